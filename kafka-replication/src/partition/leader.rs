//! The leader side of [`Partition`]: becoming leader, appends, follower fetches (K8.1, K8.2),
//! the high watermark, ISR shrink and expansion, acks.

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;

use super::{
    AckCheck, FetchParams, FetchRead, Partition, PartitionError, PartitionState, ReplicaState,
    CONSUMER_REPLICA_ID,
};
use crate::epoch_cache::EpochEndOffset;
use crate::isr::BrokerId;
use crate::log::{LogAppendInfo, LogStorage};
use crate::producer_state::{ProducerBatch, Verdict};

impl<L: LogStorage> Partition<L> {
    /// K4.3 `makeLeader`: applies `state` with this broker as leader. On a new leader epoch
    /// the epoch's start offset is this log's end, written to the epoch cache (KAFKA-7415),
    /// and every follower's state is reset (caught up now if in the ISR). A replica that was
    /// not leading rebuilds its idempotent-producer state from its log (KIP-98), so that a
    /// retry of a batch appended under the previous leader is known as one. Returns whether
    /// the high watermark advanced.
    pub fn make_leader(
        &mut self,
        now_ms: u64,
        state: &PartitionState,
    ) -> Result<bool, PartitionError> {
        self.check_state_is_newer(state)?;
        let was_leader = self.is_leader();
        let new_epoch = state.leader_epoch > self.leader_epoch || !was_leader;
        self.controller_epoch = state.controller_epoch;
        self.replicas = state.replicas.clone();
        self.isr = state.isr.clone();
        self.pending = None;
        self.outbox = None;
        self.partition_epoch = state.partition_epoch;
        self.leader_epoch = state.leader_epoch;
        self.leader = Some(self.local);
        self.remotes.retain(|id, _| state.replicas.contains(id));
        if !was_leader {
            self.producers.rebuild(&self.log);
        }
        if new_epoch {
            let start = self.log.log_end_offset();
            self.log.assign_epoch_start(state.leader_epoch, start)?;
            self.leader_epoch_start_offset = Some(start);
            self.remotes.clear();
            for &id in &state.replicas {
                if id != self.local {
                    let in_isr = state.isr.contains(&id);
                    self.remotes
                        .insert(id, ReplicaState::at_leadership_start(start, now_ms, in_isr));
                }
            }
            tracing::info!(
                topic = %self.tp.topic,
                partition = self.tp.partition,
                leader_epoch = state.leader_epoch,
                epoch_start_offset = start,
                high_watermark = self.high_watermark,
                "became leader"
            );
        } else {
            for &id in &state.replicas {
                if id != self.local && !self.remotes.contains_key(&id) {
                    let start = self.leader_epoch_start_offset.unwrap_or(0);
                    self.remotes
                        .insert(id, ReplicaState::at_leadership_start(start, now_ms, false));
                }
            }
        }
        Ok(self.maybe_increment_leader_hw())
    }

