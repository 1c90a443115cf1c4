//! The partition state machine: Kafka's transition table, refused transitions, and the K1
//! (broker failure), K2.2 (topic creation), K5 (broker start-up) and K6.8 flows run against
//! an in-memory store.

mod common;

use common::*;
use kafka_controller::context::{PartitionReplica, NO_LEADER};
use kafka_controller::election::ElectionStrategy;
use kafka_controller::partition_state_machine::{
    handle_state_changes, initialize_partition_states, partitions_with_offline_leader,
    plan_election, trigger_online_partition_state_change, PartitionState,
    PartitionStateChangeError, WriteKind,
};
use kafka_controller::replica_state_machine::{
    handle_state_changes as replica_changes, initialize_replica_states, ReplicaState,
};
use kafka_controller::request_batch::{ControlRequest, ControllerBrokerRequestBatch};

use PartitionState::*;

#[test]
fn partition_transition_table_matches_kafka() {
    let all = [New, Online, Offline, NonExistent];
    let valid = |from, to| -> bool {
        matches!(
            (from, to),
            (NonExistent, New)
                | (New | Online | Offline, Online)
                | (New | Online | Offline, Offline)
                | (Offline, NonExistent)
        )
    };
    for to in all {
        for from in all {
            assert_eq!(
                to.is_valid_transition_from(from),
                valid(from, to),
                "{from:?} -> {to:?}"
            );
        }
    }
}

#[test]
fn invalid_partition_transitions_are_refused_and_state_kept() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1, 2])));
    let t0 = tp("t", 0);
    // NonExistent -> Online and NonExistent -> Offline are not in the table.
    let pass = handle_state_changes(
        &mut ctx,
        std::slice::from_ref(&t0),
        Online,
        Some(ElectionStrategy::Preferred),
    );
    assert_eq!(pass.invalid.len(), 1);
    assert!(pass.elections.is_empty() && pass.initializations.is_empty());
    assert_eq!(ctx.partition_state(&t0), NonExistent);
    ctx.put_partition_state(t0.clone(), Online);
    for to in [New, NonExistent] {
        let pass = handle_state_changes(&mut ctx, std::slice::from_ref(&t0), to, None);
        assert_eq!(pass.invalid[0].from, Online);
        assert_eq!(pass.invalid[0].to, to);
        assert_eq!(ctx.partition_state(&t0), Online);
    }
    // Online without a strategy fails rather than guessing.
    let pass = handle_state_changes(&mut ctx, std::slice::from_ref(&t0), Online, None);
    assert_eq!(
        pass.failed,
        vec![(t0, PartitionStateChangeError::NoStrategy)]
    );
}

/// Two partitions; broker 1 leads p0 and follows in p1.
fn two_partitions() -> (kafka_controller::context::ControllerContext, FakeStore) {
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
        &[2, 3, 1],
        Some((2, &[2, 3, 1])),
    );
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);
    (ctx, store)
}

/// `onBrokerFailure(dead)` as the event loop runs it: offline leaders → Offline, elections,
/// replicas on dead brokers → Offline, one batch.
fn broker_failure(
    ctx: &mut kafka_controller::context::ControllerContext,
    store: &mut FakeStore,
    dead: &[i32],
) -> (
    PartitionRun,
    Vec<kafka_controller::request_batch::BrokerRequest>,
) {
    for &b in dead {
        ctx.remove_live_broker(b);
    }
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.new_batch().unwrap();
    let offline = partitions_with_offline_leader(ctx);
    let pass = handle_state_changes(ctx, &offline, Offline, None);
    assert!(pass.invalid.is_empty());
    let pass = trigger_online_partition_state_change(ctx);
    let run = run_partition_pass(ctx, &mut batch, store, &pass);
    let replicas = ctx.replicas_on_brokers(&brokers(dead));
    let rpass = replica_changes(ctx, &mut batch, &replicas, ReplicaState::Offline);
    run_replica_pass(ctx, &mut batch, store, &rpass);
    (run, batch.send_requests(ctx))
}

