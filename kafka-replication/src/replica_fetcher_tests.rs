//! Two replica managers in one process: a leader and a follower whose fetcher talks to it.

use super::*;
use crate::log::{test_util::batch, LogStorage, MemoryLog};
use crate::partition::PartitionConfig;
use crate::replica_manager::{FetchOutcome, ReplicaAction};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::LeaderAndIsrRequest;

fn manager(broker: BrokerId) -> ReplicaManager<MemoryLog> {
    ReplicaManager::new(
        broker,
        PartitionConfig::default(),
        0,
        Box::new(|_| Ok(MemoryLog::new())),
    )
}

fn lair(leader: BrokerId, epoch: i32) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest {
        controller_epoch: 1,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "t".into(),
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: "t".into(),
                partition_index: 0,
                controller_epoch: 1,
                leader,
                leader_epoch: epoch,
                isr: vec![1, 2].into(),
                partition_epoch: epoch,
                replicas: vec![1, 2].into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// Runs request/response rounds between the follower's fetcher and the leader.
fn pump(
    now: u64,
    fetcher: &mut ReplicaFetcher,
    follower: &mut ReplicaManager<MemoryLog>,
    leader: &mut ReplicaManager<MemoryLog>,
    rounds: usize,
) {
    for _ in 0..rounds {
        match fetcher.poll_request(now, follower) {
            Some(FetcherRequest::OffsetForLeaderEpoch(req)) => {
                let resp = leader.offset_for_leader_epoch(&req);
                fetcher.on_offset_for_leader_epoch_response(now, &resp, follower);
            }
            Some(FetcherRequest::Fetch(req)) => match leader.fetch(now, &req) {
                FetchOutcome::Respond(resp) => fetcher.on_fetch_response(now, &resp, follower),
                FetchOutcome::Delayed { .. } => {
                    // Nothing new: let the delayed fetch expire.
                    leader.tick(now + 1_000);
                    while let Some(a) = leader.poll_action() {
                        if let ReplicaAction::FetchResponse { response, .. } = a {
                            fetcher.on_fetch_response(now, &response, follower);
                        }
                    }
                }
            },
            None => {}
        }
    }
}

fn setup(
    config: FetcherConfig,
) -> (
    ReplicaManager<MemoryLog>,
    ReplicaManager<MemoryLog>,
    ReplicaFetcher,
) {
    let mut leader = manager(1);
    let mut follower = manager(2);
    leader.become_leader_or_follower(0, &lair(1, 1), 4);
    follower.become_leader_or_follower(0, &lair(1, 1), 4);
    let mut fetcher = ReplicaFetcher::new(2, 1, config);
    while let Some(a) = follower.poll_action() {
        if let ReplicaAction::AddFetcherPartitions {
            leader: 1,
            partitions,
        } = a
        {
            fetcher.add_partitions(partitions);
        }
    }
    (leader, follower, fetcher)
}

fn leo(m: &ReplicaManager<MemoryLog>) -> i64 {
    m.partition(&tp()).map_or(-1, |p| p.log_end_offset())
}

fn hw(m: &ReplicaManager<MemoryLog>) -> i64 {
    m.partition(&tp()).map_or(-1, |p| p.high_watermark())
}

#[test]
fn k8_follower_replicates_and_both_high_watermarks_advance() {
    for via_fetch in [false, true] {
        let (mut leader, mut follower, mut fetcher) = setup(FetcherConfig {
            truncate_via_fetch: via_fetch,
            ..FetcherConfig::default()
        });
        assert!(leader.append_records(&tp(), batch(5), -1).is_ok());
        pump(10, &mut fetcher, &mut follower, &mut leader, 4);
        assert_eq!(leo(&follower), 5);
        assert_eq!(hw(&leader), 5);
        assert_eq!(
            hw(&follower),
            5,
            "the follower learned the HW on its next fetch"
        );
        assert_eq!(fetcher.state(&tp()), Some(PartitionFetchState::Fetching));
    }
}

#[test]
fn kip_279_diverged_follower_truncates_before_fetching() {
    for via_fetch in [false, true] {
        let (mut leader, mut follower, mut fetcher) = setup(FetcherConfig {
            truncate_via_fetch: via_fetch,
            ..FetcherConfig::default()
        });
        assert!(leader.append_records(&tp(), batch(2), -1).is_ok());
        pump(10, &mut fetcher, &mut follower, &mut leader, 3);
        // The follower leads epoch 2 briefly and writes 3 records nobody else sees.
        follower.become_leader_or_follower(20, &lair(2, 2), 4);
        assert!(follower.append_records(&tp(), batch(3), 1).is_ok());
        // Broker 1 leads epoch 3 and writes 1 record; the follower follows it again.
        leader.become_leader_or_follower(30, &lair(1, 3), 4);
        assert!(leader.append_records(&tp(), batch(1), 1).is_ok());
        follower.become_leader_or_follower(30, &lair(1, 3), 4);
        fetcher.add_partitions([tp()]);
        pump(40, &mut fetcher, &mut follower, &mut leader, 6);
        let (l, f) = (leader.partition(&tp()), follower.partition(&tp()));
        let batches = |p: Option<&crate::partition::Partition<MemoryLog>>| {
            p.map(|p| p.log().batches().to_vec()).unwrap_or_default()
        };
        assert_eq!(
            batches(f),
            batches(l),
            "via_fetch={via_fetch}: logs must match"
        );
        assert_eq!(leo(&follower), 3);
    }
}

#[test]
fn fenced_epoch_backs_off_then_resumes_after_leader_and_isr() {
    let (mut leader, mut follower, mut fetcher) = setup(FetcherConfig::default());
    pump(0, &mut fetcher, &mut follower, &mut leader, 2);
    // The leader moves to epoch 2; the follower has not heard yet: its fetches are fenced.
    leader.become_leader_or_follower(10, &lair(1, 2), 4);
    assert!(leader.append_records(&tp(), batch(1), 1).is_ok());
    pump(10, &mut fetcher, &mut follower, &mut leader, 1);
    assert!(matches!(
        fetcher.state(&tp()),
        Some(PartitionFetchState::Backoff { .. })
    ));
    assert_eq!(
        fetcher.poll_request(500, &mut follower),
        None,
        "still backing off"
    );
    follower.become_leader_or_follower(600, &lair(1, 2), 4);
    pump(1_010, &mut fetcher, &mut follower, &mut leader, 4);
    assert_eq!(leo(&follower), 1);
}

#[test]
fn link_errors_back_off_the_whole_session() {
    let (_leader, mut follower, mut fetcher) = setup(FetcherConfig::default());
    assert!(fetcher.poll_request(0, &mut follower).is_some());
    assert!(
        fetcher.poll_request(0, &mut follower).is_none(),
        "one request in flight"
    );
    fetcher.on_link_error(5);
    assert!(fetcher.poll_request(900, &mut follower).is_none());
    assert!(fetcher.poll_request(1_005, &mut follower).is_some());
    fetcher.remove_partitions([&tp()]);
    assert!(fetcher.is_idle());
    let _ = follower.partition(&tp()).map(|p| p.log().log_end_offset());
}

#[test]
fn memory_leader_link_carries_both_requests() {
    use std::sync::{atomic::AtomicU64, Arc, Mutex};
    let (mut leader, mut follower, mut fetcher) = setup(FetcherConfig::default());
    assert!(leader.append_records(&tp(), batch(2), 1).is_ok());
    let leader = Arc::new(Mutex::new(leader));
    let mut link = MemoryLeaderLink::new(leader.clone(), Arc::new(AtomicU64::new(5)));
    for _ in 0..3 {
        match fetcher.poll_request(5, &mut follower) {
            Some(FetcherRequest::OffsetForLeaderEpoch(req)) => {
                let resp = futures::executor::block_on(link.offset_for_leader_epoch(req));
                let resp = resp.unwrap_or_else(|e| panic!("link: {e}"));
                fetcher.on_offset_for_leader_epoch_response(5, &resp, &mut follower);
            }
            Some(FetcherRequest::Fetch(req)) => {
                let resp = futures::executor::block_on(link.fetch(req));
                let resp = resp.unwrap_or_else(|e| panic!("link: {e}"));
                fetcher.on_fetch_response(5, &resp, &mut follower);
            }
            None => {}
        }
    }
    assert_eq!(leo(&follower), 2);
}

#[test]
fn a_follower_below_the_leaders_log_start_starts_again_there() {
    let (mut leader, mut follower, mut fetcher) = setup(FetcherConfig::default());
    for _ in 0..4 {
        assert!(leader.append_records(&tp(), batch(3), -1).is_ok());
    }
    pump(10, &mut fetcher, &mut follower, &mut leader, 4);
    assert_eq!((leo(&follower), hw(&leader)), (12, 12));
    // Retention removes all but the newest batch on the leader.
    leader.set_retention(
        crate::log::RetentionPolicy::keep_all().with_retention_bytes(0),
        1,
    );
    assert_eq!(leader.apply_retention(0), 3);
    // Broker 2 comes back with an empty disk: its next offset, 0, is below the leader's start.
    let mut fresh = manager(2);
    fresh.become_leader_or_follower(0, &lair(1, 1), 4);
    let mut fetcher = ReplicaFetcher::new(2, 1, FetcherConfig::default());
    while let Some(a) = fresh.poll_action() {
        if let ReplicaAction::AddFetcherPartitions { partitions, .. } = a {
            fetcher.add_partitions(partitions);
        }
    }
    pump(20, &mut fetcher, &mut fresh, &mut leader, 6);
    let p = fresh
        .partition(&tp())
        .map(|p| (p.log_start_offset(), p.log_end_offset()));
    assert_eq!(
        p,
        Some((9, 12)),
        "started again at the leader's log start and caught up"
    );
    assert_eq!(fetcher.state(&tp()), Some(PartitionFetchState::Fetching));
}
