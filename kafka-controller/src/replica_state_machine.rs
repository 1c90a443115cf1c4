//! The replica state machine (Kafka's `ReplicaStateMachine`): New / Online / Offline /
//! ReplicaDeletionStarted / ReplicaDeletionSuccessful / ReplicaDeletionIneligible /
//! NonExistent, Kafka's valid-previous-state table, and each transition's actions.
//!
//! Only one transition needs the store: Offline removes the replica from the partition's ISR
//! with a conditional write. A pass ([`handle_state_changes`]) returns those replicas in
//! [`ReplicaPass::isr_removals`]; the loop reads each partition's state znode, calls
//! [`plan_isr_removal`], writes what it returns (if anything) and feeds the outcome to
//! [`complete_isr_removal`]. Everything else happens in memory and in the request batch.

use tracing::{debug, info, warn};

use crate::context::{
    diff, BrokerId, ControllerContext, PartitionLeadership, PartitionReplica, TopicPartition,
    NO_LEADER,
};
use crate::partition_state_machine::{PartitionStateWrite, WriteKind, WriteOutcome};
use crate::request_batch::ControllerBrokerRequestBatch;

/// A replica's state in the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicaState {
    /// Created by a reassignment or topic creation; may only be a follower.
    New,
    /// Started and part of the assignment.
    Online,
    /// Its broker died or it is being removed.
    Offline,
    /// StopReplica(delete) was sent.
    DeletionStarted,
    /// The broker confirmed the deletion.
    DeletionSuccessful,
    /// Deletion cannot proceed (broker down, or it failed).
    DeletionIneligible,
    /// Does not exist.
    NonExistent,
}

impl ReplicaState {
    /// Kafka's `ReplicaStateMachine`: the states a replica may enter `self` from.
    pub fn valid_previous_states(self) -> &'static [ReplicaState] {
        use ReplicaState::*;
        match self {
            New => &[NonExistent],
            Online | Offline => &[New, Online, Offline, DeletionIneligible],
            DeletionStarted => &[Offline],
            DeletionSuccessful => &[DeletionStarted],
            DeletionIneligible => &[Offline, DeletionStarted],
            NonExistent => &[DeletionSuccessful],
        }
    }

    /// True if a replica in `from` may move to `self`.
    pub fn is_valid_transition_from(self, from: ReplicaState) -> bool {
        self.valid_previous_states().contains(&from)
    }
}

/// Why a replica state change did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaStateChangeError {
    /// The transition is not in the valid-previous-state table.
    #[error("invalid replica state transition {from:?} -> {to:?}")]
    InvalidTransition {
        /// Current state.
        from: ReplicaState,
        /// Requested state.
        to: ReplicaState,
    },
    /// A replica cannot become New while it leads the partition.
    #[error("replica is the partition's leader and cannot become a new replica")]
    ReplicaIsLeader,
    /// The partition's state znode is missing.
    #[error("partition state znode does not exist")]
    NoStateZnode,
    /// The state was written by a newer controller.
    #[error("state written by controller epoch {found}, newer than ours ({ours})")]
    NewerControllerEpoch {
        /// Epoch found in the store.
        found: i32,
        /// Our epoch.
        ours: i32,
    },
}

/// A replica transition refused because it is not in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidReplicaTransition {
    /// The replica.
    pub replica: PartitionReplica,
    /// Its current state.
    pub from: ReplicaState,
    /// The requested state.
    pub to: ReplicaState,
}

/// The result of one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaPass {
    /// Transitions refused (logged).
    pub invalid: Vec<InvalidReplicaTransition>,
    /// Replicas that could not change state for another reason.
    pub failed: Vec<(PartitionReplica, ReplicaStateChangeError)>,
    /// Offline replicas of partitions with leadership: remove each from the ISR in the store
    /// (read, [`plan_isr_removal`], write, [`complete_isr_removal`]); they become Offline then.
    pub isr_removals: Vec<PartitionReplica>,
}

