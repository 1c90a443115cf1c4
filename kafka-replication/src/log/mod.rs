//! Partition logs: the [`LogStorage`] trait a broker's partitions are written through, with an
//! in-memory implementation ([`MemoryLog`]) and a segmented file log ([`FileLog`]).
//!
//! A log holds whole magic-v2 record batches (the `kafka-wire` [`RecordBatch`] view). A leader
//! append assigns offsets from the log end offset and stamps the leader epoch into every batch
//! (KIP-101) and records the epoch in the [`LeaderEpochCache`]; a follower append keeps the
//! leader's offsets and epochs. Reads return whole batches as `Bytes`.

pub mod checkpoint;
mod file;
mod memory;
pub mod retention;

pub use file::{FileLog, FileLogConfig, FlushPolicy};
pub use memory::MemoryLog;
pub use retention::{RetentionOutcome, RetentionPolicy};

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{rewrite_record_set, RecordBatch, RecordBatches};
use kafka_wire::DecodeError;

use crate::epoch_cache::{EpochCacheError, LeaderEpochCache};

/// What an append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAppendInfo {
    /// Offset of the first record written.
    pub first_offset: i64,
    /// Offset of the last record written.
    pub last_offset: i64,
    /// Number of batches written.
    pub batches: usize,
    /// Number of bytes written.
    pub bytes: usize,
}

