//! K7 partition reassignment: each step, K7's worked example (docs/behaviour.md) (OAR {1,2,3} → RAR {4,5,6})
//! asserted after every step, and a successor controller resuming from every step.

mod common;

use common::*;
use kafka_controller::context::{BrokerId, ControllerContext, PartitionReplica, ReplicaAssignment};
use kafka_controller::election::ElectionStrategy;
use kafka_controller::partition_state_machine::{
    handle_state_changes as partition_changes, initialize_partition_states, PartitionState,
};
use kafka_controller::reassignment::*;
use kafka_controller::replica_state_machine::{initialize_replica_states, ReplicaState};
use kafka_controller::request_batch::{
    BrokerRequest, ControlRequest, ControllerBrokerRequestBatch,
};

const OAR: &[BrokerId] = &[1, 2, 3];
const RAR: &[BrokerId] = &[4, 5, 6];
const ALL: &[BrokerId] = &[1, 2, 3, 4, 5, 6];

/// Cluster of brokers 1..=6, topic "t" partition 0 on OAR led by 1 with ISR {1,2,3}, and the
/// admin path asking for RAR.
fn cluster() -> (ControllerContext, FakeStore) {
    let mut ctx = context(ALL);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, OAR, Some((1, OAR)));
    store.admin_reassign.insert(tp("t", 0), RAR.to_vec());
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);
    (ctx, store)
}

fn sorted(v: &[BrokerId]) -> Vec<BrokerId> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

/// (AR in the store, leader, ISR) as K7's table in docs/behaviour.md shows them.
fn row(store: &FakeStore) -> (Vec<BrokerId>, BrokerId, Vec<BrokerId>) {
    let ar = store.topics["t"][&0].replicas.clone();
    let l = &store.states[&tp("t", 0)];
    (sorted(&ar), l.leader, sorted(&l.isr))
}

fn epoch_bump(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    store: &mut FakeStore,
) {
    for _ in 0..10 {
        let read = store.read(&tp("t", 0));
        let w = plan_epoch_bump(ctx, &tp("t", 0), read.as_ref()).unwrap();
        let outcome = store.write(&w);
        if let EpochBumpStep::Done(_) = complete_epoch_bump(ctx, batch, &w, outcome) {
            return;
        }
    }
    panic!("epoch bump did not converge");
}

/// The brokers of RAR catch up: the (ZooKeeper-mode) leader expands the ISR in the store, and
/// the controller learns it (ISR change notification).
fn isr_catches_up(ctx: &mut ControllerContext, store: &mut FakeStore) {
    let l = store.states.get_mut(&tp("t", 0)).unwrap();
    for r in RAR {
        if !l.isr.contains(r) {
            l.isr.push(*r);
        }
    }
    l.partition_epoch += 1;
    ctx.put_leadership(tp("t", 0), l.clone());
}

