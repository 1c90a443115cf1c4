//! K6.11 auto-rebalance: per-broker preferred-leader imbalance against
//! `leader.imbalance.per.broker.percentage`.

mod common;

use common::*;
use kafka_controller::rebalance::{
    can_preferred_replica_lead, imbalance_by_broker, partitions_to_rebalance,
    DEFAULT_IMBALANCE_PERCENTAGE,
};

#[test]
fn k6_11_imbalance_ratio_per_preferred_broker() {
    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    // Broker 1 is preferred for 10 partitions and leads 9 of them: exactly 10 %, not above.
    for p in 0..10 {
        let leader = if p == 0 { 2 } else { 1 };
        add_partition(
            &mut ctx,
            &mut store,
            "t",
            p,
            &[1, 2, 3],
            Some((leader, &[1, 2, 3])),
        );
    }
    // Broker 2 is preferred for 2 partitions and leads neither.
    add_partition(&mut ctx, &mut store, "u", 0, &[2, 3], Some((3, &[2, 3])));
    add_partition(&mut ctx, &mut store, "u", 1, &[2, 3], Some((3, &[3])));
    let imb = imbalance_by_broker(&ctx);
    assert_eq!(imb[&1].preferred, 10);
    assert_eq!(imb[&1].not_led, vec![tp("t", 0)]);
    assert!(
        !imb[&1].exceeds(DEFAULT_IMBALANCE_PERCENTAGE),
        "10 % is not above 10 %"
    );
    assert!(imb[&1].exceeds(9));
    assert!(imb[&2].exceeds(DEFAULT_IMBALANCE_PERCENTAGE));
    // Only u-0 qualifies: in u-1 the preferred replica is not in the ISR.
    assert!(!can_preferred_replica_lead(&ctx, &tp("u", 1)));
    assert_eq!(
        partitions_to_rebalance(&ctx, DEFAULT_IMBALANCE_PERCENTAGE),
        vec![tp("u", 0)]
    );
}

#[test]
fn k6_11_dead_preferred_replicas_and_deleted_topics_are_skipped() {
    let mut ctx = context(&[2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((2, &[1, 2])));
    add_partition(&mut ctx, &mut store, "d", 0, &[3, 2], Some((2, &[3, 2])));
    assert_eq!(partitions_to_rebalance(&ctx, 10), vec![tp("d", 0)]);
    ctx.queue_topic_for_deletion("d");
    assert!(
        partitions_to_rebalance(&ctx, 10).is_empty(),
        "broker 1 is dead; d is being deleted"
    );
    assert!(!imbalance_by_broker(&ctx).contains_key(&3));
}

#[test]
fn admin_preferred_election_splits_the_request() {
    use kafka_controller::election::ElectionStrategy;
    use kafka_controller::partition_state_machine::{
        handle_state_changes, initialize_partition_states, PartitionState,
    };
    use kafka_controller::rebalance::split_preferred_election;
    use kafka_controller::request_batch::ControllerBrokerRequestBatch;

    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((2, &[1, 2])));
    add_partition(&mut ctx, &mut store, "t", 1, &[1, 2], Some((1, &[1, 2])));
    add_partition(&mut ctx, &mut store, "t", 2, &[3, 2], Some((2, &[2])));
    add_partition(&mut ctx, &mut store, "d", 0, &[1, 2], Some((2, &[1, 2])));
    ctx.queue_topic_for_deletion("d");
    initialize_partition_states(&mut ctx);
    let asked = [
        tp("t", 0),
        tp("t", 1),
        tp("t", 2),
        tp("d", 0),
        tp("x", 0),
        tp("t", 0),
    ];
    let split = split_preferred_election(&ctx, &asked);
    assert_eq!(split.to_elect, vec![tp("t", 0), tp("t", 2)]);
    assert_eq!(split.already_preferred, vec![tp("t", 1)]);
    assert_eq!(split.being_deleted, vec![tp("d", 0)]);
    assert_eq!(split.unknown, vec![tp("x", 0)]);
    let pass = handle_state_changes(
        &mut ctx,
        &split.to_elect,
        PartitionState::Online,
        Some(ElectionStrategy::Preferred),
    );
    let mut batch = ControllerBrokerRequestBatch::new();
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    let l = &run.elected[&tp("t", 0)];
    assert_eq!(
        (l.leader, l.leader_epoch, l.isr.clone()),
        (1, 4, vec![1, 2])
    );
    assert!(
        run.failed.contains_key(&tp("t", 2)),
        "preferred replica 3 is not in the ISR"
    );
}
