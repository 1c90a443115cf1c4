//! [`Partition`]: one partition's replication state on one broker — pure, time passed in.
//!
//! Leader side: each follower's LEO and caught-up time (K8.2), the high watermark as the
//! minimum LEO over the *maximal* ISR (a pending expansion counts, a pending shrink does not),
//! moving only forward; ISR shrink for followers not caught up within
//! `replica.lag.time.max.ms`; ISR expansion only once a follower reaches the HW **and** the
//! start offset of the leader's epoch (KAFKA-7128); `min.insync.replicas`.
//!
//! Follower side: truncation by leader epoch — OffsetForLeaderEpoch or the diverging epoch of
//! a Fetch v12+ response, iterated as KIP-279 requires — never to the high watermark (KIP-101);
//! the follower HW is `min(leader HW, own LEO)`.
//!
//! ISR changes are proposals ([`Partition::poll_isr_proposal`]) for an
//! [`IsrWriter`](crate::isr::IsrWriter); the answer comes back through
//! [`Partition::on_isr_result`].

mod replica;

pub use replica::{ReplicaState, UNKNOWN_OFFSET};

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;

use crate::epoch_cache::{EpochEndOffset, UNDEFINED_EPOCH};
use crate::isr::{BrokerId, IsrProposal, IsrResult, LeaderAndIsr, TopicPartition};
use crate::log::{LogError, LogStorage};
use crate::producer_state::{ProducerStateError, ProducerStateManager};

/// Replica id of a consumer in a fetch.
pub const CONSUMER_REPLICA_ID: BrokerId = -1;

/// Per-partition settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionConfig {
    /// `replica.lag.time.max.ms` (30 s since Kafka 2.5).
    pub replica_lag_time_max_ms: u64,
    /// `min.insync.replicas` (default 1).
    pub min_insync_replicas: usize,
}

impl PartitionConfig {
    /// Sets [`replica_lag_time_max_ms`](Self::replica_lag_time_max_ms).
    #[must_use]
    pub fn with_replica_lag_time_max_ms(mut self, replica_lag_time_max_ms: u64) -> Self {
        self.replica_lag_time_max_ms = replica_lag_time_max_ms;
        self
    }

    /// Sets [`min_insync_replicas`](Self::min_insync_replicas).
    #[must_use]
    pub fn with_min_insync_replicas(mut self, min_insync_replicas: usize) -> Self {
        self.min_insync_replicas = min_insync_replicas;
        self
    }
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: 1,
        }
    }
}

impl PartitionConfig {
    /// How often the ISR shrink check runs: half the lag time.
    pub fn isr_check_interval_ms(&self) -> u64 {
        self.replica_lag_time_max_ms / 2
    }
}

/// The leadership part of a LeaderAndIsr request for one partition (K4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The controller epoch that sent it.
    pub controller_epoch: i32,
    /// The leader.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The ISR.
    pub isr: Vec<BrokerId>,
    /// The partition epoch (state znode version).
    pub partition_epoch: i32,
    /// The assigned replicas.
    pub replicas: Vec<BrokerId>,
}

/// Errors of partition operations; each maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionError {
    /// This broker is not the leader (or not a replica) for the request.
    #[error("not leader or follower")]
    NotLeaderOrFollower,
    /// KIP-320: the request's leader epoch is older than ours.
    #[error("fenced leader epoch: request {request}, current {current}")]
    FencedLeaderEpoch {
        /// The epoch in the request.
        request: i32,
        /// Our epoch.
        current: i32,
    },
    /// KIP-320: the request's leader epoch is newer than ours.
    #[error("unknown leader epoch: request {request}, current {current}")]
    UnknownLeaderEpoch {
        /// The epoch in the request.
        request: i32,
        /// Our epoch.
        current: i32,
    },
    /// A LeaderAndIsr state older than what this partition already applied (K4.2).
    #[error("stale leader epoch {request} (current {current})")]
    StaleLeaderEpoch {
        /// The epoch in the request.
        request: i32,
        /// Our epoch.
        current: i32,
    },
    /// acks=all with fewer in-sync replicas than `min.insync.replicas`.
    #[error("not enough replicas: ISR {isr}, required {required}")]
    NotEnoughReplicas {
        /// Current ISR size.
        isr: usize,
        /// Required size.
        required: usize,
    },
    /// The log refused the operation.
    #[error(transparent)]
    Log(#[from] LogError),
    /// KIP-98: the idempotent-producer checks refused the append (a fenced producer epoch, a
    /// sequence gap).
    #[error(transparent)]
    Producer(#[from] ProducerStateError),
}

impl PartitionError {
    /// The Kafka error code to answer with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            PartitionError::NotLeaderOrFollower => ErrorCode::NotLeaderOrFollower,
            PartitionError::FencedLeaderEpoch { .. } | PartitionError::StaleLeaderEpoch { .. } => {
                ErrorCode::FencedLeaderEpoch
            }
            PartitionError::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
            PartitionError::NotEnoughReplicas { .. } => ErrorCode::NotEnoughReplicas,
            PartitionError::Log(LogError::OffsetOutOfRange { .. }) => ErrorCode::OffsetOutOfRange,
            PartitionError::Log(LogError::InvalidRecords(_)) => ErrorCode::CorruptMessage,
            PartitionError::Log(_) => ErrorCode::KafkaStorageError,
            PartitionError::Producer(e) => e.error_code(),
        }
    }
}

