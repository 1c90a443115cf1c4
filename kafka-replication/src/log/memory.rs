//! [`MemoryLog`]: a [`LogStorage`] held in memory, for tests, simulations and examples.
//!
//! The records live in a byte stream of chunks. A leader append copies the produced records
//! (the one copy: offsets and the epoch are written into them) onto the end of an *active*
//! arena, a `BytesMut` reserved in steps of 64 KiB doubling up to 1 MiB; a follower append
//! keeps the fetched `Bytes` as a chunk of its own (no copy). A read that reaches into the
//! active arena first freezes what it holds into an immutable chunk (`BytesMut::split` and
//! `freeze`, no copy) and appends go on into the rest of the arena; so a read whose batches lie
//! in one chunk is a `Bytes::slice` of it, and only a read spanning chunks joins them into a
//! new buffer (counted as [`CopyStep::LogRead`](crate::data_path::CopyStep::LogRead)). Reads
//! return exactly the batches Kafka's `Log.read` would pick whatever the chunks: the chunks are
//! a storage detail, not segments (each batch stands for a segment for retention).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{rewrite_record_set, RecordBatch};

use super::retention::{deletable_prefix, RetentionOutcome, RetentionPolicy, SegmentInfo};
use super::{
    check_follower_order, learn_epochs, split_batches, LogAppendInfo, LogError, LogStorage,
};
use crate::data_path::{count_copy, CopyStep};
use crate::epoch_cache::LeaderEpochCache;

/// The first active arena's capacity; each new one doubles it, up to [`MAX_ARENA`].
const MIN_ARENA: usize = 64 * 1024;
/// The largest step an active arena is reserved in (an append larger than it gets its size).
const MAX_ARENA: usize = 1024 * 1024;

/// Where one batch lies in the byte stream, and the header fields the log uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    base_offset: i64,
    next_offset: i64,
    /// Position of its first byte in the log's byte stream.
    position: u64,
    size: usize,
    max_timestamp: i64,
}

impl BatchMeta {
    fn end(&self) -> u64 {
        self.position + self.size as u64
    }
}

/// An immutable part of the byte stream.
#[derive(Debug, Clone)]
struct Chunk {
    start: u64,
    bytes: Bytes,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// The byte stream: frozen chunks, oldest first and contiguous (each ends where the next
/// starts), then the active arena from `active_start`. Batches never straddle two parts.
#[derive(Debug, Clone, Default)]
struct Store {
    chunks: VecDeque<Chunk>,
    active: BytesMut,
    active_start: u64,
    next_capacity: usize,
}

impl Store {
    /// The position after the last byte.
    fn end(&self) -> u64 {
        self.active_start + self.active.len() as u64
    }

    /// Turns what the active arena holds into a chunk (O(1)); later appends go on into the
    /// rest of its capacity.
    fn freeze(&mut self) {
        if self.active.is_empty() {
            return;
        }
        let bytes = self.active.split().freeze();
        let start = self.active_start;
        self.active_start += bytes.len() as u64;
        self.chunks.push_back(Chunk { start, bytes });
    }

    /// Copies `records` onto the end of the active arena (freezing it and reserving a fresh
    /// one first if they do not fit, so no byte already there is moved); returns their
    /// position and the arena index they start at.
    fn append_copy(&mut self, records: &[u8]) -> (u64, usize) {
        if self.active.capacity() - self.active.len() < records.len() {
            self.freeze();
            let step = self.next_capacity.clamp(MIN_ARENA, MAX_ARENA);
            self.next_capacity = (step * 2).min(MAX_ARENA);
            self.active = BytesMut::with_capacity(step.max(records.len()));
        }
        let at = self.active.len();
        let position = self.end();
        count_copy(CopyStep::LeaderAppend, records.len());
        self.active.extend_from_slice(records);
        (position, at)
    }

    /// Adds `bytes` as a chunk of its own (no copy); returns its position.
    fn push_chunk(&mut self, bytes: Bytes) -> u64 {
        self.freeze();
        let start = self.active_start;
        self.active_start += bytes.len() as u64;
        self.chunks.push_back(Chunk { start, bytes });
        start
    }

