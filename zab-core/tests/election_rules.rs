//! SPEC Z1–Z8 and ZooKeeper's election rules, each driven by hand through the core.

mod common;

use std::time::Duration;

use common::{sid, Net};
use zab_core::{DecisionPath, ElectionConfig, ServerState, VoteData, Zxid};

fn zk() -> ElectionConfig {
    ElectionConfig::zookeeper()
}

fn data(epoch: i64, counter: u32) -> VoteData {
    VoteData::new(Zxid::new(epoch, counter), epoch)
}

#[test]
fn z7_startup_election_elects_the_largest_sid_among_equal_zxids() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(3), (ServerState::Leading, sid(3)));
    assert_eq!(net.view(1), (ServerState::Following, sid(3)));
    assert_eq!(net.view(2), (ServerState::Following, sid(3)));
    // ZooKeeper waits finalizeWait (200 ms) after the quorum agreed.
    let d = net.last_decision(3).unwrap();
    assert_eq!(d.path, DecisionPath::FinalizeWait);
    assert!(net.ms() >= 200, "decided after {} ms", net.ms());
}
