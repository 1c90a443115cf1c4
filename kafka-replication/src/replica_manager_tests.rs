//! Tests of [`ReplicaManager`], one per behaviour K4.1–K4.5 and K8.1–K8.6.

use super::*;
use crate::log::{test_util::batch, MemoryLog};
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::leader_and_isr_request::LeaderAndIsrTopicState;
use kafka_wire::{Decode, Encode};

fn manager(broker: BrokerId) -> ReplicaManager<MemoryLog> {
    ReplicaManager::new(
        broker,
        PartitionConfig::default(),
        0,
        Box::new(|_| Ok(MemoryLog::new())),
    )
}

fn lair(controller_epoch: i32, parts: &[(i32, BrokerId, i32)]) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest {
        controller_id: 9,
        controller_epoch,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "t".into(),
            partition_states: parts
                .iter()
                .map(|&(partition, leader, epoch)| LeaderAndIsrPartitionState {
                    topic_name: "t".into(),
                    partition_index: partition,
                    controller_epoch,
                    leader,
                    leader_epoch: epoch,
                    isr: vec![1, 2].into(),
                    partition_epoch: epoch,
                    replicas: vec![1, 2].into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn codes(r: &LeaderAndIsrResponse) -> Vec<(i32, i16)> {
    r.partition_errors
        .iter()
        .map(|e| (e.partition_index, e.error_code))
        .collect()
}

fn fetch_request(
    replica_id: BrokerId,
    max_wait_ms: i32,
    min_bytes: i32,
    parts: &[(i32, i64, i32)],
) -> FetchRequest {
    FetchRequest {
        replica_id,
        max_wait_ms,
        min_bytes,
        topics: vec![FetchTopic {
            topic: "t".into(),
            partitions: parts
                .iter()
                .map(|&(partition, offset, epoch)| FetchPartition {
                    partition,
                    fetch_offset: offset,
                    current_leader_epoch: epoch,
                    log_start_offset: 0,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn actions(m: &mut ReplicaManager<MemoryLog>) -> Vec<ReplicaAction> {
    std::iter::from_fn(|| m.poll_action()).collect()
}

fn respond(outcome: FetchOutcome) -> FetchResponse {
    match outcome {
        FetchOutcome::Respond(r) => r,
        FetchOutcome::Delayed { .. } => panic!("expected an immediate answer"),
    }
}

fn first(r: &FetchResponse) -> &PartitionData {
    match r.responses.first().and_then(|t| t.partitions.first()) {
        Some(p) => p,
        None => panic!("empty fetch response"),
    }
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

#[test]
fn k4_1_stale_controller_epoch_is_rejected_for_the_whole_request() {
    let mut m = manager(1);
    m.become_leader_or_follower(0, &lair(5, &[(0, 1, 1)]), 4);
    let r = m.become_leader_or_follower(0, &lair(4, &[(0, 1, 2), (1, 1, 1)]), 4);
    assert_eq!(r.error_code, ErrorCode::StaleControllerEpoch.code());
    assert!(codes(&r)
        .iter()
        .all(|(_, c)| *c == ErrorCode::StaleControllerEpoch.code()));
    assert_eq!(
        m.partition(&tp(0)).map(|p| p.leader_epoch()),
        Some(1),
        "nothing applied"
    );
    assert!(m.partition(&tp(1)).is_none());
}

#[test]
fn k4_2_only_newer_leader_epochs_apply_and_only_for_assigned_replicas() {
    let mut m = manager(1);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 3)]), 4);
    let mut req = lair(1, &[(0, 1, 3), (1, 1, 1), (2, 1, 1)]);
    req.topic_states[0].partition_states[2].replicas = vec![2, 3].into();
    let r = m.become_leader_or_follower(0, &req, 4);
    assert_eq!(
        codes(&r),
        vec![
            (0, ErrorCode::FencedLeaderEpoch.code()),
            (1, ErrorCode::None.code()),
            (2, ErrorCode::UnknownTopicOrPartition.code())
        ]
    );
    assert!(m.partition(&tp(2)).is_none());
    // v5+ answers per topic id.
    let r = m.become_leader_or_follower(0, &lair(1, &[(1, 1, 2)]), 5);
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].partition_errors[0].error_code, 0);
}

#[test]
fn k4_3_leaders_and_followers_are_made_and_fetchers_follow_the_leader() {
    let mut m = manager(2);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1), (1, 2, 1)]), 4);
    assert!(m.partition(&tp(1)).is_some_and(|p| p.is_leader()));
    assert!(m
        .partition(&tp(0))
        .is_some_and(|p| !p.is_leader() && p.leader() == Some(1)));
    let a = actions(&mut m);
    assert!(a.contains(&ReplicaAction::AddFetcherPartitions {
        leader: 1,
        partitions: vec![tp(0)]
    }));
    // Leadership of partition 0 moves here: its fetcher entry goes.
    m.become_leader_or_follower(0, &lair(1, &[(0, 2, 2)]), 4);
    let a = actions(&mut m);
    assert!(a.contains(&ReplicaAction::RemoveFetcherPartitions {
        partitions: vec![tp(0)]
    }));
    assert!(m.partition(&tp(0)).is_some_and(|p| p.is_leader()));
}