/// A fetch as one partition sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchParams {
    /// The fetching follower, or [`CONSUMER_REPLICA_ID`].
    pub replica_id: BrokerId,
    /// First offset wanted.
    pub fetch_offset: i64,
    /// The follower's log start offset.
    pub log_start_offset: i64,
    /// Byte limit for this partition.
    pub max_bytes: usize,
    /// KIP-74: return the first batch even if it exceeds `max_bytes`.
    pub min_one_batch: bool,
    /// KIP-320 `CurrentLeaderEpoch`, if sent.
    pub current_leader_epoch: Option<i32>,
    /// Fetch v12+ `LastFetchedEpoch`, if sent.
    pub last_fetched_epoch: Option<i32>,
}

/// The result of a fetch read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRead {
    /// Whole batches (empty on a diverging epoch).
    pub records: Bytes,
    /// The leader's high watermark.
    pub high_watermark: i64,
    /// The leader's log end offset.
    pub log_end_offset: i64,
    /// The leader's log start offset.
    pub log_start_offset: i64,
    /// Set when the follower's log diverges from ours: truncate to this epoch's end.
    pub diverging_epoch: Option<EpochEndOffset>,
    /// Whether the HW moved (delayed produces and fetches should be checked).
    pub high_watermark_advanced: bool,
}

/// Where a follower truncated to, and whether it must ask again (KIP-279).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncationState {
    /// The offset truncated to.
    pub offset: i64,
    /// False when the follower truncated to an intermediate point and must send another
    /// OffsetForLeaderEpoch with its new latest epoch.
    pub complete: bool,
}

/// Whether acks=all can be answered for an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckCheck {
    /// Not yet: the HW is below the required offset.
    Pending,
    /// The HW reached it; the error is NONE or NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    Done(ErrorCode),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingIsr {
    proposed: Vec<BrokerId>,
    /// The writer could not tell whether the proposal landed (the store was unreachable,
    /// the session ended, its state did not decode): send it again.
    unknown: bool,
}

/// Switches that restore the 0.8 design, for regression tests and simulations that show what
/// it lost. All off by default; they can only be turned on through
/// `Partition::set_legacy`, which exists with the test-only `never-in-production` feature
/// alone, so a normal build never reaches them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Legacy {
    /// Pre-KIP-101: a new follower truncates its log to its high watermark.
    pub truncate_to_high_watermark: bool,
    /// Pre-KIP-279: OffsetForLeaderEpoch v0 answers an end offset only.
    pub offset_for_leader_epoch_v0: bool,
    /// Pre-KAFKA-7128: ISR expansion only needs the follower at the HW.
    pub expand_isr_at_high_watermark: bool,
}

impl Legacy {
    /// Sets [`truncate_to_high_watermark`](Self::truncate_to_high_watermark).
    #[must_use]
    pub fn with_truncate_to_high_watermark(mut self, truncate_to_high_watermark: bool) -> Self {
        self.truncate_to_high_watermark = truncate_to_high_watermark;
        self
    }

    /// Sets [`offset_for_leader_epoch_v0`](Self::offset_for_leader_epoch_v0).
    #[must_use]
    pub fn with_offset_for_leader_epoch_v0(mut self, offset_for_leader_epoch_v0: bool) -> Self {
        self.offset_for_leader_epoch_v0 = offset_for_leader_epoch_v0;
        self
    }

