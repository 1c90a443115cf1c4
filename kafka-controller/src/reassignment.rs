//! K7 partition reassignment as pure step functions over the controller context
//! (Kafka's `KafkaController.onPartitionReassignment`).
//!
//! With ORS the original replicas and TRS the target ones, the store first receives
//! RS = TRS ++ (ORS − TRS) with adding = TRS − ORS and removing = ORS − TRS (step 1, U1), and
//! RS = TRS only at the very end (step 10): the store holds the only durable copy of ORS, so
//! a successor controller can always recompute the reassignment from it
//! ([`PartitionReassignment::from_context`]) and resume. K7's worked example (docs/behaviour.md) lists AR as
//! a set (1,2,3,4,5,6); in the store it is the list RS = 4,5,6,1,2,3.
//!
//! The steps, each one state-machine pass (send the batch after each):
//!
//! | step | function | store work |
//! |---|---|---|
//! | 1 | [`step_1_assignment_write`], then [`step_1_apply`] (U2, U3) | write `/brokers/topics/<t>` |
//! | 2 | [`plan_epoch_bump`], [`complete_epoch_bump`] | CAS on the state znode |
//! | 3 | [`step_3_start_new_replicas`] | — |
//! | 4 | [`step_4_target_in_isr`] (phase A ends here until the ISR catches up) | — |
//! | 5 | [`step_5_adding_online`] | — |
//! | 6 | [`step_6_cache_target`] | — |
//! | 7 | [`step_7_leader_move`]: a Reassign election or an epoch bump | CAS on the state znode |
//! | 8 | [`step_8_removed_offline`] | ISR removals (CAS) |
//! | 9 | [`step_9_removed_deleted`] | — |
//! | 10 | [`step_10_assignment_write`] | write `/brokers/topics/<t>` |
//! | 11 | [`step_11_complete`] | rewrite or delete `/admin/reassign_partitions` |

use std::collections::{BTreeMap, BTreeSet};

use tracing::{info, warn};

use crate::context::{
    diff, BrokerId, ControllerContext, PartitionLeadership, PartitionReplica, ReplicaAssignment,
    TopicPartition,
};
use crate::partition_state_machine::{PartitionStateWrite, WriteKind, WriteOutcome};
use crate::replica_state_machine::{handle_state_changes, ReplicaPass, ReplicaState};
use crate::request_batch::ControllerBrokerRequestBatch;

/// Why a reassignment cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReassignmentError {
    /// The topic is queued for deletion.
    #[error("topic is being deleted")]
    TopicBeingDeleted,
    /// The partition does not exist.
    #[error("partition does not exist")]
    UnknownPartition,
    /// The target replica list is empty.
    #[error("empty target replica list")]
    EmptyTarget,
    /// A broker appears twice in the target.
    #[error("broker {0} appears twice in the target")]
    DuplicateReplica(BrokerId),
    /// A negative broker id.
    #[error("invalid broker id {0}")]
    InvalidReplica(BrokerId),
    /// Replicas to add on brokers that are not live.
    #[error("replicas to add are on brokers that are not live: {0:?}")]
    DeadAddingReplicas(Vec<BrokerId>),
    /// The partition has no leadership (no state znode) to bump.
    #[error("partition has no leadership")]
    NoLeadership,
    /// The state znode was written by a newer controller.
    #[error("state written by controller epoch {found}, newer than ours ({ours})")]
    NewerControllerEpoch {
        /// Epoch found in the store.
        found: i32,
        /// Our epoch.
        ours: i32,
    },
}

/// One partition's reassignment in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// The partition.
    pub tp: TopicPartition,
    /// The assignment during the move: RS, adding and removing replicas.
    pub full: ReplicaAssignment,
}

impl PartitionReassignment {
    /// The original replicas (ORS).
    pub fn origin(&self) -> Vec<BrokerId> {
        self.full.origin_replicas()
    }

    /// The target replicas (TRS, RAR).
    pub fn target(&self) -> Vec<BrokerId> {
        self.full.target_replicas()
    }

    /// TRS − ORS.
    pub fn adding(&self) -> &[BrokerId] {
        &self.full.adding_replicas
    }

    /// ORS − TRS.
    pub fn removing(&self) -> &[BrokerId] {
        &self.full.removing_replicas
    }

