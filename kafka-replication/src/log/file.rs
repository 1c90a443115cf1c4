//! [`FileLog`]: a segmented log on disk.
//!
//! Layout of a partition directory (Kafka's names and formats where they exist):
//! - `<base offset, 20 digits>.log` — segments of record batches, appended in order;
//! - `<base offset>.index` — a sparse offset index of 8-byte entries (offset relative to the
//!   segment base, file position), one every `index_interval_bytes`;
//! - `leader-epoch-checkpoint`, `high-watermark-checkpoint`, `recovery-point-checkpoint`,
//!   `log-start-offset-checkpoint` — text checkpoints written atomically.
//!
//! Retention ([`LogStorage::apply_retention`]) deletes whole segments from the oldest on and
//! moves the log start offset to the first offset left.
//!
//! Recovery on open: segments from the one holding the recovery point (the last flushed
//! offset) onward are scanned batch by batch with a CRC-32C check; the first torn or corrupt
//! batch and everything after it are truncated away with a warning. Earlier segments load
//! their index (rebuilt from batch headers if it does not validate). A restart loses nothing
//! that was flushed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_wire::records::{RecordBatch, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};

use super::checkpoint::{read_epochs, read_offset, write_epochs, write_offset};
use super::retention::{deletable_prefix, RetentionOutcome, RetentionPolicy, SegmentInfo};
use super::{
    check_follower_order, learn_epochs, split_batches, stamp_as_leader, LogAppendInfo, LogError,
    LogStorage,
};
use crate::epoch_cache::LeaderEpochCache;

const EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
const HW_CHECKPOINT: &str = "high-watermark-checkpoint";
const RECOVERY_CHECKPOINT: &str = "recovery-point-checkpoint";
const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// Where `maxTimestamp` lies in a batch header.
const MAX_TIMESTAMP_AT: u64 = 35;
/// Bytes of a batch header up to and including `lastOffsetDelta`.
const HEADER: usize = 27;
const INDEX_ENTRY: usize = 8;

/// When appended data is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Only on [`LogStorage::flush`] (and on segment roll), as Kafka's default: durability
    /// comes from replication.
    Manual,
    /// After every append (`flush.messages=1`).
    EveryAppend,
    /// Once this many bytes are unflushed.
    EveryBytes(u64),
}

/// Settings of a [`FileLog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileLogConfig {
    /// Roll to a new segment past this size (`segment.bytes`, 1 GiB; at most 4 GiB).
    pub segment_bytes: u64,
    /// Bytes between offset index entries (`index.interval.bytes`, 4096).
    pub index_interval_bytes: u64,
    /// The flush policy.
    pub flush: FlushPolicy,
}

impl FileLogConfig {
    /// Sets [`segment_bytes`](Self::segment_bytes).
    #[must_use]
    pub fn with_segment_bytes(mut self, segment_bytes: u64) -> Self {
        self.segment_bytes = segment_bytes;
        self
    }

    /// Sets [`index_interval_bytes`](Self::index_interval_bytes).
    #[must_use]
    pub fn with_index_interval_bytes(mut self, index_interval_bytes: u64) -> Self {
        self.index_interval_bytes = index_interval_bytes;
        self
    }

    /// Sets [`flush`](Self::flush).
    #[must_use]
    pub fn with_flush(mut self, flush: FlushPolicy) -> Self {
        self.flush = flush;
        self
    }
}

impl Default for FileLogConfig {
    fn default() -> Self {
        FileLogConfig {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            flush: FlushPolicy::Manual,
        }
    }
}

#[derive(Debug)]
struct Segment {
    base_offset: i64,
    next_offset: i64,
    size: u64,
    file: File,
    index_file: File,
    index: Vec<(i64, u64)>,
    bytes_since_index: u64,
    /// The newest record timestamp in the segment; `None` until appended to, scanned, or
    /// asked for by retention.
    max_timestamp: Option<i64>,
}

