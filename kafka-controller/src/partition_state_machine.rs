//! The partition state machine (Kafka's `PartitionStateMachine`): NonExistent / New / Online / Offline, Kafka's
//! valid-previous-state table, and the actions of each transition as a plan the event loop
//! runs against the coordination store.
//!
//! A pass ([`handle_state_changes`]) applies the memory-only transitions at once and returns
//! what needs the store: state znodes to **create** (New → Online) and partitions needing an
//! **election** (Online/Offline → Online). For an election the loop reads the state znode
//! (data and version, K1.1), calls [`plan_election`], performs the conditional write it
//! returns (K1.3, fenced by the controller epoch), and feeds the outcome to
//! [`complete_election`]: success updates the context and queues LeaderAndIsr (K1.4),
//! BADVERSION asks for a re-read and another try, NONODE fails the partition.
//!
//! The loop may first plan from the leadership the context holds
//! ([`plan_election_quietly`]) and write it conditional on that leadership's version: the
//! write succeeds only if the znode is still at that version, i.e. holds exactly what the
//! read would have returned, so the outcome is the read-then-write one; a BADVERSION (or a
//! plan that writes nothing) goes to the read path above.

use tracing::{debug, info, warn};

use crate::context::{
    BrokerId, ControllerContext, LeaderRecoveryState, PartitionLeadership, TopicPartition,
};
use crate::election::{elect_in_context, ElectionStrategy};
use crate::request_batch::ControllerBrokerRequestBatch;

/// A partition's state in the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartitionState {
    /// Assigned, never had a leader.
    New,
    /// Has a live leader.
    Online,
    /// Its leader died.
    Offline,
    /// Does not exist (or was deleted).
    NonExistent,
}

impl PartitionState {
    /// Kafka's `PartitionStateMachine`: the states a partition may enter `self` from.
    pub fn valid_previous_states(self) -> &'static [PartitionState] {
        use PartitionState::*;
        match self {
            New => &[NonExistent],
            Online | Offline => &[New, Online, Offline],
            NonExistent => &[Offline],
        }
    }

    /// True if a partition in `from` may move to `self`.
    pub fn is_valid_transition_from(self, from: PartitionState) -> bool {
        self.valid_previous_states().contains(&from)
    }
}

/// Why a partition state change did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionStateChangeError {
    /// The transition is not in the valid-previous-state table.
    #[error("invalid partition state transition {from:?} -> {to:?}")]
    InvalidTransition {
        /// Current state.
        from: PartitionState,
        /// Requested state.
        to: PartitionState,
    },
    /// New → Online with no live replica.
    #[error("no assigned replica is live")]
    NoLiveReplicas,
    /// The partition is not in the context's assignment.
    #[error("partition has no assignment")]
    UnknownPartition,
    /// The strategy found no eligible leader.
    #[error("no eligible leader")]
    NoLeaderElected,
    /// The state znode was written by a newer controller; this one must not touch it.
    #[error("state written by controller epoch {found}, newer than ours ({ours})")]
    NewerControllerEpoch {
        /// The epoch found in the store.
        found: i32,
        /// This controller's epoch.
        ours: i32,
    },
    /// An election was needed but the state znode does not exist.
    #[error("partition state znode does not exist")]
    NoStateZnode,
    /// New → Online found the state znode already created.
    #[error("partition state znode already exists")]
    StateZnodeExists,
    /// Online/Offline → Online needs an election strategy.
    #[error("no election strategy given")]
    NoStrategy,
}

/// The store's answer to a partition-state write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written; the znode's new version.
    Written {
        /// The new znode version.
        version: i32,
    },
    /// The expected version did not match (someone else wrote): re-read and retry.
    BadVersion,
    /// The znode does not exist.
    NoNode,
    /// A create found the znode already there.
    NodeExists,
}

/// What kind of write the store must perform for a partition state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// Create the znode (New → Online).
    Create,
    /// Set the data only if the znode's version is `expected_version` (K1.3).
    Update {
        /// The version read just before (the partition epoch).
        expected_version: i32,
    },
}

