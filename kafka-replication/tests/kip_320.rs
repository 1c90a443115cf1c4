//! KIP-320 on a follower: a Fetch or OffsetForLeaderEpoch naming a current leader epoch is
//! checked against the replica's epoch before its leadership, as Kafka's
//! `Partition.getLocalLog` / `checkCurrentLeaderEpoch` do — an older epoch is
//! FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, and only an equal epoch on a
//! replica that is not the leader is NOT_LEADER_OR_FOLLOWER.

use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_manager::{FetchOutcome, ReplicaManager};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_wire::messages::{FetchRequest, LeaderAndIsrRequest, OffsetForLeaderEpochRequest};

/// The leader epoch broker 2 follows broker 1 at.
const EPOCH: i32 = 5;

/// Broker 2, a follower of `t-0` led by broker 1 at [`EPOCH`].
fn follower() -> ReplicaManager<MemoryLog> {
    let mut m = ReplicaManager::new(
        2,
        PartitionConfig::default(),
        0,
        Box::new(|_| Ok(MemoryLog::new())),
    );
    let request = LeaderAndIsrRequest {
        controller_id: 9,
        controller_epoch: 1,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "t".into(),
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: "t".into(),
                partition_index: 0,
                controller_epoch: 1,
                leader: 1,
                leader_epoch: EPOCH,
                isr: vec![1, 2].into(),
                partition_epoch: EPOCH,
                replicas: vec![1, 2].into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let r = m.become_leader_or_follower(0, &request, 4);
    assert_eq!(r.error_code, ErrorCode::None.code());
    let p = m
        .partition(&kafka_replication::isr::TopicPartition::new("t", 0))
        .expect("partition created");
    assert!(!p.is_leader(), "broker 2 follows");
    assert_eq!(p.leader_epoch(), EPOCH);
    m
}

/// The error of a consumer Fetch of `t-0` naming `current_leader_epoch`.
fn fetch_error(m: &mut ReplicaManager<MemoryLog>, current_leader_epoch: i32) -> i16 {
    let request = FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 1,
        topics: vec![FetchTopic {
            topic: "t".into(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: 0,
                current_leader_epoch,
                log_start_offset: 0,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match m.fetch(0, &request) {
        FetchOutcome::Respond(r) => r.responses[0].partitions[0].error_code,
        FetchOutcome::Delayed { .. } => panic!("a fetch with an error is answered at once"),
    }
}

/// The error of an OffsetForLeaderEpoch of `t-0` naming `current_leader_epoch`.
fn offset_for_leader_epoch_error(m: &ReplicaManager<MemoryLog>, current_leader_epoch: i32) -> i16 {
    let request = OffsetForLeaderEpochRequest {
        replica_id: -1,
        topics: vec![OffsetForLeaderTopic {
            topic: "t".into(),
            partitions: vec![OffsetForLeaderPartition {
                partition: 0,
                current_leader_epoch,
                leader_epoch: EPOCH,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    m.offset_for_leader_epoch(&request).topics[0].partitions[0].error_code
}

#[test]
fn kip_320_a_follower_answers_fenced_leader_epoch_to_an_older_current_leader_epoch() {
    let mut m = follower();
    assert_eq!(
        fetch_error(&mut m, EPOCH - 1),
        ErrorCode::FencedLeaderEpoch.code()
    );
    assert_eq!(
        offset_for_leader_epoch_error(&m, EPOCH - 1),
        ErrorCode::FencedLeaderEpoch.code()
    );
}

#[test]
fn kip_320_a_follower_answers_unknown_leader_epoch_to_a_newer_current_leader_epoch() {
    let mut m = follower();
    assert_eq!(
        fetch_error(&mut m, EPOCH + 1),
        ErrorCode::UnknownLeaderEpoch.code()
    );
    assert_eq!(
        offset_for_leader_epoch_error(&m, EPOCH + 1),
        ErrorCode::UnknownLeaderEpoch.code()
    );
}

#[test]
fn kip_320_a_follower_answers_not_leader_or_follower_at_its_own_epoch() {
    let mut m = follower();
    assert_eq!(
        fetch_error(&mut m, EPOCH),
        ErrorCode::NotLeaderOrFollower.code()
    );
    assert_eq!(
        offset_for_leader_epoch_error(&m, EPOCH),
        ErrorCode::NotLeaderOrFollower.code()
    );
    // No epoch named (-1): only the leadership is checked.
    assert_eq!(
        fetch_error(&mut m, -1),
        ErrorCode::NotLeaderOrFollower.code()
    );
}
