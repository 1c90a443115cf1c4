//! [`MemoryLog`]: a [`LogStorage`] held in memory, for tests, simulations and examples.

use bytes::{Bytes, BytesMut};
use kafka_wire::records::RecordBatch;

use super::retention::{deletable_prefix, RetentionOutcome, RetentionPolicy, SegmentInfo};
use super::{
    check_follower_order, learn_epochs, split_batches, stamp_as_leader, LogAppendInfo, LogError,
    LogStorage,
};
use crate::epoch_cache::LeaderEpochCache;

/// A log held in memory: a vector of validated batches and a leader-epoch cache.
#[derive(Debug, Clone, Default)]
pub struct MemoryLog {
    batches: Vec<RecordBatch>,
    /// The next offset of each batch of `batches`, side by side: finding the batch of an
    /// offset searches this contiguous vector instead of reading every probed batch's header.
    next_offsets: Vec<i64>,
    log_start_offset: i64,
    log_end_offset: i64,
    epochs: LeaderEpochCache,
    high_watermark_checkpoint: i64,
}

impl MemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The batches held, oldest first.
    pub fn batches(&self) -> &[RecordBatch] {
        &self.batches
    }

    /// The batches a read returns, and their total size: whole batches from the one holding
    /// `offset`, none reaching `max_offset`, at most `max_bytes` (at least one batch with
    /// `min_one_batch`).
    fn pick(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<(&[RecordBatch], usize), LogError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let first = self.next_offsets.partition_point(|n| *n <= offset);
        let mut last = first;
        let mut size = 0usize;
        for b in &self.batches[first..] {
            if b.next_offset() > max_offset {
                break;
            }
            if size + b.size() > max_bytes && !(last == first && min_one_batch) {
                break;
            }
            size += b.size();
            last += 1;
        }
        Ok((&self.batches[first..last], size))
    }

    fn push(&mut self, batches: Vec<RecordBatch>) -> LogAppendInfo {
        let first_offset = batches
            .first()
            .map_or(self.log_end_offset, RecordBatch::base_offset);
        let mut info = LogAppendInfo {
            first_offset,
            last_offset: first_offset,
            batches: batches.len(),
            bytes: 0,
        };
        for b in batches {
            info.last_offset = b.last_offset();
            info.bytes += b.size();
            self.log_end_offset = b.next_offset();
            self.next_offsets.push(b.next_offset());
            self.batches.push(b);
        }
        info
    }
}

impl LogStorage for MemoryLog {
    fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, LogError> {
        let batches = stamp_as_leader(records, self.log_end_offset, leader_epoch)?;
        if leader_epoch >= 0 && self.epochs.latest_epoch() != Some(leader_epoch) {
            self.epochs.assign(leader_epoch, self.log_end_offset)?;
        }
        Ok(self.push(batches))
    }

    fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, LogError> {
        let batches = split_batches(records)?;
        check_follower_order(&batches, self.log_end_offset)?;
        learn_epochs(&mut self.epochs, &batches)?;
        Ok(self.push(batches))
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Bytes, LogError> {
        let (picked, size) = self.pick(offset, max_bytes, max_offset, min_one_batch)?;
        Ok(match picked {
            [] => Bytes::new(),
            [one] => one.as_bytes().clone(),
            many => {
                crate::data_path::count_copy(crate::data_path::CopyStep::LogRead, size);
                let mut buf = BytesMut::with_capacity(size);
                for b in many {
                    buf.extend_from_slice(b.as_bytes());
                }
                buf.freeze()
            }
        })
    }

    fn readable_bytes(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<usize, LogError> {
        self.pick(offset, max_bytes, max_offset, min_one_batch)
            .map(|(_, size)| size)
    }

    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        if offset >= self.log_end_offset {
            // An epoch entry without data (a leader that wrote nothing) may still conflict.
            self.epochs.truncate_from_end(self.log_end_offset);
            return Ok(());
        }
        // Batches are contiguous: a batch's last offset is below `offset` exactly when its
        // next offset is at most `offset`.
        let keep = self.next_offsets.partition_point(|n| *n <= offset);
        self.batches.truncate(keep);
        self.next_offsets.truncate(keep);
        self.log_end_offset = self
            .batches
            .last()
            .map_or(self.log_start_offset, RecordBatch::next_offset);
        self.epochs.truncate_from_end(self.log_end_offset);
        Ok(())
    }

    fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    fn assign_epoch_start(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        self.epochs.assign(epoch, start_offset)?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        Ok(())
    }

    fn checkpoint_high_watermark(&mut self, high_watermark: i64) -> Result<(), LogError> {
        self.high_watermark_checkpoint = high_watermark;
        Ok(())
    }

    fn checkpointed_high_watermark(&self) -> i64 {
        self.high_watermark_checkpoint
    }

    /// Retention with each batch standing for a segment (the newest one active).
    fn apply_retention(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        policy: &RetentionPolicy,
    ) -> Result<RetentionOutcome, LogError> {
        let infos: Vec<SegmentInfo> = self
            .batches
            .iter()
            .map(|b| SegmentInfo {
                next_offset: b.next_offset(),
                size: b.size() as u64,
                max_timestamp: b.max_timestamp(),
            })
            .collect();
        let n = deletable_prefix(
            &infos,
            now_ms,
            high_watermark,
            self.log_start_offset,
            policy,
        );
        let bytes = self.batches.drain(..n).map(|b| b.size() as u64).sum();
        self.next_offsets.drain(..n);
        if let Some(first) = self.batches.first() {
            self.log_start_offset = self.log_start_offset.max(first.base_offset());
        }
        Ok(RetentionOutcome {
            segments_deleted: n,
            bytes_deleted: bytes,
            log_start_offset: self.log_start_offset,
        })
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.batches.clear();
        self.next_offsets.clear();
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.epochs = LeaderEpochCache::new();
        self.high_watermark_checkpoint = offset;
        Ok(())
    }

    fn increment_log_start_offset(&mut self, offset: i64) -> Result<bool, LogError> {
        let offset = offset.min(self.log_end_offset);
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = offset;
        let below = self
            .batches
            .iter()
            .take(self.batches.len().saturating_sub(1))
            .take_while(|b| b.next_offset() <= offset)
            .count();
        self.batches.drain(..below);
        self.next_offsets.drain(..below);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::batch;

    /// The operations a log goes through, for the property below.
    #[derive(Debug, Clone)]
    enum Op {
        Append(usize),
        Truncate(i64),
        Retention(u64),
        StartAt(i64),
        IncrementStart(i64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1usize..4).prop_map(Op::Append),
            1 => (0i64..40).prop_map(Op::Truncate),
            1 => (0u64..2_000).prop_map(Op::Retention),
            1 => (0i64..40).prop_map(Op::StartAt),
            1 => (0i64..40).prop_map(Op::IncrementStart),
        ]
    }

    /// The batch a read starts from, found by scanning the batches themselves (the search
    /// the side vector of next offsets replaces).
    fn scanned_read(log: &MemoryLog, offset: i64, max_offset: i64) -> Bytes {
        let mut out = BytesMut::new();
        for b in log
            .batches()
            .iter()
            .skip_while(|b| b.next_offset() <= offset)
        {
            if b.next_offset() > max_offset {
                break;
            }
            out.extend_from_slice(b.as_bytes());
        }
        out.freeze()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// After any sequence of appends, truncations, retention and log-start moves, every
        /// read and every readable-bytes count equals what scanning the batches gives, and the
        /// side vector holds exactly the batches' next offsets.
        #[test]
        fn reads_through_the_next_offset_vector_equal_a_scan_of_the_batches(
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            let mut log = MemoryLog::new();
            for op in ops {
                let _ = match op {
                    Op::Append(n) => log.append_as_leader(batch(n), 1).map(|_| ()),
                    Op::Truncate(at) => log.truncate_to(at),
                    Op::Retention(bytes) => log
                        .apply_retention(0, log.log_end_offset(), &RetentionPolicy::keep_all()
                            .with_retention_bytes(bytes as i64))
                        .map(|_| ()),
                    Op::StartAt(at) => log.truncate_fully_and_start_at(at),
                    Op::IncrementStart(at) => log.increment_log_start_offset(at).map(|_| ()),
                };
                let ends: Vec<i64> = log.batches().iter().map(RecordBatch::next_offset).collect();
                proptest::prop_assert_eq!(&ends, &log.next_offsets);
                let (start, end) = (log.log_start_offset(), log.log_end_offset());
                for offset in start..=end {
                    let read = log.read(offset, usize::MAX, end, false);
                    let read = read.map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
                    proptest::prop_assert_eq!(&read, &scanned_read(&log, offset, end));
                    let counted = log.readable_bytes(offset, usize::MAX, end, false);
                    proptest::prop_assert_eq!(counted.ok(), Some(read.len()));
                }
            }
        }
    }
}