    /// Validates a new reassignment of `tp` to `target` (`validateReassignment`) and computes
    /// its full assignment from the context's current one; a reassignment already in progress
    /// keeps its original replicas.
    pub fn new(
        ctx: &ControllerContext,
        tp: &TopicPartition,
        target: &[BrokerId],
    ) -> Result<Self, ReassignmentError> {
        if ctx.is_topic_queued_for_deletion(&tp.topic) {
            return Err(ReassignmentError::TopicBeingDeleted);
        }
        let current = ctx
            .partition_assignment(tp)
            .ok_or(ReassignmentError::UnknownPartition)?;
        if target.is_empty() {
            return Err(ReassignmentError::EmptyTarget);
        }
        let mut seen = BTreeSet::new();
        for &r in target {
            if r < 0 {
                return Err(ReassignmentError::InvalidReplica(r));
            }
            if !seen.insert(r) {
                return Err(ReassignmentError::DuplicateReplica(r));
            }
        }
        let full = current.reassign_to(target);
        let dead: Vec<BrokerId> = full
            .adding_replicas
            .iter()
            .copied()
            .filter(|r| !ctx.is_broker_live(*r))
            .collect();
        if !dead.is_empty() {
            return Err(ReassignmentError::DeadAddingReplicas(dead));
        }
        Ok(Self {
            tp: tp.clone(),
            full,
        })
    }

    /// The reassignment in progress for `tp`, if any: for a successor controller, the one
    /// recorded in the loaded assignment (adding / removing replicas written at step 1); for
    /// this controller also one that only reorders the replicas (marked, with none adding or
    /// removing).
    pub fn from_context(ctx: &ControllerContext, tp: &TopicPartition) -> Option<Self> {
        let a = ctx.partition_assignment(tp)?;
        // A reassignment that only reorders the replicas has no adding or removing replicas:
        // it is known by the partition's mark (Kafka's `partitionsBeingReassigned`).
        (a.is_being_reassigned() || ctx.partitions_being_reassigned().contains(tp)).then(|| Self {
            tp: tp.clone(),
            full: a.clone(),
        })
    }
}

/// A write of a topic's whole assignment to `/brokers/topics/<t>` (fenced by the controller
/// epoch, any version).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a planned topic-assignment write does nothing until it is performed"]
pub struct TopicAssignmentWrite {
    /// The topic.
    pub topic: String,
    /// Its topic id, if known.
    pub topic_id: Option<kafka_wire::Uuid>,
    /// Every partition's assignment.
    pub partitions: BTreeMap<i32, ReplicaAssignment>,
}

fn topic_write_with(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    assignment: ReplicaAssignment,
) -> TopicAssignmentWrite {
    let mut partitions = ctx.topic_assignment(&tp.topic).cloned().unwrap_or_default();
    partitions.insert(tp.partition, assignment);
    TopicAssignmentWrite {
        topic: tp.topic.to_string(),
        topic_id: ctx.topic_id(&tp.topic),
        partitions,
    }
}

/// K7 step 1 (U1): the store write of RS = TRS ++ (ORS − TRS) with adding / removing, or
/// `None` when the context (loaded from the store) already holds it — a resumed reassignment.
pub fn step_1_assignment_write(
    ctx: &ControllerContext,
    r: &PartitionReassignment,
) -> Option<TopicAssignmentWrite> {
    if ctx.partition_assignment(&r.tp) == Some(&r.full) {
        return None;
    }
    Some(topic_write_with(ctx, &r.tp, r.full.clone()))
}

/// K7 step 1 after the store write (U2, U3): the context takes the full assignment and marks
/// the partition as being reassigned. Returns the replicas of an earlier, replaced
/// reassignment that are no longer needed; stop them with [`step_8_removed_offline`] and
/// [`step_9_removed_deleted`].
pub fn step_1_apply(ctx: &mut ControllerContext, r: &PartitionReassignment) -> Vec<BrokerId> {
    let current = ctx.partition_replicas(&r.tp);
    let unneeded = diff(&current, &r.full.replicas);
    ctx.set_partition_assignment(&r.tp, r.full.clone());
    ctx.mark_being_reassigned(r.tp.clone(), true);
    info!(topic = %r.tp.topic, partition = r.tp.partition, replicas = ?r.full.replicas,
        "reassignment started");
    unneeded
}

