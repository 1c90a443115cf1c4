//! A tiny in-memory stand-in for the coordination store and a synchronous runner of the
//! state machines' plans, playing the part of the controller event loop in tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use kafka_controller::context::{
    BrokerId, BrokerInfo, ControllerContext, PartitionLeadership, PartitionReplica,
    ReplicaAssignment, TopicPartition,
};
use kafka_controller::partition_state_machine::{
    complete_election, complete_initialization, plan_election, ElectionStep, PartitionPass,
    PartitionStateChangeError, PartitionStateWrite, WriteKind, WriteOutcome,
};
use kafka_controller::reassignment::TopicAssignmentWrite;
use kafka_controller::replica_state_machine::{
    complete_isr_removal, plan_isr_removal, IsrRemoval, IsrRemovalStep, ReplicaPass,
};
use kafka_controller::request_batch::ControllerBrokerRequestBatch;

/// Partition state znodes (their `partition_epoch` is the znode version) and topic
/// assignments.
#[derive(Clone, Debug, Default)]
pub struct FakeStore {
    pub states: BTreeMap<TopicPartition, PartitionLeadership>,
    pub topics: BTreeMap<String, BTreeMap<i32, ReplicaAssignment>>,
    pub admin_reassign: BTreeMap<TopicPartition, Vec<BrokerId>>,
    /// Partitions whose next conditional write loses a race with another writer (a
    /// ZooKeeper-mode leader shrinking its ISR to `isr`), so it gets BADVERSION.
    pub races: BTreeMap<TopicPartition, Vec<BrokerId>>,
    pub writes: usize,
    pub reads: usize,
}

impl FakeStore {
    pub fn read(&mut self, tp: &TopicPartition) -> Option<PartitionLeadership> {
        self.reads += 1;
        self.states.get(tp).cloned()
    }

    pub fn write(&mut self, w: &PartitionStateWrite) -> WriteOutcome {
        self.writes += 1;
        match w.kind {
            WriteKind::Create => {
                if self.states.contains_key(&w.tp) {
                    return WriteOutcome::NodeExists;
                }
                let mut l = w.leadership.clone();
                l.partition_epoch = 0;
                self.states.insert(w.tp.clone(), l);
                WriteOutcome::Written { version: 0 }
            }
            WriteKind::Update { expected_version } => {
                if let Some(isr) = self.races.remove(&w.tp) {
                    if let Some(cur) = self.states.get_mut(&w.tp) {
                        cur.isr = isr;
                        cur.partition_epoch += 1;
                    }
                }
                let Some(cur) = self.states.get_mut(&w.tp) else {
                    return WriteOutcome::NoNode;
                };
                if cur.partition_epoch != expected_version {
                    return WriteOutcome::BadVersion;
                }
                let mut l = w.leadership.clone();
                l.partition_epoch = expected_version + 1;
                *cur = l;
                WriteOutcome::Written {
                    version: expected_version + 1,
                }
            }
        }
    }

    pub fn write_topic(&mut self, w: &TopicAssignmentWrite) {
        self.writes += 1;
        self.topics.insert(w.topic.clone(), w.partitions.clone());
    }

    /// A new controller's context loaded from this store (K6.7).
    pub fn load_context(
        &self,
        controller: BrokerId,
        epoch: i32,
        brokers: &[BrokerId],
    ) -> ControllerContext {
        let mut ctx = ControllerContext::new(controller, epoch, epoch);
        for &b in brokers {
            ctx.add_live_broker(BrokerInfo::new(b, 100 + i64::from(b)));
        }
        for (t, ps) in &self.topics {
            ctx.set_topic_assignment(t.clone(), ps.clone());
        }
        for (tp, l) in &self.states {
            ctx.put_leadership(tp.clone(), l.clone());
        }
        ctx
    }
}

/// The outcome of running a partition pass to completion.
#[derive(Debug, Default)]
pub struct PartitionRun {
    pub elected: BTreeMap<TopicPartition, PartitionLeadership>,
    pub failed: BTreeMap<TopicPartition, PartitionStateChangeError>,
    pub retries: usize,
}