/// Header fields of a batch on disk.
#[derive(Debug, Clone, Copy)]
struct Header {
    base_offset: i64,
    size: u64,
    last_offset: i64,
}

fn parse_header(h: &[u8; HEADER]) -> Option<Header> {
    let base_offset = i64::from_be_bytes(h[0..8].try_into().ok()?);
    let length = i32::from_be_bytes(h[8..12].try_into().ok()?);
    let delta = i32::from_be_bytes(h[23..27].try_into().ok()?);
    if (length as i64) < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64 || delta < 0 {
        return None;
    }
    Some(Header {
        base_offset,
        size: LOG_OVERHEAD as u64 + length as u64,
        last_offset: base_offset.checked_add(i64::from(delta))?,
    })
}

fn segment_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

impl Segment {
    fn create(dir: &Path, base_offset: i64) -> io::Result<Segment> {
        let open = |ext| {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(segment_path(dir, base_offset, ext))
        };
        let file = open("log")?;
        let index_file = open("index")?;
        let size = file.metadata()?.len();
        Ok(Segment {
            base_offset,
            next_offset: base_offset,
            size,
            file,
            index_file,
            index: Vec::new(),
            bytes_since_index: 0,
            max_timestamp: None,
        })
    }

    /// The newest record timestamp of the segment (`-1` when empty), read from the batch
    /// headers the first time it is needed.
    fn max_timestamp(&mut self) -> io::Result<i64> {
        if let Some(t) = self.max_timestamp {
            return Ok(t);
        }
        let mut newest = -1i64;
        let mut pos = 0;
        while let Some(h) = self.header_at(pos)? {
            let mut t = [0u8; 8];
            let mut f = &self.file;
            f.seek(SeekFrom::Start(pos + MAX_TIMESTAMP_AT))?;
            f.read_exact(&mut t)?;
            newest = newest.max(i64::from_be_bytes(t));
            pos += h.size;
        }
        self.max_timestamp = Some(newest);
        Ok(newest)
    }

    fn header_at(&self, pos: u64) -> io::Result<Option<Header>> {
        if pos + HEADER as u64 > self.size {
            return Ok(None);
        }
        let mut h = [0u8; HEADER];
        let mut f = &self.file;
        f.seek(SeekFrom::Start(pos))?;
        f.read_exact(&mut h)?;
        Ok(parse_header(&h).filter(|hd| pos + hd.size <= self.size))
    }

    /// Index floor: the position of the last indexed batch at or before `offset`.
    fn lookup(&self, offset: i64) -> (i64, u64) {
        let i = self.index.partition_point(|(o, _)| *o <= offset);
        i.checked_sub(1)
            .map_or((self.base_offset, 0), |i| self.index[i])
    }

    /// Position of the first batch whose last offset is ≥ `offset` (or the end).
    fn position_of(&self, offset: i64) -> io::Result<(u64, Option<Header>)> {
        let (_, mut pos) = self.lookup(offset);
        while let Some(h) = self.header_at(pos)? {
            if h.last_offset >= offset {
                return Ok((pos, Some(h)));
            }
            pos += h.size;
        }
        Ok((self.size, None))
    }

    fn append(&mut self, batch: &RecordBatch, index_interval: u64) -> io::Result<()> {
        let pos = self.size;
        self.file.write_all(batch.as_bytes())?;
        if self.bytes_since_index >= index_interval {
            let rel = (batch.base_offset() - self.base_offset) as u32;
            let mut entry = [0u8; INDEX_ENTRY];
            entry[..4].copy_from_slice(&rel.to_be_bytes());
            entry[4..].copy_from_slice(&(pos as u32).to_be_bytes());
            self.index_file.write_all(&entry)?;
            self.index.push((batch.base_offset(), pos));
            self.bytes_since_index = 0;
        }
        self.size += batch.size() as u64;
        self.bytes_since_index += batch.size() as u64;
        self.next_offset = batch.next_offset();
        if let Some(t) = self.max_timestamp.as_mut() {
            *t = (*t).max(batch.max_timestamp());
        } else if pos == 0 {
            self.max_timestamp = Some(batch.max_timestamp());
        }
        Ok(())
    }

