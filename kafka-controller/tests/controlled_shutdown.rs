//! Controlled shutdown: the broker's leaderships move first (ControlledShutdown strategy), it
//! leaves the ISR of partitions it follows, and it learns which partitions it still leads.

mod common;

use common::*;
use kafka_controller::context::PartitionReplica;
use kafka_controller::election::{
    begin_controlled_shutdown, partitions_still_led, ControlledShutdownError, ElectionStrategy,
};
use kafka_controller::partition_state_machine::{
    handle_state_changes, initialize_partition_states, PartitionState,
};
use kafka_controller::replica_state_machine::{
    handle_state_changes as replica_changes, initialize_replica_states, ReplicaState,
};
use kafka_controller::request_batch::{ControlRequest, ControllerBrokerRequestBatch};

#[test]
fn controlled_shutdown_moves_leaderships_then_shrinks_isr() {
    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(
        &mut ctx,
        &mut store,
        "t",
        0,
        &[1, 2, 3],
        Some((1, &[1, 2, 3])),
    );
    add_partition(
        &mut ctx,
        &mut store,
        "t",
        1,
        &[2, 1, 3],
        Some((2, &[2, 1, 3])),
    );
    add_partition(&mut ctx, &mut store, "single", 0, &[1], Some((1, &[1])));
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);

    let plan = begin_controlled_shutdown(&mut ctx, 1, 101).unwrap();
    assert_eq!(plan.led, vec![tp("t", 0)]);
    assert_eq!(plan.followed, vec![tp("t", 1)]);
    assert!(ctx.shutting_down_broker_ids().contains(&1));

    let mut batch = ControllerBrokerRequestBatch::new();
    let pass = handle_state_changes(
        &mut ctx,
        &plan.led,
        PartitionState::Online,
        Some(ElectionStrategy::ControlledShutdown),
    );
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    let l = &run.elected[&tp("t", 0)];
    assert_eq!(
        (l.leader, l.isr.clone(), l.leader_epoch),
        (2, vec![2, 3], 4)
    );
    let requests = batch.send_requests(&ctx);
    assert!(
        requests
            .iter()
            .any(|r| r.broker == 1 && matches!(r.request, ControlRequest::LeaderAndIsr { .. })),
        "the shutting-down broker still hears about its partitions"
    );

    let followers: Vec<PartitionReplica> = plan
        .followed
        .iter()
        .map(|t| PartitionReplica::new(t.clone(), 1))
        .collect();
    for t in &plan.followed {
        batch.add_stop_replica(&ctx, &[1], t, false);
    }
    let pass = replica_changes(&mut ctx, &mut batch, &followers, ReplicaState::Offline);
    run_replica_pass(&mut ctx, &mut batch, &mut store, &pass);
    assert_eq!(store.states[&tp("t", 1)].isr, vec![2, 3]);
    assert_eq!(store.states[&tp("t", 1)].leader, 2);

    // The single-replica partition cannot move and does not hold the broker back: only
    // replicated partitions count.
    assert!(partitions_still_led(&ctx, 1).is_empty());
}

#[test]
fn controlled_shutdown_reports_partitions_it_could_not_move() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    // Broker 2 is not in the ISR: no one can take over.
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1])));
    initialize_partition_states(&mut ctx);
    let plan = begin_controlled_shutdown(&mut ctx, 1, -1).unwrap();
    let pass = handle_state_changes(
        &mut ctx,
        &plan.led,
        PartitionState::Online,
        Some(ElectionStrategy::ControlledShutdown),
    );
    let mut batch = ControllerBrokerRequestBatch::new();
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    assert_eq!(run.failed.len(), 1);
    assert_eq!(partitions_still_led(&ctx, 1), vec![tp("t", 0)]);
}

#[test]
fn controlled_shutdown_rejects_unknown_broker_and_stale_epoch() {
    let mut ctx = context(&[1, 2]);
    assert_eq!(
        begin_controlled_shutdown(&mut ctx, 9, -1),
        Err(ControlledShutdownError::BrokerNotAvailable(9))
    );
    assert_eq!(
        begin_controlled_shutdown(&mut ctx, 1, 100),
        Err(ControlledShutdownError::StaleBrokerEpoch {
            broker: 1,
            got: 100,
            current: 101
        })
    );
    assert!(ctx.shutting_down_broker_ids().is_empty());
    assert!(
        begin_controlled_shutdown(&mut ctx, 1, 102).is_ok(),
        "a newer epoch is accepted"
    );
}