/// Runs steps `from..=to` of the reassignment as the event loop would, returning the requests
/// sent and checking `check(step, store)` after each.
fn run_steps(
    ctx: &mut ControllerContext,
    store: &mut FakeStore,
    from: u8,
    to: u8,
    mut check: impl FnMut(u8, &FakeStore, &ControllerContext),
) -> Vec<BrokerRequest> {
    let t0 = tp("t", 0);
    let target = store
        .admin_reassign
        .get(&t0)
        .cloned()
        .unwrap_or_else(|| RAR.to_vec());
    let r = PartitionReassignment::from_context(ctx, &t0)
        .unwrap_or_else(|| PartitionReassignment::new(ctx, &t0, &target).unwrap());
    let mut sent = Vec::new();
    let mut batch = ControllerBrokerRequestBatch::new();
    for step in from..=to {
        batch.new_batch().unwrap();
        match step {
            1 => {
                if let Some(w) = step_1_assignment_write(ctx, &r) {
                    store.write_topic(&w);
                }
                assert!(step_1_apply(ctx, &r).is_empty());
            }
            2 => {
                if phase(ctx, &r) == ReassignmentPhase::WaitingForIsr {
                    epoch_bump(ctx, &mut batch, store);
                }
            }
            3 => {
                if phase(ctx, &r) == ReassignmentPhase::WaitingForIsr {
                    // A successor finds the adding replicas already Online (failover start-up)
                    // and the New transition is refused for them, as in Kafka: harmless.
                    let pass = step_3_start_new_replicas(ctx, &mut batch, &r);
                    assert!(pass.failed.is_empty());
                }
            }
            4 => {
                if !step_4_target_in_isr(ctx, &r) {
                    isr_catches_up(ctx, store);
                }
                assert!(step_4_target_in_isr(ctx, &r));
            }
            5 => {
                let pass = step_5_adding_online(ctx, &mut batch, &r);
                assert!(pass.failed.is_empty());
            }
            6 => step_6_cache_target(ctx, &r),
            7 => match step_7_leader_move(ctx, &r) {
                LeaderMove::Elect => {
                    let pass = partition_changes(
                        ctx,
                        std::slice::from_ref(&t0),
                        PartitionState::Online,
                        Some(ElectionStrategy::Reassign),
                    );
                    let run = run_partition_pass(ctx, &mut batch, store, &pass);
                    assert!(run.failed.is_empty(), "{:?}", run.failed);
                }
                LeaderMove::BumpEpoch => epoch_bump(ctx, &mut batch, store),
            },
            8 => {
                let pass = step_8_removed_offline(ctx, &mut batch, &t0, r.removing());
                run_replica_pass(ctx, &mut batch, store, &pass);
            }
            9 => {
                let pass = step_9_removed_deleted(ctx, &mut batch, &t0, r.removing());
                assert!(pass.invalid.is_empty(), "{:?}", pass.invalid);
            }
            10 => store.write_topic(&step_10_assignment_write(ctx, &r)),
            11 => match step_11_complete(ctx, &mut batch, &r, &store.admin_reassign) {
                AdminReassignmentUpdate::Delete => store.admin_reassign.clear(),
                AdminReassignmentUpdate::Rewrite(rest) => store.admin_reassign = rest,
                AdminReassignmentUpdate::Unchanged => {}
            },
            _ => unreachable!(),
        }
        sent.extend(batch.send_requests(ctx));
        check(step, store, ctx);
    }
    sent
}

#[test]
fn k7_worked_example_table_after_each_step() {
    let (mut ctx, mut store) = cluster();
    assert_eq!(row(&store), (vec![1, 2, 3], 1, vec![1, 2, 3]), "initial");
    run_steps(&mut ctx, &mut store, 1, 11, |step, store, _| {
        let want: Option<(Vec<BrokerId>, BrokerId, Vec<BrokerId>)> = match step {
            2 => Some((ALL.to_vec(), 1, OAR.to_vec())),
            4 => Some((ALL.to_vec(), 1, ALL.to_vec())),
            7 => Some((ALL.to_vec(), 4, ALL.to_vec())),
            8 => Some((ALL.to_vec(), 4, RAR.to_vec())),
            10 => Some((RAR.to_vec(), 4, RAR.to_vec())),
            _ => None,
        };
        if let Some(want) = want {
            assert_eq!(row(store), want, "after step {step}");
        }
    });
    assert!(
        store.admin_reassign.is_empty(),
        "step 11 deletes the admin node"
    );
    assert!(ctx.partitions_being_reassigned().is_empty());
    assert_eq!(ctx.partition_replicas(&tp("t", 0)), RAR.to_vec());
}

