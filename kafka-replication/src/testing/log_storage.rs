//! The conformance suite of [`LogStorage`]: what every partition log must do, per the trait's
//! documentation — leader appends assign offsets and stamp epochs (KIP-101), reads return whole
//! batches within their bounds (KIP-74, K8.5), truncation drops batches and epoch entries,
//! follower appends keep the leader's offsets, rejected appends change nothing, and a reopened
//! log keeps everything flushed; for logs on files, a torn tail is dropped and a damaged record
//! is caught on reopen.
//!
//! Implement [`LogStorageBuilder`] for your log and call [`test_all`], or the single cases:
//!
//! ```
//! use kafka_replication::log::{LogError, MemoryLog};
//! use kafka_replication::testing::log_storage::{self, LogStorageBuilder};
//!
//! struct Memory;
//! impl LogStorageBuilder for Memory {
//!     type Log = MemoryLog;
//!     fn build(&self) -> Result<MemoryLog, LogError> {
//!         Ok(MemoryLog::new())
//!     }
//!     fn reopen(&self, log: MemoryLog) -> Result<MemoryLog, LogError> {
//!         Ok(log) // nothing outlives the value: the restart keeps it
//!     }
//! }
//! log_storage::test_all(&Memory)?;
//! # Ok::<(), kafka_replication::testing::ConformanceError>(())
//! ```

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{rewrite_record_set, RecordBatchBuilder, RecordBatches};

use super::{Case, ConformanceError};
use crate::log::{LogError, LogStorage};

/// Damage done to a closed log's files before it is opened again (see
/// [`LogStorageBuilder::reopen_damaged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// A torn write: the newest file loses its last `bytes` bytes, all inside the last batch.
    TornTail {
        /// How many bytes are cut off.
        bytes: usize,
    },
    /// A flipped byte: the byte `from_end` bytes before the end of the newest file (inside the
    /// last batch's checksummed records) is inverted.
    FlippedByte {
        /// Its distance from the end of the file (1 is the last byte).
        from_end: usize,
    },
}

/// What the suite needs from a [`LogStorage`] implementation.
pub trait LogStorageBuilder {
    /// The log under test.
    type Log: LogStorage;

    /// A new, empty log, independent of every log built before.
    fn build(&self) -> Result<Self::Log, LogError>;

    /// Closes `log` as a process exit does (no flush beyond what the log did itself) and opens
    /// the same storage again. An in-memory log that cannot outlive its value returns it as
    /// it is.
    fn reopen(&self, log: Self::Log) -> Result<Self::Log, LogError>;

    /// Closes `log`, applies `damage` to its files and opens them again (the result of that
    /// open, which may be a typed error). `None` for logs without files: the damage cases
    /// ([`torn_tail_is_dropped_on_reopen`], [`flipped_byte_is_detected_on_reopen`]) then pass
    /// without checking anything. The default is `None`.
    fn reopen_damaged(
        &self,
        log: Self::Log,
        damage: Damage,
    ) -> Option<Result<Self::Log, LogError>> {
        let _ = (log, damage);
        None
    }
}

/// Runs every case in order and stops at the first failure.
pub fn test_all<B: LogStorageBuilder>(builder: &B) -> Result<(), ConformanceError> {
    leader_appends_assign_offsets_and_stamp_the_epoch(builder)?;
    reads_return_whole_batches_within_their_bounds(builder)?;
    readable_bytes_is_the_length_of_the_same_read(builder)?;
    truncate_to_drops_batches_and_later_epochs(builder)?;
    follower_appends_keep_offsets_and_refuse_gaps(builder)?;
    rejected_appends_change_nothing(builder)?;
    high_watermark_checkpoint_is_kept(builder)?;
    truncate_fully_and_start_at_empties_the_log(builder)?;
    restart_keeps_what_was_flushed(builder)?;
    restart_after_truncation_keeps_the_truncated_log(builder)?;
    torn_tail_is_dropped_on_reopen(builder)?;
    flipped_byte_is_detected_on_reopen(builder)?;
    Ok(())
}

/// A producer's batch of `n` records (base offset 0, no epoch), each value `tag`-`i`.
fn records(c: Case, n: usize, tag: &str) -> Result<Bytes, ConformanceError> {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..n {
        let value = format!("{tag}-{i:04}");
        c.op(
            "build a batch",
            b.append(1_000 + i as i64, None, Some(value.as_bytes()), &[]),
        )?;
    }
    c.op("build a batch", b.build())
}

