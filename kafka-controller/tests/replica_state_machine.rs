//! The replica state machine: Kafka's transition table, refused transitions and each
//! transition's actions (Kafka's `ReplicaStateMachine`).

mod common;

use common::*;
use kafka_controller::context::{PartitionReplica, NO_LEADER};
use kafka_controller::partition_state_machine::WriteOutcome;
use kafka_controller::replica_state_machine::{
    complete_isr_removal, handle_state_changes, plan_isr_removal, IsrRemoval, IsrRemovalStep,
    ReplicaState, ReplicaStateChangeError,
};
use kafka_controller::request_batch::{ControlRequest, ControllerBrokerRequestBatch};

use ReplicaState::*;

const ALL: [ReplicaState; 7] = [
    New,
    Online,
    Offline,
    DeletionStarted,
    DeletionSuccessful,
    DeletionIneligible,
    NonExistent,
];

#[test]
fn replica_transition_table_matches_kafka() {
    let valid = |from, to| -> bool {
        matches!(
            (from, to),
            (NonExistent, New)
                | (New | Online | Offline | DeletionIneligible, Online)
                | (New | Online | Offline | DeletionIneligible, Offline)
                | (Offline, DeletionStarted)
                | (DeletionStarted, DeletionSuccessful)
                | (Offline | DeletionStarted, DeletionIneligible)
                | (DeletionSuccessful, NonExistent)
        )
    };
    for to in ALL {
        for from in ALL {
            assert_eq!(
                to.is_valid_transition_from(from),
                valid(from, to),
                "{from:?} -> {to:?}"
            );
        }
    }
}

#[test]
fn invalid_replica_transitions_are_refused_and_state_kept() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1, 2])));
    let r = PartitionReplica::new(tp("t", 0), 2);
    let mut batch = ControllerBrokerRequestBatch::new();
    // NonExistent -> Online / Offline / DeletionStarted are refused.
    for to in [
        Online,
        Offline,
        DeletionStarted,
        DeletionSuccessful,
        DeletionIneligible,
    ] {
        let pass = handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), to);
        assert_eq!(pass.invalid.len(), 1, "NonExistent -> {to:?}");
        assert_eq!(ctx.replica_state(&r), NonExistent);
    }
    assert!(batch.is_empty(), "refused transitions queue nothing");
    ctx.put_replica_state(r.clone(), Online);
    for to in [New, DeletionStarted, DeletionSuccessful, NonExistent] {
        let pass = handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), to);
        assert_eq!((pass.invalid[0].from, pass.invalid[0].to), (Online, to));
        assert_eq!(ctx.replica_state(&r), Online);
    }
}

#[test]
fn new_replica_gets_leader_and_isr_is_new_unless_it_leads() {
    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2, 3], Some((1, &[1, 2])));
    let mut batch = ControllerBrokerRequestBatch::new();
    let follower = PartitionReplica::new(tp("t", 0), 3);
    let leader = PartitionReplica::new(tp("t", 0), 1);
    let pass = handle_state_changes(
        &mut ctx,
        &mut batch,
        &[follower.clone(), leader.clone()],
        New,
    );
    assert_eq!(
        pass.failed,
        vec![(leader.clone(), ReplicaStateChangeError::ReplicaIsLeader)]
    );
    assert_eq!(ctx.replica_state(&follower), New);
    assert_eq!(ctx.replica_state(&leader), NonExistent);
    let reqs = batch.send_requests(&ctx);
    let lai: Vec<_> = reqs
        .iter()
        .filter_map(|r| match &r.request {
            ControlRequest::LeaderAndIsr { partitions, .. } => {
                Some((r.broker, partitions[0].is_new))
            }
            _ => None,
        })
        .collect();
    assert_eq!(lai, vec![(3, true)]);
}

#[test]
fn online_from_new_adds_replica_to_assignment() {
    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1, 2])));
    let mut batch = ControllerBrokerRequestBatch::new();
    let r = PartitionReplica::new(tp("t", 0), 3);
    handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), New);
    handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), Online);
    assert_eq!(ctx.partition_replicas(&tp("t", 0)), vec![1, 2, 3]);
    assert_eq!(ctx.replica_state(&r), Online);
}

#[test]
fn k5_2_online_replica_of_restarted_broker_gets_leader_and_isr() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1])));
    let r = PartitionReplica::new(tp("t", 0), 2);
    ctx.put_replica_state(r.clone(), Offline);
    let mut batch = ControllerBrokerRequestBatch::new();
    handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), Online);
    let reqs = batch.send_requests(&ctx);
    assert!(reqs.iter().any(|q| q.broker == 2
        && matches!(&q.request, ControlRequest::LeaderAndIsr { partitions, .. } if !partitions[0].is_new)));
    assert_eq!(ctx.replica_state(&r), Online);
}