/// K7 steps 2 and 7 (`updateLeaderEpoch`): the conditional write of the same leader and ISR
/// with the leader epoch bumped, from the state just read.
pub fn plan_epoch_bump(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    read: Option<&PartitionLeadership>,
) -> Result<PartitionStateWrite, ReassignmentError> {
    let current = read.ok_or(ReassignmentError::NoLeadership)?;
    if current.controller_epoch > ctx.epoch {
        return Err(ReassignmentError::NewerControllerEpoch {
            found: current.controller_epoch,
            ours: ctx.epoch,
        });
    }
    Ok(PartitionStateWrite {
        tp: tp.clone(),
        leadership: current.new_epoch(ctx.epoch),
        kind: WriteKind::Update {
            expected_version: current.partition_epoch,
        },
    })
}

/// What became of an epoch bump.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a step may ask for a re-read and another attempt"]
pub enum EpochBumpStep {
    /// Written and LeaderAndIsr queued.
    Done(PartitionLeadership),
    /// BADVERSION: re-read and plan again.
    Retry,
    /// The state znode is gone.
    Failed,
}

/// Feeds back an epoch bump: caches the leadership and queues LeaderAndIsr to the context's
/// original replicas (not new) and adding replicas (new) — step 2 in phase A, step 7 when the
/// leader stays.
pub fn complete_epoch_bump(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    write: &PartitionStateWrite,
    outcome: WriteOutcome,
) -> EpochBumpStep {
    let version = match outcome {
        WriteOutcome::Written { version } => version,
        WriteOutcome::BadVersion => return EpochBumpStep::Retry,
        WriteOutcome::NoNode | WriteOutcome::NodeExists => return EpochBumpStep::Failed,
    };
    let tp = &write.tp;
    let mut lead = write.leadership.clone();
    lead.partition_epoch = version;
    ctx.put_leadership(tp.clone(), lead.clone());
    let a = ctx.partition_assignment(tp).cloned().unwrap_or_default();
    batch.add_leader_and_isr(ctx, &a.origin_replicas(), tp, false);
    batch.add_leader_and_isr(ctx, &a.adding_replicas, tp, true);
    info!(topic = %tp.topic, partition = tp.partition, leader = lead.leader,
        leader_epoch = lead.leader_epoch, controller_epoch = ctx.epoch, "leader epoch bumped");
    EpochBumpStep::Done(lead)
}

fn replicas_of(tp: &TopicPartition, brokers: &[BrokerId]) -> Vec<PartitionReplica> {
    brokers
        .iter()
        .map(|b| PartitionReplica::new(tp.clone(), *b))
        .collect()
}

/// K7 step 3: the adding replicas (RAR − OAR) go to NewReplica (LeaderAndIsr isNew to each).
pub fn step_3_start_new_replicas(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    r: &PartitionReassignment,
) -> ReplicaPass {
    handle_state_changes(
        ctx,
        batch,
        &replicas_of(&r.tp, r.adding()),
        ReplicaState::New,
    )
}

/// K7 step 4: true once every target replica is in the cached ISR (phase B may start).
pub fn step_4_target_in_isr(ctx: &ControllerContext, r: &PartitionReassignment) -> bool {
    ctx.leadership(&r.tp)
        .is_some_and(|l| r.target().iter().all(|t| l.isr.contains(t)))
}

/// K7 step 5: the adding replicas go to OnlineReplica.
pub fn step_5_adding_online(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    r: &PartitionReassignment,
) -> ReplicaPass {
    handle_state_changes(
        ctx,
        batch,
        &replicas_of(&r.tp, r.adding()),
        ReplicaState::Online,
    )
}

/// K7 step 6: the cached assignment becomes RS = TRS (the store still holds the full one).
pub fn step_6_cache_target(ctx: &mut ControllerContext, r: &PartitionReassignment) {
    ctx.set_partition_assignment(&r.tp, ReplicaAssignment::new(r.target()));
}

/// What K7 step 7 does with the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderMove {
    /// The leader is not in TRS or is not live: run the partition state machine to Online with
    /// [`crate::election::ElectionStrategy::Reassign`].
    Elect,
    /// The leader stays: bump the leader epoch ([`plan_epoch_bump`]) so brokers learn RS.
    BumpEpoch,
}

