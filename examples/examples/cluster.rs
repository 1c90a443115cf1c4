//! The main job: three brokers in one process on loopback TCP, narrating a timeline with the
//! time each step took — controller elected, topic created, records produced with acks=all, a
//! partition leader killed, the controller killed, brokers restarted and the ISR grown back, a
//! partition reassigned onto a fourth broker (every K7 step shown) — then reading every
//! acknowledged record back, deleting the topic and printing a verdict.
//!
//! ```text
//! cargo run --release -p ha-examples --example cluster -- \
//!     [--records <per partition and round, default 100>] \
//!     [--zookeeper host:port[,host:port...][/chroot]]
//! ```
//!
//! The coordination service is an in-memory store, or with `--zookeeper` a real ZooKeeper
//! ensemble: the demo then works under `/ha-blocks-demo` (below the chroot, if any), which it
//! deletes and creates again at start, so it can be run again and again. Exit code 0 only if
//! nothing acknowledged was lost; 2 for a bad command line.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use ha_examples::cluster::{run, DemoConfig};
use ha_examples::zookeeper_backend::{ZooKeeperHarness, DEFAULT_ROOT};

const USAGE: &str =
    "usage: cluster [--records <n>] [--zookeeper host:port[,host:port...][/chroot]]";

/// The command line: records per partition and round, and the ensemble if any.
fn parse(args: &[String]) -> Result<(Option<usize>, Option<String>), String> {
    let mut records = None;
    let mut zookeeper = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--records" => match it.next().map(|n| n.parse::<usize>()) {
                Some(Ok(n)) if n > 0 => records = Some(n),
                _ => return Err("--records takes a positive number".to_owned()),
            },
            "--zookeeper" => match it.next() {
                Some(s) if !s.starts_with("--") => zookeeper = Some(s.clone()),
                _ => return Err("--zookeeper takes host:port[,host:port...]".to_owned()),
            },
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((records, zookeeper))
}

#[tokio::main]
async fn main() -> ExitCode {
    let say = |s: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (records, zookeeper) = match parse(&args) {
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
    if let Some(connect) = zookeeper {
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
    } else {
        say("coordination: in-memory store");
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