/// `handleStateChanges` for replicas: moves `replicas` towards `target`, queueing requests in
/// `batch`. Invalid transitions are refused and logged.
pub fn handle_state_changes(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    replicas: &[PartitionReplica],
    target: ReplicaState,
) -> ReplicaPass {
    let mut pass = ReplicaPass::default();
    if matches!(target, ReplicaState::Online | ReplicaState::New) {
        // Each replica queues at most one LeaderAndIsr state for its broker.
        batch.reserve_leader_and_isr(replicas.iter().map(|r| r.replica));
    }
    // Consecutive replicas of one partition going Online with a leadership queue their
    // LeaderAndIsr together: one call for their brokers gives each broker the state one call
    // per replica gives (the context does not change in between), and the partition's
    // UpdateMetadata state is built once. Anything else flushes the group first.
    let mut group: Option<(&TopicPartition, Vec<BrokerId>)> = None;
    let flush = |group: &mut Option<(&TopicPartition, Vec<BrokerId>)>,
                 ctx: &ControllerContext,
                 batch: &mut ControllerBrokerRequestBatch| {
        if let Some((tp, brokers)) = group.take() {
            batch.add_leader_and_isr(ctx, &brokers, tp, false);
        }
    };
    for r in replicas {
        let from = ctx.replica_state(r);
        let joins = target == ReplicaState::Online
            && from != ReplicaState::New
            && target.is_valid_transition_from(from)
            && ctx.leadership(&r.tp).is_some();
        if joins {
            match &mut group {
                Some((tp, brokers)) if **tp == r.tp => brokers.push(r.replica),
                _ => {
                    flush(&mut group, ctx, batch);
                    group = Some((&r.tp, vec![r.replica]));
                }
            }
            debug!(topic = %r.tp.topic, partition = r.tp.partition, broker = r.replica, ?from,
                to = ?target, "replica state change");
            ctx.put_replica_state(r.clone(), target);
            continue;
        }
        flush(&mut group, ctx, batch);
        if !target.is_valid_transition_from(from) {
            warn!(topic = %r.tp.topic, partition = r.tp.partition, broker = r.replica, ?from,
                to = ?target, "invalid replica state transition refused");
            pass.invalid.push(InvalidReplicaTransition {
                replica: r.clone(),
                from,
                to: target,
            });
            continue;
        }
        let tp = &r.tp;
        match target {
            ReplicaState::New => match ctx.leadership(tp) {
                Some(l) if l.leader == r.replica => {
                    warn!(topic = %tp.topic, partition = tp.partition, broker = r.replica,
                        "leader replica cannot become a new replica");
                    pass.failed
                        .push((r.clone(), ReplicaStateChangeError::ReplicaIsLeader));
                    continue;
                }
                Some(_) => batch.add_leader_and_isr(ctx, &[r.replica], tp, true),
                None => {}
            },
            ReplicaState::Online => {
                if from == ReplicaState::New {
                    let mut a = ctx.partition_assignment(tp).cloned().unwrap_or_default();
                    if !a.replicas.contains(&r.replica) {
                        a.replicas.push(r.replica);
                        ctx.set_partition_assignment(tp, a);
                    }
                } else if ctx.leadership(tp).is_some() {
                    batch.add_leader_and_isr(ctx, &[r.replica], tp, false);
                }
            }
            ReplicaState::Offline => {
                batch.add_stop_replica(ctx, &[r.replica], tp, false);
                if ctx.leadership(tp).is_some() {
                    pass.isr_removals.push(r.clone());
                    continue;
                }
                batch.add_update_metadata_to_all(ctx, std::slice::from_ref(tp));
            }
            ReplicaState::DeletionStarted => {
                batch.add_stop_replica(ctx, &[r.replica], tp, true);
            }
            ReplicaState::DeletionSuccessful | ReplicaState::DeletionIneligible => {}
            ReplicaState::NonExistent => {
                if let Some(mut a) = ctx.partition_assignment(tp).cloned() {
                    a.replicas.retain(|x| *x != r.replica);
                    ctx.set_partition_assignment(tp, a);
                }
                ctx.remove_replica_state(r);
                debug!(topic = %tp.topic, partition = tp.partition, broker = r.replica,
                    "replica removed");
                continue;
            }
        }
        debug!(topic = %tp.topic, partition = tp.partition, broker = r.replica, ?from,
            to = ?target, "replica state change");
        ctx.put_replica_state(r.clone(), target);
    }
    flush(&mut group, ctx, batch);
    pass
}

/// What an Offline replica's ISR removal needs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a planned ISR removal does nothing until its write is performed"]
pub enum IsrRemoval {
    /// The replica is not in the ISR: nothing to write; this is the current state.
    Unchanged(PartitionLeadership),
    /// Conditional write of the shrunk ISR.
    Write(PartitionStateWrite),
}

