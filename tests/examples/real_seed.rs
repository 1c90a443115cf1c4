//! Runs seeds of the Kafka simulation on the real cores and prints the counts:
//! `cargo run --release -p ha-tests --example real_seed -- FIRST [COUNT] [BROKERS]`.
//! `NO_FAULTS=1` turns the injected faults off (the network still loses, duplicates and
//! reorders); `VERBOSE=1` prints every seed; `TRACE=N` keeps the last N events of a failing
//! seed's trace (60 by default).

use std::time::Instant;

use ha_tests::real::cluster::{run_seed, run_seeds};
use ha_tests::real::{RealConfig, RealFaults};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let first = args.first().copied().unwrap_or(0);
    let count = args.get(1).copied().unwrap_or(1);
    let brokers = i32::try_from(args.get(2).copied().unwrap_or(3)).unwrap_or(3);
    let mut cfg = RealConfig {
        brokers,
        ..RealConfig::default()
    };
    if let Some(n) = std::env::var("TRACE").ok().and_then(|v| v.parse().ok()) {
        cfg.trace_capacity = n;
    }
    if std::env::var("NO_FAULTS").is_ok() {
        cfg.faults = RealFaults {
            crash: 0.0,
            pause: 0.0,
            partition: 0.0,
            one_way: 0.0,
            session_expiry: 0.0,
            store_isolation: 0.0,
            reassign: 0.0,
            topic_churn: 0.0,
            controlled_shutdown: 0.0,
        };
    }
    let t = Instant::now();
    if std::env::var("VERBOSE").is_ok() {
        for seed in first..first + count {
            let (stats, failure) = run_seed(seed, cfg);
            println!("seed {seed}: {stats:?}");
            if let Some(f) = failure {
                println!("{f}");
            }
        }
        return;
    }
    let s = run_seeds(
        &format!("real cores, {brokers} brokers"),
        cfg,
        first..first + count,
        false,
    );
    let secs = t.elapsed().as_secs_f64();
    println!("{s}");
    println!(
        "{:.1} s, {:.0} seeds/minute",
        secs,
        s.seeds as f64 * 60.0 / secs.max(1e-9)
    );
    if let Some(f) = s.first_failure {
        println!("{f}");
    }
}
