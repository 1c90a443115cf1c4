//! Controller request batching (Kafka's `ControllerBrokerRequestBatch`, K1.4): one LeaderAndIsr, one UpdateMetadata and
//! one StopReplica per broker per pass, merged flags, deletion markers, recipients and headers.

mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};

use kafka_controller::context::{BrokerId, TopicPartition};
use kafka_controller::request_batch::{
    BatchNotEmpty, BrokerList, BrokerRequest, ControlHeader, ControlRequest,
    ControllerBrokerRequestBatch, LeaderAndIsrPartitionState,
};

fn cluster() -> (kafka_controller::context::ControllerContext, FakeStore) {
    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(
        &mut ctx,
        &mut store,
        "a",
        0,
        &[1, 2, 3],
        Some((1, &[1, 2, 3])),
    );
    add_partition(
        &mut ctx,
        &mut store,
        "a",
        1,
        &[2, 3, 1],
        Some((2, &[2, 3, 1])),
    );
    add_partition(&mut ctx, &mut store, "b", 0, &[3, 4], Some((3, &[3])));
    ctx.set_topic_id("a", kafka_wire::Uuid::from_u128(0xa));
    (ctx, store)
}

fn kinds(reqs: &[BrokerRequest]) -> Vec<(BrokerId, &'static str)> {
    reqs.iter()
        .map(|r| {
            let k = match r.request {
                ControlRequest::LeaderAndIsr { .. } => "lai",
                ControlRequest::UpdateMetadata { .. } => "um",
                ControlRequest::StopReplica { .. } => "stop",
            };
            (r.broker, k)
        })
        .collect()
}

#[test]
fn k1_4_one_request_of_each_kind_per_broker_in_order() {
    let (ctx, _) = cluster();
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_leader_and_isr(&ctx, &[1, 2, 3], &tp("a", 0), false);
    batch.add_leader_and_isr(&ctx, &[1, 2, 3], &tp("a", 1), false);
    batch.add_stop_replica(&ctx, &[2], &tp("a", 0), false);
    batch.add_stop_replica(&ctx, &[2], &tp("a", 1), false);
    let reqs = batch.send_requests(&ctx);
    assert_eq!(
        kinds(&reqs),
        vec![
            (1, "lai"),
            (2, "lai"),
            (3, "lai"),
            (1, "um"),
            (2, "um"),
            (3, "um"),
            (2, "stop")
        ]
    );
    for r in &reqs {
        match &r.request {
            ControlRequest::LeaderAndIsr {
                partitions,
                topic_ids,
                live_leaders,
                ..
            } => {
                assert_eq!(partitions.len(), 2);
                assert_eq!(topic_ids["a"], kafka_wire::Uuid::from_u128(0xa));
                let leaders: Vec<BrokerId> = live_leaders.iter().map(|b| b.id).collect();
                assert_eq!(leaders, vec![1, 2]);
            }
            ControlRequest::UpdateMetadata {
                partitions,
                live_brokers,
                ..
            } => {
                assert_eq!(partitions.len(), 2);
                assert_eq!(live_brokers.len(), 3);
            }
            ControlRequest::StopReplica { partitions, .. } => assert_eq!(partitions.len(), 2),
        }
    }
    assert!(batch.is_empty(), "sending drains the batch");
}

#[test]
fn headers_carry_controller_id_epoch_and_the_target_brokers_epoch() {
    let (ctx, _) = cluster();
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_leader_and_isr(&ctx, &[1, 2, 3], &tp("a", 0), false);
    for r in batch.send_requests(&ctx) {
        let h = r.request.header();
        assert_eq!((h.controller_id, h.controller_epoch), (1, 5));
        assert_eq!(h.broker_epoch, 100 + i64::from(r.broker));
    }
}

#[test]
fn is_new_and_delete_are_or_merged() {
    let (ctx, _) = cluster();
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_leader_and_isr(&ctx, &[2], &tp("a", 0), true);
    batch.add_leader_and_isr(&ctx, &[2], &tp("a", 0), false);
    batch.add_stop_replica(&ctx, &[3], &tp("a", 0), true);
    batch.add_stop_replica(&ctx, &[3], &tp("a", 0), false);
    for r in batch.send_requests(&ctx) {
        match &r.request {
            ControlRequest::LeaderAndIsr { partitions, .. } => assert!(partitions[0].is_new),
            ControlRequest::StopReplica { partitions, .. } => {
                assert!(partitions[0].delete);
                assert_eq!(partitions[0].leader_epoch, 3, "the cached leader epoch");
            }
            ControlRequest::UpdateMetadata { .. } => {}
        }
    }
}