/// Kafka's `ReplicaStateMachine` Offline: given the state just read, the write removing `r` from the ISR:
/// leader → -1 if it led, the ISR shrinks unless it has a single member (the ISR never
/// becomes empty), and the leader epoch is bumped.
pub fn plan_isr_removal(
    ctx: &ControllerContext,
    r: &PartitionReplica,
    read: Option<&PartitionLeadership>,
) -> Result<IsrRemoval, ReplicaStateChangeError> {
    let current = read.ok_or(ReplicaStateChangeError::NoStateZnode)?;
    if current.controller_epoch > ctx.epoch {
        return Err(ReplicaStateChangeError::NewerControllerEpoch {
            found: current.controller_epoch,
            ours: ctx.epoch,
        });
    }
    if !current.isr.contains(&r.replica) {
        return Ok(IsrRemoval::Unchanged(current.clone()));
    }
    let leader = if current.leader == r.replica {
        NO_LEADER
    } else {
        current.leader
    };
    let isr = if current.isr.len() == 1 {
        current.isr.clone()
    } else {
        diff(&current.isr, &[r.replica])
    };
    Ok(IsrRemoval::Write(PartitionStateWrite {
        tp: r.tp.clone(),
        leadership: current.new_leader_and_isr(leader, isr, ctx.epoch),
        kind: WriteKind::Update {
            expected_version: current.partition_epoch,
        },
    }))
}

/// What became of an ISR removal.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a step may ask for a re-read and another attempt"]
pub enum IsrRemovalStep {
    /// Done: the replica is Offline; the partition's leadership is now this.
    Done(PartitionLeadership),
    /// BADVERSION: re-read and plan again.
    Retry,
    /// The state znode vanished.
    Failed(ReplicaStateChangeError),
}

/// Feeds back an ISR removal (`outcome` is ignored for [`IsrRemoval::Unchanged`]). On success
/// the leadership is cached, LeaderAndIsr with the new ISR goes to the other replicas of the
/// partition (not for topics being deleted), and the replica becomes Offline.
pub fn complete_isr_removal(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    r: &PartitionReplica,
    removal: &IsrRemoval,
    outcome: WriteOutcome,
) -> IsrRemovalStep {
    let lead = match (removal, outcome) {
        (IsrRemoval::Unchanged(l), _) => l.clone(),
        (IsrRemoval::Write(w), WriteOutcome::Written { version }) => {
            let mut l = w.leadership.clone();
            l.partition_epoch = version;
            info!(topic = %r.tp.topic, partition = r.tp.partition, broker = r.replica,
                leader = l.leader, leader_epoch = l.leader_epoch, controller_epoch = ctx.epoch,
                "replica removed from ISR");
            l
        }
        (IsrRemoval::Write(_), WriteOutcome::BadVersion) => return IsrRemovalStep::Retry,
        (IsrRemoval::Write(_), WriteOutcome::NoNode | WriteOutcome::NodeExists) => {
            return IsrRemovalStep::Failed(ReplicaStateChangeError::NoStateZnode)
        }
    };
    ctx.put_leadership(r.tp.clone(), lead.clone());
    if !ctx.is_topic_queued_for_deletion(&r.tp.topic) {
        let others: Vec<_> = ctx
            .partition_assignment(&r.tp)
            .map_or(&[][..], |a| &a.replicas)
            .iter()
            .copied()
            .filter(|b| *b != r.replica)
            .collect();
        batch.add_leader_and_isr(ctx, &others, &r.tp, false);
    }
    ctx.put_replica_state(r.clone(), ReplicaState::Offline);
    IsrRemovalStep::Done(lead)
}

/// K6.8 failover start-up: every replica starts Online if its broker is live, else
/// ReplicaDeletionIneligible (so that topic deletion does not hang). Returns the two sets
/// for the follow-up passes (Online, then Offline).
pub fn initialize_replica_states(
    ctx: &mut ControllerContext,
) -> (Vec<PartitionReplica>, Vec<PartitionReplica>) {
    let (mut online, mut offline) = (Vec::new(), Vec::new());
    for r in ctx.all_replicas() {
        if ctx.is_replica_online_for(&r.tp, r.replica, false) {
            online.push(r);
        } else {
            offline.push(r);
        }
    }
    for r in &online {
        ctx.put_replica_state(r.clone(), ReplicaState::Online);
    }
    for r in &offline {
        ctx.put_replica_state(r.clone(), ReplicaState::DeletionIneligible);
    }
    (online, offline)
}