#[test]
fn k4_4_high_watermark_checkpoint_task_starts_once() {
    let mut m = manager(1);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
    let starts = |a: &[ReplicaAction]| {
        a.iter()
            .filter(|x| **x == ReplicaAction::StartHighWatermarkCheckpoint)
            .count()
    };
    assert_eq!(starts(&actions(&mut m)), 1);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 2)]), 4);
    assert_eq!(starts(&actions(&mut m)), 0);
    assert!(m.checkpoint_high_watermarks().is_ok());
}

#[test]
fn k4_5_idle_fetchers_are_shut_down() {
    let mut m = manager(2);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
    actions(&mut m);
    m.become_leader_or_follower(0, &lair(1, &[(0, 2, 2)]), 4);
    assert!(actions(&mut m).contains(&ReplicaAction::ShutdownIdleFetcher { leader: 1 }));
}

fn leader_with_data() -> ReplicaManager<MemoryLog> {
    let mut m = manager(1);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
    assert!(m.append_records(&tp(0), batch(3), 1).is_ok());
    actions(&mut m);
    m
}

#[test]
fn k8_1_consumers_read_up_to_the_high_watermark_followers_to_the_end() {
    let mut m = leader_with_data();
    let r = respond(m.fetch(0, &fetch_request(-1, 0, 0, &[(0, 0, 1)])));
    assert_eq!(first(&r).high_watermark, 0);
    assert_eq!(first(&r).records.as_ref().map(Bytes::len), Some(0));
    let r = respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 0, 1)])));
    assert!(first(&r).records.as_ref().is_some_and(|b| !b.is_empty()));
}

#[test]
fn k8_2_follower_fetch_moves_its_leo_and_the_high_watermark() {
    let mut m = leader_with_data();
    let r = respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 3, 1)])));
    assert_eq!(first(&r).high_watermark, 3);
    assert_eq!(m.partition(&tp(0)).map(|p| p.high_watermark()), Some(3));
    let r = respond(m.fetch(0, &fetch_request(-1, 0, 0, &[(0, 0, 1)])));
    assert!(first(&r).records.as_ref().is_some_and(|b| !b.is_empty()));
}

#[test]
fn k8_3_k8_4_immediate_answers() {
    let mut m = leader_with_data();
    // max wait 0
    assert!(matches!(
        m.fetch(0, &fetch_request(2, 0, 1 << 20, &[(0, 3, 1)])),
        FetchOutcome::Respond(_)
    ));
    // no partitions
    assert!(matches!(
        m.fetch(0, &fetch_request(2, 500, 1 << 20, &[])),
        FetchOutcome::Respond(_)
    ));
    // enough bytes
    assert!(matches!(
        m.fetch(0, &fetch_request(2, 500, 1, &[(0, 0, 1)])),
        FetchOutcome::Respond(_)
    ));
    // an error: fenced epoch, unknown partition, offset out of range
    let r = respond(m.fetch(0, &fetch_request(2, 500, 1 << 20, &[(0, 3, 0)])));
    assert_eq!(first(&r).error_code, ErrorCode::FencedLeaderEpoch.code());
    let r = respond(m.fetch(0, &fetch_request(2, 500, 1 << 20, &[(7, 0, 1)])));
    assert_eq!(
        first(&r).error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    let r = respond(m.fetch(0, &fetch_request(2, 500, 1 << 20, &[(0, 99, 1)])));
    assert_eq!(first(&r).error_code, ErrorCode::OffsetOutOfRange.code());
    let r = respond(m.fetch(0, &fetch_request(2, 500, 1 << 20, &[(0, -5, 1)])));
    assert_eq!(first(&r).error_code, ErrorCode::OffsetOutOfRange.code());
    assert_eq!(m.delayed_fetches(), 0);
}

#[test]
fn k8_5_delayed_fetch_is_answered_when_data_arrives() {
    let mut m = leader_with_data();
    respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 3, 1)])));
    let FetchOutcome::Delayed { request_id } = m.fetch(10, &fetch_request(2, 500, 1, &[(0, 3, 1)]))
    else {
        panic!("should wait")
    };
    assert_eq!(m.delayed_fetches(), 1);
    assert!(m.append_records(&tp(0), batch(1), 1).is_ok());
    let a = actions(&mut m);
    let Some(ReplicaAction::FetchResponse {
        request_id: id,
        response,
    }) = a
        .into_iter()
        .find(|x| matches!(x, ReplicaAction::FetchResponse { .. }))
    else {
        panic!("no delayed answer")
    };
    assert_eq!(id, request_id);
    assert!(first(&response)
        .records
        .as_ref()
        .is_some_and(|b| !b.is_empty()));
    assert_eq!(m.delayed_fetches(), 0);
}