    /// Cuts the segment at `pos` (a batch boundary), dropping index entries past it.
    fn truncate_at(&mut self, pos: u64) -> io::Result<()> {
        self.max_timestamp = None;
        self.file.set_len(pos)?;
        self.size = pos;
        self.index.retain(|(_, p)| *p < pos);
        self.index_file
            .set_len((self.index.len() * INDEX_ENTRY) as u64)?;
        self.bytes_since_index = pos - self.index.last().map_or(0, |(_, p)| *p);
        Ok(())
    }

    /// Loads the index file if it is consistent with the segment, then finds the end offset
    /// from the last indexed batch. Returns false if the segment must be rescanned.
    fn load_index(&mut self) -> io::Result<bool> {
        let mut raw = Vec::new();
        (&self.index_file).seek(SeekFrom::Start(0))?;
        (&self.index_file).read_to_end(&mut raw)?;
        if raw.len() % INDEX_ENTRY != 0 {
            return Ok(false);
        }
        let mut index = Vec::with_capacity(raw.len() / INDEX_ENTRY);
        for e in raw.chunks_exact(INDEX_ENTRY) {
            let rel = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            let pos = u64::from(u32::from_be_bytes([e[4], e[5], e[6], e[7]]));
            let offset = self.base_offset + i64::from(rel);
            if pos >= self.size || index.last().is_some_and(|(o, p)| *o >= offset || *p >= pos) {
                return Ok(false);
            }
            index.push((offset, pos));
        }
        self.index = index;
        let mut pos = self.index.last().map_or(0, |(_, p)| *p);
        self.bytes_since_index = 0;
        while let Some(h) = self.header_at(pos)? {
            self.next_offset = h.last_offset + 1;
            self.bytes_since_index += h.size;
            pos += h.size;
        }
        Ok(pos == self.size)
    }

    /// Scans every batch from the start, checking CRCs when `verify`; rebuilds the index
    /// (file included) and truncates a torn or corrupt tail. Returns the batches' epochs.
    fn recover(
        &mut self,
        index_interval: u64,
        verify: bool,
        epochs: &mut Vec<(i32, i64)>,
    ) -> Result<(), LogError> {
        self.index.clear();
        self.index_file.set_len(0)?;
        self.bytes_since_index = 0;
        self.next_offset = self.base_offset;
        let total = self.size;
        self.size = 0;
        let mut reader = BufReader::with_capacity(1 << 16, &self.file);
        reader.seek(SeekFrom::Start(0))?;
        let mut pos = 0u64;
        let mut valid_end = 0u64;
        let mut batches = Vec::new();
        let mut newest = -1i64;
        loop {
            if pos == total {
                break;
            }
            let mut h = [0u8; HEADER];
            if pos + HEADER as u64 > total || reader.read_exact(&mut h).is_err() {
                break;
            }
            let Some(hd) = parse_header(&h) else { break };
            // Offsets are contiguous from the segment base: the base offset lies outside the
            // CRC, so this is what catches a damaged one.
            if pos + hd.size > total || hd.base_offset != self.next_offset {
                break;
            }
            let mut buf = vec![0u8; hd.size as usize];
            buf[..HEADER].copy_from_slice(&h);
            if reader.read_exact(&mut buf[HEADER..]).is_err() {
                break;
            }
            let parsed = if verify {
                RecordBatch::parse(Bytes::from(buf))
            } else {
                RecordBatch::parse_without_crc(Bytes::from(buf))
            };
            let Ok(batch) = parsed else { break };
            // Leader epochs never go back along a log; the field lies outside the CRC.
            let epoch = batch.partition_leader_epoch();
            if epoch < epochs.last().map_or(-1, |(e, _)| *e) {
                break;
            }
            epochs.push((batch.partition_leader_epoch(), batch.base_offset()));
            self.next_offset = batch.next_offset();
            newest = newest.max(batch.max_timestamp());
            batches.push((pos, batch.base_offset(), hd.size));
            pos += hd.size;
            valid_end = pos;
        }
        drop(reader);
        if valid_end < total {
            tracing::warn!(
                segment = self.base_offset,
                valid_bytes = valid_end,
                file_bytes = total,
                "truncating a torn or corrupt segment tail"
            );
            self.file.set_len(valid_end)?;
        }
        self.size = valid_end;
        self.max_timestamp = Some(newest);
        for (pos, base, size) in batches {
            if self.bytes_since_index >= index_interval {
                let rel = (base - self.base_offset) as u32;
                let mut entry = [0u8; INDEX_ENTRY];
                entry[..4].copy_from_slice(&rel.to_be_bytes());
                entry[4..].copy_from_slice(&(pos as u32).to_be_bytes());
                self.index_file.write_all(&entry)?;
                self.index.push((base, pos));
                self.bytes_since_index = 0;
            }
            self.bytes_since_index += size;
        }
        Ok(())
    }
}

