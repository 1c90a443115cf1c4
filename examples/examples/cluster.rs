//! The main job: three brokers in one process on loopback TCP with an in-memory coordination
//! store, narrating a timeline — controller elected, topic created, records produced with
//! acks=all, a partition leader killed, the controller killed, brokers restarted and the ISR
//! grown back, a partition reassigned onto a fourth broker — then reading every acknowledged
//! record back, deleting the topic and printing a verdict.
//!
//! ```text
//! cargo run --example cluster [-- --records <per partition and round, default 100>]
//! ```
//!
//! Exit code 0 only if nothing acknowledged was lost.

use std::io::Write;
use std::process::ExitCode;

use ha_examples::cluster::{run, DemoConfig};

#[tokio::main]
async fn main() -> ExitCode {
    let say = |s: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    let mut config = DemoConfig::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, n] if flag == "--records" => match n.parse() {
            Ok(n) if n > 0 => config.records_per_partition = n,
            _ => {
                eprintln!("--records takes a positive number");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: cluster [--records <n>]");
            return ExitCode::from(2);
        }
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
