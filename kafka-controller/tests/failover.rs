//! K6 controller failover and K5 broker start-up, as sequences of passes: the context is
//! loaded from the store (K6.7), the state machines start (K6.8), UpdateMetadata reaches every
//! broker before any LeaderAndIsr (K6.10, as Kafka's `onControllerFailover` does), and a new broker learns every
//! partition (K5.1–K5.3).

mod common;

use common::*;
use kafka_controller::context::{BrokerId, BrokerInfo, PartitionReplica};
use kafka_controller::partition_state_machine::{
    initialize_partition_states, trigger_online_partition_state_change, PartitionState,
};
use kafka_controller::replica_state_machine::{
    handle_state_changes as replica_changes, initialize_replica_states, ReplicaState,
};
use kafka_controller::request_batch::{
    BrokerRequest, ControlRequest, ControllerBrokerRequestBatch,
};

fn kind(r: &BrokerRequest) -> &'static str {
    match r.request {
        ControlRequest::LeaderAndIsr { .. } => "lai",
        ControlRequest::UpdateMetadata { .. } => "um",
        ControlRequest::StopReplica { .. } => "stop",
    }
}

#[test]
fn k6_7_to_k6_10_failover_loads_store_and_sends_update_metadata_first() {
    // What the previous controller (epoch 5) left in the store.
    let mut old = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(
        &mut old,
        &mut store,
        "t",
        0,
        &[1, 2, 3],
        Some((1, &[1, 2, 3])),
    );
    add_partition(
        &mut old,
        &mut store,
        "t",
        1,
        &[2, 3, 1],
        Some((2, &[2, 3, 1])),
    );
    add_partition(&mut old, &mut store, "t", 2, &[3, 1, 2], None); // created, never initialized

    // Broker 2 wins /controller with epoch 6; broker 1 is gone by now.
    let mut ctx = store.load_context(2, 6, &[2, 3]);
    initialize_partition_states(&mut ctx);
    let (online, offline) = initialize_replica_states(&mut ctx);
    assert_eq!(ctx.partition_state(&tp("t", 0)), PartitionState::Offline);
    assert_eq!(ctx.partition_state(&tp("t", 1)), PartitionState::Online);
    assert_eq!(ctx.partition_state(&tp("t", 2)), PartitionState::New);

    let mut sent = Vec::new();
    // As Kafka's `onControllerFailover`: UpdateMetadata (live brokers, no partitions) to all.
    let mut batch = ControllerBrokerRequestBatch::new();
    let all: Vec<BrokerId> = ctx
        .live_or_shutting_down_broker_ids()
        .iter()
        .copied()
        .collect();
    batch.add_update_metadata(&ctx, &all, &[]);
    sent.extend(batch.send_requests(&ctx));
    // K6.8 / K6.10: replica state machine start-up, then partition state machine start-up.
    batch.new_batch().unwrap();
    replica_changes(&mut ctx, &mut batch, &online, ReplicaState::Online);
    let pass = replica_changes(&mut ctx, &mut batch, &offline, ReplicaState::Offline);
    run_replica_pass(&mut ctx, &mut batch, &mut store, &pass);
    sent.extend(batch.send_requests(&ctx));
    batch.new_batch().unwrap();
    let pass = trigger_online_partition_state_change(&mut ctx);
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    sent.extend(batch.send_requests(&ctx));

    for b in [2, 3] {
        let kinds: Vec<&str> = sent.iter().filter(|r| r.broker == b).map(kind).collect();
        assert_eq!(
            kinds[0], "um",
            "broker {b} hears UpdateMetadata before any LeaderAndIsr"
        );
        assert!(kinds.contains(&"lai"));
    }
    assert!(sent
        .iter()
        .all(|r| r.request.header().controller_epoch == 6));
    // t-0 lost its leader with broker 1: elected from the live ISR; t-2 initialized.
    assert_eq!(run.elected[&tp("t", 0)].leader, 2);
    assert_eq!(run.elected[&tp("t", 2)].leader, 3);
    for p in 0..3 {
        assert_eq!(ctx.partition_state(&tp("t", p)), PartitionState::Online);
        assert_eq!(store.states[&tp("t", p)].controller_epoch, 6);
        assert!(
            !store.states[&tp("t", p)].isr.contains(&1),
            "dead broker 1 left every ISR"
        );
    }
}

#[test]
fn k5_1_to_k5_3_broker_start_up() {
    let mut ctx = context(&[2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((2, &[2])));
    add_partition(&mut ctx, &mut store, "t", 1, &[1, 3], Some((-1, &[1])));
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);

    ctx.add_live_broker(BrokerInfo::new(1, 777));
    let mut batch = ControllerBrokerRequestBatch::new();
    // K5.1: UpdateMetadata without partitions to the existing brokers, with every partition to
    // the new one.
    batch.add_update_metadata(&ctx, &[2, 3], &[]);
    let mut sent = batch.send_requests(&ctx);
    batch.new_batch().unwrap();
    batch.add_update_metadata(&ctx, &[1], &ctx.all_partitions());
    sent.extend(batch.send_requests(&ctx));
    // K5.2: its replicas go Online (LeaderAndIsr for the partitions that have a leader).
    batch.new_batch().unwrap();
    let replicas: Vec<PartitionReplica> = ctx.replicas_on_brokers(&brokers(&[1]));
    let pass = replica_changes(&mut ctx, &mut batch, &replicas, ReplicaState::Online);
    assert!(pass.invalid.is_empty());
    // K5.3: partitions without a leader come online.
    let pass = trigger_online_partition_state_change(&mut ctx);
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    sent.extend(batch.send_requests(&ctx));

    let to_new: Vec<&BrokerRequest> = sent.iter().filter(|r| r.broker == 1).collect();
    let ControlRequest::UpdateMetadata { partitions, .. } = &to_new[0].request else {
        panic!("first request to the new broker is UpdateMetadata")
    };
    assert_eq!(partitions.len(), 2);
    assert_eq!(to_new[0].request.header().broker_epoch, 777);
    assert!(to_new.iter().any(|r| kind(r) == "lai"));
    assert_eq!(
        run.elected[&tp("t", 1)].leader,
        1,
        "t-1's only ISR member is back"
    );
    assert_eq!(
        ctx.replica_state(&PartitionReplica::new(tp("t", 0), 1)),
        ReplicaState::Online
    );
}