#[test]
fn only_live_or_shutting_down_brokers_receive_anything() {
    let (mut ctx, _) = cluster();
    ctx.mark_shutting_down(3);
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_leader_and_isr(&ctx, &[3, 4, -1], &tp("b", 0), false);
    batch.add_stop_replica(&ctx, &[4], &tp("b", 0), false);
    batch.add_update_metadata(&ctx, &[4, 9], &[]);
    let reqs = batch.send_requests(&ctx);
    assert_eq!(
        kinds(&reqs),
        vec![(3, "lai"), (1, "um"), (2, "um"), (3, "um")]
    );
    // Broker 4 is not live, and (as in Kafka) a shutting-down broker's replica counts as
    // offline in UpdateMetadata too.
    let ControlRequest::UpdateMetadata { partitions, .. } = &reqs[1].request else {
        panic!()
    };
    assert_eq!(partitions[0].offline_replicas[..], [3, 4]);
}

#[test]
fn k2_1_topics_being_deleted_carry_leader_minus_two_and_epoch_minus_two() {
    let (mut ctx, _) = cluster();
    ctx.queue_topic_for_deletion("a");
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_update_metadata(&ctx, &[1], &[tp("a", 0), tp("b", 0)]);
    batch.add_stop_replica(&ctx, &[2], &tp("a", 0), true);
    let reqs = batch.send_requests(&ctx);
    let ControlRequest::UpdateMetadata { partitions, .. } = &reqs[0].request else {
        panic!()
    };
    let leaders: Vec<(&str, BrokerId)> = partitions
        .iter()
        .map(|p| (&*p.tp.topic, p.leader))
        .collect();
    assert_eq!(leaders, vec![("a", -2), ("b", 3)]);
    let ControlRequest::StopReplica { partitions, .. } = &reqs[1].request else {
        panic!()
    };
    assert_eq!(
        (partitions[0].leader_epoch, partitions[0].delete),
        (-2, true)
    );
}