    /// Sets [`expand_isr_at_high_watermark`](Self::expand_isr_at_high_watermark).
    #[must_use]
    pub fn with_expand_isr_at_high_watermark(mut self, expand_isr_at_high_watermark: bool) -> Self {
        self.expand_isr_at_high_watermark = expand_isr_at_high_watermark;
        self
    }
}

/// One partition's replication state on one broker.
#[derive(Debug)]
pub struct Partition<L> {
    tp: TopicPartition,
    local: BrokerId,
    config: PartitionConfig,
    log: L,
    leader: Option<BrokerId>,
    leader_epoch: i32,
    partition_epoch: i32,
    controller_epoch: i32,
    replicas: Vec<BrokerId>,
    isr: Vec<BrokerId>,
    pending: Option<PendingIsr>,
    outbox: Option<IsrProposal>,
    high_watermark: i64,
    leader_epoch_start_offset: Option<i64>,
    remotes: BTreeMap<BrokerId, ReplicaState>,
    /// KIP-98: the idempotent producers of this log (leader only).
    producers: ProducerStateManager,
    /// Off unless a test turned them on (`never-in-production`).
    pub(crate) legacy: Legacy,
}

mod follower;
mod leader;

impl<L: LogStorage> Partition<L> {
    /// A partition on broker `local` over `log`, neither leader nor follower yet. The high
    /// watermark starts at the log's checkpoint (clamped to the log).
    pub fn new(tp: TopicPartition, local: BrokerId, log: L, config: PartitionConfig) -> Self {
        let high_watermark = log
            .checkpointed_high_watermark()
            .clamp(log.log_start_offset(), log.log_end_offset());
        Partition {
            tp,
            local,
            config,
            log,
            leader: None,
            leader_epoch: -1,
            partition_epoch: -1,
            controller_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            pending: None,
            outbox: None,
            high_watermark,
            leader_epoch_start_offset: None,
            remotes: BTreeMap::new(),
            producers: ProducerStateManager::new(),
            legacy: Legacy::default(),
        }
    }

    /// Turns on the 0.8-design switches (test builds with the `never-in-production` feature
    /// only).
    #[cfg(any(test, feature = "never-in-production"))]
    pub fn set_legacy(&mut self, legacy: Legacy) {
        self.legacy = legacy;
    }

    /// The partition.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// This broker.
    pub fn local_broker(&self) -> BrokerId {
        self.local
    }

    /// The settings.
    pub fn config(&self) -> &PartitionConfig {
        &self.config
    }

    /// The log.
    pub fn log(&self) -> &L {
        &self.log
    }

    /// The idempotent-producer state of this log (KIP-98): kept by the leader's appends,
    /// rebuilt from the log when this replica becomes leader, empty on a follower.
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// Gives the log back (e.g. to simulate a restart).
    pub fn into_log(self) -> L {
        self.log
    }

    /// The current leader, if known.
    pub fn leader(&self) -> Option<BrokerId> {
        self.leader
    }

    /// Whether this broker leads the partition.
    pub fn is_leader(&self) -> bool {
        self.leader == Some(self.local)
    }

    /// The leader epoch applied last.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The partition epoch applied last.
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// The controller epoch of the last applied state.
    pub fn controller_epoch(&self) -> i32 {
        self.controller_epoch
    }

    /// The assigned replicas.
    pub fn replicas(&self) -> &[BrokerId] {
        &self.replicas
    }

    /// The committed ISR (leader only; empty on a follower).
    pub fn isr(&self) -> &[BrokerId] {
        &self.isr
    }

    /// The ISR proposal awaiting an answer, if any.
    pub fn pending_isr(&self) -> Option<&[BrokerId]> {
        self.pending.as_ref().map(|p| p.proposed.as_slice())
    }