/// A write to `/brokers/topics/<t>/partitions/<p>/state`, to be fenced by the controller epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a planned partition-state write does nothing until it is performed"]
pub struct PartitionStateWrite {
    /// The partition.
    pub tp: TopicPartition,
    /// The content to write (its `partition_epoch` is the version it was derived from).
    pub leadership: PartitionLeadership,
    /// Create or conditional update.
    pub kind: WriteKind,
}

/// A transition refused because it is not in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidPartitionTransition {
    /// The partition.
    pub tp: TopicPartition,
    /// Its current state.
    pub from: PartitionState,
    /// The requested state.
    pub to: PartitionState,
}

/// The result of one pass: what was refused or failed, and what the loop must do in the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionPass {
    /// Transitions refused (logged).
    pub invalid: Vec<InvalidPartitionTransition>,
    /// Partitions that could not change state for another reason.
    pub failed: Vec<(TopicPartition, PartitionStateChangeError)>,
    /// New → Online: state znodes to create; feed outcomes to [`complete_initialization`].
    pub initializations: Vec<PartitionStateWrite>,
    /// Online/Offline → Online: read each state znode, then [`plan_election`].
    pub elections: Vec<TopicPartition>,
    /// The strategy for `elections`.
    pub strategy: Option<ElectionStrategy>,
}

/// `handleStateChanges`: moves `partitions` towards `target`. Invalid transitions are refused
/// and logged; New, Offline and NonExistent are applied in memory at once; Online returns the
/// store work (see the module docs).
pub fn handle_state_changes(
    ctx: &mut ControllerContext,
    partitions: &[TopicPartition],
    target: PartitionState,
    strategy: Option<ElectionStrategy>,
) -> PartitionPass {
    let mut pass = PartitionPass {
        strategy,
        ..PartitionPass::default()
    };
    for tp in partitions {
        let from = ctx.partition_state(tp);
        if !target.is_valid_transition_from(from) {
            warn!(topic = %tp.topic, partition = tp.partition, ?from, to = ?target,
                "invalid partition state transition refused");
            pass.invalid.push(InvalidPartitionTransition {
                tp: tp.clone(),
                from,
                to: target,
            });
            continue;
        }
        match target {
            PartitionState::New | PartitionState::Offline | PartitionState::NonExistent => {
                debug!(topic = %tp.topic, partition = tp.partition, ?from, to = ?target,
                    "partition state change");
                ctx.put_partition_state(tp.clone(), target);
            }
            PartitionState::Online if from == PartitionState::New => {
                match initial_leadership(ctx, tp) {
                    Ok(leadership) => pass.initializations.push(PartitionStateWrite {
                        tp: tp.clone(),
                        leadership,
                        kind: WriteKind::Create,
                    }),
                    Err(e) => {
                        warn!(topic = %tp.topic, partition = tp.partition, error = %e,
                            "cannot initialize partition leadership");
                        pass.failed.push((tp.clone(), e));
                    }
                }
            }
            PartitionState::Online => {
                if strategy.is_none() {
                    pass.failed
                        .push((tp.clone(), PartitionStateChangeError::NoStrategy));
                } else {
                    pass.elections.push(tp.clone());
                }
            }
        }
    }
    pass
}

/// K2.2 / New → Online: leader = first live replica in assignment order, ISR = all live
/// replicas, leader epoch 0, stamped with this controller's epoch.
pub fn initial_leadership(
    ctx: &ControllerContext,
    tp: &TopicPartition,
) -> Result<PartitionLeadership, PartitionStateChangeError> {
    let assignment = ctx
        .partition_assignment(tp)
        .ok_or(PartitionStateChangeError::UnknownPartition)?;
    let live: Vec<BrokerId> = assignment
        .replicas
        .iter()
        .copied()
        .filter(|r| ctx.is_replica_online_for(tp, *r, false))
        .collect();
    let leader = *live
        .first()
        .ok_or(PartitionStateChangeError::NoLiveReplicas)?;
    Ok(PartitionLeadership::new(leader, 0, live, ctx.epoch, 0))
}

