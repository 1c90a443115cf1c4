//! Runs seeds of the Kafka simulation on the real cores and prints the counts:
//! `cargo run --release -p ha-tests --example real_seed -- FIRST [COUNT] [BROKERS]`.
//! `NO_FAULTS=1` turns the injected faults off (the network still loses, duplicates and
//! reorders); `VERBOSE=1` prints every seed; `TRACE=N` keeps the last N events of a failing
//! seed's trace (60 by default). The exit code is 1 if any seed violated an invariant, 2 for a
//! bad command line.

use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, Parser};
use ha_tests::real::cluster::{run_seed, run_seeds};
use ha_tests::real::{RealConfig, RealFaults};

/// Runs seeds FIRST..FIRST+COUNT of the Kafka simulation on the real cores and prints the
/// counts.
#[derive(Debug, Parser)]
#[command(
    name = "real_seed",
    after_help = "Environment: NO_FAULTS=1 turns the injected faults off (the network still \
                  loses, duplicates and reorders); VERBOSE=1 prints every seed; TRACE=N keeps \
                  the last N events of a failing seed's trace (60 by default)."
)]
struct Args {
    /// The first seed.
    #[arg(default_value_t = 0)]
    first: u64,
    /// How many seeds to run.
    #[arg(default_value_t = 1, value_parser = positive::<u64>)]
    count: u64,
    /// Brokers in the cluster (at least the replication factor, 3).
    #[arg(default_value_t = 3, value_parser = brokers)]
    brokers: i32,
}

/// Parses a whole number of at least 1.
fn positive<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err("expected a whole number of at least 1".to_string()),
    }
}

/// Parses a broker count: at least the replication factor, 3.
fn brokers(s: &str) -> Result<i32, String> {
    match s.parse::<i32>() {
        Ok(n) if n >= 3 => Ok(n),
        _ => Err("expected a whole number of at least 3 (the replication factor)".to_string()),
    }
}

fn main() -> ExitCode {
    let Args {
        first,
        count,
        brokers,
    } = Args::parse();
    let Some(end) = first.checked_add(count) else {
        Args::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!("seeds {first}.. and {count} more go past {}", u64::MAX),
            )
            .exit();
    };
    let mut cfg = RealConfig {
        brokers,
        ..RealConfig::default()
    };
    if let Some(v) = std::env::var_os("TRACE") {
        match v.to_str().and_then(|v| v.parse().ok()) {
            Some(n) => cfg.trace_capacity = n,
            None => {
                eprintln!(
                    "error: TRACE={} is not a number of events",
                    v.to_string_lossy()
                );
                return ExitCode::from(2);
            }
        }
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
        let mut failed = 0u64;
        for seed in first..end {
            let (stats, failure) = run_seed(seed, cfg);
            println!("seed {seed}: {stats:?}");
            if let Some(f) = failure {
                failed += 1;
                println!("{f}");
            }
        }
        println!("{failed} of {count} seeds failed");
        return if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let s = run_seeds(
        &format!("real cores, {brokers} brokers"),
        cfg,
        first..end,
        false,
    );
    let secs = t.elapsed().as_secs_f64();
    println!("{s}");
    println!(
        "{:.1} s, {:.0} seeds/minute",
        secs,
        s.seeds as f64 * 60.0 / secs.max(1e-9)
    );
    if let Some(f) = &s.first_failure {
        println!("{f}");
    }
    if s.violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