#[test]
fn offline_removes_from_isr_leader_to_minus_one_and_keeps_single_member_isr() {
    let ctx = context(&[1, 2, 3]);
    let r1 = PartitionReplica::new(tp("t", 0), 1);
    let l = kafka_controller::context::PartitionLeadership::new(1, 3, vec![1, 2], 4, 7);
    let IsrRemoval::Write(w) = plan_isr_removal(&ctx, &r1, Some(&l)).unwrap() else {
        panic!("expected a write")
    };
    assert_eq!(
        (
            w.leadership.leader,
            w.leadership.isr.clone(),
            w.leadership.leader_epoch
        ),
        (NO_LEADER, vec![2], 4)
    );
    let single = kafka_controller::context::PartitionLeadership::new(1, 3, vec![1], 4, 7);
    let IsrRemoval::Write(w) = plan_isr_removal(&ctx, &r1, Some(&single)).unwrap() else {
        panic!("expected a write")
    };
    assert_eq!(
        (w.leadership.leader, w.leadership.isr.clone()),
        (NO_LEADER, vec![1])
    );
    let r3 = PartitionReplica::new(tp("t", 0), 3);
    assert_eq!(
        plan_isr_removal(&ctx, &r3, Some(&l)),
        Ok(IsrRemoval::Unchanged(l.clone()))
    );
    assert_eq!(
        plan_isr_removal(&ctx, &r3, None),
        Err(ReplicaStateChangeError::NoStateZnode)
    );
    let newer = kafka_controller::context::PartitionLeadership::new(1, 3, vec![1, 2], 9, 7);
    assert!(matches!(
        plan_isr_removal(&ctx, &r1, Some(&newer)),
        Err(ReplicaStateChangeError::NewerControllerEpoch { found: 9, ours: 5 })
    ));
}

#[test]
fn offline_sends_stop_replica_and_tells_other_replicas_after_the_isr_write() {
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
    let r = PartitionReplica::new(tp("t", 0), 3);
    ctx.put_replica_state(r.clone(), Online);
    let mut batch = ControllerBrokerRequestBatch::new();
    let pass = handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), Offline);
    assert_eq!(pass.isr_removals, vec![r.clone()]);
    assert_eq!(
        ctx.replica_state(&r),
        Online,
        "Offline only once the ISR write lands"
    );
    let read = store.read(&r.tp);
    let removal = plan_isr_removal(&ctx, &r, read.as_ref()).unwrap();
    let IsrRemoval::Write(w) = &removal else {
        panic!()
    };
    // A racing write: BADVERSION asks for a retry and changes nothing.
    assert_eq!(
        complete_isr_removal(&mut ctx, &mut batch, &r, &removal, WriteOutcome::BadVersion),
        IsrRemovalStep::Retry
    );
    assert_eq!(ctx.replica_state(&r), Online);
    let outcome = store.write(w);
    assert!(matches!(
        complete_isr_removal(&mut ctx, &mut batch, &r, &removal, outcome),
        IsrRemovalStep::Done(_)
    ));
    assert_eq!(ctx.replica_state(&r), Offline);
    assert_eq!(ctx.leadership(&r.tp).unwrap().partition_epoch, 8);
    let reqs = batch.send_requests(&ctx);
    let kinds: Vec<(i32, &str)> = reqs
        .iter()
        .map(|q| {
            (
                q.broker,
                match &q.request {
                    ControlRequest::LeaderAndIsr { .. } => "lai",
                    ControlRequest::UpdateMetadata { .. } => "um",
                    ControlRequest::StopReplica { partitions, .. } => {
                        assert!(!partitions[0].delete);
                        "stop"
                    }
                },
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (1, "lai"),
            (2, "lai"),
            (1, "um"),
            (2, "um"),
            (3, "um"),
            (3, "stop")
        ]
    );
}

#[test]
fn offline_without_leadership_only_updates_metadata() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], None);
    let r = PartitionReplica::new(tp("t", 0), 2);
    ctx.put_replica_state(r.clone(), New);
    let mut batch = ControllerBrokerRequestBatch::new();
    let pass = handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), Offline);
    assert!(pass.isr_removals.is_empty());
    assert_eq!(ctx.replica_state(&r), Offline);
}