#[test]
fn k7_step_1_store_gets_trs_then_ors_minus_trs_with_adding_and_removing() {
    let (mut ctx, mut store) = cluster();
    run_steps(&mut ctx, &mut store, 1, 1, |_, _, _| {});
    let a = &store.topics["t"][&0];
    assert_eq!(a.replicas, vec![4, 5, 6, 1, 2, 3]);
    assert_eq!(a.adding_replicas, RAR.to_vec());
    assert_eq!(a.removing_replicas, OAR.to_vec());
    assert_eq!(ctx.partition_assignment(&tp("t", 0)), Some(a));
    assert!(ctx.partitions_being_reassigned().contains(&tp("t", 0)));
}

#[test]
fn k7_step_2_bumps_leader_epoch_and_tells_every_replica_in_ar() {
    let (mut ctx, mut store) = cluster();
    let sent = run_steps(&mut ctx, &mut store, 1, 2, |_, _, _| {});
    let l = &store.states[&tp("t", 0)];
    assert_eq!((l.leader, l.leader_epoch), (1, 4));
    let mut lai: Vec<(BrokerId, bool)> = sent
        .iter()
        .filter_map(|r| match &r.request {
            ControlRequest::LeaderAndIsr { partitions, .. } => {
                Some((r.broker, partitions[0].is_new))
            }
            _ => None,
        })
        .collect();
    lai.sort_unstable();
    assert_eq!(
        lai,
        vec![
            (1, false),
            (2, false),
            (3, false),
            (4, true),
            (5, true),
            (6, true)
        ]
    );
}

#[test]
fn k7_step_3_adding_replicas_become_new() {
    let (mut ctx, mut store) = cluster();
    run_steps(&mut ctx, &mut store, 1, 3, |_, _, _| {});
    for b in RAR {
        assert_eq!(
            ctx.replica_state(&PartitionReplica::new(tp("t", 0), *b)),
            ReplicaState::New
        );
    }
}

#[test]
fn k7_step_4_waits_until_every_target_replica_is_in_the_isr() {
    let (mut ctx, mut store) = cluster();
    run_steps(&mut ctx, &mut store, 1, 3, |_, _, _| {});
    let r = PartitionReassignment::from_context(&ctx, &tp("t", 0)).unwrap();
    assert!(!step_4_target_in_isr(&ctx, &r));
    assert_eq!(phase(&ctx, &r), ReassignmentPhase::WaitingForIsr);
    let mut l = ctx.leadership(&tp("t", 0)).unwrap().clone();
    l.isr = vec![1, 2, 3, 4, 5];
    ctx.put_leadership(tp("t", 0), l.clone());
    assert!(!step_4_target_in_isr(&ctx, &r), "6 is still missing");
    l.isr.push(6);
    ctx.put_leadership(tp("t", 0), l);
    assert_eq!(phase(&ctx, &r), ReassignmentPhase::Finishing);
}

#[test]
fn k7_steps_5_and_6_adding_online_and_cache_holds_rar() {
    let (mut ctx, mut store) = cluster();
    run_steps(&mut ctx, &mut store, 1, 6, |step, store, ctx| {
        if step == 6 {
            assert_eq!(ctx.partition_replicas(&tp("t", 0)), RAR.to_vec());
            assert_eq!(
                sorted(&store.topics["t"][&0].replicas),
                ALL.to_vec(),
                "store unchanged"
            );
        }
    });
    for b in RAR {
        assert_eq!(
            ctx.replica_state(&PartitionReplica::new(tp("t", 0), *b)),
            ReplicaState::Online
        );
    }
}

#[test]
fn k7_step_7_leader_in_rar_only_bumps_the_epoch() {
    let mut ctx = context(&[1, 2, 3, 4]);
    let mut store = FakeStore::default();
    add_partition(
        &mut ctx,
        &mut store,
        "t",
        0,
        &[1, 2, 3],
        Some((2, &[1, 2, 3])),
    );
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);
    store.admin_reassign.insert(tp("t", 0), vec![2, 3, 4]);
    let r = PartitionReassignment::new(&ctx, &tp("t", 0), &[2, 3, 4]).unwrap();
    let mut before = None;
    run_steps(&mut ctx, &mut store, 1, 7, |step, store, ctx| {
        if step == 6 {
            before = Some(store.states[&tp("t", 0)].leader_epoch);
            assert_eq!(step_7_leader_move(ctx, &r), LeaderMove::BumpEpoch);
        }
    });
    let l = &store.states[&tp("t", 0)];
    assert_eq!(l.leader, 2);
    assert_eq!(Some(l.leader_epoch - 1), before);
}