    /// The maximal ISR: the committed ISR plus a pending expansion (a pending shrink still
    /// counts the replicas it would remove). This is what the HW and acks use.
    pub fn maximal_isr(&self) -> Vec<BrokerId> {
        let mut isr = self.isr.clone();
        if let Some(p) = &self.pending {
            for id in &p.proposed {
                if !isr.contains(id) {
                    isr.push(*id);
                }
            }
        }
        isr
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The local log end offset.
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// The local log start offset.
    pub fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    /// The start offset of the leader epoch this broker leads, if it leads.
    pub fn leader_epoch_start_offset(&self) -> Option<i64> {
        self.leader_epoch_start_offset
    }

    /// The leader's view of follower `id`.
    pub fn replica_state(&self, id: BrokerId) -> Option<&ReplicaState> {
        self.remotes.get(&id)
    }

    /// Persists the high watermark through the log (K4.4's checkpoint task calls this).
    pub fn checkpoint_high_watermark(&mut self) -> Result<(), PartitionError> {
        self.log.checkpoint_high_watermark(self.high_watermark)?;
        Ok(())
    }

    /// KIP-320, in the order of Kafka's `Partition.getLocalLog`: the request's
    /// `CurrentLeaderEpoch` is checked against this replica's epoch first (older:
    /// FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH), and only an equal (or absent) epoch
    /// goes on to the leadership check (NOT_LEADER_OR_FOLLOWER when `require_leader` and this
    /// replica follows). A follower asked at an epoch it has not seen yet thus tells the client
    /// its metadata is ahead, not that it asked the wrong broker.
    pub fn check_local_replica(
        &self,
        current_leader_epoch: Option<i32>,
        require_leader: bool,
    ) -> Result<(), PartitionError> {
        self.check_leader_epoch(current_leader_epoch)?;
        if require_leader && !self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        Ok(())
    }

    /// Runs retention on the log at wall-clock `now_ms`, below this replica's high watermark
    /// (a leader's or a follower's).
    pub fn apply_retention(
        &mut self,
        now_ms: i64,
        policy: &crate::log::RetentionPolicy,
    ) -> Result<crate::log::RetentionOutcome, PartitionError> {
        Ok(self
            .log
            .apply_retention(now_ms, self.high_watermark, policy)?)
    }

    /// DeleteRecords on the leader (Kafka's `Partition.deleteRecordsOnLeader`): moves the log
    /// start offset forward to `offset` (-1: the high watermark), deleting the segments wholly
    /// below it; followers follow through their fetches. Refused with
    /// NOT_LEADER_OR_FOLLOWER on a follower and OFFSET_OUT_OF_RANGE for an offset beyond the
    /// high watermark (or negative other than -1). Returns the offset the log now starts at
    /// at least (the requested one, or the earlier start when it was already past it).
    pub fn delete_records_on_leader(&mut self, offset: i64) -> Result<i64, PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let target = if offset == -1 {
            self.high_watermark
        } else {
            offset
        };
        if target < 0 || target > self.high_watermark {
            return Err(PartitionError::Log(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log.log_start_offset(),
                log_end_offset: self.log.log_end_offset(),
            }));
        }
        self.log.increment_log_start_offset(target)?;
        Ok(target.max(self.log.log_start_offset()))
    }

    /// The low watermark of a leader (Kafka's `Partition.lowWatermarkIfLeader`): the smallest
    /// log start offset of this replica and of the followers `alive` says are live, as each
    /// follower last reported it in a fetch (-1 until its first fetch of this leadership);
    /// `None` on a follower.
    pub fn low_watermark_if_leader(&self, alive: impl Fn(BrokerId) -> bool) -> Option<i64> {
        if !self.is_leader() {
            return None;
        }
        let local = self.log.log_start_offset();
        Some(
            self.remotes
                .iter()
                .filter(|(id, _)| alive(**id))
                .map(|(_, r)| r.log_start_offset)
                .fold(local, i64::min),
        )
    }

    /// KIP-320: checks a request's `CurrentLeaderEpoch` against ours (`None` or -1: no check).
    pub fn check_leader_epoch(
        &self,
        current_leader_epoch: Option<i32>,
    ) -> Result<(), PartitionError> {
        match current_leader_epoch {
            None => Ok(()),
            Some(e) if e == UNDEFINED_EPOCH => Ok(()),
            Some(e) if e < self.leader_epoch => Err(PartitionError::FencedLeaderEpoch {
                request: e,
                current: self.leader_epoch,
            }),
            Some(e) if e > self.leader_epoch => Err(PartitionError::UnknownLeaderEpoch {
                request: e,
                current: self.leader_epoch,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Sends again a pending proposal whose outcome is unknown: the same compare-and-set on
    /// the same partition epoch either lands, or finds that it had landed (the stored state
    /// equals it), or meets the state that moved on — each an answer that ends the wait, as
    /// Kafka's `AlterIsrManager` resends until it hears back. Without this a leader whose
    /// write was cut off would keep its pending change until a LeaderAndIsr with a newer
    /// leader epoch, which may never come, and the ISR would never grow back.
    pub fn retry_unknown_isr_proposal(&mut self) {
        if !self.is_leader() || self.outbox.is_some() {
            return;
        }
        let Some(pending) = self.pending.as_mut().filter(|p| p.unknown) else {
            return;
        };
        pending.unknown = false;
        self.outbox = Some(IsrProposal {
            topic_partition: self.tp.clone(),
            proposed: LeaderAndIsr {
                leader: self.local,
                leader_epoch: self.leader_epoch,
                isr: pending.proposed.clone(),
                partition_epoch: self.partition_epoch,
            },
        });
    }

    /// The next ISR change to send to the [`IsrWriter`](crate::isr::IsrWriter), once.
    #[must_use = "dropping it loses the ISR write"]
    pub fn poll_isr_proposal(&mut self) -> Option<IsrProposal> {
        self.outbox.take()
    }

    /// Applies the store's answer to `proposal`, if that is the pending proposal (the same
    /// ISR, leader epoch and partition epoch): the answer to an earlier proposal — one sent
    /// before a LeaderAndIsr replaced the leadership, whose write was slow — says nothing
    /// about the current one and is ignored. Applying it would take the state it read for the
    /// outcome of the current proposal, and a pending expansion that then lands would be
    /// forgotten: the HW would pass a replica the store counts in the ISR. On a conflict the
    /// state the store holds is adopted if it is still our leadership (re-read, then retry on
    /// the next check). Returns whether the HW advanced.
    pub fn on_isr_result(&mut self, proposal: &IsrProposal, result: IsrResult) -> bool {
        let answers_pending = self
            .pending
            .as_ref()
            .is_some_and(|p| p.proposed == proposal.proposed.isr)
            && proposal.proposed.leader == self.local
            && proposal.proposed.leader_epoch == self.leader_epoch
            && proposal.proposed.partition_epoch == self.partition_epoch;
        if !answers_pending {
            tracing::debug!(
                topic = %self.tp.topic,
                partition = self.tp.partition,
                leader_epoch = self.leader_epoch,
                ?proposal,
                "answer to an earlier ISR proposal ignored"
            );
            return false;
        }
        let Some(pending) = self.pending.take() else {
            return false;
        };
        self.outbox = None;
        match result {
            IsrResult::Committed { partition_epoch } => {
                tracing::info!(
                    topic = %self.tp.topic,
                    partition = self.tp.partition,
                    leader_epoch = self.leader_epoch,
                    isr = ?pending.proposed,
                    partition_epoch,
                    "ISR updated"
                );
                self.isr = pending.proposed;
                self.partition_epoch = partition_epoch;
            }
            IsrResult::Conflict { current } => {
                tracing::info!(
                    topic = %self.tp.topic,
                    partition = self.tp.partition,
                    leader_epoch = self.leader_epoch,
                    ?current,
                    "ISR update conflicted"
                );
                match current {
                    Some(c) if c.leader == self.local && c.leader_epoch == self.leader_epoch => {
                        self.isr = c.isr;
                        self.partition_epoch = c.partition_epoch;
                    }
                    // Another writer moved the state on. A retry of this proposal may have been
                    // applied before that (its answer lost), so the proposed ISR may be what the
                    // store holds: keep the maximal ISR until the next LeaderAndIsr says what
                    // the state is, as Kafka does on FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION.
                    // Dropping it would let the HW pass a replica the store counts as in sync.
                    // Without a current state the outcome is unknown: the proposal is sent
                    // again ([`Partition::retry_unknown_isr_proposal`]).
                    current => {
                        self.pending = Some(PendingIsr {
                            unknown: current.is_none(),
                            ..pending
                        });
                        return false;
                    }
                }
            }
        }
        self.is_leader() && self.maybe_increment_leader_hw()
    }

    fn propose_isr(&mut self, isr: Vec<BrokerId>) {
        let proposal = IsrProposal {
            topic_partition: self.tp.clone(),
            proposed: LeaderAndIsr {
                leader: self.local,
                leader_epoch: self.leader_epoch,
                isr: isr.clone(),
                partition_epoch: self.partition_epoch,
            },
        };
        self.pending = Some(PendingIsr {
            proposed: isr,
            unknown: false,
        });
        self.outbox = Some(proposal);
    }

    /// Rejects a LeaderAndIsr state older than the applied one (K4.2 at partition level).
    fn check_state_is_newer(&self, state: &PartitionState) -> Result<(), PartitionError> {
        if state.leader_epoch < self.leader_epoch
            || (state.leader_epoch == self.leader_epoch
                && state.partition_epoch < self.partition_epoch)
        {
            return Err(PartitionError::StaleLeaderEpoch {
                request: state.leader_epoch,
                current: self.leader_epoch,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