/// `records` rewritten as a leader would have sent them: from `base`, in `epoch`.
fn fetched(c: Case, n: usize, base: i64, epoch: i32) -> Result<Bytes, ConformanceError> {
    let mut buf = BytesMut::from(&records(c, n, "fetched")?[..]);
    c.op("rewrite a batch", rewrite_record_set(&mut buf, base, epoch))?;
    Ok(buf.freeze())
}

/// Every batch of the log as `(base offset, leader epoch, bytes)`, read from its start.
fn contents<L: LogStorage>(c: Case, log: &L) -> Result<Vec<(i64, i32, Bytes)>, ConformanceError> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let bytes = c.op("read", log.read(offset, 1 << 20, end, true))?;
        if bytes.is_empty() {
            return Err(c.fail(format!(
                "read at {offset} below the log end offset {end} returned nothing"
            )));
        }
        for b in RecordBatches::new(bytes) {
            let b = c.op("decode a batch read back", b)?;
            out.push((
                b.base_offset(),
                b.partition_leader_epoch(),
                b.as_bytes().clone(),
            ));
            offset = b.next_offset();
        }
    }
    Ok(out)
}

fn batch_heads(c: Case, bytes: Bytes) -> Result<Vec<(i64, i32)>, ConformanceError> {
    RecordBatches::new(bytes)
        .map(|b| {
            c.op("decode a batch read back", b)
                .map(|b| (b.base_offset(), b.partition_leader_epoch()))
        })
        .collect()
}

/// Leader appends get offsets from the log end offset and the epoch in every batch
/// (KIP-101), and the epoch cache records where each epoch starts.
pub fn leader_appends_assign_offsets_and_stamp_the_epoch<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("leader_appends_assign_offsets_and_stamp_the_epoch");
    let mut log = c.op("build", builder.build())?;
    c.eq("log end offset of a new log", log.log_end_offset(), 0)?;
    c.eq("log start offset of a new log", log.log_start_offset(), 0)?;
    let a = c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.eq(
        "first append",
        (a.first_offset, a.last_offset, a.batches),
        (0, 2, 1),
    )?;
    let b = c.op("append", log.append_as_leader(records(c, 2, "b")?, 2))?;
    c.eq("second append", (b.first_offset, b.last_offset), (3, 4))?;
    c.eq("log end offset", log.log_end_offset(), 5)?;
    c.eq(
        "end offset of epoch 1",
        log.epoch_cache().end_offset_for(1, 5).end_offset,
        3,
    )?;
    c.eq("latest epoch", log.epoch_cache().latest_epoch(), Some(2))?;
    let all = c.op("read", log.read(0, 1 << 20, 5, false))?;
    c.eq(
        "batches read back",
        batch_heads(c, all)?,
        vec![(0, 1), (3, 2)],
    )
}

/// Reads return whole batches from the one holding the offset, never one reaching
/// `max_offset`, at most `max_bytes` unless `min_one_batch` (KIP-74), and
/// `OffsetOutOfRange` past the log end.
pub fn reads_return_whole_batches_within_their_bounds<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("reads_return_whole_batches_within_their_bounds");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.op("append", log.append_as_leader(records(c, 2, "b")?, 2))?;
    let below = c.op("read", log.read(0, 1 << 20, 4, false))?;
    c.eq(
        "batches below max_offset 4",
        batch_heads(c, below)?,
        vec![(0, 1)],
    )?;
    let mid = c.op("read", log.read(1, 1 << 20, 5, false))?;
    c.eq(
        "a read in the middle of a batch",
        batch_heads(c, mid)?,
        vec![(0, 1), (3, 2)],
    )?;
    let one = c.op("read", log.read(0, 1, 5, true))?;
    c.eq(
        "max_bytes 1 with min_one_batch",
        batch_heads(c, one)?,
        vec![(0, 1)],
    )?;
    let none = c.op("read", log.read(0, 1, 5, false))?;
    c.eq("max_bytes 1 without min_one_batch", none.len(), 0)?;
    let at_end = c.op("read", log.read(5, 100, 5, false))?;
    c.eq("a read at the log end offset", at_end.len(), 0)?;
    match log.read(6, 100, 6, false) {
        Err(LogError::OffsetOutOfRange { offset: 6, .. }) => Ok(()),
        other => Err(c.fail(format!(
            "a read past the log end: expected OffsetOutOfRange, got {other:?}"
        ))),
    }
}