#[test]
fn k7_steps_8_and_9_removed_replicas_leave_isr_get_stop_replica_and_vanish() {
    let (mut ctx, mut store) = cluster();
    // StopReplica is only sent by steps 8 and 9.
    let sent = run_steps(&mut ctx, &mut store, 1, 9, |_, _, _| {});
    let stops: Vec<(BrokerId, bool)> = sent
        .iter()
        .filter_map(|r| match &r.request {
            ControlRequest::StopReplica { partitions, .. } => {
                Some((r.broker, partitions[0].delete))
            }
            _ => None,
        })
        .collect();
    for b in OAR {
        assert!(
            stops.contains(&(*b, false)),
            "step 8 stops {b} without delete"
        );
        assert!(stops.contains(&(*b, true)), "step 9 deletes {b}");
        assert_eq!(
            ctx.replica_state(&PartitionReplica::new(tp("t", 0), *b)),
            ReplicaState::NonExistent
        );
    }
    assert_eq!(sorted(&store.states[&tp("t", 0)].isr), RAR.to_vec());
    // Step 8's ISR removals are told to the leader.
    assert!(sent
        .iter()
        .any(|r| r.broker == 4 && matches!(r.request, ControlRequest::LeaderAndIsr { .. })));
}

#[test]
fn k7_step_10_and_11_store_gets_rar_last_then_admin_entry_removed() {
    let (mut ctx, mut store) = cluster();
    store.admin_reassign.insert(tp("other", 0), vec![1]);
    run_steps(&mut ctx, &mut store, 1, 9, |_, store, _| {
        assert_eq!(
            store.topics["t"][&0].replicas.len(),
            6,
            "RS = TRS is written last"
        );
    });
    run_steps(&mut ctx, &mut store, 10, 11, |_, _, _| {});
    assert_eq!(store.topics["t"][&0], ReplicaAssignment::new(RAR.to_vec()));
    assert_eq!(
        store.admin_reassign.keys().cloned().collect::<Vec<_>>(),
        vec![tp("other", 0)]
    );
}

#[test]
fn k7_successor_controller_resumes_from_every_step() {
    for killed_after in 0..=10u8 {
        let (mut ctx, mut store) = cluster();
        if killed_after > 0 {
            run_steps(&mut ctx, &mut store, 1, killed_after, |_, _, _| {});
        }
        // The controller dies; a successor with a higher epoch loads the store (K6.7).
        let mut succ = store.load_context(2, 6, ALL);
        initialize_partition_states(&mut succ);
        initialize_replica_states(&mut succ);
        let resumed = PartitionReassignment::from_context(&succ, &tp("t", 0));
        if (1..10).contains(&killed_after) {
            let r = resumed.expect("the store's adding/removing replicas describe the move");
            assert_eq!(r.target(), RAR.to_vec());
            assert_eq!(r.origin(), OAR.to_vec());
        }
        run_steps(&mut succ, &mut store, 1, 11, |_, _, _| {});
        assert_eq!(
            row(&store),
            (RAR.to_vec(), 4, RAR.to_vec()),
            "killed after step {killed_after}"
        );
        assert_eq!(store.topics["t"][&0], ReplicaAssignment::new(RAR.to_vec()));
        assert!(store.admin_reassign.is_empty());
        assert_eq!(store.states[&tp("t", 0)].controller_epoch, 6);
    }
}

