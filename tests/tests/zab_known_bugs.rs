//! ZooKeeper's election bugs as cluster-level scenarios on the ensemble simulator: the real
//! zab-core cores must show the fixed behaviour, and — where zab-core keeps the old behaviour
//! behind a test-only switch — the simulator must catch the old one.

use bytes::Bytes;
use ha_tests::runner::run_zab_seeds;
use ha_tests::zab::ensemble::Ensemble;
use ha_tests::zab::node::Durable;
use ha_tests::zab::{ZabConfig, ZabFaultRates};
use zab_core::txnlog::Txn;
use zab_core::{VoteOrder, Zxid};

/// Five voters with the same five transactions of epoch 1; server 1 then synced with a
/// leader of epoch 2 that wrote nothing, so it alone has `currentEpoch` 2 (ZOOKEEPER-1419).
fn epoch_tie(id: i64) -> Durable {
    let log = (1..=5)
        .map(|c| Txn::new(Zxid::new(1, c), Bytes::from(format!("past/{c}"))))
        .collect();
    Durable {
        current_epoch: if id == 1 { 2 } else { 1 },
        accepted_epoch: 2,
        log,
    }
}

fn zookeeper_1419_config(order: VoteOrder) -> ZabConfig {
    let mut c = ZabConfig::new(5, 0);
    c.faults = ZabFaultRates::none();
    c.chaos_ms = 1_500;
    c.initial = Some(epoch_tie);
    c.election.vote_order = order;
    c.election.fast_decide = false;
    c
}

#[test]
fn zookeeper_1419_fixed_vote_order_elects_the_newest_epoch_on_every_seed() {
    let s = run_zab_seeds(
        "ZOOKEEPER-1419 fixed order",
        |_| zookeeper_1419_config(VoteOrder::ZooKeeper),
        0..60,
        false,
    );
    println!("{s}");
    if let Some(f) = &s.first_failure {
        panic!("{f}");
    }
    // And the leader is the one with the newest epoch.
    let mut e = Ensemble::new(1, zookeeper_1419_config(VoteOrder::ZooKeeper), 0);
    if let Err(f) = e.run() {
        panic!("{f}");
    }
    assert!(e.server(1).is_some_and(|s| s.is_established_leader()));
}

#[test]
fn zookeeper_1419_pre_fix_vote_order_is_caught_within_20_seeds() {
    let s = run_zab_seeds(
        "ZOOKEEPER-1419 pre-fix order",
        |_| zookeeper_1419_config(VoteOrder::BrokenPre1419),
        0..20,
        true,
    );
    println!("{s}");
    let Some(f) = &s.first_failure else {
        panic!("the non-transitive order went unnoticed in 20 seeds");
    };
    println!("caught at seed {}: {}", f.seed, f.violation);
    // The seed replays the same violation.
    let (_, again) =
        ha_tests::zab::ensemble::run_seed(f.seed, &zookeeper_1419_config(VoteOrder::BrokenPre1419));
    assert_eq!(again.map(|g| g.violation), Some(f.violation.clone()));
}