#[test]
fn k8_5_delayed_fetch_expires_after_max_wait() {
    let mut m = leader_with_data();
    respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 3, 1)])));
    let FetchOutcome::Delayed { request_id } = m.fetch(10, &fetch_request(2, 500, 1, &[(0, 3, 1)]))
    else {
        panic!("should wait")
    };
    m.tick(509);
    assert!(!actions(&mut m)
        .iter()
        .any(|x| matches!(x, ReplicaAction::FetchResponse { .. })));
    m.tick(510);
    let a = actions(&mut m);
    assert!(a.iter().any(
        |x| matches!(x, ReplicaAction::FetchResponse { request_id: id, .. } if *id == request_id)
    ));
}

#[test]
fn k8_5_consumer_delayed_fetch_waits_for_the_high_watermark() {
    let mut m = leader_with_data();
    let FetchOutcome::Delayed { .. } = m.fetch(0, &fetch_request(-1, 500, 1, &[(0, 0, 1)])) else {
        panic!("nothing committed yet: should wait")
    };
    // The follower's fetch commits offsets 0..3 and wakes the consumer.
    respond(m.fetch(1, &fetch_request(2, 0, 0, &[(0, 3, 1)])));
    assert!(actions(&mut m)
        .iter()
        .any(|x| matches!(x, ReplicaAction::FetchResponse { .. })));
}

#[test]
fn k8_6_the_answer_is_a_fetch_response_on_the_wire() {
    let mut m = leader_with_data();
    let r = respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 0, 1)])));
    let bytes = r
        .encode_to_bytes(12)
        .unwrap_or_else(|e| panic!("encode: {e}"));
    let back =
        FetchResponse::decode(&mut bytes.clone(), 12).unwrap_or_else(|e| panic!("decode: {e}"));
    assert_eq!(back, r);
}

#[test]
fn stop_replica_is_epoch_checked_and_can_delete() {
    let mut m = leader_with_data();
    assert_eq!(
        m.stop_replica(0, &tp(0), 1, false).err(),
        Some(ErrorCode::StaleControllerEpoch)
    );
    assert_eq!(
        m.stop_replica(1, &tp(0), 0, true).err(),
        Some(ErrorCode::FencedLeaderEpoch)
    );
    assert!(m
        .stop_replica(1, &tp(0), 1, true)
        .is_ok_and(|log| log.is_some()));
    assert!(m.partition(&tp(0)).is_none());
}

/// Found by the real-core simulation in `ha-tests` (`EpochsOnlyGrow`, 3 seeds in 100,000 on
/// 5 brokers): a partition moved off this broker was deleted by StopReplica at leader epoch 7;
/// a LeaderAndIsr of epoch 6, sent before and delivered late, then created it again, a stray
/// replica back at an older epoch. The deleted partition's epoch is kept by topic id.
#[test]
fn k2_1_a_late_leader_and_isr_does_not_bring_back_a_deleted_partition() {
    let id = kafka_wire::Uuid::from_u128(7);
    let with_id = |req: LeaderAndIsrRequest| LeaderAndIsrRequest {
        topic_states: req
            .topic_states
            .into_iter()
            .map(|t| LeaderAndIsrTopicState { topic_id: id, ..t })
            .collect(),
        ..req
    };
    let mut m = manager(2);
    m.become_leader_or_follower(0, &with_id(lair(1, &[(0, 1, 6)])), 5);
    m.become_leader_or_follower(0, &with_id(lair(1, &[(0, 1, 7)])), 5);
    assert!(m
        .stop_replica(1, &tp(0), 7, true)
        .is_ok_and(|log| log.is_some()));
    assert!(m.partition(&tp(0)).is_none());
    // The epoch-6 request again, late.
    let r = m.become_leader_or_follower(0, &with_id(lair(1, &[(0, 1, 6)])), 5);
    assert_eq!(
        r.topics[0].partition_errors[0].error_code,
        ErrorCode::FencedLeaderEpoch.code()
    );
    assert!(m.partition(&tp(0)).is_none(), "no stray replica");
    // Assigned here again, with a newer epoch: applied.
    m.become_leader_or_follower(0, &with_id(lair(1, &[(0, 1, 8)])), 5);
    assert_eq!(m.partition(&tp(0)).map(|p| p.leader_epoch()), Some(8));
    // A topic of the same name created again has a new id: its epoch 0 applies.
    let mut other = manager(2);
    other.become_leader_or_follower(0, &with_id(lair(1, &[(0, 1, 7)])), 5);
    assert!(other
        .stop_replica(1, &tp(0), 7, true)
        .is_ok_and(|log| log.is_some()));
    let fresh = lair(1, &[(0, 1, 0)]);
    let fresh = LeaderAndIsrRequest {
        topic_states: fresh
            .topic_states
            .into_iter()
            .map(|t| LeaderAndIsrTopicState {
                topic_id: kafka_wire::Uuid::from_u128(8),
                ..t
            })
            .collect(),
        ..fresh
    };
    other.become_leader_or_follower(0, &fresh, 5);
    assert_eq!(other.partition(&tp(0)).map(|p| p.leader_epoch()), Some(0));
}