/// Completes a New → Online initialization: on success the partition is Online, its
/// leadership cached, and LeaderAndIsr (isNew) queued to the ISR (+ UpdateMetadata to all).
pub fn complete_initialization(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    write: &PartitionStateWrite,
    outcome: WriteOutcome,
) -> Result<(), PartitionStateChangeError> {
    let tp = &write.tp;
    match outcome {
        WriteOutcome::Written { version } => {
            let mut lead = write.leadership.clone();
            lead.partition_epoch = version;
            let isr = lead.isr.clone();
            info!(topic = %tp.topic, partition = tp.partition, leader = lead.leader,
                leader_epoch = lead.leader_epoch, controller_epoch = ctx.epoch,
                "partition initialized online");
            ctx.put_leadership(tp.clone(), lead);
            ctx.put_partition_state(tp.clone(), PartitionState::Online);
            batch.add_leader_and_isr(ctx, &isr, tp, true);
            Ok(())
        }
        WriteOutcome::NodeExists | WriteOutcome::BadVersion => {
            warn!(topic = %tp.topic, partition = tp.partition,
                "partition state znode already exists; initialization failed");
            Err(PartitionStateChangeError::StateZnodeExists)
        }
        WriteOutcome::NoNode => Err(PartitionStateChangeError::NoStateZnode),
    }
}

/// An election ready to be written.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a planned election does nothing until its write is performed"]
pub struct PlannedElection {
    /// The conditional write (K1.3).
    pub write: PartitionStateWrite,
    /// The brokers to send LeaderAndIsr to once written.
    pub recipients: Vec<BrokerId>,
    /// True for an unclean election.
    pub unclean: bool,
}

/// K1.1–K1.3: given the state just read from the store (`None`: no znode), runs `strategy`
/// and returns the conditional write of the new leader, ISR, leader epoch + 1 and controller
/// epoch, expecting the version that was read. Logs why an election cannot happen.
pub fn plan_election(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    read: Option<&PartitionLeadership>,
    strategy: ElectionStrategy,
) -> Result<PlannedElection, PartitionStateChangeError> {
    let planned = plan_election_quietly(ctx, tp, read, strategy);
    match &planned {
        Err(PartitionStateChangeError::NewerControllerEpoch { found, .. }) => {
            warn!(topic = %tp.topic, partition = tp.partition, controller_epoch = *found,
                "partition state written by a newer controller; election aborted");
        }
        Err(PartitionStateChangeError::NoLeaderElected) => {
            warn!(topic = %tp.topic, partition = tp.partition, ?strategy, "no eligible leader");
        }
        _ => {}
    }
    planned
}

/// [`plan_election`] without logging: the optimistic round plans from the leadership the
/// context holds, and only a write it plans is acted on (anything else is decided again
/// from a read of the store, which logs).
pub fn plan_election_quietly(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    read: Option<&PartitionLeadership>,
    strategy: ElectionStrategy,
) -> Result<PlannedElection, PartitionStateChangeError> {
    let current = read.ok_or(PartitionStateChangeError::NoStateZnode)?;
    if current.controller_epoch > ctx.epoch {
        return Err(PartitionStateChangeError::NewerControllerEpoch {
            found: current.controller_epoch,
            ours: ctx.epoch,
        });
    }
    if ctx.partition_assignment(tp).is_none() {
        return Err(PartitionStateChangeError::UnknownPartition);
    }
    let result = elect_in_context(ctx, tp, current, strategy)
        .ok_or(PartitionStateChangeError::NoLeaderElected)?;
    let mut leadership = current.new_leader_and_isr(result.leader, result.isr, ctx.epoch);
    if result.unclean && ctx.leader_recovery_on_unclean {
        leadership.leader_recovery_state = LeaderRecoveryState::Recovering;
    }
    Ok(PlannedElection {
        write: PartitionStateWrite {
            tp: tp.clone(),
            leadership,
            kind: WriteKind::Update {
                expected_version: current.partition_epoch,
            },
        },
        recipients: result.recipients,
        unclean: result.unclean,
    })
}