#[test]
fn k2_1_deletion_path_stop_replica_with_delete_then_replica_vanishes() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1, 2])));
    ctx.queue_topic_for_deletion("t");
    let r = PartitionReplica::new(tp("t", 0), 2);
    ctx.put_replica_state(r.clone(), Offline);
    let mut batch = ControllerBrokerRequestBatch::new();
    handle_state_changes(
        &mut ctx,
        &mut batch,
        std::slice::from_ref(&r),
        DeletionStarted,
    );
    let reqs = batch.send_requests(&ctx);
    let ControlRequest::StopReplica { partitions, .. } = &reqs[0].request else {
        panic!()
    };
    assert!(partitions[0].delete);
    assert_eq!(
        partitions[0].leader_epoch, -2,
        "topics being deleted carry epoch -2"
    );
    handle_state_changes(
        &mut ctx,
        &mut batch,
        std::slice::from_ref(&r),
        DeletionIneligible,
    );
    assert_eq!(ctx.replica_state(&r), DeletionIneligible);
    // Retried: back to Offline (the ISR removal lands), then deletion again.
    let pass = handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), Offline);
    assert_eq!(
        run_replica_pass(&mut ctx, &mut batch, &mut store, &pass),
        vec![r.clone()]
    );
    handle_state_changes(
        &mut ctx,
        &mut batch,
        std::slice::from_ref(&r),
        DeletionStarted,
    );
    handle_state_changes(
        &mut ctx,
        &mut batch,
        std::slice::from_ref(&r),
        DeletionSuccessful,
    );
    handle_state_changes(&mut ctx, &mut batch, std::slice::from_ref(&r), NonExistent);
    assert_eq!(ctx.replica_state(&r), NonExistent);
    assert_eq!(ctx.partition_replicas(&tp("t", 0)), vec![1]);
}

/// The Online pass queues the LeaderAndIsr of consecutive replicas of one partition in one
/// call; the requests must be exactly those of one call per replica in order (Kafka's
/// `addLeaderAndIsrRequestForBrokers(Seq(replicaId), …)`), also when a New replica of the
/// same partition in the middle changes its assignment, a replica is refused, or a partition
/// has no leadership.
#[test]
fn k6_8_online_pass_queues_the_requests_of_one_call_per_replica() {
    let setup = || {
        let mut ctx = context(&[1, 2, 3, 4]);
        let mut store = FakeStore::default();
        add_partition(
            &mut ctx,
            &mut store,
            "a",
            0,
            &[1, 2, 3],
            Some((1, &[1, 2, 3])),
        );
        add_partition(&mut ctx, &mut store, "a", 1, &[2, 3], Some((2, &[2])));
        add_partition(&mut ctx, &mut store, "b", 0, &[3, 1], None);
        add_partition(&mut ctx, &mut store, "b", 1, &[4, 1, 2], Some((4, &[4, 1])));
        ctx
    };
    let replicas = vec![
        PartitionReplica::new(tp("a", 0), 1),
        PartitionReplica::new(tp("a", 0), 2),
        PartitionReplica::new(tp("a", 0), 4), // New: joins the assignment
        PartitionReplica::new(tp("a", 0), 3),
        PartitionReplica::new(tp("a", 1), 2),
        PartitionReplica::new(tp("a", 1), 3), // refused: DeletionSuccessful
        PartitionReplica::new(tp("b", 0), 3), // no leadership
        PartitionReplica::new(tp("b", 0), 1),
        PartitionReplica::new(tp("b", 1), 4),
        PartitionReplica::new(tp("b", 1), 1),
        PartitionReplica::new(tp("b", 1), 2),
    ];
    let states = |ctx: &mut kafka_controller::context::ControllerContext| {
        for r in &replicas {
            ctx.put_replica_state(r.clone(), Online);
        }
        ctx.put_replica_state(PartitionReplica::new(tp("a", 0), 4), New);
        ctx.put_replica_state(PartitionReplica::new(tp("a", 1), 3), DeletionSuccessful);
    };
    let mut grouped_ctx = setup();
    states(&mut grouped_ctx);
    let mut grouped = ControllerBrokerRequestBatch::new();
    let pass = handle_state_changes(&mut grouped_ctx, &mut grouped, &replicas, Online);
    assert_eq!(pass.invalid.len(), 1);

    // The reference: one call per replica, in order, as the transitions of Kafka's pass.
    let mut one_ctx = setup();
    states(&mut one_ctx);
    let mut one_by_one = ControllerBrokerRequestBatch::new();
    for r in &replicas {
        match one_ctx.replica_state(r) {
            New => {
                let mut a = one_ctx
                    .partition_assignment(&r.tp)
                    .cloned()
                    .unwrap_or_default();
                if !a.replicas.contains(&r.replica) {
                    a.replicas.push(r.replica);
                    one_ctx.set_partition_assignment(&r.tp, a);
                }
            }
            DeletionSuccessful => continue,
            _ if one_ctx.leadership(&r.tp).is_some() => {
                one_by_one.add_leader_and_isr(&one_ctx, &[r.replica], &r.tp, false);
            }
            _ => {}
        }
        one_ctx.put_replica_state(r.clone(), Online);
    }
    assert_eq!(
        grouped.send_requests(&grouped_ctx),
        one_by_one.send_requests(&one_ctx)
    );
    for r in &replicas[..5] {
        assert_eq!(grouped_ctx.replica_state(r), Online);
    }
    assert_eq!(
        grouped_ctx.partition_replicas(&tp("a", 0)),
        vec![1, 2, 3, 4]
    );
}
