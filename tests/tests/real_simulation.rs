//! Seeded runs of the Kafka cluster on the real cores — `kafka-controller`'s controller on
//! every broker over `MemoryCoordination`, `kafka-replication`'s replica manager and fetchers,
//! `kafka-wire` requests on the simulated network — with crashes, pauses (zombie
//! controllers), symmetric and one-way partitions, session expiries, message loss,
//! duplication and reordering, and every invariant checked after every step, every delivered
//! message and every store write. `SIM_SEEDS=N`
//! runs N seeds per scenario instead of the default.

use ha_tests::kafka::check::Invariant;
use ha_tests::real::cluster::{run_seed, run_seeds, RealSummary};
use ha_tests::real::{RealConfig, StoreBreakage};
use ha_tests::runner::{expect_no_violation, seed_range_from_env};

mod legacy;
use legacy::{offset_for_leader_epoch_v0, truncate_to_high_watermark};

fn no_violation(name: &str, cfg: RealConfig, default_seeds: u64) -> RealSummary {
    let s = expect_no_violation(name, || {
        run_seeds(name, cfg, seed_range_from_env(default_seeds), false)
    });
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
        assert!(
            s.faults.topic_delete_completed > 0,
            "topic deletions completed"
        );
        assert!(
            s.faults.controlled_shutdown_stopped > 0,
            "brokers stopped cleanly"
        );
    }
}

/// One seed, one run: the same counts and the same digest of the final state, for seeds
/// with every kind of fault (pauses were the hard part: a waking node's tasks must resume in
/// one order).
#[test]
fn real_one_seed_is_one_run() {
    let cfg = RealConfig::default();
    for seed in 0..30 {
        assert_eq!(run_seed(seed, cfg).0, run_seed(seed, cfg).0, "seed {seed}");
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
    let s = run_seeds("store ignores the controller epoch", cfg, 0..600, true);
    let f = s
        .first_failure
        .unwrap_or_else(|| panic!("no violation in {} seeds", s.seeds));
    println!("caught at seed {}: {f}", f.seed);
    assert_eq!(
        f.violation.invariant,
        ha_tests::kafka::check::Invariant::StaleControllerWrite
    );
}

/// KIP-101 on the real replica manager and fetchers: truncating to the high watermark on
/// becoming a follower, instead of by leader epoch, loses or forks committed records.
#[test]
fn kip_101_truncate_to_high_watermark_is_caught_on_the_real_cores() {
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

fn caught_within(name: &str, cfg: RealConfig, seeds: u64, expected: &[Invariant]) {
    let s = run_seeds(name, cfg, 0..seeds, true);
    println!("{s}");
    let f = s
        .first_failure
        .unwrap_or_else(|| panic!("[{name}] no violation in {} seeds", s.seeds));
    println!("[{name}] caught at seed {}: {f}", f.seed);
    assert!(
        expected.contains(&f.violation.invariant),
        "[{name}] unexpected {:?}",
        f.violation
    );
    // The seed replays to the same violation.
    let (_, again) = run_seed(f.seed, cfg);
    assert_eq!(again.map(|a| a.violation), Some(f.violation));
}

/// Jepsen 2013 on the real controller: with `min.insync.replicas=1` the ISR can shrink to
/// the leader alone; once that leader is gone, `unclean.leader.election.enable` elects a
/// replica that lacks what it acknowledged. The checker reports the loss.
#[test]
fn jepsen_2013_real_cores_unclean_election_loses_acknowledged_writes_and_is_reported() {
    let cfg = RealConfig {
        min_insync_replicas: 1,
        unclean_election: true,
        ..RealConfig::default()
    };
    caught_within(
        "jepsen 2013, unclean election",
        cfg,
        200,
        &[
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
            Invariant::StrongIsr,
            Invariant::LogsDiverge,
        ],
    );
}

/// The same ISR-of-one schedules with unclean election off (Kafka's default since 0.11): a
/// partition whose only in-sync replica is gone waits for it, and nothing acknowledged is
/// lost.
#[test]
fn jepsen_2013_real_cores_without_unclean_election_loses_nothing() {
    let cfg = RealConfig {
        min_insync_replicas: 1,
        ..RealConfig::default()
    };
    no_violation("jepsen 2013, clean elections only", cfg, 60);
}

fn ignore_epochs(
    rm: &mut kafka_replication::replica_manager::ReplicaManager<kafka_replication::log::MemoryLog>,
) {
    rm.set_ignore_epochs(true);
}

/// The K4 test's mix: more zombies and more stale requests than the default.
fn stale_request_mix() -> RealConfig {
    // More zombies and more stale requests: pauses and session expiries five times as often
    // as in the default mix, and a network that duplicates and holds back five times as many
    // messages (a LeaderAndIsr delivered again late carries an older leader epoch).
    let base = RealConfig::default();
    RealConfig {
        faults: ha_tests::real::RealFaults {
            pause: base.faults.pause * 5.0,
            session_expiry: base.faults.session_expiry * 5.0,
            ..base.faults
        },
        net: ha_tests::net::NetConfig {
            duplicate: base.net.duplicate * 5.0,
            long_delay: base.net.long_delay * 5.0,
            ..base.net
        },
        // The controller resends a request it got no answer to within 30 ms: copies of one
        // LeaderAndIsr overtake each other and the next one.
        control_timeout_ms: 30,
        // Recovery from that churn takes longer: a longer calm end.
        duration_ms: 5_000,
        calm_ms: 2_500,
        ..base
    }
}

/// K4.1 / K4.2 / KIP-380 switched off in every broker's replica manager: LeaderAndIsr from
/// zombie controllers and delayed requests roll leaderships back, and the checks see it.
#[test]
fn k4_brokers_ignoring_controller_leader_and_broker_epochs_are_caught_on_the_real_cores() {
    let cfg = RealConfig {
        brokers_ignore_epochs: Some(ignore_epochs),
        ..stale_request_mix()
    };
    caught_within(
        "K4 ignored on the real cores",
        cfg,
        1_000,
        &[
            Invariant::EpochsOnlyGrow,
            Invariant::OneLeaderPerEpoch,
            Invariant::HighWatermarkMonotonic,
            Invariant::StrongIsr,
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
            Invariant::LogsDiverge,
        ],
    );
}

/// KIP-279 on the real replica manager and fetchers: OffsetForLeaderEpoch v0 (an end offset
/// without its epoch) lets replicas that missed several leader changes diverge.
#[test]
fn kip_279_offset_for_leader_epoch_v0_is_caught_on_the_real_cores() {
    let cfg = RealConfig {
        partition_hook: Some(offset_for_leader_epoch_v0),
        ..RealConfig::default()
    };
    caught_within(
        "kip-279 on the real cores",
        cfg,
        1_000,
        &[
            Invariant::StrongIsr,
            Invariant::LogsDiverge,
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
        ],
    );
}

/// The control for the test above: the same mix with the epoch checks in place holds every
/// invariant.
#[test]
fn k4_stale_request_mix_with_the_epoch_checks_holds() {
    no_violation("stale-request mix, checks on", stale_request_mix(), 100);
}