#[test]
fn k1_1_election_uses_the_isr_read_from_the_store_not_the_cache() {
    let (mut ctx, mut store) = two_partitions();
    // The leader shrank the ISR in the store; the controller's cache is stale.
    store.states.get_mut(&tp("t", 0)).unwrap().isr = vec![1, 3];
    store.states.get_mut(&tp("t", 0)).unwrap().partition_epoch = 8;
    let (run, _) = broker_failure(&mut ctx, &mut store, &[1]);
    let l = &run.elected[&tp("t", 0)];
    assert_eq!((l.leader, l.isr.clone()), (3, vec![3]));
}

#[test]
fn k1_2_live_isr_replica_leads_with_live_isr() {
    let (mut ctx, mut store) = two_partitions();
    let (run, _) = broker_failure(&mut ctx, &mut store, &[1]);
    let l = &store.states[&tp("t", 0)];
    assert_eq!(
        (l.leader, l.isr.clone(), l.leader_epoch),
        (2, vec![2, 3], 4)
    );
    assert_eq!(l.controller_epoch, 5);
    assert_eq!(
        run.elected.len(),
        1,
        "only the partition led by the dead broker is elected"
    );
    assert_eq!(ctx.partition_state(&tp("t", 0)), Online);
    // p1 kept its leader; the dead follower left its ISR (epoch bumped by the ISR write).
    let l1 = &store.states[&tp("t", 1)];
    assert_eq!(
        (l1.leader, l1.isr.clone(), l1.leader_epoch),
        (2, vec![2, 3], 4)
    );
    assert_eq!(
        ctx.replica_state(&PartitionReplica::new(tp("t", 1), 1)),
        ReplicaState::Offline
    );
}

#[test]
fn k1_2_unclean_election_only_when_topic_allows_it() {
    for unclean in [false, true] {
        let mut ctx = context(&[1, 2, 3]);
        let mut store = FakeStore::default();
        add_partition(&mut ctx, &mut store, "t", 0, &[1, 2, 3], Some((1, &[1])));
        ctx.set_unclean_leader_election("t", unclean);
        initialize_partition_states(&mut ctx);
        initialize_replica_states(&mut ctx);
        let (run, _) = broker_failure(&mut ctx, &mut store, &[1]);
        let l = &store.states[&tp("t", 0)];
        if unclean {
            assert_eq!((l.leader, l.isr.clone()), (2, vec![2]));
            assert_eq!(ctx.partition_state(&tp("t", 0)), Online);
        } else {
            assert_eq!(
                run.failed[&tp("t", 0)],
                PartitionStateChangeError::NoLeaderElected
            );
            assert_eq!(ctx.partition_state(&tp("t", 0)), Offline);
            // The OfflineReplica transition then writes leader -1 and keeps the 1-member ISR.
            assert_eq!((l.leader, l.isr.clone()), (NO_LEADER, vec![1]));
        }
    }
}

#[test]
fn k1_2_no_live_replica_leader_becomes_minus_one_isr_never_empty() {
    let mut ctx = context(&[1, 2]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[1, 2], Some((1, &[1, 2])));
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);
    broker_failure(&mut ctx, &mut store, &[1, 2]);
    let l = &store.states[&tp("t", 0)];
    assert_eq!(l.leader, NO_LEADER);
    assert_eq!(l.isr, vec![2], "the last ISR member stays");
    assert_eq!(ctx.partition_state(&tp("t", 0)), Offline);
}

#[test]
fn k1_3_conditional_write_retries_from_a_fresh_read_on_bad_version() {
    let (mut ctx, mut store) = two_partitions();
    // Between our read and our write, the leader's ISR shrink lands (version 7 -> 8).
    store.races.insert(tp("t", 0), vec![1, 3]);
    let (run, _) = broker_failure(&mut ctx, &mut store, &[1]);
    assert!(run.retries >= 1);
    let l = &store.states[&tp("t", 0)];
    // The retry re-read the ISR {1,3}: broker 2 is no longer eligible.
    assert_eq!((l.leader, l.isr.clone()), (3, vec![3]));
    assert_eq!(l.partition_epoch, 9, "written on top of the racing write");
    assert_eq!(ctx.leadership(&tp("t", 0)), Some(l));
}

