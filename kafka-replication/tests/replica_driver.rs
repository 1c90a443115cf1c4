//! The tokio [`ReplicaDriver`]: the leaderships a LeaderAndIsr gives and takes reach the
//! [`LeadershipListener`] from the replica manager's actions.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use kafka_replication::isr::{MemoryIsrWriter, TopicPartition};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_driver::{LeadershipListener, LinkFactory, ReplicaDriver};
use kafka_replication::replica_fetcher::{FetcherConfig, MemoryLeaderLink};
use kafka_replication::replica_manager::ReplicaManager;
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::LeaderAndIsrRequest;

/// What the listener heard: `Some(controller epoch)` for leading, `None` for not leading.
#[derive(Default)]
struct Heard(Mutex<Vec<(TopicPartition, Option<i32>)>>);

impl LeadershipListener for Heard {
    fn leading(&self, tp: &TopicPartition, controller_epoch: i32) {
        if let Ok(mut h) = self.0.lock() {
            h.push((tp.clone(), Some(controller_epoch)));
        }
    }
    fn not_leading(&self, tp: &TopicPartition) {
        if let Ok(mut h) = self.0.lock() {
            h.push((tp.clone(), None));
        }
    }
}

fn leader_and_isr(
    controller_epoch: i32,
    state_epoch: i32,
    leader: i32,
    leader_epoch: i32,
) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest {
        controller_epoch,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "t".into(),
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: "t".into(),
                partition_index: 0,
                controller_epoch: state_epoch,
                leader,
                leader_epoch,
                isr: vec![1, 2].into(),
                partition_epoch: leader_epoch,
                replicas: vec![1, 2].into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn k4_1_leader_and_isr_leaderships_reach_the_listener_with_the_deciding_controller_epoch() {
    let manager = ReplicaManager::new(
        1,
        PartitionConfig::default(),
        0,
        Box::new(|_| Ok(MemoryLog::new())),
    );
    // Links to a leader that never answers usefully: this test does not replicate.
    let other = Arc::new(Mutex::new(ReplicaManager::new(
        2,
        PartitionConfig::default(),
        0,
        Box::new(|_| Ok(MemoryLog::new())),
    )));
    let clock = Arc::new(AtomicU64::new(0));
    let links: LinkFactory<MemoryLeaderLink<MemoryLog>> =
        Box::new(move |_| MemoryLeaderLink::new(other.clone(), clock.clone()));
    let driver = ReplicaDriver::start(
        manager,
        links,
        MemoryIsrWriter::new(),
        FetcherConfig::default(),
    );
    let heard = Arc::new(Heard::default());
    driver.set_leadership_listener(Some(heard.clone()));
    let tp = TopicPartition::new("t", 0);

    // A controller of epoch 7 re-sends the state an epoch-5 controller decided: the ISR
    // writes carry 5.
    driver.with_manager(|m, now| m.become_leader_or_follower(now, &leader_and_isr(7, 5, 1, 3), 4));
    driver.with_manager(|m, now| m.become_leader_or_follower(now, &leader_and_isr(7, 7, 2, 4), 4));
    // A stale request changes nothing and is not reported.
    driver.with_manager(|m, now| m.become_leader_or_follower(now, &leader_and_isr(6, 6, 1, 9), 4));
    let heard = heard.0.lock().map(|h| h.clone()).unwrap_or_default();
    assert_eq!(heard, vec![(tp.clone(), Some(5)), (tp, None)]);
    driver.shutdown().await;
}