/// Runs the store work of a partition pass as the event loop would.
pub fn run_partition_pass(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    store: &mut FakeStore,
    pass: &PartitionPass,
) -> PartitionRun {
    let mut run = PartitionRun::default();
    for (tp, e) in &pass.failed {
        run.failed.insert(tp.clone(), e.clone());
    }
    for init in &pass.initializations {
        let outcome = store.write(init);
        match complete_initialization(ctx, batch, init, outcome) {
            Ok(()) => {
                run.elected.insert(
                    init.tp.clone(),
                    ctx.leadership(&init.tp)
                        .cloned()
                        .unwrap_or_else(|| init.leadership.clone()),
                );
            }
            Err(e) => {
                run.failed.insert(init.tp.clone(), e);
            }
        }
    }
    let Some(strategy) = pass.strategy else {
        return run;
    };
    for tp in &pass.elections {
        for _attempt in 0..10 {
            let read = store.read(tp);
            match plan_election(ctx, tp, read.as_ref(), strategy) {
                Ok(planned) => {
                    let outcome = store.write(&planned.write);
                    match complete_election(ctx, batch, &planned, outcome) {
                        ElectionStep::Elected(l) => {
                            run.elected.insert(tp.clone(), l);
                            break;
                        }
                        ElectionStep::Retry => run.retries += 1,
                        ElectionStep::Failed(e) => {
                            run.failed.insert(tp.clone(), e);
                            break;
                        }
                    }
                }
                Err(e) => {
                    run.failed.insert(tp.clone(), e);
                    break;
                }
            }
        }
    }
    run
}

/// Runs the ISR removals of a replica pass as the event loop would; returns the replicas
/// that became Offline.
pub fn run_replica_pass(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    store: &mut FakeStore,
    pass: &ReplicaPass,
) -> Vec<PartitionReplica> {
    let mut done = Vec::new();
    for r in &pass.isr_removals {
        for _attempt in 0..10 {
            let read = store.read(&r.tp);
            let Ok(removal) = plan_isr_removal(ctx, r, read.as_ref()) else {
                break;
            };
            let outcome = match &removal {
                IsrRemoval::Unchanged(_) => WriteOutcome::Written { version: -1 },
                IsrRemoval::Write(w) => store.write(w),
            };
            match complete_isr_removal(ctx, batch, r, &removal, outcome) {
                IsrRemovalStep::Done(_) => {
                    done.push(r.clone());
                    break;
                }
                IsrRemovalStep::Retry => continue,
                IsrRemovalStep::Failed(_) => break,
            }
        }
    }
    done
}

pub fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

pub fn brokers(ids: &[BrokerId]) -> BTreeSet<BrokerId> {
    ids.iter().copied().collect()
}

/// A context with live brokers `live` (epoch 100 + id) at controller epoch 5.
pub fn context(live: &[BrokerId]) -> ControllerContext {
    let mut ctx = ControllerContext::new(live.first().copied().unwrap_or(0), 5, 5);
    for &b in live {
        ctx.add_live_broker(BrokerInfo::new(b, 100 + i64::from(b)));
    }
    ctx
}

/// Adds partition `p` of `topic` with assignment `ar` and (if `leader` is Some) a state znode
/// `leader / isr` at leader epoch 3, controller epoch 4, version 7, to both context and store.
pub fn add_partition(
    ctx: &mut ControllerContext,
    store: &mut FakeStore,
    topic: &str,
    p: i32,
    ar: &[BrokerId],
    leader_isr: Option<(BrokerId, &[BrokerId])>,
) {
    let t = tp(topic, p);
    ctx.set_partition_assignment(&t, ReplicaAssignment::new(ar.to_vec()));
    store
        .topics
        .entry(topic.to_owned())
        .or_default()
        .insert(p, ReplicaAssignment::new(ar.to_vec()));
    if let Some((leader, isr)) = leader_isr {
        let l = PartitionLeadership::new(leader, 3, isr.to_vec(), 4, 7);
        ctx.put_leadership(t.clone(), l.clone());
        store.states.insert(t, l);
    }
}