/// Errors of a log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The record set is not a sequence of valid batches (bad CRC, bad lengths, partial tail).
    #[error("invalid record set: {0}")]
    InvalidRecords(#[from] DecodeError),
    /// An append with no batch in it.
    #[error("empty record set")]
    EmptyRecords,
    /// A follower append whose offsets do not continue the log.
    #[error("out-of-order offsets: batch at {base_offset}, log end offset {log_end_offset}")]
    OutOfOrderOffsets {
        /// The batch's base offset.
        base_offset: i64,
        /// The log end offset it had to reach.
        log_end_offset: i64,
    },
    /// A read outside `[log start, log end]` (Kafka's OFFSET_OUT_OF_RANGE).
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The log start offset.
        log_start_offset: i64,
        /// The log end offset.
        log_end_offset: i64,
    },
    /// An invalid leader-epoch entry.
    #[error(transparent)]
    EpochCache(#[from] EpochCacheError),
    /// A file operation failed.
    #[error("log I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// A partition's log.
///
/// Implementations are synchronous: a broker calls them from its request handlers, as Kafka
/// does; the high-watermark checkpoint lives here too so one object holds a partition's durable
/// state.
pub trait LogStorage {
    /// The first offset still in the log.
    fn log_start_offset(&self) -> i64;

    /// The offset the next record will get (LEO).
    fn log_end_offset(&self) -> i64;

    /// Appends `records` as the leader of `leader_epoch`: offsets are assigned from the log
    /// end offset and the epoch is stamped into every batch (KIP-101).
    fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, LogError>;

    /// Appends batches fetched from the leader as they are (offsets and epochs kept); they
    /// must continue exactly at the log end offset.
    fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, LogError>;

    /// Reads whole batches from the one holding `offset`, up to `max_bytes`, never a batch
    /// that reaches `max_offset` (the HW for consumers, the LEO for followers). With
    /// `min_one_batch` the first batch is returned even if larger than `max_bytes` (KIP-74).
    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Bytes, LogError>;

    /// The length [`LogStorage::read`] with the same arguments would return, without reading
    /// or copying the records (K8.5: a delayed fetch counts readable bytes on every check, as
    /// Kafka's `DelayedFetch` compares log positions). The default reads; logs that know their
    /// batch positions answer from them.
    fn readable_bytes(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<usize, LogError> {
        self.read(offset, max_bytes, max_offset, min_one_batch)
            .map(|b| b.len())
    }

    /// Removes every batch holding an offset ≥ `offset` and the epoch entries starting at or
    /// after the new end (even when no batch goes: a leader may have assigned an epoch and
    /// written nothing).
    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError>;

    /// The leader-epoch cache.
    fn epoch_cache(&self) -> &LeaderEpochCache;

    /// Records that `epoch` starts at `start_offset` (a new leader does it on election,
    /// KAFKA-7415) and persists the cache.
    fn assign_epoch_start(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError>;

    /// Makes everything appended so far durable.
    fn flush(&mut self) -> Result<(), LogError>;

    /// Persists the high watermark (Kafka's `replication-offset-checkpoint`).
    fn checkpoint_high_watermark(&mut self, high_watermark: i64) -> Result<(), LogError>;

    /// The last persisted high watermark (0 if none).
    fn checkpointed_high_watermark(&self) -> i64;

    /// Removes whole segments per `policy` at wall-clock time `now_ms`, never one holding an
    /// offset at or above `high_watermark` nor the active one, and advances the log start
    /// offset to the first remaining offset ([`retention`]). The default keeps everything.
    fn apply_retention(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        policy: &RetentionPolicy,
    ) -> Result<RetentionOutcome, LogError> {
        let _ = (now_ms, high_watermark, policy);
        Ok(RetentionOutcome {
            log_start_offset: self.log_start_offset(),
            ..RetentionOutcome::default()
        })
    }

    /// Empties the log and makes `offset` both its start and its end, dropping the leader-epoch
    /// cache: what a follower does when its next offset is below the leader's log start
    /// offset (Kafka's `truncateFullyAndStartAt`, from `handleOutOfRangeError`).
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError>;

    /// Moves the log start offset forward to `offset` (at most the log end offset), as a
    /// follower does with the leader's log start offset (Kafka's
    /// `maybeIncrementLogStartOffset`); segments wholly below it are deleted. Returns whether
    /// it moved. The default cannot move it.
    fn increment_log_start_offset(&mut self, offset: i64) -> Result<bool, LogError> {
        let _ = offset;
        Ok(false)
    }
}

/// Checks every batch of `records` (CRC included); the set must end on a batch boundary.
pub(crate) fn split_batches(records: Bytes) -> Result<Vec<RecordBatch>, LogError> {
    let mut it = RecordBatches::new(records);
    let mut batches = Vec::new();
    for b in it.by_ref() {
        batches.push(b?);
    }
    if it.has_partial_tail() {
        return Err(LogError::InvalidRecords(DecodeError::Truncated {
            needed: it.remaining().len() + 1,
            remaining: it.remaining().len(),
        }));
    }
    if batches.is_empty() {
        return Err(LogError::EmptyRecords);
    }
    Ok(batches)
}

/// Validates `records`, then assigns offsets from `first_offset` and stamps `leader_epoch`.
pub(crate) fn stamp_as_leader(
    records: Bytes,
    first_offset: i64,
    leader_epoch: i32,
) -> Result<Vec<RecordBatch>, LogError> {
    split_batches(records.clone())?;
    // The one copy a leader makes of produced records: the offsets and the epoch are written
    // into it.
    crate::data_path::count_copy(crate::data_path::CopyStep::LeaderAppend, records.len());
    let mut buf = BytesMut::from(&records[..]);
    rewrite_record_set(&mut buf, first_offset, leader_epoch)?;
    // The rewritten fields lie outside the CRC: no need to check it again.
    let mut it = RecordBatches::new(buf.freeze()).without_crc_check();
    let mut batches = Vec::new();
    for b in it.by_ref() {
        batches.push(b?);
    }
    Ok(batches)
}

/// Checks follower batches continue exactly from `log_end_offset`, without gaps (this crate
/// has no compaction, so a leader's offsets are contiguous; a gap can only be corruption).
pub(crate) fn check_follower_order(
    batches: &[RecordBatch],
    log_end_offset: i64,
) -> Result<(), LogError> {
    let mut next = log_end_offset;
    for b in batches {
        if b.base_offset() != next || b.last_offset() < b.base_offset() {
            return Err(LogError::OutOfOrderOffsets {
                base_offset: b.base_offset(),
                log_end_offset: next,
            });
        }
        next = b.next_offset();
    }
    Ok(())
}

/// Folds the epochs of appended batches into the cache (a follower learns the leader's
/// epochs this way); returns whether it changed.
pub(crate) fn learn_epochs(
    cache: &mut LeaderEpochCache,
    batches: &[RecordBatch],
) -> Result<bool, LogError> {
    let mut changed = false;
    for b in batches {
        let epoch = b.partition_leader_epoch();
        if epoch >= 0 && cache.latest_epoch().is_none_or(|latest| epoch > latest) {
            changed |= cache.assign(epoch, b.base_offset())?;
        }
    }
    Ok(changed)
}

#[cfg(test)]
pub(crate) mod test_util {
    //! Record sets for tests.
    use bytes::Bytes;
    use kafka_wire::records::RecordBatchBuilder;

    /// One batch of `records` small records (base offset 0, no epoch: a producer's batch).
    pub fn batch(records: usize) -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        for i in 0..records {
            let value = format!("value-{i}");
            if let Err(e) = b.append(1_000 + i as i64, None, Some(value.as_bytes()), &[]) {
                panic!("cannot build a test batch: {e}");
            }
        }
        match b.build() {
            Ok(bytes) => bytes,
            Err(e) => panic!("cannot build a test batch: {e}"),
        }
    }
}