/// A segmented, recoverable log in one directory.
#[derive(Debug)]
pub struct FileLog {
    dir: PathBuf,
    config: FileLogConfig,
    segments: Vec<Segment>,
    epochs: LeaderEpochCache,
    high_watermark: i64,
    recovery_point: i64,
    unflushed_bytes: u64,
    log_start_offset: i64,
}

impl FileLog {
    /// Opens (creating if needed) the log in `dir`, recovering it as described in the module
    /// documentation.
    pub fn open(dir: impl AsRef<Path>, config: FileLogConfig) -> Result<FileLog, LogError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        let mut bases: Vec<i64> = fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        bases.sort_unstable();
        let recovery_point = match read_offset(&dir.join(RECOVERY_CHECKPOINT)) {
            Ok(p) => p.unwrap_or(0),
            Err(e) => {
                tracing::warn!(error = %e, "recovery point checkpoint unreadable; full recovery");
                0
            }
        };
        let mut segments: Vec<Segment> = Vec::new();
        let mut scanned_epochs = Vec::new();
        let mut corrupt = false;
        for (i, &base) in bases.iter().enumerate() {
            let mut seg = Segment::create(&dir, base)?;
            if corrupt
                || segments
                    .last()
                    .is_some_and(|p: &Segment| p.next_offset != base)
            {
                // Everything after a truncated tail is garbage.
                drop(seg);
                fs::remove_file(segment_path(&dir, base, "log"))?;
                let _ = fs::remove_file(segment_path(&dir, base, "index"));
                corrupt = true;
                continue;
            }
            let holds_recovery_point = bases.get(i + 1).is_none_or(|next| *next > recovery_point);
            let size_before = seg.size;
            if holds_recovery_point || !seg.load_index()? {
                seg.recover(config.index_interval_bytes, true, &mut scanned_epochs)?;
                corrupt = seg.size < size_before;
            }
            segments.push(seg);
        }
        if segments.is_empty() {
            segments.push(Segment::create(&dir, 0)?);
        }
        let mut log = FileLog {
            dir,
            config,
            segments,
            epochs: LeaderEpochCache::new(),
            high_watermark: 0,
            recovery_point,
            unflushed_bytes: 0,
            log_start_offset: 0,
        };
        log.epochs = log.load_epochs(&scanned_epochs)?;
        let leo = log.log_end_offset();
        if log.epochs.truncate_from_end(leo) {
            log.persist_epochs()?;
        }
        log.high_watermark = match read_offset(&log.dir.join(HW_CHECKPOINT)) {
            Ok(hw) => hw.unwrap_or(0),
            Err(e) => {
                tracing::warn!(error = %e, "high watermark checkpoint unreadable; starting from 0");
                0
            }
        };
        log.recovery_point = log.recovery_point.min(leo);
        let first_base = log.segments.first().map_or(0, |s| s.base_offset);
        let checkpointed = match read_offset(&log.dir.join(LOG_START_CHECKPOINT)) {
            Ok(o) => o.unwrap_or(0),
            Err(e) => {
                tracing::warn!(error = %e, "log start offset checkpoint unreadable; using the first segment");
                0
            }
        };
        log.log_start_offset = checkpointed.max(first_base).min(leo);
        Ok(log)
    }

    fn load_epochs(&self, scanned: &[(i32, i64)]) -> Result<LeaderEpochCache, LogError> {
        let path = self.dir.join(EPOCH_CHECKPOINT);
        let from_file = match read_epochs(&path) {
            Ok(entries) => entries.and_then(|e| LeaderEpochCache::from_entries(e).ok()),
            Err(e) => {
                tracing::warn!(error = %e, "leader epoch checkpoint unreadable; rebuilding from batches");
                None
            }
        };
        let mut cache = match from_file {
            Some(c) => c,
            None => {
                // Rebuild from every batch's header.
                let mut c = LeaderEpochCache::new();
                for seg in &self.segments {
                    let mut pos = 0;
                    while let Some(h) = seg.header_at(pos)? {
                        let mut e = [0u8; 4];
                        let mut f = &seg.file;
                        f.seek(SeekFrom::Start(pos + 12))?;
                        f.read_exact(&mut e)?;
                        let epoch = i32::from_be_bytes(e);
                        if epoch >= 0 && c.latest_epoch().is_none_or(|l| epoch > l) {
                            c.assign(epoch, h.base_offset)?;
                        }
                        pos += h.size;
                    }
                }
                return Ok(c);
            }
        };
        // Batches recovered past the checkpoint may carry newer epochs.
        for &(epoch, offset) in scanned {
            if epoch >= 0 && cache.latest_epoch().is_none_or(|l| epoch > l) {
                cache.assign(epoch, offset)?;
            }
        }
        Ok(cache)
    }

    fn persist_epochs(&self) -> Result<(), LogError> {
        write_epochs(&self.dir.join(EPOCH_CHECKPOINT), self.epochs.entries())?;
        Ok(())
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The offset up to which everything is known flushed.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    fn active(&mut self) -> &mut Segment {
        let last = self.segments.len() - 1;
        &mut self.segments[last]
    }

    fn write_batches(&mut self, batches: &[RecordBatch]) -> Result<LogAppendInfo, LogError> {
        let mut info = LogAppendInfo {
            first_offset: batches.first().map_or(0, RecordBatch::base_offset),
            last_offset: 0,
            batches: batches.len(),
            bytes: 0,
        };
        for b in batches {
            let segment_bytes = self.config.segment_bytes.min(u32::MAX as u64);
            let roll = {
                let a = self.active();
                let too_big = a.size + b.size() as u64 > segment_bytes;
                // Index entries hold offsets relative to the segment base in 32 bits.
                let too_far = b.last_offset() - a.base_offset > i64::from(i32::MAX);
                a.size > 0 && (too_big || too_far)
            };
            if roll {
                self.active().file.sync_data()?;
                let seg = Segment::create(&self.dir, b.base_offset())?;
                self.segments.push(seg);
            }
            let interval = self.config.index_interval_bytes;
            self.active().append(b, interval)?;
            info.last_offset = b.last_offset();
            info.bytes += b.size();
        }
        self.unflushed_bytes += info.bytes as u64;
        let flush = match self.config.flush {
            FlushPolicy::Manual => false,
            FlushPolicy::EveryAppend => true,
            FlushPolicy::EveryBytes(n) => self.unflushed_bytes >= n,
        };
        if flush {
            self.flush()?;
        }
        Ok(info)
    }
}

