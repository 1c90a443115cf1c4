//! Controller request batching (Kafka's `ControllerBrokerRequestBatch`, K1.4): one LeaderAndIsr, one UpdateMetadata and
//! one StopReplica per broker per pass, merged flags, deletion markers, recipients and headers.

mod common;

use common::*;
use kafka_controller::context::BrokerId;
use kafka_controller::request_batch::{
    BatchNotEmpty, BrokerRequest, ControlRequest, ControllerBrokerRequestBatch,
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
    assert_eq!(partitions[0].offline_replicas, vec![3, 4]);
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