/// `readable_bytes` is the length the same `read` returns (K8.5), and fails as it does.
pub fn readable_bytes_is_the_length_of_the_same_read<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("readable_bytes_is_the_length_of_the_same_read");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.op("append", log.append_as_leader(records(c, 2, "b")?, 2))?;
    for (offset, max_bytes, max_offset, min_one) in [
        (0, 1 << 20, 5, false),
        (0, 1 << 20, 4, false),
        (1, 1 << 20, 5, false),
        (0, 1, 5, true),
        (0, 1, 5, false),
        (5, 100, 5, false),
        (3, 1 << 20, 5, true),
    ] {
        let read = c.op("read", log.read(offset, max_bytes, max_offset, min_one))?;
        let counted = c.op(
            "readable_bytes",
            log.readable_bytes(offset, max_bytes, max_offset, min_one),
        )?;
        c.eq(
            &format!("readable_bytes({offset}, {max_bytes}, {max_offset}, {min_one})"),
            counted,
            read.len(),
        )?;
    }
    match log.readable_bytes(6, 100, 6, false) {
        Err(LogError::OffsetOutOfRange { .. }) => Ok(()),
        other => Err(c.fail(format!(
            "readable_bytes past the log end: expected OffsetOutOfRange, got {other:?}"
        ))),
    }
}

/// `truncate_to` removes every batch holding an offset at or above the point and the epoch
/// entries starting at or after the new end, even when no batch goes.
pub fn truncate_to_drops_batches_and_later_epochs<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("truncate_to_drops_batches_and_later_epochs");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.op("append", log.append_as_leader(records(c, 2, "b")?, 2))?;
    c.op("truncate", log.truncate_to(3))?;
    c.eq(
        "log end offset after truncate_to(3)",
        log.log_end_offset(),
        3,
    )?;
    c.eq(
        "latest epoch after truncate_to(3)",
        log.epoch_cache().latest_epoch(),
        Some(1),
    )?;
    c.eq("batches left", contents(c, &log)?.len(), 1)?;
    // An epoch assigned with nothing written goes too.
    c.op("assign an epoch", log.assign_epoch_start(4, 3))?;
    c.eq("latest epoch", log.epoch_cache().latest_epoch(), Some(4))?;
    c.op("truncate", log.truncate_to(3))?;
    c.eq(
        "latest epoch after truncate_to(3) with no batch above",
        log.epoch_cache().latest_epoch(),
        Some(1),
    )?;
    // Appends continue from the new end.
    let a = c.op("append", log.append_as_leader(records(c, 1, "c")?, 5))?;
    c.eq("offset after truncation", a.first_offset, 3)
}

/// Follower appends keep the leader's offsets and epochs, teach the epoch cache, and refuse
/// batches that do not continue at the log end offset (`OutOfOrderOffsets`).
pub fn follower_appends_keep_offsets_and_refuse_gaps<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("follower_appends_keep_offsets_and_refuse_gaps");
    let mut log = c.op("build", builder.build())?;
    let f = c.op("append", log.append_as_follower(fetched(c, 3, 0, 2)?))?;
    c.eq("follower append", (f.first_offset, f.last_offset), (0, 2))?;
    let g = c.op("append", log.append_as_follower(fetched(c, 4, 3, 5)?))?;
    c.eq(
        "second follower append",
        (g.first_offset, g.last_offset),
        (3, 6),
    )?;
    c.eq("latest epoch", log.epoch_cache().latest_epoch(), Some(5))?;
    c.eq(
        "end offset of epoch 2",
        log.epoch_cache().end_offset_for(2, 7).end_offset,
        3,
    )?;
    for (what, base) in [("an overlap", 2), ("a gap", 9)] {
        match log.append_as_follower(fetched(c, 1, base, 5)?) {
            Err(LogError::OutOfOrderOffsets { .. }) => {}
            other => {
                return Err(c.fail(format!("{what}: expected OutOfOrderOffsets, got {other:?}")))
            }
        }
    }
    c.eq(
        "log end offset after refused appends",
        log.log_end_offset(),
        7,
    )?;
    let heads: Vec<(i64, i32)> = contents(c, &log)?
        .into_iter()
        .map(|(o, e, _)| (o, e))
        .collect();
    c.eq("batches", heads, vec![(0, 2), (3, 5)])
}