#[test]
fn k1_3_newer_controller_epoch_in_store_aborts_the_election() {
    let (ctx, mut store) = two_partitions();
    let mut read = store.read(&tp("t", 0)).unwrap();
    read.controller_epoch = 6;
    let err = plan_election(
        &ctx,
        &tp("t", 0),
        Some(&read),
        ElectionStrategy::Offline {
            allow_unclean: false,
        },
    )
    .unwrap_err();
    assert_eq!(
        err,
        PartitionStateChangeError::NewerControllerEpoch { found: 6, ours: 5 }
    );
    let planned = plan_election(
        &ctx,
        &tp("t", 0),
        store.states.get(&tp("t", 0)),
        ElectionStrategy::Preferred,
    )
    .unwrap();
    assert_eq!(
        planned.write.kind,
        WriteKind::Update {
            expected_version: 7
        }
    );
}

#[test]
fn k1_4_one_leader_and_isr_per_broker_carrying_all_its_partitions() {
    let (mut ctx, mut store) = two_partitions();
    let (_, requests) = broker_failure(&mut ctx, &mut store, &[1]);
    let lai: Vec<_> = requests
        .iter()
        .filter(|r| matches!(r.request, ControlRequest::LeaderAndIsr { .. }))
        .collect();
    assert_eq!(lai.iter().map(|r| r.broker).collect::<Vec<_>>(), vec![2, 3]);
    for r in &lai {
        let ControlRequest::LeaderAndIsr {
            header, partitions, ..
        } = &r.request
        else {
            unreachable!()
        };
        assert_eq!(
            partitions.len(),
            2,
            "broker {} gets both partitions in one request",
            r.broker
        );
        assert_eq!(header.controller_epoch, 5);
        assert_eq!(header.broker_epoch, 100 + i64::from(r.broker));
    }
    assert!(
        requests.iter().all(|r| r.broker != 1),
        "nothing goes to the dead broker"
    );
}

