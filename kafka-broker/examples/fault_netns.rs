//! Runs the real-process fault test for any seed and duration and prints its timeline and
//! counts (see `tests/fault/mod.rs`). Needs root, ZooKeeper and kcat, and the two binaries
//! built first:
//!
//! ```sh
//! cargo build --release -p kafka-broker --features cli --bins
//! cargo run --release -p kafka-broker --features cli --example fault_netns -- --seed 7 --seconds 300
//! ```

#[path = "../tests/fault/mod.rs"]
mod fault;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// The real-process fault run: three ZooKeeper servers and three brokers in network
/// namespaces, an idempotent acks=all producer, and a seeded nemesis.
#[derive(Debug, Parser)]
struct Args {
    /// Seeds the nemesis (the order and kind of faults).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many seeds to run, from `--seed` on.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Length of the fault phase of each run, in seconds.
    #[arg(long, default_value_t = 300)]
    seconds: u64,
    /// The `ha-broker` binary (default: beside this example's directory).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// The `ha-admin` binary (default: beside this example's directory).
    #[arg(long)]
    admin_bin: Option<PathBuf>,
}

fn beside(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().and_then(|d| d.parent()).map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn main() {
    let args = Args::parse();
    let mut failed = 0;
    for seed in args.seed..args.seed + args.seeds {
        let cfg = fault::RunConfig {
            seed,
            duration: Duration::from_secs(args.seconds),
            broker_bin: args
                .broker_bin
                .clone()
                .unwrap_or_else(|| beside("ha-broker")),
            admin_bin: args.admin_bin.clone().unwrap_or_else(|| beside("ha-admin")),
            rolling_restart: false,
        };
        match fault::run(&cfg) {
            Ok(report) => {
                println!("{}", report.render());
                println!(
                    "VERDICT seed {seed}: {}",
                    if report.passed() { "PASS" } else { "FAIL" }
                );
                failed += usize::from(!report.passed());
            }
            Err(e) => {
                println!("VERDICT seed {seed}: could not run: {e}");
                failed += 1;
            }
        }
    }
    std::process::exit(i32::from(failed > 0));
}