/// What became of a planned election.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a step may ask for a re-read and another attempt"]
pub enum ElectionStep {
    /// Written: the partition is Online with this leadership.
    Elected(PartitionLeadership),
    /// BADVERSION (K1.3): re-read the state znode and plan again.
    Retry,
    /// The partition keeps its state.
    Failed(PartitionStateChangeError),
}

/// Feeds back the outcome of a planned election's write. On success the context caches the
/// new leadership, the partition becomes Online and LeaderAndIsr (not new) is queued to the
/// strategy's recipients, plus UpdateMetadata to every broker (K1.4).
pub fn complete_election(
    ctx: &mut ControllerContext,
    batch: &mut ControllerBrokerRequestBatch,
    planned: &PlannedElection,
    outcome: WriteOutcome,
) -> ElectionStep {
    let tp = &planned.write.tp;
    match outcome {
        WriteOutcome::Written { version } => {
            let mut lead = planned.write.leadership.clone();
            lead.partition_epoch = version;
            if planned.unclean {
                warn!(topic = %tp.topic, partition = tp.partition, leader = lead.leader,
                    "unclean leader election: data may be lost");
            }
            info!(topic = %tp.topic, partition = tp.partition, leader = lead.leader,
                leader_epoch = lead.leader_epoch, controller_epoch = ctx.epoch,
                "partition leader elected");
            ctx.put_leadership(tp.clone(), lead.clone());
            ctx.put_partition_state(tp.clone(), PartitionState::Online);
            ctx.record_leader_election(planned.unclean);
            batch.add_leader_and_isr(ctx, &planned.recipients, tp, false);
            ElectionStep::Elected(lead)
        }
        WriteOutcome::BadVersion => {
            debug!(topic = %tp.topic, partition = tp.partition,
                "partition state changed since read; retrying");
            ElectionStep::Retry
        }
        WriteOutcome::NoNode => ElectionStep::Failed(PartitionStateChangeError::NoStateZnode),
        WriteOutcome::NodeExists => {
            ElectionStep::Failed(PartitionStateChangeError::StateZnodeExists)
        }
    }
}

/// `triggerOnlinePartitionStateChange` (K1, K5.3, K6.8): every New or Offline partition of a
/// topic not queued for deletion goes Online with the clean offline strategy.
#[must_use = "the pass names the elections still to perform"]
pub fn trigger_online_partition_state_change(ctx: &mut ControllerContext) -> PartitionPass {
    let mut partitions = ctx.partitions_in_state(PartitionState::New);
    partitions.extend(ctx.partitions_in_state(PartitionState::Offline));
    partitions.retain(|tp| !ctx.is_topic_queued_for_deletion(&tp.topic));
    partitions.sort();
    handle_state_changes(
        ctx,
        &partitions,
        PartitionState::Online,
        Some(ElectionStrategy::Offline {
            allow_unclean: false,
        }),
    )
}

/// Partitions whose cached leader is not live (as in Kafka, a leader in controlled shutdown
/// counts as offline here), of topics not queued for deletion (`partitionsWithOfflineLeader`,
/// K1 step 1 of `onBrokerFailure`).
pub fn partitions_with_offline_leader(ctx: &ControllerContext) -> Vec<TopicPartition> {
    ctx.leaderships()
        .filter(|(tp, l)| {
            !ctx.is_replica_online_for(tp, l.leader, false)
                && !ctx.is_topic_queued_for_deletion(&tp.topic)
        })
        .map(|(tp, _)| tp.clone())
        .collect()
}

/// K6.8 failover start-up: a partition with a state znode whose leader is live starts Online,
/// one whose leader is not starts Offline, one with no state znode starts New.
pub fn initialize_partition_states(ctx: &mut ControllerContext) {
    for tp in ctx.all_partitions() {
        let state = match ctx.leadership(&tp) {
            Some(l) if ctx.is_replica_online_for(&tp, l.leader, false) => PartitionState::Online,
            Some(_) => PartitionState::Offline,
            None => PartitionState::New,
        };
        ctx.put_partition_state(tp, state);
    }
}