/// Garbage, a partial batch and an empty set are refused with typed errors and change
/// nothing.
pub fn rejected_appends_change_nothing<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("rejected_appends_change_nothing");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 2, "a")?, 1))?;
    let before = contents(c, &log)?;
    match log.append_as_leader(Bytes::from_static(b"garbage"), 1) {
        Err(LogError::InvalidRecords(_)) => {}
        other => return Err(c.fail(format!("garbage: expected InvalidRecords, got {other:?}"))),
    }
    let good = records(c, 2, "b")?;
    match log.append_as_leader(good.slice(..good.len() - 1), 1) {
        Err(LogError::InvalidRecords(_)) => {}
        other => {
            return Err(c.fail(format!(
                "a partial batch: expected InvalidRecords, got {other:?}"
            )))
        }
    }
    match log.append_as_leader(Bytes::new(), 1) {
        Err(LogError::EmptyRecords | LogError::InvalidRecords(_)) => {}
        other => {
            return Err(c.fail(format!(
                "an empty set: expected EmptyRecords, got {other:?}"
            )))
        }
    }
    let mut damaged = BytesMut::from(&good[..]);
    let n = damaged.len();
    damaged[n - 2] ^= 0xff;
    match log.append_as_follower(damaged.freeze()) {
        Err(LogError::InvalidRecords(_)) => {}
        other => {
            return Err(c.fail(format!(
                "a batch failing its CRC: expected InvalidRecords, got {other:?}"
            )))
        }
    }
    c.eq("log end offset", log.log_end_offset(), 2)?;
    c.ensure(contents(c, &log)? == before, || {
        "a refused append changed the log".into()
    })
}

/// The high-watermark checkpoint reads back what was written (0 before any).
pub fn high_watermark_checkpoint_is_kept<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("high_watermark_checkpoint_is_kept");
    let mut log = c.op("build", builder.build())?;
    c.eq(
        "checkpoint of a new log",
        log.checkpointed_high_watermark(),
        0,
    )?;
    c.op("append", log.append_as_leader(records(c, 5, "a")?, 1))?;
    c.op("checkpoint", log.checkpoint_high_watermark(4))?;
    c.eq("checkpoint", log.checkpointed_high_watermark(), 4)?;
    c.op("checkpoint", log.checkpoint_high_watermark(5))?;
    c.eq("checkpoint", log.checkpointed_high_watermark(), 5)
}

/// `truncate_fully_and_start_at` empties the log, drops the epoch cache and makes the offset
/// both start and end; appends continue there.
pub fn truncate_fully_and_start_at_empties_the_log<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("truncate_fully_and_start_at_empties_the_log");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.op("truncate fully", log.truncate_fully_and_start_at(10))?;
    c.eq(
        "start and end",
        (log.log_start_offset(), log.log_end_offset()),
        (10, 10),
    )?;
    c.eq("latest epoch", log.epoch_cache().latest_epoch(), None)?;
    match log.read(0, 100, 10, false) {
        Err(LogError::OffsetOutOfRange { .. }) => {}
        other => {
            return Err(c.fail(format!(
                "a read below the new start: expected OffsetOutOfRange, got {other:?}"
            )))
        }
    }
    let f = c.op("append", log.append_as_follower(fetched(c, 2, 10, 3)?))?;
    c.eq("follower append at 10", f.first_offset, 10)?;
    let a = c.op("append", log.append_as_leader(records(c, 1, "b")?, 4))?;
    c.eq("leader append", a.first_offset, 12)
}

/// After `flush`, a restart keeps every batch byte for byte, the epoch cache (an entry at the
/// log end offset with no batch yet may go), the log start offset and the high-watermark
/// checkpoint, and appends continue at the same end.
pub fn restart_keeps_what_was_flushed<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restart_keeps_what_was_flushed");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.op("append", log.append_as_leader(records(c, 2, "b")?, 4))?;
    c.op("assign an epoch", log.assign_epoch_start(6, 5))?;
    c.op("flush", log.flush())?;
    c.op("checkpoint", log.checkpoint_high_watermark(3))?;
    let before = contents(c, &log)?;
    let epochs = log.epoch_cache().clone();
    let ends = (log.log_start_offset(), log.log_end_offset());
    let mut log = c.op("reopen", builder.reopen(log))?;
    c.eq(
        "start and end after the restart",
        (log.log_start_offset(), log.log_end_offset()),
        ends,
    )?;
    // An epoch entry at the log end offset, with no batch yet, may go on recovery (Kafka's
    // recovery truncates the cache from the end at the log end offset); the rest must stay.
    let mut with_data = epochs.clone();
    with_data.truncate_from_end(ends.1);
    c.ensure(
        log.epoch_cache() == &epochs || log.epoch_cache() == &with_data,
        || {
            format!(
                "epoch cache after the restart: expected {epochs:?}, got {:?}",
                log.epoch_cache()
            )
        },
    )?;
    c.eq(
        "high-watermark checkpoint after the restart",
        log.checkpointed_high_watermark(),
        3,
    )?;
    c.ensure(contents(c, &log)? == before, || {
        "the batches changed across the restart".into()
    })?;
    let a = c.op("append", log.append_as_leader(records(c, 1, "c")?, 6))?;
    c.eq("offset of the next append", a.first_offset, 5)
}