    /// `min(min.insync.replicas, replication factor)`.
    pub fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.replicas.len().max(1))
    }

    /// Appends `records` as leader. With `required_acks == -1` the append is refused before
    /// writing if the ISR is smaller than `min.insync.replicas` (NOT_ENOUGH_REPLICAS). Returns
    /// what was written and whether the HW advanced (an ISR of one).
    ///
    /// Idempotent batches go through the producer state first (KIP-98, Kafka's
    /// `analyzeAndValidateProducerState`): a retry of one of a producer's last five batches is
    /// not written again — the info then carries the original batch's offsets and 0 batches /
    /// 0 bytes written — and a fenced epoch or a sequence gap is refused
    /// ([`PartitionError::Producer`]).
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        required_acks: i16,
    ) -> Result<(LogAppendInfo, bool), PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let required = self.effective_min_isr();
        if required_acks == -1 && self.isr.len() < required {
            return Err(PartitionError::NotEnoughReplicas {
                isr: self.isr.len(),
                required,
            });
        }
        let producer_batches = ProducerBatch::all_of(&records);
        if let Some(batches) = &producer_batches {
            match self.producers.check(batches) {
                Verdict::Append => {}
                Verdict::Duplicate(original) => {
                    tracing::debug!(
                        topic = %self.tp.topic,
                        partition = self.tp.partition,
                        leader_epoch = self.leader_epoch,
                        first_seq = original.first_seq,
                        base_offset = original.first_offset,
                        "retried batch answered from the producer state"
                    );
                    let info = LogAppendInfo {
                        first_offset: original.first_offset,
                        last_offset: original.last_offset,
                        batches: 0,
                        bytes: 0,
                    };
                    return Ok((info, false));
                }
                Verdict::Refuse(e) => {
                    tracing::debug!(
                        topic = %self.tp.topic,
                        partition = self.tp.partition,
                        error = %e,
                        "produce refused by the producer state"
                    );
                    return Err(e.into());
                }
            }
        }
        let info = self.log.append_as_leader(records, self.leader_epoch)?;
        if let Some(batches) = &producer_batches {
            self.producers.record(batches, info.first_offset);
        }
        Ok((info, self.maybe_increment_leader_hw()))
    }

    /// acks=all completion: done once the HW reaches `required_offset` (last offset + 1), with
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR shrank below `min.insync.replicas`.
    pub fn check_enough_replicas_reach_offset(
        &self,
        required_offset: i64,
    ) -> Result<AckCheck, PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        if self.high_watermark < required_offset {
            return Ok(AckCheck::Pending);
        }
        Ok(AckCheck::Done(
            if self.maximal_isr().len() >= self.config.min_insync_replicas {
                ErrorCode::None
            } else {
                ErrorCode::NotEnoughReplicasAfterAppend
            },
        ))
    }

    /// OffsetForLeaderEpoch on the leader (KIP-279, KIP-320 fenced, the epoch checked before
    /// the leadership): the largest epoch ≤ `requested_epoch` and its end offset.
    pub fn last_offset_for_leader_epoch(
        &self,
        current_leader_epoch: Option<i32>,
        requested_epoch: i32,
    ) -> Result<EpochEndOffset, PartitionError> {
        self.check_local_replica(current_leader_epoch, true)?;
        Ok(self
            .log
            .epoch_cache()
            .end_offset_for(requested_epoch, self.log.log_end_offset()))
    }

    /// Fetch v12+: the epoch end the follower must truncate to when `(last_fetched_epoch,
    /// fetch_offset)` is not a prefix of our log.
    pub fn diverging_epoch(
        &self,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> Option<EpochEndOffset> {
        let end = self
            .log
            .epoch_cache()
            .end_offset_for(last_fetched_epoch, self.log.log_end_offset());
        (end.epoch < last_fetched_epoch || end.end_offset < fetch_offset).then_some(end)
    }

    /// K8.1 + K8.2: serves a fetch on the leader. Followers read up to the LEO, consumers up
    /// to the HW; a follower's fetch updates its state, may expand the ISR and may advance
    /// the HW. KIP-320 fencing and the diverging-epoch check come first.
    pub fn fetch_records(
        &mut self,
        now_ms: u64,
        params: &FetchParams,
    ) -> Result<FetchRead, PartitionError> {
        let mut read = self.read_records(params)?;
        if params.replica_id != CONSUMER_REPLICA_ID && read.diverging_epoch.is_none() {
            read.high_watermark_advanced = self.update_follower_fetch_state(
                now_ms,
                params.replica_id,
                params.fetch_offset,
                params.log_start_offset,
                read.log_end_offset,
            );
            read.high_watermark = self.high_watermark;
        }
        Ok(read)
    }

    /// K8.1 alone: reads for a fetch without recording anything (a delayed fetch re-reads
    /// this way when it completes).
    pub fn read_records(&self, params: &FetchParams) -> Result<FetchRead, PartitionError> {
        self.check_local_replica(params.current_leader_epoch, true)?;
        let from_follower = params.replica_id != CONSUMER_REPLICA_ID;
        if from_follower && !self.remotes.contains_key(&params.replica_id) {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let leader_end_offset = self.log.log_end_offset();
        let mut read = FetchRead {
            records: Bytes::new(),
            high_watermark: self.high_watermark,
            log_end_offset: leader_end_offset,
            log_start_offset: self.log.log_start_offset(),
            diverging_epoch: None,
            high_watermark_advanced: false,
        };
        if let Some(last_fetched_epoch) = params.last_fetched_epoch.filter(|e| *e >= 0) {
            if let Some(diverging) = self.diverging_epoch(params.fetch_offset, last_fetched_epoch) {
                // The follower's position is not on our log: nothing is recorded for it.
                read.diverging_epoch = Some(diverging);
                return Ok(read);
            }
        }
        let max_offset = if from_follower {
            leader_end_offset
        } else {
            self.high_watermark
        };
        read.records = self.log.read(
            params.fetch_offset,
            params.max_bytes,
            max_offset,
            params.min_one_batch,
        )?;
        Ok(read)
    }

    /// K8.2: records follower `id`'s fetch at `fetch_offset` (its LEO) made while the leader's
    /// LEO was `leader_end_offset`; may propose an ISR expansion; returns whether the HW moved.
    pub fn update_follower_fetch_state(
        &mut self,
        now_ms: u64,
        id: BrokerId,
        fetch_offset: i64,
        follower_log_start_offset: i64,
        leader_end_offset: i64,
    ) -> bool {
        let Some(replica) = self.remotes.get_mut(&id) else {
            return false;
        };
        let previous = replica.log_end_offset;
        replica.update_fetch_state(
            fetch_offset,
            follower_log_start_offset,
            now_ms,
            leader_end_offset,
        );
        if self.pending.is_none() && !self.isr.contains(&id) {
            self.maybe_expand_isr(id);
        }
        previous != fetch_offset && self.maybe_increment_leader_hw()
    }

    /// Whether follower `id` may join the ISR: at or past the HW and — KAFKA-7128 — at or past
    /// the start offset of the leader's current epoch.
    pub fn is_follower_eligible_for_isr(&self, id: BrokerId) -> bool {
        let Some(r) = self.remotes.get(&id) else {
            return false;
        };
        let at_hw = r.log_end_offset >= self.high_watermark;
        if self.legacy.expand_isr_at_high_watermark {
            return at_hw;
        }
        at_hw
            && self
                .leader_epoch_start_offset
                .is_some_and(|s| r.log_end_offset >= s)
    }

    fn maybe_expand_isr(&mut self, id: BrokerId) {
        if !self.is_follower_eligible_for_isr(id) || !self.replicas.contains(&id) {
            return;
        }
        let mut isr = self.isr.clone();
        isr.push(id);
        tracing::info!(
            topic = %self.tp.topic,
            partition = self.tp.partition,
            leader_epoch = self.leader_epoch,
            broker = id,
            "expanding ISR"
        );
        self.propose_isr(isr);
    }

    /// The ISR shrink check, run every `replica.lag.time.max.ms / 2`: followers in the ISR
    /// that are not caught up are proposed for removal. Returns whether a proposal was made.
    pub fn maybe_shrink_isr(&mut self, now_ms: u64) -> bool {
        if !self.is_leader() || self.pending.is_some() {
            return false;
        }
        let leo = self.log.log_end_offset();
        let lag = self.config.replica_lag_time_max_ms;
        let out: Vec<BrokerId> = self
            .isr
            .iter()
            .copied()
            .filter(|id| *id != self.local)
            .filter(|id| {
                !self
                    .remotes
                    .get(id)
                    .is_some_and(|r| r.is_caught_up(leo, now_ms, lag))
            })
            .collect();
        if out.is_empty() {
            return false;
        }
        tracing::info!(
            topic = %self.tp.topic,
            partition = self.tp.partition,
            leader_epoch = self.leader_epoch,
            out_of_sync = ?out,
            "shrinking ISR"
        );
        let isr = self
            .isr
            .iter()
            .copied()
            .filter(|id| !out.contains(id))
            .collect();
        self.propose_isr(isr);
        true
    }

    /// HW = min(leader LEO, LEO of every follower in the maximal ISR); it only moves forward.
    pub(crate) fn maybe_increment_leader_hw(&mut self) -> bool {
        let mut new_hw = self.log.log_end_offset();
        for id in self.maximal_isr() {
            if id == self.local {
                continue;
            }
            let leo = self
                .remotes
                .get(&id)
                .map_or(super::UNKNOWN_OFFSET, |r| r.log_end_offset);
            new_hw = new_hw.min(leo);
        }
        if new_hw > self.high_watermark {
            tracing::debug!(
                topic = %self.tp.topic,
                partition = self.tp.partition,
                leader_epoch = self.leader_epoch,
                high_watermark = new_hw,
                "high watermark advanced"
            );
            self.high_watermark = new_hw;
            true
        } else {
            false
        }
    }
}
