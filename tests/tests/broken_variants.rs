//! The checker can fail: each deliberately broken variant — of the replication core (its
//! `never-in-production`) or of the model (`Broken`) — is caught within a stated number of seeds
//! of the default fault mix. (KAFKA-7128's early ISR expansion needs a tighter schedule than
//! random faults give; it is caught by the scripted `known_bugs::kafka_7128_*` test.)

use ha_tests::kafka::check::Invariant;
use ha_tests::kafka::{Broken, KafkaConfig};
use ha_tests::runner::run_seeds;

mod legacy;
use legacy::{offset_for_leader_epoch_v0, truncate_to_high_watermark};

/// Runs seeds from 0 until the first violation; asserts one is found within `max_seeds` and
/// that it breaks one of `expected`.
fn caught_within(name: &str, cfg: KafkaConfig, max_seeds: u64, expected: &[Invariant]) {
    let s = run_seeds(name, cfg, 0..max_seeds, true);
    println!("{s}");
    let Some(f) = &s.first_failure else {
        panic!("[{name}] no violation in {max_seeds} seeds");
    };
    println!("{f}");
    assert!(
        expected.contains(&f.violation.invariant),
        "[{name}] unexpected {:?}",
        f.violation
    );
    // The printed seed replays the same failure.
    let (_, again) = ha_tests::kafka::cluster::run_seed(f.seed, cfg);
    assert_eq!(again.map(|a| a.violation), Some(f.violation.clone()));
}

#[test]
fn kip_101_truncate_to_high_watermark_is_caught_within_50_seeds() {
    let cfg = KafkaConfig {
        partition_hook: Some(truncate_to_high_watermark),
        ..KafkaConfig::default()
    };
    caught_within(
        "kip-101 truncate to HW",
        cfg,
        50,
        &[
            Invariant::StrongIsr,
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
        ],
    );
}

#[test]
fn kip_279_offset_for_leader_epoch_v0_is_caught_within_200_seeds() {
    let cfg = KafkaConfig {
        partition_hook: Some(offset_for_leader_epoch_v0),
        ..KafkaConfig::default()
    };
    caught_within(
        "kip-279 OffsetForLeaderEpoch v0",
        cfg,
        200,
        &[
            Invariant::StrongIsr,
            Invariant::LogsDiverge,
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
        ],
    );
}

#[test]
fn k4_broker_ignoring_controller_and_leader_epochs_is_caught_within_20_seeds() {
    let cfg = KafkaConfig {
        broken: Broken {
            ignore_epochs: true,
            ..Broken::default()
        },
        ..KafkaConfig::default()
    };
    caught_within(
        "K4.1/K4.2 ignored",
        cfg,
        20,
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

#[test]
fn kafka_6082_zombie_controller_write_without_epoch_fence_is_caught_within_50_seeds() {
    let cfg = KafkaConfig {
        broken: Broken {
            store_ignores_controller_epoch: true,
            ..Broken::default()
        },
        ..KafkaConfig::default()
    };
    caught_within(
        "KAFKA-6082 unfenced zombie controller",
        cfg,
        50,
        &[Invariant::StaleControllerWrite],
    );
}

#[test]
fn jepsen_2013_unclean_election_is_caught_within_50_seeds() {
    let cfg = KafkaConfig {
        unclean_election: true,
        ..KafkaConfig::default()
    };
    caught_within(
        "unclean election",
        cfg,
        50,
        &[
            Invariant::AckedWriteLost,
            Invariant::ConsumedRecordLost,
            Invariant::StrongIsr,
            Invariant::LogsDiverge,
        ],
    );
}