    /// Drops every byte from `position` on.
    fn truncate(&mut self, position: u64) {
        if position >= self.active_start {
            self.active
                .truncate(usize::try_from(position - self.active_start).unwrap_or(usize::MAX));
            return;
        }
        self.active.clear();
        self.active_start = position;
        while self.chunks.back().is_some_and(|c| c.start >= position) {
            self.chunks.pop_back();
        }
        if let Some(last) = self.chunks.back_mut() {
            if last.end() > position {
                last.bytes.truncate((position - last.start) as usize);
            }
        }
    }

    /// Drops the chunks wholly before `position` (the first byte still held).
    fn drop_before(&mut self, position: u64) {
        while self.chunks.front().is_some_and(|c| c.end() <= position) {
            self.chunks.pop_front();
        }
    }

    /// Drops every byte.
    fn clear(&mut self) {
        let end = self.end();
        self.chunks.clear();
        self.active.clear();
        self.active_start = end;
    }

    /// The bytes `[start, end)`: a slice of one chunk, or a copy when they span chunks.
    fn slice(&mut self, start: u64, end: u64) -> Bytes {
        if end > self.active_start {
            self.freeze();
        }
        let i = self.chunks.partition_point(|c| c.end() <= start);
        let Some(first) = self.chunks.get(i) else {
            return Bytes::new();
        };
        if end <= first.end() {
            return first
                .bytes
                .slice((start - first.start) as usize..(end - first.start) as usize);
        }
        let len = (end - start) as usize;
        count_copy(CopyStep::LogRead, len);
        let mut buf = BytesMut::with_capacity(len);
        for c in self.chunks.range(i..).take_while(|c| c.start < end) {
            let from = (start.max(c.start) - c.start) as usize;
            let to = (end.min(c.end()) - c.start) as usize;
            buf.extend_from_slice(&c.bytes[from..to]);
        }
        buf.freeze()
    }

    /// Views of the batches `metas` (freezing the active arena first).
    fn views(&mut self, metas: &[BatchMeta]) -> Vec<RecordBatch> {
        if metas.last().is_some_and(|m| m.end() > self.active_start) {
            self.freeze();
        }
        let mut chunks = self.chunks.iter().peekable();
        let mut out = Vec::with_capacity(metas.len());
        for m in metas {
            while chunks.next_if(|c| c.end() <= m.position).is_some() {}
            let Some(c) = chunks.peek() else { break };
            let from = (m.position - c.start) as usize;
            // Every stored batch was checked on its append.
            if let Ok(b) = RecordBatch::parse_without_crc(c.bytes.slice(from..from + m.size)) {
                out.push(b);
            }
        }
        out
    }
}

/// A log held in memory: the batches' positions and offsets, the chunks holding their bytes
/// (see the module header) and a leader-epoch cache.
#[derive(Debug, Default)]
pub struct MemoryLog {
    batches: Vec<BatchMeta>,
    /// The next offset of each batch of `batches`, side by side: finding the batch of an
    /// offset searches this contiguous vector.
    next_offsets: Vec<i64>,
    /// Behind a lock because a read (`&self`) may freeze the active arena.
    store: Mutex<Store>,
    log_start_offset: i64,
    log_end_offset: i64,
    epochs: LeaderEpochCache,
    high_watermark_checkpoint: i64,
}

impl Clone for MemoryLog {
    fn clone(&self) -> Self {
        MemoryLog {
            batches: self.batches.clone(),
            next_offsets: self.next_offsets.clone(),
            store: Mutex::new(self.store().clone()),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            epochs: self.epochs.clone(),
            high_watermark_checkpoint: self.high_watermark_checkpoint,
        }
    }
}

impl MemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The batches held, oldest first: views sharing the log's memory (no record copy).
    pub fn batches(&self) -> Vec<RecordBatch> {
        self.store().views(&self.batches)
    }