impl FileLog {
    /// Where a read lands: the segment and the byte range `[first_pos, end_pos)` of the whole
    /// batches from the one holding `offset`, none reaching `max_offset`, at most `max_bytes`
    /// (at least one batch with `min_one_batch`); `None` when that is no batch at all.
    fn span(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<(&Segment, u64, u64)>, LogError> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        let mut i = self
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        while i + 1 < self.segments.len() && self.segments[i].next_offset <= offset {
            i += 1;
        }
        let seg = &self.segments[i];
        let (first_pos, mut header) = seg.position_of(offset)?;
        let mut pos = first_pos;
        while let Some(h) = header {
            if h.last_offset + 1 > max_offset {
                break;
            }
            let taken = (pos - first_pos) as usize;
            if taken + h.size as usize > max_bytes && !(taken == 0 && min_one_batch) {
                break;
            }
            pos += h.size;
            header = seg.header_at(pos)?;
        }
        Ok((pos > first_pos).then_some((seg, first_pos, pos)))
    }
}

impl LogStorage for FileLog {
    fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    fn log_end_offset(&self) -> i64 {
        self.segments.last().map_or(0, |s| s.next_offset)
    }

    fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, LogError> {
        let leo = self.log_end_offset();
        let batches = stamp_as_leader(records, leo, leader_epoch)?;
        if leader_epoch >= 0
            && self.epochs.latest_epoch() != Some(leader_epoch)
            && self.epochs.assign(leader_epoch, leo)?
        {
            self.persist_epochs()?;
        }
        self.write_batches(&batches)
    }

    fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, LogError> {
        let batches = split_batches(records)?;
        check_follower_order(&batches, self.log_end_offset())?;
        if learn_epochs(&mut self.epochs, &batches)? {
            self.persist_epochs()?;
        }
        self.write_batches(&batches)
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Bytes, LogError> {
        let Some((seg, first_pos, pos)) =
            self.span(offset, max_bytes, max_offset, min_one_batch)?
        else {
            return Ok(Bytes::new());
        };
        let mut buf = vec![0u8; (pos - first_pos) as usize];
        crate::data_path::count_copy(crate::data_path::CopyStep::LogRead, buf.len());
        let mut f = &seg.file;
        f.seek(SeekFrom::Start(first_pos))?;
        f.read_exact(&mut buf)?;
        Ok(Bytes::from(buf))
    }

    fn readable_bytes(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<usize, LogError> {
        Ok(self
            .span(offset, max_bytes, max_offset, min_one_batch)?
            .map_or(0, |(_, first_pos, pos)| (pos - first_pos) as usize))
    }

    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        if offset < leo {
            while self.segments.len() > 1
                && self.segments.last().is_some_and(|s| s.base_offset > offset)
            {
                self.segments.pop();
            }
            self.remove_orphans()?;
            let seg = self.active();
            let (pos, header) = seg.position_of(offset)?;
            if let Some(h) = header {
                seg.truncate_at(pos)?;
                seg.next_offset = h.base_offset.max(seg.base_offset);
            }
            let leo = self.log_end_offset();
            self.recovery_point = self.recovery_point.min(leo);
            self.log_start_offset = self.log_start_offset.min(leo);
        }
        let leo = self.log_end_offset();
        if self.epochs.truncate_from_end(leo) {
            self.persist_epochs()?;
        }
        Ok(())
    }

    fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    fn assign_epoch_start(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        if self.epochs.assign(epoch, start_offset)? {
            self.persist_epochs()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        self.active().file.sync_data()?;
        self.active().index_file.sync_data()?;
        self.unflushed_bytes = 0;
        let leo = self.log_end_offset();
        if leo != self.recovery_point {
            write_offset(&self.dir.join(RECOVERY_CHECKPOINT), leo)?;
            self.recovery_point = leo;
        }
        Ok(())
    }

    fn checkpoint_high_watermark(&mut self, high_watermark: i64) -> Result<(), LogError> {
        write_offset(&self.dir.join(HW_CHECKPOINT), high_watermark)?;
        self.high_watermark = high_watermark;
        Ok(())
    }

    fn checkpointed_high_watermark(&self) -> i64 {
        self.high_watermark
    }

    fn apply_retention(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        policy: &RetentionPolicy,
    ) -> Result<RetentionOutcome, LogError> {
        let mut infos = Vec::with_capacity(self.segments.len());
        for s in &mut self.segments {
            infos.push(SegmentInfo {
                next_offset: s.next_offset,
                size: s.size,
                max_timestamp: s.max_timestamp()?,
            });
        }
        let n = deletable_prefix(
            &infos,
            now_ms,
            high_watermark,
            self.log_start_offset,
            policy,
        );
        self.delete_oldest(n)
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        let offset = offset.max(0);
        tracing::info!(dir = %self.dir.display(), offset, "truncating fully; the log starts again");
        // The new empty segment first, so that a crash in between leaves a log that opens.
        let fresh = Segment::create(&self.dir, offset)?;
        self.segments.clear();
        self.segments.push(fresh);
        self.remove_orphans()?;
        self.epochs = LeaderEpochCache::new();
        self.persist_epochs()?;
        self.log_start_offset = offset;
        write_offset(&self.dir.join(LOG_START_CHECKPOINT), offset)?;
        self.recovery_point = offset;
        write_offset(&self.dir.join(RECOVERY_CHECKPOINT), offset)?;
        self.high_watermark = offset;
        write_offset(&self.dir.join(HW_CHECKPOINT), offset)?;
        Ok(())
    }

    fn increment_log_start_offset(&mut self, offset: i64) -> Result<bool, LogError> {
        let offset = offset.min(self.log_end_offset());
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = offset;
        write_offset(&self.dir.join(LOG_START_CHECKPOINT), offset)?;
        let below = self
            .segments
            .iter()
            .take(self.segments.len().saturating_sub(1))
            .take_while(|s| s.next_offset <= offset)
            .count();
        self.delete_oldest(below)?;
        Ok(true)
    }
}

impl FileLog {
    /// Deletes the `n` oldest segments (never the active one), moves the log start offset to
    /// the first offset left and checkpoints it.
    fn delete_oldest(&mut self, n: usize) -> Result<RetentionOutcome, LogError> {
        let n = n.min(self.segments.len().saturating_sub(1));
        let mut bytes = 0;
        for seg in self.segments.drain(..n) {
            bytes += seg.size;
            tracing::info!(
                dir = %self.dir.display(),
                segment = seg.base_offset,
                next_offset = seg.next_offset,
                bytes = seg.size,
                "deleting a segment (retention)"
            );
        }
        if n > 0 {
            self.remove_orphans()?;
            let first = self.segments.first().map_or(0, |s| s.base_offset);
            if first > self.log_start_offset {
                self.log_start_offset = first;
                write_offset(&self.dir.join(LOG_START_CHECKPOINT), first)?;
            }
        }
        Ok(RetentionOutcome {
            segments_deleted: n,
            bytes_deleted: bytes,
            log_start_offset: self.log_start_offset,
        })
    }

    /// Deletes segment files that no longer belong to a live segment.
    fn remove_orphans(&mut self) -> Result<(), LogError> {
        let live: Vec<i64> = self.segments.iter().map(|s| s.base_offset).collect();
        for e in fs::read_dir(&self.dir)?.filter_map(|e| e.ok()) {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let base = name
                .strip_suffix(".log")
                .or_else(|| name.strip_suffix(".index"))
                .and_then(|b| b.parse::<i64>().ok());
            if let Some(base) = base {
                if !live.contains(&base) {
                    fs::remove_file(e.path())?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