/// K7 step 7 (after step 6): elect a new leader from RAR if the current one is not in it or
/// not live, else bump the leader epoch.
pub fn step_7_leader_move(ctx: &ControllerContext, r: &PartitionReassignment) -> LeaderMove {
    match ctx.leadership(&r.tp) {
        Some(l)
            if r.target().contains(&l.leader)
                && ctx.is_replica_online_for(&r.tp, l.leader, false) =>
        {
            LeaderMove::BumpEpoch
        }
        _ => LeaderMove::Elect,
    }
}

/// K7 step 8: the removed replicas (OAR − RAR, or U3's unneeded ones) go to OfflineReplica:
/// StopReplica (no delete) to each, and ISR removals for the loop to write (each tells the
/// remaining replicas with LeaderAndIsr).
pub fn step_8_removed_offline(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    tp: &TopicPartition,
    removed: &[BrokerId],
) -> ReplicaPass {
    handle_state_changes(ctx, batch, &replicas_of(tp, removed), ReplicaState::Offline)
}

/// K7 step 9: the removed replicas go through ReplicaDeletionStarted (StopReplica with
/// delete), ReplicaDeletionSuccessful and NonExistentReplica (dropped from the assignment).
pub fn step_9_removed_deleted(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    tp: &TopicPartition,
    removed: &[BrokerId],
) -> ReplicaPass {
    let replicas = replicas_of(tp, removed);
    let mut pass = ReplicaPass::default();
    for target in [
        ReplicaState::DeletionStarted,
        ReplicaState::DeletionSuccessful,
        ReplicaState::NonExistent,
    ] {
        let p = handle_state_changes(ctx, batch, &replicas, target);
        pass.invalid.extend(p.invalid);
        pass.failed.extend(p.failed);
    }
    pass
}

/// K7 step 10: the store write of RS = TRS (last, see the module docs).
pub fn step_10_assignment_write(
    ctx: &ControllerContext,
    r: &PartitionReassignment,
) -> TopicAssignmentWrite {
    topic_write_with(ctx, &r.tp, ReplicaAssignment::new(r.target()))
}

/// What to do with `/admin/reassign_partitions` at step 11.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "the update of the admin znode is still to be written"]
pub enum AdminReassignmentUpdate {
    /// Rewrite it with the remaining entries.
    Rewrite(BTreeMap<TopicPartition, Vec<BrokerId>>),
    /// Delete it: nothing remains.
    Delete,
    /// The partition was not listed (an API-triggered reassignment): leave it alone.
    Unchanged,
}

/// K7 step 11: the partition is no longer being reassigned; returns the update of
/// `/admin/reassign_partitions` (whose current entries are `admin`) and queues UpdateMetadata
/// for the partition to every broker (B8).
pub fn step_11_complete(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    r: &PartitionReassignment,
    admin: &BTreeMap<TopicPartition, Vec<BrokerId>>,
) -> AdminReassignmentUpdate {
    ctx.mark_being_reassigned(r.tp.clone(), false);
    batch.add_update_metadata_to_all(ctx, std::slice::from_ref(&r.tp));
    info!(topic = %r.tp.topic, partition = r.tp.partition, replicas = ?r.target(),
        "reassignment completed");
    if !admin.contains_key(&r.tp) {
        return AdminReassignmentUpdate::Unchanged;
    }
    let mut rest = admin.clone();
    rest.remove(&r.tp);
    if rest.is_empty() {
        AdminReassignmentUpdate::Delete
    } else {
        AdminReassignmentUpdate::Rewrite(rest)
    }
}

/// Where a (possibly resumed) reassignment stands, from the context alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReassignmentPhase {
    /// Phase A: steps 1–3 (again, idempotently), then wait for step 4.
    WaitingForIsr,
    /// Phase B: steps 5–11.
    Finishing,
}

/// The phase a reassignment is in (K7 step 4's test); a successor runs step 1 (which finds
/// nothing to write if the store has it) and then this phase.
pub fn phase(ctx: &ControllerContext, r: &PartitionReassignment) -> ReassignmentPhase {
    if step_4_target_in_isr(ctx, r) {
        ReassignmentPhase::Finishing
    } else {
        if ctx.leadership(&r.tp).is_none() {
            warn!(topic = %r.tp.topic, partition = r.tp.partition,
                "reassigning a partition without leadership");
        }
        ReassignmentPhase::WaitingForIsr
    }
}