    /// The number of batches held.
    pub fn batch_count(&self) -> usize {
        self.batches.len()
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        // The store is consistent between any two of its calls, none of which panics.
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn store_mut(&mut self) -> &mut Store {
        self.store.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    /// The batches a read returns, as a range of `batches`, and their total size: whole
    /// batches from the one holding `offset`, none reaching `max_offset`, at most `max_bytes`
    /// (at least one batch with `min_one_batch`).
    fn pick(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<(std::ops::Range<usize>, usize), LogError> {
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
            if b.next_offset > max_offset {
                break;
            }
            if size + b.size > max_bytes && !(last == first && min_one_batch) {
                break;
            }
            size += b.size;
            last += 1;
        }
        Ok((first..last, size))
    }

    fn push(&mut self, metas: Vec<BatchMeta>) -> LogAppendInfo {
        let first_offset = metas.first().map_or(self.log_end_offset, |m| m.base_offset);
        let mut info = LogAppendInfo {
            first_offset,
            last_offset: first_offset,
            batches: metas.len(),
            bytes: 0,
        };
        for m in metas {
            info.last_offset = m.next_offset - 1;
            info.bytes += m.size;
            self.log_end_offset = m.next_offset;
            self.next_offsets.push(m.next_offset);
            self.batches.push(m);
        }
        info
    }

    /// Drops the chunks holding no batch any more (after the oldest batches went).
    fn drop_unused_chunks(&mut self) {
        let first = self.batches.first().map(|m| m.position);
        let store = self.store_mut();
        match first {
            Some(position) => store.drop_before(position),
            None => store.clear(),
        }
    }
}

/// The metadata of checked batches lying one after another from `position`.
fn metas_of(batches: &[RecordBatch], mut position: u64) -> Vec<BatchMeta> {
    batches
        .iter()
        .map(|b| {
            let m = BatchMeta {
                base_offset: b.base_offset(),
                next_offset: b.next_offset(),
                position,
                size: b.size(),
                max_timestamp: b.max_timestamp(),
            };
            position += b.size() as u64;
            m
        })
        .collect()
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
        let checked = split_batches(records.clone())?;
        let first_offset = self.log_end_offset;
        let store = self.store.get_mut().unwrap_or_else(PoisonError::into_inner);
        // The one copy a leader makes of produced records: the offsets and the epoch are
        // written into it. The rewritten fields lie outside the CRC: no need to check it again.
        let (position, at) = store.append_copy(&records);
        if let Err(e) = rewrite_record_set(&mut store.active[at..], first_offset, leader_epoch) {
            store.truncate(position);
            return Err(e.into());
        }
        if leader_epoch >= 0 && self.epochs.latest_epoch() != Some(leader_epoch) {
            if let Err(e) = self.epochs.assign(leader_epoch, first_offset) {
                store.truncate(position);
                return Err(e.into());
            }
        }
        let mut metas = metas_of(&checked, position);
        let mut next = first_offset;
        for (m, b) in metas.iter_mut().zip(&checked) {
            m.base_offset = next;
            next = next
                .saturating_add(i64::from(b.last_offset_delta()))
                .saturating_add(1);
            m.next_offset = next;
        }
        Ok(self.push(metas))
    }

    fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, LogError> {
        let batches = split_batches(records.clone())?;
        check_follower_order(&batches, self.log_end_offset)?;
        learn_epochs(&mut self.epochs, &batches)?;
        // The fetched batches are kept as they were read (no copy).
        let position = self.store_mut().push_chunk(records);
        Ok(self.push(metas_of(&batches, position)))
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Bytes, LogError> {
        let (picked, size) = self.pick(offset, max_bytes, max_offset, min_one_batch)?;
        let Some(first) = self
            .batches
            .get(picked.start)
            .filter(|_| !picked.is_empty())
        else {
            return Ok(Bytes::new());
        };
        let start = first.position;
        Ok(self.store().slice(start, start + size as u64))
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
        if let Some(position) = self.batches.get(keep).map(|m| m.position) {
            self.store_mut().truncate(position);
        }
        self.batches.truncate(keep);
        self.next_offsets.truncate(keep);
        // A truncation of everything after the log start may leave a chunk of deleted batches.
        self.drop_unused_chunks();
        self.log_end_offset = self
            .batches
            .last()
            .map_or(self.log_start_offset, |m| m.next_offset);
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
            .map(|m| SegmentInfo {
                next_offset: m.next_offset,
                size: m.size as u64,
                max_timestamp: m.max_timestamp,
            })
            .collect();
        let n = deletable_prefix(
            &infos,
            now_ms,
            high_watermark,
            self.log_start_offset,
            policy,
        );
        let bytes = self.batches.drain(..n).map(|m| m.size as u64).sum();
        self.next_offsets.drain(..n);
        self.drop_unused_chunks();
        if let Some(first) = self.batches.first() {
            self.log_start_offset = self.log_start_offset.max(first.base_offset);
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
        self.store_mut().clear();
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
            .take_while(|m| m.next_offset <= offset)
            .count();
        self.batches.drain(..below);
        self.next_offsets.drain(..below);
        self.drop_unused_chunks();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::stamp_as_leader;
    use crate::log::test_util::batch;
    use proptest::test_runner::TestCaseError;

    /// A batch of `records` records continuing `log` as its leader of epoch 1 would write it
    /// (what a follower fetches).
    fn fetched(log: &MemoryLog, records: usize) -> Bytes {
        let mut buf = BytesMut::from(&batch(records)[..]);
        if let Err(e) = rewrite_record_set(&mut buf, log.log_end_offset(), 1) {
            panic!("cannot stamp a test batch: {e}");
        }
        buf.freeze()
    }

    /// The operations a log goes through, for the properties below.
    #[derive(Debug, Clone)]
    enum Op {
        Append(usize),
        AppendAsFollower(usize),
        /// A read from the offset this far into the log, at most this many bytes, up to the
        /// log end (or the offset before it), with or without KIP-74's first batch.
        Read(usize, usize, bool, bool),
        Truncate(i64),
        Retention(u64),
        StartAt(i64),
        IncrementStart(i64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1usize..4).prop_map(Op::Append),
            2 => (1usize..4).prop_map(Op::AppendAsFollower),
            4 => (0usize..64, 0usize..400, any::<bool>(), any::<bool>())
                .prop_map(|(at, max, min_one, below_end)| Op::Read(at, max, min_one, below_end)),
            1 => (0i64..40).prop_map(Op::Truncate),
            1 => (0u64..2_000).prop_map(Op::Retention),
            1 => (0i64..40).prop_map(Op::StartAt),
            1 => (0i64..40).prop_map(Op::IncrementStart),
        ]
    }

    /// A read of `plain` (each batch in its own buffer, as the log held them before its
    /// chunks): the batches a Kafka `Log.read` picks, joined.
    fn plain_read(
        plain: &[RecordBatch],
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Bytes {
        let mut out = BytesMut::new();
        for b in plain.iter().skip_while(|b| b.next_offset() <= offset) {
            if b.next_offset() > max_offset {
                break;
            }
            if out.len() + b.size() > max_bytes && !(out.is_empty() && min_one_batch) {
                break;
            }
            out.extend_from_slice(b.as_bytes());
        }
        out.freeze()
    }

    fn fail(e: impl std::fmt::Display) -> TestCaseError {
        TestCaseError::fail(e.to_string())
    }

    /// Applies `op` to `log` and to `plain`, the same batches each in its own buffer; reads
    /// compare the two.
    fn apply(
        log: &mut MemoryLog,
        plain: &mut Vec<RecordBatch>,
        op: Op,
    ) -> Result<(), TestCaseError> {
        match op {
            Op::Append(n) => {
                let records = batch(n);
                let leo = log.log_end_offset();
                log.append_as_leader(records.clone(), 1).map_err(fail)?;
                plain.extend(stamp_as_leader(records, leo, 1).map_err(fail)?);
            }
            Op::AppendAsFollower(n) => {
                let records = fetched(log, n);
                log.append_as_follower(records.clone()).map_err(fail)?;
                plain.extend(split_batches(records).map_err(fail)?);
            }
            Op::Read(at, max_bytes, min_one, below_end) => {
                let (start, end) = (log.log_start_offset(), log.log_end_offset());
                let offset = start + (at as i64) % (end - start + 1);
                let max_offset = if below_end {
                    (end - 1).max(offset)
                } else {
                    end
                };
                let read = log
                    .read(offset, max_bytes, max_offset, min_one)
                    .map_err(fail)?;
                let want = plain_read(plain, offset, max_bytes, max_offset, min_one);
                proptest::prop_assert_eq!(&read, &want);
                let counted = log.readable_bytes(offset, max_bytes, max_offset, min_one);
                proptest::prop_assert_eq!(counted.ok(), Some(read.len()));
            }
            Op::Truncate(at) => {
                log.truncate_to(at).map_err(fail)?;
                plain.retain(|b| b.next_offset() <= at);
            }
            Op::Retention(bytes) => {
                let policy = RetentionPolicy::keep_all().with_retention_bytes(bytes as i64);
                log.apply_retention(0, log.log_end_offset(), &policy)
                    .map_err(fail)?;
            }
            Op::StartAt(at) => {
                log.truncate_fully_and_start_at(at).map_err(fail)?;
                plain.clear();
            }
            Op::IncrementStart(at) => {
                log.increment_log_start_offset(at).map_err(fail)?;
            }
        }
        // Retention and log-start moves remove a prefix: the plain list drops the same one.
        let gone = plain.len().saturating_sub(log.batch_count());
        plain.drain(..gone);
        Ok(())
    }

    /// The store holds the batches and nothing wholly older than them.
    fn check_store(log: &MemoryLog) -> Result<(), TestCaseError> {
        let store = log.store();
        let mut at = store.chunks.front().map_or(store.active_start, |c| c.start);
        for c in &store.chunks {
            proptest::prop_assert_eq!(c.start, at, "chunks are contiguous");
            at = c.end();
        }
        proptest::prop_assert_eq!(at, store.active_start);
        if let (Some(first), Some(last)) = (log.batches.first(), log.batches.last()) {
            proptest::prop_assert_eq!(last.end(), store.end());
            if let Some(c) = store.chunks.front() {
                proptest::prop_assert!(
                    c.end() > first.position,
                    "a chunk of deleted batches is kept"
                );
            }
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

        /// After any sequence of leader and follower appends, reads (each freezing the active
        /// arena at another point), truncations, retention and log-start moves, every read
        /// through the chunks equals the same read of the plain batch list, readable bytes
        /// count it, the side vector holds exactly the batches' next offsets, and the batches
        /// are the plain list's.
        #[test]
        fn reads_through_the_arena_equal_reads_of_the_plain_batch_list(
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let mut log = MemoryLog::new();
            let mut plain = Vec::new();
            for op in ops {
                apply(&mut log, &mut plain, op)?;
                let ends: Vec<i64> = log.batches.iter().map(|m| m.next_offset).collect();
                proptest::prop_assert_eq!(&ends, &log.next_offsets);
                check_store(&log)?;
            }
            proptest::prop_assert_eq!(&log.batches(), &plain);
            let (start, end) = (log.log_start_offset(), log.log_end_offset());
            for offset in start..=end {
                for max_bytes in [0, 100, usize::MAX] {
                    let read = log.read(offset, max_bytes, end, true).map_err(fail)?;
                    proptest::prop_assert_eq!(&read, &plain_read(&plain, offset, max_bytes, end, true));
                }
            }
        }
    }

    #[test]
    fn a_read_within_one_chunk_is_a_slice_of_the_log() -> Result<(), LogError> {
        let mut log = MemoryLog::new();
        log.append_as_leader(batch(2), 1)?;
        log.append_as_leader(batch(3), 1)?;
        // The first read freezes both appends into one chunk; reads of it are slices.
        let both = log.read(0, usize::MAX, log.log_end_offset(), false)?;
        let again = log.read(0, usize::MAX, log.log_end_offset(), false)?;
        assert_eq!(both.as_ptr(), again.as_ptr());
        let second = log.read(2, usize::MAX, log.log_end_offset(), false)?;
        assert_eq!(second.as_ptr(), both[both.len() - second.len()..].as_ptr());
        // Later appends go on in the same arena, right after the frozen chunk.
        log.append_as_leader(batch(1), 1)?;
        let third = log.read(5, usize::MAX, log.log_end_offset(), false)?;
        assert_eq!(third.as_ptr(), both.as_ptr().wrapping_add(both.len()));
        Ok(())
    }

    #[test]
    fn a_follower_keeps_the_fetched_buffer() -> Result<(), LogError> {
        let mut log = MemoryLog::new();
        let records = fetched(&log, 3);
        log.append_as_follower(records.clone())?;
        let read = log.read(0, usize::MAX, log.log_end_offset(), false)?;
        assert_eq!(read.as_ptr(), records.as_ptr());
        Ok(())
    }

    #[test]
    fn an_append_larger_than_the_arena_step_is_kept_whole() -> Result<(), LogError> {
        let mut log = MemoryLog::new();
        log.append_as_leader(batch(1), 1)?;
        let big = {
            let mut b = kafka_wire::records::RecordBatchBuilder::new(0);
            let value = vec![7u8; MAX_ARENA + 1];
            if let Err(e) = b.append(1, None, Some(&value), &[]) {
                panic!("cannot build a test batch: {e}");
            }
            match b.build() {
                Ok(bytes) => bytes,
                Err(e) => panic!("cannot build a test batch: {e}"),
            }
        };
        log.append_as_leader(big.clone(), 1)?;
        let read = log.read(1, 0, log.log_end_offset(), true)?;
        assert_eq!(read.len(), big.len());
        assert_eq!(&read[61..], &big[61..]);
        Ok(())
    }
}