/// A truncation survives a restart: the cut batches do not come back.
pub fn restart_after_truncation_keeps_the_truncated_log<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restart_after_truncation_keeps_the_truncated_log");
    let mut log = c.op("build", builder.build())?;
    for (n, epoch) in [(3, 1), (2, 2), (4, 3)] {
        c.op("append", log.append_as_leader(records(c, n, "a")?, epoch))?;
    }
    c.op("flush", log.flush())?;
    c.op("truncate", log.truncate_to(3))?;
    c.op("flush", log.flush())?;
    let before = contents(c, &log)?;
    let log = c.op("reopen", builder.reopen(log))?;
    c.eq("log end offset after the restart", log.log_end_offset(), 3)?;
    c.eq(
        "latest epoch after the restart",
        log.epoch_cache().latest_epoch(),
        Some(1),
    )?;
    c.ensure(contents(c, &log)? == before, || {
        "truncated batches came back after the restart".into()
    })
}

/// Writes a flushed batch and an unflushed one, damages the files with `damage` and reopens;
/// `None` when the builder has no files. Returns the reopened log (or its error) and what was
/// there before the unflushed batch.
#[allow(clippy::type_complexity)]
fn damaged<B: LogStorageBuilder>(
    c: Case,
    builder: &B,
    damage: Damage,
) -> Result<Option<(Result<B::Log, LogError>, Vec<(i64, i32, Bytes)>)>, ConformanceError> {
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append_as_leader(records(c, 3, "a")?, 1))?;
    c.op("append", log.append_as_leader(records(c, 2, "b")?, 2))?;
    c.op("flush", log.flush())?;
    let kept = contents(c, &log)?;
    c.op("append", log.append_as_leader(records(c, 4, "c")?, 3))?;
    Ok(builder.reopen_damaged(log, damage).map(|r| (r, kept)))
}

/// A torn write — the last batch cut short — is dropped on reopen and what precedes it is
/// kept; the log takes appends again from there. Passes without checking when the builder
/// has no files ([`LogStorageBuilder::reopen_damaged`] returns `None`).
pub fn torn_tail_is_dropped_on_reopen<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("torn_tail_is_dropped_on_reopen");
    let Some((reopened, kept)) = damaged(c, builder, Damage::TornTail { bytes: 7 })? else {
        return Ok(());
    };
    let mut log = c.op("reopen the torn log", reopened)?;
    c.eq("log end offset", log.log_end_offset(), 5)?;
    c.ensure(contents(c, &log)? == kept, || {
        "the batches before the torn one changed".into()
    })?;
    let a = c.op("append", log.append_as_leader(records(c, 1, "d")?, 4))?;
    c.eq("offset of the next append", a.first_offset, 5)
}

/// A flipped byte in a batch is detected on reopen: the open fails with a typed error, or the
/// log ends before the damaged batch with everything before it intact — never a log that
/// returns the damaged bytes. Passes without checking when the builder has no files.
pub fn flipped_byte_is_detected_on_reopen<B: LogStorageBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("flipped_byte_is_detected_on_reopen");
    let Some((reopened, kept)) = damaged(c, builder, Damage::FlippedByte { from_end: 3 })? else {
        return Ok(());
    };
    let Ok(log) = reopened else {
        return Ok(()); // a typed error is a detection
    };
    c.eq(
        "log end offset (the damaged batch must go)",
        log.log_end_offset(),
        5,
    )?;
    c.ensure(contents(c, &log)? == kept, || {
        "the batches before the damaged one changed".into()
    })
}
