//! The main job: three brokers in one process on loopback TCP, narrating a timeline with the
//! time each step took — controller elected, topic created, records produced with acks=all, a
//! partition leader killed, the controller killed, brokers restarted and the ISR grown back, a
//! partition reassigned onto a fourth broker (every K7 step shown) — then reading every
//! acknowledged record back, deleting the topic and printing a verdict.
//!
//! ```text
//! cargo run --release -p ha-examples --example cluster -- \
//!     [--records <per partition and round, default 100>] \
//!     [--zookeeper host:port[,host:port...][/chroot] | --coordination memory|zab]
//! ```
//!
//! The coordination service is an in-memory store; with `--zookeeper` a real ZooKeeper
//! ensemble: the demo then works under `/ha-blocks-demo` (below the chroot, if any), which it
//! deletes and creates again at start, so it can be run again and again. With
//! `--coordination zab` it is a store replicated by three in-process `zab-core` peers
//! ([`ZabEnsemble`]); the demo then also kills the ZAB leader after the first produce round and
//! restarts it once the ISR is whole again — the Kafka cluster carries on once the ensemble
//! re-elects. Exit code 0 only if
//! nothing acknowledged was lost; 2 for a bad command line.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use std::time::{Duration, Instant};

use ha_examples::cluster::{run, DemoConfig, DemoStep};
use ha_examples::zookeeper_backend::{ZooKeeperHarness, DEFAULT_ROOT};
use zab_coordination::ZabEnsemble;

const USAGE: &str = "usage: cluster [--records <n>] \
[--zookeeper host:port[,host:port...][/chroot] | --coordination memory|zab]";

/// Which coordination service the demo runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Backend {
    /// The in-memory store (default).
    Memory,
    /// A real ZooKeeper ensemble at this connect string.
    ZooKeeper(String),
    /// Three in-process ZAB peers.
    Zab,
}

/// The command line: records per partition and round, and the coordination backend.
fn parse(args: &[String]) -> Result<(Option<usize>, Backend), String> {
    let mut records = None;
    let mut backend = Backend::Memory;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--records" => match it.next().map(|n| n.parse::<usize>()) {
                Some(Ok(n)) if n > 0 => records = Some(n),
                _ => return Err("--records takes a positive number".to_owned()),
            },
            "--zookeeper" => match it.next() {
                Some(s) if !s.starts_with("--") => backend = Backend::ZooKeeper(s.clone()),
                _ => return Err("--zookeeper takes host:port[,host:port...]".to_owned()),
            },
            "--coordination" => match it.next().map(String::as_str) {
                Some("memory") => backend = Backend::Memory,
                Some("zab") => backend = Backend::Zab,
                Some("zookeeper") => {
                    return Err("--coordination zookeeper: give --zookeeper host:port".to_owned())
                }
                _ => return Err("--coordination takes memory or zab".to_owned()),
            },
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((records, backend))
}

#[tokio::main]
async fn main() -> ExitCode {
    let say = |s: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (records, backend) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("{why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut config = DemoConfig::default();
    if let Some(n) = records {
        config.records_per_partition = n;
    }
    match backend {
        Backend::ZooKeeper(connect) => {
            match ZooKeeperHarness::start(&connect, DEFAULT_ROOT).await {
                Ok(harness) => {
                    say(&format!(
                        "coordination: ZooKeeper {} under {}",
                        harness.servers().join(","),
                        harness.root()
                    ));
                    config.harness = Arc::new(harness);
                }
                Err(e) => {
                    println!("VERDICT: FAIL — the demo stopped: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        Backend::Zab => match zab_backend(&say).await {
            Ok(ensemble) => {
                config.harness = ensemble.clone();
                config = config.with_step_hook(move |step| disturb(ensemble.clone(), step));
            }
            Err(e) => {
                println!("VERDICT: FAIL — the demo stopped: {e}");
                return ExitCode::FAILURE;
            }
        },
        Backend::Memory => say("coordination: in-memory store"),
    }
    match run(config, say).await {
        Ok(report) => {
            let verdict = if report.passed() { "PASS" } else { "FAIL" };
            println!(
                "VERDICT: {verdict} — {} acknowledged, {} read back, {} lost; controller epochs {:?}; topic deleted: {}",
                report.acknowledged,
                report.read_back,
                report.lost,
                report.controller_epochs,
                report.topic_deleted
            );
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            println!("VERDICT: FAIL — the demo stopped: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a line at once (the demo's progress must be visible while it runs).
fn say_now(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

/// Starts three in-process ZAB peers and waits for their first leader.
async fn zab_backend(say: &impl Fn(&str)) -> Result<Arc<ZabEnsemble>, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let ensemble = ZabEnsemble::start(3).await?;
    let leader = ensemble.wait_for_leader(Duration::from_secs(10)).await?;
    say(&format!(
        "coordination: 3 in-process ZAB peers, leader sid {} elected in {:.0?}",
        leader.0,
        started.elapsed()
    ));
    Ok(Arc::new(ensemble))
}

/// The ZAB backend's disturbance (Z8): after the first produce round the ZAB leader is
/// killed and the demo goes on once the two survivors re-elect; once every ISR is whole again
/// the killed peer restarts and rejoins as a follower.
async fn disturb(ensemble: Arc<ZabEnsemble>, step: DemoStep) {
    match step {
        DemoStep::Produced { round: 1 } => {
            let started = Instant::now();
            let Some(killed) = ensemble.kill_leader().await else {
                say_now("  [zab] no ZAB leader to kill");
                return;
            };
            say_now(&format!("  [zab] killed the ZAB leader, sid {}", killed.0));
            match ensemble.wait_for_leader(Duration::from_secs(10)).await {
                Ok(leader) => say_now(&format!(
                    "  [zab] sid {} leads the ensemble after {:.0?}; the Kafka cluster carries on",
                    leader.0,
                    started.elapsed()
                )),
                Err(e) => say_now(&format!("  [zab] no new ZAB leader: {e}")),
            }
            *KILLED.lock().unwrap_or_else(|e| e.into_inner()) = Some(killed);
        }
        DemoStep::IsrRestored => {
            let killed = KILLED.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(sid) = killed {
                match ensemble.restart(sid).await {
                    Ok(()) => say_now(&format!("  [zab] sid {} restarted and rejoined", sid.0)),
                    Err(e) => say_now(&format!("  [zab] sid {} did not restart: {e}", sid.0)),
                }
            }
        }
        _ => {}
    }
}

/// The ZAB peer killed by [`disturb`], restarted later.
static KILLED: std::sync::Mutex<Option<zab_core::ServerId>> = std::sync::Mutex::new(None);