#[test]
fn k2_2_new_partition_first_live_replica_leads_and_isr_is_live_ar() {
    let mut ctx = context(&[1, 2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "new", 0, &[2, 3, 1], None);
    add_partition(&mut ctx, &mut store, "new", 1, &[4, 1, 2], None); // broker 4 not live
    let parts = vec![tp("new", 0), tp("new", 1)];
    let replicas: Vec<PartitionReplica> = parts
        .iter()
        .flat_map(|t| {
            ctx.partition_replicas(t)
                .into_iter()
                .map(move |b| PartitionReplica::new(t.clone(), b))
        })
        .collect();
    let mut batch = ControllerBrokerRequestBatch::new();
    handle_state_changes(&mut ctx, &parts, New, None);
    replica_changes(&mut ctx, &mut batch, &replicas, ReplicaState::New);
    let pass = handle_state_changes(
        &mut ctx,
        &parts,
        Online,
        Some(ElectionStrategy::Offline {
            allow_unclean: false,
        }),
    );
    assert_eq!(pass.initializations.len(), 2);
    assert!(pass
        .initializations
        .iter()
        .all(|w| w.kind == WriteKind::Create));
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    assert!(run.failed.is_empty());
    replica_changes(&mut ctx, &mut batch, &replicas, ReplicaState::Online);
    let l0 = &store.states[&tp("new", 0)];
    assert_eq!(
        (
            l0.leader,
            l0.isr.clone(),
            l0.leader_epoch,
            l0.controller_epoch
        ),
        (2, vec![2, 3, 1], 0, 5)
    );
    let l1 = &store.states[&tp("new", 1)];
    assert_eq!((l1.leader, l1.isr.clone()), (1, vec![1, 2]));
    let requests = batch.send_requests(&ctx);
    for r in &requests {
        if let ControlRequest::LeaderAndIsr { partitions, .. } = &r.request {
            assert!(partitions.iter().all(|p| p.is_new), "creation sends isNew");
        }
    }
    assert_eq!(ctx.partition_state(&tp("new", 1)), Online);
}

#[test]
fn k2_2_new_partition_without_live_replica_stays_new() {
    let mut ctx = context(&[1]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[5, 6], None);
    handle_state_changes(&mut ctx, &[tp("t", 0)], New, None);
    let pass = handle_state_changes(
        &mut ctx,
        &[tp("t", 0)],
        Online,
        Some(ElectionStrategy::Offline {
            allow_unclean: false,
        }),
    );
    assert_eq!(
        pass.failed,
        vec![(tp("t", 0), PartitionStateChangeError::NoLiveReplicas)]
    );
    assert_eq!(ctx.partition_state(&tp("t", 0)), New);
    // A state znode that already exists makes the create fail; the partition stays New.
    add_partition(&mut ctx, &mut store, "u", 0, &[1], Some((1, &[1])));
    handle_state_changes(&mut ctx, &[tp("u", 0)], New, None);
    let pass = handle_state_changes(&mut ctx, &[tp("u", 0)], Online, None);
    let mut batch = ControllerBrokerRequestBatch::new();
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    assert_eq!(
        run.failed[&tp("u", 0)],
        PartitionStateChangeError::StateZnodeExists
    );
    assert_eq!(ctx.partition_state(&tp("u", 0)), New);
}

#[test]
fn k5_3_broker_start_up_brings_offline_partitions_online() {
    let mut ctx = context(&[2]);
    let mut store = FakeStore::default();
    add_partition(
        &mut ctx,
        &mut store,
        "t",
        0,
        &[1, 2],
        Some((NO_LEADER, &[1])),
    );
    initialize_partition_states(&mut ctx);
    assert_eq!(ctx.partition_state(&tp("t", 0)), Offline);
    // Broker 1 comes back.
    ctx.add_live_broker(kafka_controller::context::BrokerInfo::new(1, 500));
    let pass = trigger_online_partition_state_change(&mut ctx);
    let mut batch = ControllerBrokerRequestBatch::new();
    let run = run_partition_pass(&mut ctx, &mut batch, &mut store, &pass);
    assert_eq!(run.elected[&tp("t", 0)].leader, 1);
    assert_eq!(ctx.partition_state(&tp("t", 0)), Online);
}

#[test]
fn k6_8_failover_initial_states_follow_leader_liveness() {
    let mut ctx = context(&[2, 3]);
    let mut store = FakeStore::default();
    add_partition(&mut ctx, &mut store, "t", 0, &[2, 3], Some((2, &[2, 3])));
    add_partition(&mut ctx, &mut store, "t", 1, &[1, 3], Some((1, &[1, 3])));
    add_partition(&mut ctx, &mut store, "t", 2, &[1, 3], None);
    initialize_partition_states(&mut ctx);
    assert_eq!(ctx.partition_state(&tp("t", 0)), Online);
    assert_eq!(ctx.partition_state(&tp("t", 1)), Offline);
    assert_eq!(ctx.partition_state(&tp("t", 2)), New);
    let (online, offline) = initialize_replica_states(&mut ctx);
    assert_eq!(online.len(), 4);
    assert_eq!(offline.len(), 2);
    assert_eq!(
        ctx.replica_state(&PartitionReplica::new(tp("t", 1), 1)),
        ReplicaState::DeletionIneligible
    );
    // Topics queued for deletion are not brought online.
    ctx.queue_topic_for_deletion("t");
    let pass = trigger_online_partition_state_change(&mut ctx);
    assert!(pass.elections.is_empty() && pass.initializations.is_empty());
}

#[test]
fn kip_704_unclean_leader_starts_recovering_when_enabled() {
    use kafka_controller::context::LeaderRecoveryState;
    for kip_704 in [false, true] {
        let mut ctx = context(&[2, 3]);
        ctx.leader_recovery_on_unclean = kip_704;
        let mut store = FakeStore::default();
        add_partition(&mut ctx, &mut store, "t", 0, &[1, 2, 3], Some((1, &[1])));
        let planned = plan_election(
            &ctx,
            &tp("t", 0),
            store.states.get(&tp("t", 0)),
            ElectionStrategy::Offline {
                allow_unclean: true,
            },
        )
        .unwrap();
        assert!(planned.unclean);
        let want = if kip_704 {
            LeaderRecoveryState::Recovering
        } else {
            LeaderRecoveryState::Recovered
        };
        assert_eq!(planned.write.leadership.leader_recovery_state, want);
        assert_eq!(planned.write.leadership.isr, vec![2]);
    }
}
