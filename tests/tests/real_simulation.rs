//! Seeded runs of the Kafka cluster on the real cores — `kafka-controller`'s controller on
//! every broker over `MemoryCoordination`, `kafka-replication`'s replica manager and fetchers,
//! `kafka-wire` requests on the simulated network — with crashes, pauses (zombie
//! controllers), symmetric and one-way partitions, session expiries, message loss,
//! duplication and reordering, and every invariant checked after every step. `SIM_SEEDS=N`
//! runs N seeds per scenario instead of the default.

use std::time::Instant;

use ha_tests::real::cluster::{run_seed, run_seeds, RealSummary};
use ha_tests::real::{RealConfig, StoreBreakage};
use ha_tests::runner::seed_range_from_env;

fn no_violation(name: &str, cfg: RealConfig, default_seeds: u64) -> RealSummary {
    let t = Instant::now();
    let s = run_seeds(name, cfg, seed_range_from_env(default_seeds), false);
    let secs = t.elapsed().as_secs_f64();
    println!("{s}");
    println!(
        "[{name}] {:.1} s, {:.0} seeds/minute",
        secs,
        s.seeds as f64 * 60.0 / secs.max(1e-9)
    );
    if let Some(f) = &s.first_failure {
        panic!(
            "{} of {} seeds violated an invariant; first:\n{f}",
            s.violations, s.seeds
        );
    }
    assert!(s.acked > 0 && s.consumed > 0);
    s
}

#[test]
fn real_cores_three_brokers_hold_every_invariant_under_every_fault() {
    let s = no_violation("real cores, 3 brokers", RealConfig::default(), 200);
    if s.seeds >= 40 {
        let f = s.faults;
        assert!(f.crash > 0 && f.pause > 0 && f.controller_pause > 0 && f.partition > 0);
        assert!(f.one_way > 0 && f.session_expiry > 0);
        assert!(s.controller_epochs > s.seeds, "controllers failed over");
    }
}

#[test]
fn real_cores_five_brokers_hold_every_invariant_under_every_fault() {
    let cfg = RealConfig {
        brokers: 5,
        ..RealConfig::default()
    };
    let s = no_violation("real cores, 5 brokers", cfg, 100);
    if s.seeds >= 40 {
        assert!(s.faults.reassign_completed > 0, "reassignments completed");
    }
}

#[test]
fn real_one_seed_is_one_run() {
    let cfg = RealConfig::default();
    for seed in [1, 42] {
        assert_eq!(run_seed(seed, cfg).0, run_seed(seed, cfg).0);
    }
    assert_ne!(run_seed(1, cfg).0, run_seed(2, cfg).0);
}

/// K6 fencing: a store that drops the `/controller_epoch` check lets a zombie controller's
/// writes land, and the audit catches it.
#[test]
fn kafka_6082_store_without_controller_epoch_check_is_caught() {
    let cfg = RealConfig {
        breakage: StoreBreakage {
            ignore_controller_epoch_check: true,
        },
        ..RealConfig::default()
    };
    let s = run_seeds("store ignores the controller epoch", cfg, 0..60, true);
    let f = s
        .first_failure
        .unwrap_or_else(|| panic!("no violation in {} seeds", s.seeds));
    println!("caught at seed {}: {f}", f.seed);
    assert_eq!(
        f.violation.invariant,
        ha_tests::kafka::check::Invariant::StaleControllerWrite
    );
}

fn truncate_to_high_watermark(
    p: &mut kafka_replication::partition::Partition<kafka_replication::log::MemoryLog>,
) {
    p.set_legacy(kafka_replication::partition::Legacy {
        truncate_to_high_watermark: true,
        ..kafka_replication::partition::Legacy::default()
    });
}

/// KIP-101 on the real replica manager and fetchers: truncating to the high watermark on
/// becoming a follower, instead of by leader epoch, loses or forks committed records.
#[test]
fn kip_101_truncate_to_high_watermark_is_caught_on_the_real_cores() {
    use ha_tests::kafka::check::Invariant;
    let cfg = RealConfig {
        partition_hook: Some(truncate_to_high_watermark),
        ..RealConfig::default()
    };
    let s = run_seeds("kip-101 on the real cores", cfg, 0..300, true);
    println!("{s}");
    let f = s
        .first_failure
        .unwrap_or_else(|| panic!("no violation in {} seeds", s.seeds));
    println!("caught at seed {}: {f}", f.seed);
    assert!(
        [
            Invariant::StrongIsr,
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
            Invariant::LogsDiverge
        ]
        .contains(&f.violation.invariant),
        "{:?}",
        f.violation
    );
}
