//! The follower side of [`Partition`]: becoming follower, truncation by leader epoch
//! (KIP-101, KIP-279, Fetch v12 diverging epochs), appends of fetched data and the follower HW.

use bytes::Bytes;

use super::{Partition, PartitionError, PartitionState, TruncationState};
use crate::epoch_cache::{EpochEndOffset, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
use crate::log::{LogAppendInfo, LogStorage};

impl<L: LogStorage> Partition<L> {
    /// K4.3 `makeFollower`: applies `state` with another broker as leader. Leader-side state
    /// (ISR, follower states, epoch start offset) is dropped. The log is **not** truncated
    /// here (KIP-101): the fetcher truncates by leader epoch before fetching. The
    /// idempotent-producer state is dropped (rebuilt from the log on leading again). Returns whether
    /// the leader or its epoch changed, i.e. whether the fetcher must (re)start and truncate.
    pub fn make_follower(&mut self, state: &PartitionState) -> Result<bool, PartitionError> {
        self.check_state_is_newer(state)?;
        let changed = self.leader != Some(state.leader) || state.leader_epoch != self.leader_epoch;
        self.controller_epoch = state.controller_epoch;
        self.replicas = state.replicas.clone();
        self.isr.clear();
        self.pending = None;
        self.outbox = None;
        self.remotes.clear();
        self.leader_epoch_start_offset = None;
        // KIP-98: the log moves on under another leader; rebuilt on leading again.
        self.producers.clear();
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        self.leader = (state.leader >= 0).then_some(state.leader);
        if self.legacy.truncate_to_high_watermark && changed {
            self.log.truncate_to(self.high_watermark)?;
        }
        tracing::info!(
            topic = %self.tp.topic,
            partition = self.tp.partition,
            leader_epoch = state.leader_epoch,
            broker = state.leader,
            "became follower"
        );
        Ok(changed)
    }

    /// The epoch a follower asks OffsetForLeaderEpoch about (and sends as `LastFetchedEpoch`):
    /// the latest epoch in its log, or [`UNDEFINED_EPOCH`].
    pub fn latest_epoch(&self) -> i32 {
        self.log
            .epoch_cache()
            .latest_epoch()
            .unwrap_or(UNDEFINED_EPOCH)
    }

    /// Truncates after the leader answered OffsetForLeaderEpoch (or sent a diverging epoch)
    /// with `leader`: the largest epoch ≤ the one asked and its end offset.
    ///
    /// - undefined end offset: the leader has no epochs; truncate to the HW;
    /// - the follower does not have the leader's epoch: truncate to the end of its own largest
    ///   smaller epoch and ask again ([`TruncationState::complete`] is false) — KIP-279;
    /// - same epoch: truncate to the smaller of both ends of it.
    pub fn truncate_to_leader_epoch(
        &mut self,
        leader: EpochEndOffset,
    ) -> Result<TruncationState, PartitionError> {
        let leo = self.log.log_end_offset();
        #[allow(unused_mut)]
        let mut leader = leader;
        if self.legacy.offset_for_leader_epoch_v0 {
            leader.epoch = UNDEFINED_EPOCH;
        }
        let state = if leader.end_offset == UNDEFINED_EPOCH_OFFSET {
            TruncationState {
                offset: self.high_watermark.min(leo),
                complete: true,
            }
        } else if leader.epoch == UNDEFINED_EPOCH {
            TruncationState {
                offset: leader.end_offset.min(leo),
                complete: true,
            }
        } else {
            let own = self.log.epoch_cache().end_offset_for(leader.epoch, leo);
            if own.is_undefined() {
                TruncationState {
                    offset: leader.end_offset.min(leo),
                    complete: true,
                }
            } else if own.epoch != leader.epoch {
                TruncationState {
                    offset: own.end_offset.min(leo),
                    complete: false,
                }
            } else {
                TruncationState {
                    offset: own.end_offset.min(leader.end_offset).min(leo),
                    complete: true,
                }
            }
        };
        if state.offset < self.high_watermark {
            tracing::warn!(
                topic = %self.tp.topic,
                partition = self.tp.partition,
                leader_epoch = self.leader_epoch,
                offset = state.offset,
                high_watermark = self.high_watermark,
                "truncating below the high watermark"
            );
        }
        if state.offset < leo {
            tracing::info!(
                topic = %self.tp.topic,
                partition = self.tp.partition,
                leader_epoch = self.leader_epoch,
                offset = state.offset,
                "truncating by leader epoch"
            );
        }
        self.log.truncate_to(state.offset)?;
        self.high_watermark = self.high_watermark.min(self.log.log_end_offset());
        Ok(state)
    }

    /// Appends data fetched from the leader and sets the follower HW to
    /// `min(leader HW, own LEO)`.
    pub fn append_as_follower(
        &mut self,
        records: Bytes,
        leader_high_watermark: i64,
    ) -> Result<Option<LogAppendInfo>, PartitionError> {
        if self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let info = if records.is_empty() {
            None
        } else {
            Some(self.log.append_as_follower(records)?)
        };
        self.update_follower_high_watermark(leader_high_watermark);
        Ok(info)
    }

    /// A follower learns the leader's log start offset from its Fetch answers and moves its
    /// own forward to it, never past its own high watermark (Kafka's
    /// `maybeIncrementLogStartOffset` with `LeaderOffsetIncremented`); whole segments below
    /// it are deleted. Returns whether it moved.
    pub fn update_follower_log_start_offset(
        &mut self,
        leader_log_start_offset: i64,
    ) -> Result<bool, PartitionError> {
        if self.is_leader() || leader_log_start_offset < 0 {
            return Ok(false);
        }
        let target = leader_log_start_offset.min(self.high_watermark);
        Ok(self.log.increment_log_start_offset(target)?)
    }

    /// Kafka's `handleOutOfRangeError` for a follower whose next offset lies below the
    /// leader's log start offset (the leader deleted those records by retention while this
    /// replica was away): the log is emptied and starts again at the leader's log start
    /// offset, which becomes the follower's high watermark too. Returns whether it did; a
    /// follower at or above the leader's start is left alone (its divergence, if any, is
    /// handled by leader-epoch truncation).
    pub fn reset_below_leader_log_start(
        &mut self,
        leader_log_start_offset: i64,
    ) -> Result<bool, PartitionError> {
        if self.is_leader()
            || leader_log_start_offset < 0
            || self.log.log_end_offset() >= leader_log_start_offset
        {
            return Ok(false);
        }
        self.log
            .truncate_fully_and_start_at(leader_log_start_offset)?;
        self.high_watermark = leader_log_start_offset;
        Ok(true)
    }

    /// Follower HW = `min(leader HW, own LEO)`.
    pub fn update_follower_high_watermark(&mut self, leader_high_watermark: i64) {
        self.high_watermark = leader_high_watermark
            .min(self.log.log_end_offset())
            .max(self.log.log_start_offset());
    }
}