mod produce {
    use super::*;
    use crate::isr::{IsrResult, MemoryIsrWriter};
    use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_wire::messages::ProduceRequest;

    /// Kafka's `getPartitionOrError`: a broker that does not host a partition answers
    /// NOT_LEADER_OR_FOLLOWER when its metadata knows the partition (the producer's metadata
    /// is stale: a restarted broker with its UpdateMetadata but not yet its LeaderAndIsr), and
    /// UNKNOWN_TOPIC_OR_PARTITION only when it does not. Found under load by the rolling
    /// restart test, where a restarted broker answered 3 to a producer.
    #[test]
    fn produce_to_a_partition_known_to_metadata_but_not_hosted_is_not_leader_or_follower() {
        use kafka_wire::messages::update_metadata_request::{
            UpdateMetadataPartitionState, UpdateMetadataTopicState,
        };
        use kafka_wire::messages::UpdateMetadataRequest;
        let mut m = manager(2);
        let first = |m: &mut ReplicaManager<MemoryLog>| {
            let ProduceOutcome::Respond(r) = m.produce(0, &produce_request(1, 1000)) else {
                panic!("answered at once")
            };
            r.responses[0].partition_responses[0].error_code
        };
        assert_eq!(first(&mut m), ErrorCode::UnknownTopicOrPartition.code());
        m.update_metadata(&UpdateMetadataRequest {
            controller_id: 1,
            controller_epoch: 1,
            topic_states: vec![UpdateMetadataTopicState {
                topic_name: "t".into(),
                partition_states: vec![UpdateMetadataPartitionState {
                    topic_name: "t".into(),
                    partition_index: 0,
                    controller_epoch: 1,
                    leader: 1,
                    leader_epoch: 1,
                    isr: vec![1, 2].into(),
                    replicas: vec![1, 2].into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(first(&mut m), ErrorCode::NotLeaderOrFollower.code());
    }

    fn produce_request(acks: i16, timeout_ms: i32) -> ProduceRequest {
        ProduceRequest {
            acks,
            timeout_ms,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(batch(2)),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn manager_with(min_isr: usize) -> ReplicaManager<MemoryLog> {
        let config = PartitionConfig {
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: min_isr,
        };
        let mut m = ReplicaManager::new(1, config, 0, Box::new(|_| Ok(MemoryLog::new())));
        m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
        actions(&mut m);
        m
    }

    fn produce_answer(m: &mut ReplicaManager<MemoryLog>) -> Option<(i16, i64)> {
        actions(m).into_iter().find_map(|a| match a {
            ReplicaAction::ProduceResponse { response, .. } => response
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .map(|p| (p.error_code, p.base_offset)),
            _ => None,
        })
    }

    #[test]
    fn acks_0_sends_nothing_and_acks_1_answers_after_the_local_append() {
        let mut m = manager_with(1);
        assert_eq!(
            m.produce(0, &produce_request(0, 1000)),
            ProduceOutcome::NoResponse
        );
        let ProduceOutcome::Respond(r) = m.produce(0, &produce_request(1, 1000)) else {
            panic!("acks=1 answers at once")
        };
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, 2));
        assert_eq!(m.delayed_produces(), 0);
    }

    #[test]
    fn acks_all_waits_until_the_isr_has_the_records() {
        let mut m = manager_with(2);
        let ProduceOutcome::Delayed { .. } = m.produce(0, &produce_request(-1, 1000)) else {
            panic!("acks=-1 waits")
        };
        assert_eq!(produce_answer(&mut m), None);
        respond(m.fetch(5, &fetch_request(2, 0, 0, &[(0, 2, 1)])));
        assert_eq!(produce_answer(&mut m), Some((0, 0)));
    }

    #[test]
    fn acks_all_below_min_isr_is_refused_before_the_append() {
        let mut m = manager_with(2);
        m.become_leader_or_follower(
            0,
            &{
                let mut r = lair(1, &[(0, 1, 2)]);
                r.topic_states[0].partition_states[0].isr = vec![1].into();
                r
            },
            4,
        );
        let ProduceOutcome::Respond(r) = m.produce(0, &produce_request(-1, 1000)) else {
            panic!("refused at once")
        };
        assert_eq!(
            r.responses[0].partition_responses[0].error_code,
            ErrorCode::NotEnoughReplicas.code()
        );
        assert_eq!(m.partition(&tp(0)).map(|p| p.log_end_offset()), Some(0));
    }

    #[test]
    fn acks_all_answers_not_enough_replicas_after_append_when_the_isr_shrank() {
        let mut m = manager_with(2);
        let mut store = MemoryIsrWriter::new();
        store.set(
            tp(0),
            crate::isr::LeaderAndIsr {
                leader: 1,
                leader_epoch: 1,
                isr: vec![1, 2],
                partition_epoch: 1,
            },
        );
        let ProduceOutcome::Delayed { .. } = m.produce(0, &produce_request(-1, 60_000)) else {
            panic!("acks=-1 waits")
        };
        m.tick(30_001); // follower 2 never fetched: out of the ISR
        let proposal = actions(&mut m).into_iter().find_map(|a| match a {
            ReplicaAction::AlterIsr(p) => Some(p),
            _ => None,
        });
        let Some(proposal) = proposal else {
            panic!("no ISR proposal")
        };
        let result = store.propose_now(&proposal);
        assert!(matches!(result, IsrResult::Committed { .. }));
        m.on_isr_result(&proposal, result);
        assert_eq!(
            produce_answer(&mut m),
            Some((ErrorCode::NotEnoughReplicasAfterAppend.code(), 0))
        );
    }

    #[test]
    fn acks_all_times_out() {
        let mut m = manager_with(2);
        let ProduceOutcome::Delayed { .. } = m.produce(0, &produce_request(-1, 100)) else {
            panic!("acks=-1 waits")
        };
        m.tick(100);
        assert_eq!(
            produce_answer(&mut m),
            Some((ErrorCode::RequestTimedOut.code(), 0))
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

    /// Hostile fetches — any replica id, offsets, epochs, byte limits, unknown partitions —
    /// get per-partition error codes, never a panic, and never disturb the partition.
    #[test]
    fn arbitrary_fetches_never_panic_or_disturb_the_leader(
        requests in proptest::collection::vec(
            (-3i32..5, -100i32..1000, -5i32..5, proptest::collection::vec((-2i32..3, -10i64..20, -3i32..4, -10i32..100_000), 0..4)),
            1..8,
        )
    ) {
        let mut m = leader_with_data();
        respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 3, 1)])));
        let hw = m.partition(&tp(0)).map(|p| p.high_watermark());
        for (replica, max_wait, min_bytes, parts) in requests {
            let mut req = fetch_request(replica, max_wait, min_bytes, &[]);
            req.topics[0].partitions = parts
                .iter()
                .map(|&(partition, offset, epoch, max_bytes)| FetchPartition {
                    partition,
                    fetch_offset: offset,
                    current_leader_epoch: epoch,
                    partition_max_bytes: max_bytes,
                    ..Default::default()
                })
                .collect();
            let _ = m.fetch(0, &req);
            m.tick(1_000);
            actions(&mut m);
        }
        proptest::prop_assert_eq!(m.partition(&tp(0)).map(|p| p.log_end_offset()), Some(3));
        proptest::prop_assert!(m.partition(&tp(0)).map(|p| p.high_watermark()) >= hw);
    }
}

#[test]
fn k8_2_a_caught_up_follower_fetch_proposes_isr_expansion() {
    let mut m = manager(1);
    let mut req = lair(1, &[(0, 1, 1)]);
    req.topic_states[0].partition_states[0].isr = vec![1].into();
    m.become_leader_or_follower(0, &req, 4);
    assert!(m.append_records(&tp(0), batch(2), 1).is_ok());
    actions(&mut m);
    respond(m.fetch(1, &fetch_request(2, 0, 0, &[(0, 0, 1)])));
    assert!(
        !actions(&mut m)
            .iter()
            .any(|a| matches!(a, ReplicaAction::AlterIsr(_))),
        "LEO 0 < HW 2"
    );
    respond(m.fetch(2, &fetch_request(2, 0, 0, &[(0, 2, 1)])));
    let proposal = actions(&mut m).into_iter().find_map(|a| match a {
        ReplicaAction::AlterIsr(p) => Some(p),
        _ => None,
    });
    assert_eq!(proposal.map(|p| p.proposed.isr), Some(vec![1, 2]));
}

#[test]
fn k4_3_leader_and_isr_reports_became_leader_and_became_follower_as_actions() {
    let mut m = manager(2);
    m.become_leader_or_follower(0, &lair(3, &[(0, 1, 1), (1, 2, 1)]), 4);
    let a = actions(&mut m);
    assert!(a.contains(&ReplicaAction::BecameLeader {
        topic_partition: tp(1),
        leader_epoch: 1,
        controller_epoch: 3,
    }));
    assert!(a.contains(&ReplicaAction::BecameFollower {
        topic_partition: tp(0),
        leader: 1,
        leader_epoch: 1,
    }));
    // Leadership of partition 0 moves here, partition 1 moves away.
    m.become_leader_or_follower(0, &lair(4, &[(0, 2, 2), (1, 1, 2)]), 4);
    let a = actions(&mut m);
    let leadership: Vec<_> = a
        .iter()
        .filter(|x| {
            matches!(
                x,
                ReplicaAction::BecameLeader { .. } | ReplicaAction::BecameFollower { .. }
            )
        })
        .collect();
    assert_eq!(
        leadership,
        vec![
            &ReplicaAction::BecameLeader {
                topic_partition: tp(0),
                leader_epoch: 2,
                controller_epoch: 4,
            },
            &ReplicaAction::BecameFollower {
                topic_partition: tp(1),
                leader: 1,
                leader_epoch: 2,
            },
        ]
    );
    // Nothing is reported for what a request did not apply: a fenced leader epoch, a stale
    // controller.
    m.become_leader_or_follower(0, &lair(4, &[(0, 2, 2)]), 4);
    m.become_leader_or_follower(0, &lair(3, &[(1, 2, 9)]), 4);
    assert!(!actions(&mut m).iter().any(|x| matches!(
        x,
        ReplicaAction::BecameLeader { .. } | ReplicaAction::BecameFollower { .. }
    )));
}

mod idempotence {
    use super::*;
    use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_wire::messages::ProduceRequest;
    use kafka_wire::records::RecordBatchBuilder;

    const PID: i64 = 7;

    /// An idempotent batch of `n` records from (`PID`, `epoch`) at sequence `seq`.
    fn idempotent(epoch: i16, seq: i32, n: usize) -> Bytes {
        let mut b = RecordBatchBuilder::new(0).producer(PID, epoch, seq);
        for i in 0..n {
            if let Err(e) = b.append(i as i64, None, Some(b"v"), &[]) {
                panic!("cannot build a test batch: {e}");
            }
        }
        match b.build() {
            Ok(bytes) => bytes,
            Err(e) => panic!("cannot build a test batch: {e}"),
        }
    }

    fn produce(acks: i16, records: Bytes) -> ProduceRequest {
        ProduceRequest {
            acks,
            timeout_ms: 1_000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(records),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// (error code, base offset) of an immediate answer.
    fn answered(outcome: ProduceOutcome) -> (i16, i64) {
        let ProduceOutcome::Respond(r) = outcome else {
            panic!("expected an immediate answer, got {outcome:?}")
        };
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    /// The delayed produce answers among the pending actions, by request id.
    fn delayed_answers(m: &mut ReplicaManager<MemoryLog>) -> Vec<(u64, i16, i64)> {
        actions(m)
            .into_iter()
            .filter_map(|a| match a {
                ReplicaAction::ProduceResponse {
                    request_id,
                    response,
                } => {
                    let p = &response.responses[0].partition_responses[0];
                    Some((request_id, p.error_code, p.base_offset))
                }
                _ => None,
            })
            .collect()
    }

    fn leo(m: &ReplicaManager<MemoryLog>) -> Option<i64> {
        m.partition(&tp(0)).map(|p| p.log_end_offset())
    }

    #[test]
    fn kip_98_a_new_leader_detects_a_duplicate_written_under_the_previous_leader() {
        let mut b1 = manager(1);
        let mut b2 = manager(2);
        let epoch1 = lair(1, &[(0, 1, 1)]);
        b1.become_leader_or_follower(0, &epoch1, 4);
        b2.become_leader_or_follower(0, &epoch1, 4);
        assert_eq!(
            answered(b1.produce(0, &produce(1, idempotent(0, 0, 2)))),
            (0, 0)
        );
        assert_eq!(
            answered(b1.produce(0, &produce(1, idempotent(0, 2, 3)))),
            (0, 2)
        );
        // Broker 2 replicates both batches as a follower.
        let read = respond(b1.fetch(1, &fetch_request(2, 0, 0, &[(0, 0, 1)])));
        let records = first(&read).records.clone().unwrap_or_default();
        let appended = b2
            .partition_mut(&tp(0))
            .map(|p| p.append_as_follower(records, 0));
        assert!(matches!(appended, Some(Ok(Some(_)))));
        assert_eq!(leo(&b2), Some(5));
        assert!(b2
            .partition(&tp(0))
            .is_some_and(|p| p.producer_state().is_empty()));

        // Broker 1 fails; broker 2 leads epoch 2 and the producer retries its last batch.
        b2.become_leader_or_follower(0, &lair(2, &[(0, 2, 2)]), 4);
        assert_eq!(
            answered(b2.produce(1, &produce(1, idempotent(0, 2, 3)))),
            (0, 2),
            "answered with the offset it got under the previous leader"
        );
        assert_eq!(leo(&b2), Some(5), "not appended twice");
        // The first batch too is known; the sequence goes on from the old leader's.
        assert_eq!(
            answered(b2.produce(1, &produce(1, idempotent(0, 0, 2)))),
            (0, 0)
        );
        assert_eq!(
            answered(b2.produce(1, &produce(1, idempotent(0, 9, 1)))).0,
            ErrorCode::OutOfOrderSequenceNumber.code()
        );
        assert_eq!(
            answered(b2.produce(1, &produce(1, idempotent(0, 5, 1)))),
            (0, 5)
        );
        assert_eq!(leo(&b2), Some(6));
    }

    #[test]
    fn kip_98_a_retried_acks_all_duplicate_is_answered_only_once_the_high_watermark_passes_it() {
        let mut m = manager(1);
        m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
        actions(&mut m);
        let ProduceOutcome::Delayed { request_id: first } =
            m.produce(0, &produce(-1, idempotent(0, 0, 2)))
        else {
            panic!("acks=-1 waits for the follower")
        };
        // The client times out on its side and retries: no append, but a wait in the
        // purgatory on the original's offsets.
        let ProduceOutcome::Delayed { request_id: retry } =
            m.produce(1, &produce(-1, idempotent(0, 0, 2)))
        else {
            panic!("the retried acks=-1 batch waits too")
        };
        assert_eq!(leo(&m), Some(2));
        assert_eq!(m.delayed_produces(), 2);
        assert_eq!(delayed_answers(&mut m), vec![]);
        // The follower fetches the records, but its next fetch (which tells the leader it
        // has them) has not come yet: still nothing.
        respond(m.fetch(2, &fetch_request(2, 0, 0, &[(0, 0, 1)])));
        assert_eq!(delayed_answers(&mut m), vec![]);
        assert_eq!(m.partition(&tp(0)).map(|p| p.high_watermark()), Some(0));
        // The HW passes the batch: both are answered with the original offset.
        respond(m.fetch(3, &fetch_request(2, 0, 0, &[(0, 2, 1)])));
        assert_eq!(delayed_answers(&mut m), vec![(first, 0, 0), (retry, 0, 0)]);
        assert_eq!(m.delayed_produces(), 0);
        // A retry of a committed batch is answered as soon as it is parked.
        let ProduceOutcome::Delayed { request_id: late } =
            m.produce(4, &produce(-1, idempotent(0, 0, 2)))
        else {
            panic!("acks=-1 goes through the purgatory")
        };
        assert_eq!(delayed_answers(&mut m), vec![(late, 0, 0)]);
        assert_eq!(leo(&m), Some(2));
    }

    #[test]
    fn kip_98_a_retried_acks_all_duplicate_times_out_if_the_high_watermark_does_not_pass_it() {
        let mut m = manager(1);
        m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
        actions(&mut m);
        let first = m.produce(0, &produce(-1, idempotent(0, 0, 2)));
        assert!(matches!(first, ProduceOutcome::Delayed { .. }));
        let ProduceOutcome::Delayed { request_id: retry } =
            m.produce(500, &produce(-1, idempotent(0, 0, 2)))
        else {
            panic!("the retried acks=-1 batch waits")
        };
        m.tick(1_000);
        let answers = delayed_answers(&mut m);
        assert!(!answers.iter().any(|(id, _, _)| *id == retry));
        m.tick(1_500);
        let answers = delayed_answers(&mut m);
        assert_eq!(
            answers,
            vec![(retry, ErrorCode::RequestTimedOut.code(), 0)],
            "the base offset stays, as for an append whose replication timed out"
        );
    }

    #[test]
    fn kip_98_fenced_producer_epoch_is_refused_and_not_appended() {
        let mut m = manager(1);
        m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
        assert_eq!(
            answered(m.produce(0, &produce(1, idempotent(1, 0, 1)))),
            (0, 0)
        );
        assert_eq!(
            answered(m.produce(0, &produce(1, idempotent(0, 1, 1)))),
            (ErrorCode::InvalidProducerEpoch.code(), -1)
        );
        assert_eq!(leo(&m), Some(1));
    }
}

#[test]
fn retention_moves_the_log_start_offset_which_fetch_and_followers_then_follow() {
    let mut m = leader_with_data();
    for _ in 0..3 {
        assert!(m.append_records(&tp(0), batch(3), 1).is_ok());
    }
    // Follower 2 has everything: the HW reaches the log end.
    let r = respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 12, 1)])));
    assert_eq!(first(&r).high_watermark, 12);
    m.set_retention(
        crate::log::RetentionPolicy::keep_all().with_retention_bytes(0),
        1_000,
    );
    assert_eq!(m.retention_check_interval_ms(), 1_000);
    // Each batch of a MemoryLog stands for a segment; all but the newest go.
    assert_eq!(m.apply_retention(0), 3);
    assert_eq!(m.partition(&tp(0)).map(|p| p.log_start_offset()), Some(9));
    // A consumer below the log start is out of range; the answer carries the new start.
    let r = respond(m.fetch(0, &fetch_request(-1, 0, 0, &[(0, 0, 1)])));
    assert_eq!(first(&r).error_code, ErrorCode::OffsetOutOfRange.code());
    let r = respond(m.fetch(0, &fetch_request(2, 0, 0, &[(0, 12, 1)])));
    assert_eq!(
        first(&r).log_start_offset,
        9,
        "followers learn the start from Fetch"
    );
}

#[test]
fn a_follower_moves_its_log_start_offset_to_the_leaders_within_its_high_watermark() {
    let mut m = manager(2);
    m.become_leader_or_follower(0, &lair(1, &[(0, 1, 1)]), 4);
    actions(&mut m);
    let Some(p) = m.partition_mut(&tp(0)) else {
        panic!("partition 0 is assigned to broker 2");
    };
    for base in [0, 3, 6, 9] {
        let mut b = kafka_wire::records::RecordBatchBuilder::new(base);
        for i in 0..3 {
            assert!(b.append(i, None, Some(b"v"), &[]).is_ok());
        }
        let Ok(records) = b.build() else {
            panic!("the batch builds");
        };
        assert!(p.append_as_follower(records, 6).is_ok());
    }
    assert_eq!(p.high_watermark(), 6);
    assert_eq!(p.update_follower_log_start_offset(9).ok(), Some(true));
    assert_eq!(
        p.log_start_offset(),
        6,
        "never past the follower's own high watermark"
    );
    assert_eq!(
        p.update_follower_log_start_offset(3).ok(),
        Some(false),
        "never backwards"
    );
}

#[test]
fn stats_count_under_replicated_leaders_and_committed_isr_expansions() {
    let mut m = manager(1);
    let mut req = lair(1, &[(0, 1, 1)]);
    req.topic_states[0].partition_states[0].isr = vec![1].into();
    m.become_leader_or_follower(0, &req, 4);
    assert!(m.append_records(&tp(0), batch(2), 1).is_ok());
    actions(&mut m);
    let s = m.stats();
    assert_eq!(
        (s.partitions, s.leaders, s.under_replicated_partitions),
        (1, 1, 1)
    );
    assert_eq!(
        s.at_min_isr_partitions, 1,
        "ISR [1] with min.insync.replicas 1"
    );
    respond(m.fetch(2, &fetch_request(2, 0, 0, &[(0, 2, 1)])));
    let Some(proposal) = actions(&mut m).into_iter().find_map(|a| match a {
        ReplicaAction::AlterIsr(p) => Some(p),
        _ => None,
    }) else {
        panic!("a caught-up follower is proposed for the ISR");
    };
    assert_eq!(m.stats().isr_expands, 0, "counted once committed");
    m.on_isr_result(
        &proposal,
        crate::isr::IsrResult::Committed {
            partition_epoch: proposal.proposed.partition_epoch + 1,
        },
    );
    let s = m.stats();
    assert_eq!((s.isr_expands, s.isr_shrinks), (1, 0));
    assert_eq!(s.under_replicated_partitions, 0);
}