#[test]
fn k7_invalid_reassignments_are_refused() {
    let (mut ctx, _) = cluster();
    let t0 = tp("t", 0);
    assert_eq!(
        PartitionReassignment::new(&ctx, &t0, &[]),
        Err(ReassignmentError::EmptyTarget)
    );
    assert_eq!(
        PartitionReassignment::new(&ctx, &t0, &[4, 4]),
        Err(ReassignmentError::DuplicateReplica(4))
    );
    assert_eq!(
        PartitionReassignment::new(&ctx, &t0, &[-3]),
        Err(ReassignmentError::InvalidReplica(-3))
    );
    assert_eq!(
        PartitionReassignment::new(&ctx, &tp("t", 9), &[4]),
        Err(ReassignmentError::UnknownPartition)
    );
    ctx.remove_live_broker(5);
    assert_eq!(
        PartitionReassignment::new(&ctx, &t0, RAR),
        Err(ReassignmentError::DeadAddingReplicas(vec![5]))
    );
    ctx.queue_topic_for_deletion("t");
    assert_eq!(
        PartitionReassignment::new(&ctx, &t0, RAR),
        Err(ReassignmentError::TopicBeingDeleted)
    );
}

#[test]
fn k7_u3_replacing_a_reassignment_stops_unneeded_adding_replicas() {
    let (mut ctx, mut store) = cluster();
    run_steps(&mut ctx, &mut store, 1, 3, |_, _, _| {});
    // A new target {4,5,1} replaces {4,5,6}: 6 was being added and is no longer needed.
    let r = PartitionReassignment::new(&ctx, &tp("t", 0), &[4, 5, 1]).unwrap();
    assert_eq!(r.origin(), OAR.to_vec(), "the original replicas are kept");
    assert_eq!(r.full.replicas, vec![4, 5, 1, 2, 3]);
    let w = step_1_assignment_write(&ctx, &r).unwrap();
    store.write_topic(&w);
    let unneeded = step_1_apply(&mut ctx, &r);
    assert_eq!(unneeded, vec![6]);
    let mut batch = ControllerBrokerRequestBatch::new();
    let pass = step_8_removed_offline(&mut ctx, &mut batch, &tp("t", 0), &unneeded);
    run_replica_pass(&mut ctx, &mut batch, &mut store, &pass);
    let pass = step_9_removed_deleted(&mut ctx, &mut batch, &tp("t", 0), &unneeded);
    assert!(pass.invalid.is_empty(), "{:?}", pass.invalid);
    assert_eq!(
        ctx.replica_state(&PartitionReplica::new(tp("t", 0), 6)),
        ReplicaState::NonExistent
    );
}

#[test]
fn k7_step_7_dead_leader_in_rar_is_replaced_by_election() {
    let mut ctx = context(&[1, 2, 3, 4]);
    let mut store = FakeStore::default();
    add_partition(
        &mut ctx,
        &mut store,
        "t",
        0,
        &[1, 2, 3],
        Some((2, &[1, 2, 3, 4])),
    );
    initialize_partition_states(&mut ctx);
    let r = PartitionReassignment::new(&ctx, &tp("t", 0), &[2, 3, 4]).unwrap();
    step_1_apply(&mut ctx, &r);
    step_6_cache_target(&mut ctx, &r);
    assert_eq!(step_7_leader_move(&ctx, &r), LeaderMove::BumpEpoch);
    ctx.remove_live_broker(2);
    assert_eq!(step_7_leader_move(&ctx, &r), LeaderMove::Elect);
    let pass = partition_changes(
        &mut ctx,
        &[tp("t", 0)],
        PartitionState::Online,
        Some(ElectionStrategy::Reassign),
    );
    let mut batch = ControllerBrokerRequestBatch::new();
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    assert_eq!(
        run.elected[&tp("t", 0)].leader,
        3,
        "first live target replica in the ISR"
    );
}
