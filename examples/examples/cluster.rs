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

use clap::builder::NonEmptyStringValueParser;
use clap::{Parser, ValueEnum};
use ha_examples::cluster::{run, DemoConfig, DemoStep};
use ha_examples::zookeeper_backend::{ZooKeeperHarness, DEFAULT_ROOT};
use zab_coordination::ZabEnsemble;

/// Three Kafka brokers in one process: controller election, acks=all produce, leader and
/// controller failover, ISR recovery, a K7 reassignment and a read-back, with a verdict.
#[derive(Debug, Parser)]
#[command(name = "cluster")]
struct Args {
    /// Records produced to each partition in each produce round (default 100).
    #[arg(long, value_name = "N", value_parser = positive::<usize>)]
    records: Option<usize>,
    /// Run on a real ZooKeeper ensemble at this connect string; the demo works under
    /// `/ha-blocks-demo` (below the chroot, if any), which it deletes and creates again.
    #[arg(
        long,
        value_name = "HOST:PORT[,HOST:PORT...][/CHROOT]",
        value_parser = NonEmptyStringValueParser::new(),
        conflicts_with = "coordination"
    )]
    zookeeper: Option<String>,
    /// The coordination service when `--zookeeper` is not given: an in-memory store, or a
    /// store replicated by three in-process ZAB peers.
    #[arg(long, value_enum, default_value_t = Backend::Memory)]
    coordination: Backend,
}

/// Which in-process coordination service the demo runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The in-memory store.
    Memory,
    /// Three in-process ZAB peers (`ZabEnsemble`); the demo also kills the ZAB leader.
    Zab,
}

/// Parses a whole number of at least 1.
fn positive<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err("expected a whole number of at least 1".to_string()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let say = |s: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    let args = Args::parse();
    let mut config = DemoConfig::default();
    if let Some(n) = args.records {
        config.records_per_partition = n;
    }
    match (args.zookeeper, args.coordination) {
        (Some(connect), _) => match ZooKeeperHarness::start(&connect, DEFAULT_ROOT).await {
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
        },
        (None, Backend::Zab) => match zab_backend(&say).await {
            Ok(ensemble) => {
                config.harness = ensemble.clone();
                config = config.with_step_hook(move |step| disturb(ensemble.clone(), step));
            }
            Err(e) => {
                println!("VERDICT: FAIL — the demo stopped: {e}");
                return ExitCode::FAILURE;
            }
        },
        (None, Backend::Memory) => say("coordination: in-memory store"),
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
