//! K1 / K5 under random broker failures, restarts and racing ISR writes: after every event the
//! store and the controller's cache agree, the ISR is never empty, a leader is live and in its
//! ISR, leader epochs only grow, and with unclean election disabled every new leader came
//! from the previous ISR.

mod common;

use std::collections::BTreeMap;

use common::*;
use kafka_controller::context::{
    BrokerId, BrokerInfo, ControllerContext, PartitionLeadership, PartitionReplica, TopicPartition,
};
use kafka_controller::partition_state_machine::{
    handle_state_changes, initialize_partition_states, partitions_with_offline_leader,
    trigger_online_partition_state_change, PartitionState,
};
use kafka_controller::replica_state_machine::{
    handle_state_changes as replica_changes, initialize_replica_states, ReplicaState,
};
use kafka_controller::request_batch::{ControlRequest, ControllerBrokerRequestBatch};
use proptest::prelude::*;

const BROKERS: BrokerId = 5;

#[derive(Clone, Debug)]
enum Event {
    Fail(BrokerId),
    Start(BrokerId),
    /// A leader shrinks its ISR to itself just before the controller writes.
    Race(i32),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (1..=BROKERS).prop_map(Event::Fail),
        (1..=BROKERS).prop_map(Event::Start),
        (0..6i32).prop_map(Event::Race),
    ]
}

fn setup() -> (ControllerContext, FakeStore) {
    let ids: Vec<BrokerId> = (1..=BROKERS).collect();
    let mut ctx = context(&ids);
    let mut store = FakeStore::default();
    for p in 0..6 {
        let ar: Vec<BrokerId> = (0..3).map(|i| 1 + (p + i) % BROKERS).collect();
        add_partition(&mut ctx, &mut store, "t", p, &ar, Some((ar[0], &ar)));
    }
    initialize_partition_states(&mut ctx);
    initialize_replica_states(&mut ctx);
    (ctx, store)
}

fn on_broker_failure(ctx: &mut ControllerContext, store: &mut FakeStore, dead: BrokerId) -> usize {
    ctx.remove_live_broker(dead);
    let mut batch = ControllerBrokerRequestBatch::new();
    let offline = partitions_with_offline_leader(ctx);
    handle_state_changes(ctx, &offline, PartitionState::Offline, None);
    let pass = trigger_online_partition_state_change(ctx);
    run_partition_pass(ctx, &mut batch, store, &pass);
    let replicas = ctx.replicas_on_brokers(&brokers(&[dead]));
    let pass = replica_changes(ctx, &mut batch, &replicas, ReplicaState::Offline);
    run_replica_pass(ctx, &mut batch, store, &pass);
    check_one_leader_and_isr_per_broker(ctx, &mut batch)
}

fn on_broker_startup(ctx: &mut ControllerContext, store: &mut FakeStore, b: BrokerId) -> usize {
    ctx.add_live_broker(BrokerInfo::new(b, 1000 + i64::from(b)));
    let mut batch = ControllerBrokerRequestBatch::new();
    let replicas: Vec<PartitionReplica> = ctx.replicas_on_brokers(&brokers(&[b]));
    replica_changes(ctx, &mut batch, &replicas, ReplicaState::Online);
    let pass = trigger_online_partition_state_change(ctx);
    run_partition_pass(ctx, &mut batch, store, &pass);
    check_one_leader_and_isr_per_broker(ctx, &mut batch)
}

/// K1.4: at most one LeaderAndIsr per broker per pass, none to dead brokers.
fn check_one_leader_and_isr_per_broker(
    ctx: &ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
) -> usize {
    let reqs = batch.send_requests(ctx);
    let mut seen = BTreeMap::new();
    for r in &reqs {
        assert!(ctx.is_live_or_shutting_down(r.broker));
        if matches!(r.request, ControlRequest::LeaderAndIsr { .. }) {
            *seen.entry(r.broker).or_insert(0) += 1;
        }
    }
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    reqs.len()
}

fn check_invariants(
    ctx: &ControllerContext,
    store: &FakeStore,
    before: &BTreeMap<TopicPartition, PartitionLeadership>,
) {
    for (tp, l) in &store.states {
        assert_eq!(ctx.leadership(tp), Some(l), "{tp}: cache equals store");
        assert!(!l.isr.is_empty(), "{tp}: ISR never empty");
        if l.leader >= 0 {
            assert!(
                ctx.is_broker_live(l.leader),
                "{tp}: leader {} live",
                l.leader
            );
            assert!(l.isr.contains(&l.leader), "{tp}: leader in ISR");
        }
        let old = &before[tp];
        assert!(
            l.leader_epoch >= old.leader_epoch,
            "{tp}: leader epoch never goes back"
        );
        if l.leader != old.leader {
            assert!(
                l.leader_epoch > old.leader_epoch,
                "{tp}: a new leader bumps the epoch"
            );
            if l.leader >= 0 {
                assert!(old.isr.contains(&l.leader), "{tp}: clean election only");
            }
        }
        if l.leader >= 0 && ctx.partition_state(tp) != PartitionState::Online {
            panic!(
                "{tp}: has a live leader but is {:?}",
                ctx.partition_state(tp)
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn k1_k5_random_failures_and_restarts_keep_invariants(events in prop::collection::vec(event(), 1..40)) {
        let (mut ctx, mut store) = setup();
        for e in events {
            let before = store.states.clone();
            match e {
                Event::Fail(b) if ctx.is_broker_live(b) => {
                    on_broker_failure(&mut ctx, &mut store, b);
                }
                Event::Start(b) if !ctx.is_broker_live(b) => {
                    on_broker_startup(&mut ctx, &mut store, b);
                }
                Event::Race(p) => {
                    let l = &store.states[&tp("t", p)];
                    if l.leader >= 0 {
                        store.races.insert(tp("t", p), vec![l.leader]);
                    }
                    continue;
                }
                _ => continue,
            }
            // A race that did not fire (no controller write) is dropped, like a leader's write
            // that landed before the controller read: apply it now and refresh the cache, as an
            // ISR change notification would.
            for (t, isr) in std::mem::take(&mut store.races) {
                let l = store.states.get_mut(&t).unwrap();
                l.isr = isr;
                l.partition_epoch += 1;
                ctx.put_leadership(t, l.clone());
            }
            check_invariants(&ctx, &store, &before);
        }
    }
}