#[test]
fn k5_1_update_metadata_without_partitions_carries_live_brokers() {
    let (ctx, _) = cluster();
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_update_metadata(&ctx, &[1, 2, 3], &[]);
    let reqs = batch.send_requests(&ctx);
    assert_eq!(reqs.len(), 3);
    for r in reqs {
        let ControlRequest::UpdateMetadata {
            partitions,
            live_brokers,
            ..
        } = r.request
        else {
            panic!()
        };
        assert!(partitions.is_empty());
        assert_eq!(
            live_brokers.iter().map(|b| b.id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }
}

#[test]
fn new_batch_refuses_an_unsent_batch() {
    let (ctx, _) = cluster();
    let mut batch = ControllerBrokerRequestBatch::new();
    assert_eq!(batch.new_batch(), Ok(()));
    batch.add_update_metadata(&ctx, &[1], &[]);
    assert_eq!(batch.new_batch(), Err(BatchNotEmpty));
    batch.clear();
    assert_eq!(batch.new_batch(), Ok(()));
    // A partition with no leadership is not put in LeaderAndIsr.
    batch.add_leader_and_isr(&ctx, &[1], &tp("zzz", 0), false);
    assert!(batch.is_empty());
}

/// One call of a pass, as the reference model below replays it.
enum Add<'a> {
    LeaderAndIsr(&'a [BrokerId], TopicPartition, bool),
    StopReplica(&'a [BrokerId], TopicPartition, bool),
    UpdateMetadata(&'a [BrokerId], Vec<TopicPartition>),
    /// The context's leadership of the partition changes (a new leader epoch and ISR).
    NewLeadership(TopicPartition, BrokerId, Vec<BrokerId>),
}

/// The LeaderAndIsr requests a batch holding a full copy of each partition's state per
/// broker gives (each broker gets the state of the last call naming it, `is_new` OR-merged).
fn reference_leader_and_isr(
    ctx: &kafka_controller::context::ControllerContext,
    per_broker: BTreeMap<BrokerId, BTreeMap<TopicPartition, LeaderAndIsrPartitionState>>,
) -> Vec<BrokerRequest> {
    per_broker
        .into_iter()
        .filter(|(b, _)| ctx.is_live_or_shutting_down(*b))
        .map(|(broker, parts)| {
            let partitions: Vec<LeaderAndIsrPartitionState> = parts.into_values().collect();
            let leaders: BTreeSet<BrokerId> = partitions.iter().map(|p| p.leader).collect();
            let topic_ids = partitions
                .iter()
                .filter_map(|p| Some((p.tp.topic.clone(), ctx.topic_id(&p.tp.topic)?)))
                .collect();
            BrokerRequest {
                broker,
                request: ControlRequest::LeaderAndIsr {
                    header: ControlHeader {
                        controller_id: ctx.controller_id,
                        controller_epoch: ctx.epoch,
                        broker_epoch: ctx.broker_epoch(broker),
                    },
                    partitions,
                    topic_ids,
                    live_leaders: leaders
                        .into_iter()
                        .filter_map(|l| ctx.broker(l).cloned())
                        .collect(),
                },
            }
        })
        .collect()
}

/// The batch keeps one state per partition with its recipients; what it sends is exactly
/// what a copy per broker sent: same requests, same order, same states and flags, including
/// a partition queued again for other brokers after its leadership changed.
#[test]
fn k1_4_one_state_per_partition_sends_what_a_copy_per_broker_sent() {
    let (mut ctx, _) = cluster();
    ctx.mark_shutting_down(3);
    let sequence = [
        Add::LeaderAndIsr(&[3, 1, 2], tp("a", 1), false),
        Add::LeaderAndIsr(&[2], tp("a", 0), true),
        Add::StopReplica(&[2, 4], tp("b", 0), true),
        Add::LeaderAndIsr(&[1, -1, 4], tp("a", 0), false),
        Add::UpdateMetadata(&[1, 9], vec![tp("b", 0)]),
        Add::LeaderAndIsr(&[2, 3], tp("a", 0), false),
        Add::NewLeadership(tp("a", 0), 2, vec![2, 3]),
        // Broker 2 takes the new state and keeps its `is_new`; broker 1 keeps the old one.
        Add::LeaderAndIsr(&[3, 2], tp("a", 0), false),
        Add::LeaderAndIsr(&[3], tp("b", 0), true),
        Add::StopReplica(&[1], tp("a", 1), false),
        Add::NewLeadership(tp("a", 1), 3, vec![3]),
        Add::LeaderAndIsr(&[1], tp("a", 1), true),
        Add::NewLeadership(tp("a", 1), 1, vec![1]),
        Add::LeaderAndIsr(&[2], tp("a", 1), false),
        Add::LeaderAndIsr(&[-1], tp("b", 0), false),
    ];
    let mut batch = ControllerBrokerRequestBatch::new();
    // The same pass with each LeaderAndIsr call replaced by the UpdateMetadata it queues.
    let mut without_leader_and_isr = ControllerBrokerRequestBatch::new();
    let mut model: BTreeMap<BrokerId, BTreeMap<TopicPartition, LeaderAndIsrPartitionState>> =
        BTreeMap::new();
    for add in &sequence {
        match add {
            Add::LeaderAndIsr(brokers, tp, is_new) => {
                batch.add_leader_and_isr(&ctx, brokers, tp, *is_new);
                without_leader_and_isr.add_update_metadata_to_all(&ctx, std::slice::from_ref(tp));
                let lead = ctx.leadership(tp).unwrap();
                let a = ctx.partition_assignment(tp).unwrap();
                for &b in brokers.iter().filter(|b| **b >= 0) {
                    let was_new = model
                        .get(&b)
                        .and_then(|m| m.get(tp))
                        .is_some_and(|s| s.is_new);
                    model.entry(b).or_default().insert(
                        tp.clone(),
                        LeaderAndIsrPartitionState {
                            tp: tp.clone(),
                            controller_epoch: lead.controller_epoch,
                            leader: lead.leader,
                            leader_epoch: lead.leader_epoch,
                            isr: BrokerList::from_slice(&lead.isr),
                            partition_epoch: lead.partition_epoch,
                            replicas: BrokerList::from_slice(&a.replicas),
                            adding_replicas: BrokerList::from_slice(&a.adding_replicas),
                            removing_replicas: BrokerList::from_slice(&a.removing_replicas),
                            is_new: *is_new || was_new,
                            leader_recovery_state: lead.leader_recovery_state,
                        },
                    );
                }
            }
            Add::StopReplica(brokers, tp, delete) => {
                batch.add_stop_replica(&ctx, brokers, tp, *delete);
                without_leader_and_isr.add_stop_replica(&ctx, brokers, tp, *delete);
            }
            Add::UpdateMetadata(brokers, partitions) => {
                batch.add_update_metadata(&ctx, brokers, partitions);
                without_leader_and_isr.add_update_metadata(&ctx, brokers, partitions);
            }
            Add::NewLeadership(tp, leader, isr) => {
                let mut lead = ctx.leadership(tp).unwrap().clone();
                lead.leader = *leader;
                lead.leader_epoch += 1;
                lead.partition_epoch += 1;
                lead.isr = isr.clone();
                ctx.put_leadership(tp.clone(), lead);
            }
        }
    }
    let mut expected = reference_leader_and_isr(&ctx, model);
    expected.extend(without_leader_and_isr.send_requests(&ctx));
    let sent = batch.send_requests(&ctx);
    assert_eq!(
        kinds(&sent),
        vec![
            (1, "lai"),
            (2, "lai"),
            (3, "lai"),
            (1, "um"),
            (2, "um"),
            (3, "um"),
            (1, "stop"),
            (2, "stop")
        ]
    );
    assert_eq!(sent, expected);
    // The cases the sequence is meant to cover are in it.
    let ControlRequest::LeaderAndIsr { partitions, .. } = &sent[0].request else {
        unreachable!()
    };
    let ControlRequest::LeaderAndIsr {
        partitions: two, ..
    } = &sent[1].request
    else {
        unreachable!()
    };
    let a0 = |ps: &[LeaderAndIsrPartitionState]| ps.iter().find(|p| p.tp == tp("a", 0)).cloned();
    let (one_a0, two_a0) = (a0(partitions).unwrap(), a0(two).unwrap());
    assert_ne!(
        one_a0.leader_epoch, two_a0.leader_epoch,
        "two states of a/0"
    );
    assert!(two_a0.is_new && !one_a0.is_new);
    assert!(batch.is_empty());
}
