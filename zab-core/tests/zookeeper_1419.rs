//! ZOOKEEPER-1419: before ZooKeeper 3.4.4 the vote order was not a total order (the sid
//! tie-break ignored the epoch), and a 5-voter election could go on forever. The fixed order
//! is a strict total order and the same election settles.

mod common;

use std::time::Duration;

use common::{sid, Net};
use proptest::prelude::*;
use zab_core::{
    total_order_predicate, Candidate, ElectionConfig, ServerId, ServerState, VoteData, Zxid,
};

/// Five voters with the same last zxid: 1 has the newest epoch, the others an older one (it
/// synced with a new leader that crashed before writing anything).
fn data(i: i64) -> VoteData {
    let zxid = Zxid::new(1, 5);
    if i == 1 {
        VoteData::new(zxid, 2)
    } else {
        VoteData::new(zxid, 1)
    }
}

/// Runs the election with every message delivered in FIFO order and the clock moving 1 ms per
/// 50 deliveries; returns the servers' (state, leader) after `limit`.
fn run(config: ElectionConfig, limit: Duration) -> (Net, bool) {
    let mut net = Net::new(&[1, 2, 3, 4, 5], &[], config, data);
    net.connect_all();
    net.start(&[1, 2, 3, 4, 5]);
    let end = net.now + limit;
    let mut count = 0;
    while net.now < end && !net.all_decided() {
        match net.queue.pop_front() {
            Some(m) => {
                net.deliver(m);
                count += 1;
                if count % 50 == 0 {
                    net.advance(Duration::from_millis(1));
                }
            }
            None => net.advance(Duration::from_millis(1)),
        }
    }
    let decided = net.all_decided();
    (net, decided)
}

#[test]
fn zookeeper_1419_five_voters_settle_on_the_newest_epoch() {
    let (net, decided) = run(ElectionConfig::zookeeper(), Duration::from_secs(10));
    assert!(decided, "the election settles");
    assert_eq!(net.view(1), (ServerState::Leading, sid(1)));
    for i in 2..=5 {
        assert_eq!(net.view(i), (ServerState::Following, sid(1)));
    }
}

#[cfg(feature = "never-in-production")]
#[test]
fn zookeeper_1419_the_pre_fix_order_fails_the_same_election() {
    let config = ElectionConfig::zookeeper().with_broken_pre_1419_order();
    let (net, decided) = run(config, Duration::from_secs(2));
    // Either the election never settles, or it elects a leader whose epoch is older than
    // that of a server following it (losing that server's newer history).
    let leader_is_newest = net.view(1) == (ServerState::Leading, sid(1));
    eprintln!(
        "pre-1419 order: decided={decided}, views={:?}, deliveries={}",
        (1..=5).map(|i| net.view(i)).collect::<Vec<_>>(),
        net.delivered
    );
    assert!(!decided || !leader_is_newest);
}

fn cand(leader: i64, zxid: i64, epoch: i64) -> Candidate {
    Candidate::new(ServerId(leader), Zxid(zxid), epoch)
}

fn small() -> impl Strategy<Value = Candidate> {
    (1i64..4, 0i64..3, 0i64..3).prop_map(|(l, z, e)| cand(l, z, e))
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// The ZooKeeper order is a strict total order: irreflexive, asymmetric, transitive, and
    /// total on distinct candidates.
    #[test]
    fn zookeeper_1419_vote_order_is_a_strict_total_order(a in small(), b in small(), c in small()) {
        let gt = |x: Candidate, y: Candidate| total_order_predicate(x, y, 1);
        prop_assert!(!gt(a, a));
        prop_assert!(!(gt(a, b) && gt(b, a)));
        if gt(a, b) && gt(b, c) {
            prop_assert!(gt(a, c));
        }
        if a != b {
            prop_assert!(gt(a, b) || gt(b, a));
        }
    }
}

#[cfg(feature = "never-in-production")]
#[test]
fn zookeeper_1419_pre_fix_predicate_is_not_an_order() {
    use zab_core::vote::pre_1419_predicate;
    let newer_epoch = cand(1, 5, 2);
    let larger_sid = cand(5, 5, 1);
    // each beats the other
    assert!(pre_1419_predicate(newer_epoch, larger_sid));
    assert!(pre_1419_predicate(larger_sid, newer_epoch));
}
