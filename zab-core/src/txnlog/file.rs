//! [`FileTxnLog`]: a transaction log in segments, and snapshots, in one directory.
//!
//! - `log.<zxid as 16 hex digits>`: one segment of the log, named after the zxid of its first
//!   transaction (as ZooKeeper names its `log.<zxid>` files). The 8-byte magic `HATXLOG1`,
//!   then records `u32 len; u32 crc32c(zxid ++ data); i64 zxid; data[len]` (big-endian). A
//!   segment is created by the first append after the previous one passed
//!   [`FileTxnLogOptions::segment_size`] bytes (ZooKeeper's `txnLogSizeLimitInKb`) or after a
//!   snapshot was saved (ZooKeeper rolls its log at every snapshot), so that whole segments
//!   can be [purged](TxnLog::purge) once snapshots cover them.
//! - On open only the last segment is scanned: its first record that is short, over
//!   [`MAX_TXN_DATA`], fails its checksum or does not increase the zxid marks a torn tail
//!   and the segment is cut there (a crash mid-append loses only that append, which was never
//!   acknowledged); a last segment left without a record by a crash is deleted. A damaged
//!   record in an older segment is reported as [`TxnLogError::Corrupt`] when read.
//! - `snapshot.<zxid as 16 hex digits>`: the magic `HASNAP01`, `i64 zxid; u64 len;
//!   u32 crc32c(data)`, then the data. Written to a temporary file, fsynced, renamed into place
//!   and the directory fsynced, so a crash leaves the old or the new snapshot. A snapshot that
//!   fails its checks is skipped for the next older one.
//!
//! Memory does not grow with the log: the log keeps one entry per segment, and reads stream
//! through the segments from the one holding the wanted zxid.
//!
//! Purge (ZooKeeper's `PurgeTxnLog`): the newest [`FileTxnLogOptions::snap_retain_count`]
//! snapshots are kept (at least [`MIN_SNAP_RETAIN_COUNT`]); older snapshots are deleted, and
//! so is every segment whose transactions all lie at or below the oldest kept snapshot.
//!
//! Group commit: [`TxnLog::append_deferred`] writes the records at once and leaves the fsync
//! to the next [`TxnLog::sync`], which covers every record written since the last one (as
//! ZooKeeper's sync thread flushes a group of transactions with one fsync);
//! [`TxnLog::start_sync`] hands that fsync to another thread while appends go on. A segment
//! is fsynced when the log rolls to the next one.
//!
//! A directory written by an older version of this log (one file `txnlog`) is turned into a
//! segment on open.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use tracing::warn;

use super::retain::MIN_SNAP_RETAIN_COUNT;
use super::{
    check_append, FsyncPolicy, PendingSync, Snapshot, Txn, TxnLog, TxnLogError, MAX_SNAPSHOT_DATA,
    MAX_TXN_DATA,
};
use crate::broadcast::SnapshotInfo;
use crate::zxid::Zxid;

const LOG_MAGIC: &[u8; 8] = b"HATXLOG1";
const SNAP_MAGIC: &[u8; 8] = b"HASNAP01";
const RECORD_HEADER: u64 = 16;
const SNAP_HEADER: usize = 8 + 8 + 8 + 4;
const LEGACY_LOG_FILE: &str = "txnlog";
const LOG_PREFIX: &str = "log.";
pub(super) const SNAP_PREFIX: &str = "snapshot.";

/// Default size after which the log rolls to a new segment (64 MiB, the size ZooKeeper
/// preallocates its log files to).
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;

/// How a [`FileTxnLog`] writes, rolls and purges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileTxnLogOptions {
    /// When appends become durable.
    pub fsync: FsyncPolicy,
    /// A segment that reached this many bytes is closed and the next append starts a new one
    /// (ZooKeeper's `txnLogSizeLimitInKb`). A single batch is never split, so a segment may
    /// exceed it by one batch.
    pub segment_size: u64,
    /// Snapshots kept by [`TxnLog::purge`] (ZooKeeper's `autopurge.snapRetainCount`; values
    /// below [`MIN_SNAP_RETAIN_COUNT`] count as it).
    pub snap_retain_count: usize,
}

impl FileTxnLogOptions {
    /// [`FsyncPolicy::EveryAppend`], [`DEFAULT_SEGMENT_SIZE`], [`MIN_SNAP_RETAIN_COUNT`].
    pub const fn new() -> Self {
        Self {
            fsync: FsyncPolicy::EveryAppend,
            segment_size: DEFAULT_SEGMENT_SIZE,
            snap_retain_count: MIN_SNAP_RETAIN_COUNT,
        }
    }

    /// With this fsync policy.
    #[must_use]
    pub const fn with_fsync(mut self, fsync: FsyncPolicy) -> Self {
        self.fsync = fsync;
        self
    }

    /// Rolling to a new segment past `bytes` (at least one record per segment).
    #[must_use]
    pub const fn with_segment_size(mut self, bytes: u64) -> Self {
        self.segment_size = bytes;
        self
    }

    /// Keeping the newest `count` snapshots when purging (at least
    /// [`MIN_SNAP_RETAIN_COUNT`]).
    #[must_use]
    pub const fn with_snap_retain_count(mut self, count: usize) -> Self {
        self.snap_retain_count = if count < MIN_SNAP_RETAIN_COUNT {
            MIN_SNAP_RETAIN_COUNT
        } else {
            count
        };
        self
    }
}

impl Default for FileTxnLogOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// One segment file: the zxid of its first record.
#[derive(Debug, Clone)]
struct Segment {
    first: Zxid,
    path: PathBuf,
}

/// A [`TxnLog`] in a directory (see the module documentation for the formats).
#[derive(Debug)]
pub struct FileTxnLog {
    dir: PathBuf,
    opts: FileTxnLogOptions,
    /// Every segment, oldest first; the last one is the one appended to.
    segments: Vec<Segment>,
    /// The last segment, open for appending (`None` when there is no segment).
    file: Option<File>,
    /// The valid length of the last segment.
    end: u64,
    /// The last logged zxid.
    last: Option<Zxid>,
    /// The next append starts a new segment (a snapshot was saved since the last roll).
    roll_pending: bool,
    snapshot_zxid: Zxid,
    /// Records were written since the last fsync.
    unsynced: bool,
    /// Where the last [`for_each_after`](Self::for_each_after) stopped, so that a reader
    /// going through the log in chunks does not read each segment again from its start.
    resume: std::sync::Mutex<Option<Resume>>,
}

/// A position in the log: the record after `after` starts at `offset` of the segment whose
/// first zxid is `segment`.
#[derive(Debug, Clone, Copy)]
struct Resume {
    after: Zxid,
    segment: Zxid,
    offset: u64,
}

fn segment_name(first: Zxid) -> String {
    format!("{LOG_PREFIX}{:016x}", first.0)
}

fn parse_hex_zxid(hex: &str) -> Option<Zxid> {
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(|z| Zxid(z as i64))
}
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TxnLogError + '_ {
    move |source| TxnLogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn record_crc(zxid: Zxid, data: &[u8]) -> u32 {
    let c = crc32c::crc32c(&zxid.0.to_be_bytes());
    crc32c::crc32c_append(c, data)
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` if the input ends first.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => return Ok(false),
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// One record read from `r`: `Ok(None)` at a clean end or a torn / corrupt record.
fn read_record(r: &mut impl Read) -> std::io::Result<Option<Txn>> {
    let mut h = [0u8; RECORD_HEADER as usize];
    if !read_full(r, &mut h)? {
        return Ok(None);
    }
    let [l0, l1, l2, l3, c0, c1, c2, c3, z @ ..] = h;
    let len = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
    let crc = u32::from_be_bytes([c0, c1, c2, c3]);
    let zxid = Zxid(i64::from_be_bytes(z));
    if len > MAX_TXN_DATA {
        return Ok(None);
    }
    let mut data = vec![0u8; len];
    if !read_full(r, &mut data)? || record_crc(zxid, &data) != crc {
        return Ok(None);
    }
    Ok(Some(Txn::new(zxid, data)))
}

/// What a scan of one segment found: where its valid records end and the last of them.
struct Scan {
    end: u64,
    first: Option<Zxid>,
    last: Option<Zxid>,
    len: u64,
}

/// Reads the records of the segment at `path` from its start, stopping at the first torn or
/// corrupt one, at a zxid that does not increase, or at the first zxid above `upto`.
fn scan_segment(path: &Path, upto: Option<Zxid>) -> Result<Scan, TxnLogError> {
    let file = File::open(path).map_err(io(path))?;
    let len = file.metadata().map_err(io(path))?.len();
    let mut r = BufReader::new(file);
    let mut magic = [0u8; 8];
    if !read_full(&mut r, &mut magic).map_err(io(path))? {
        return Ok(Scan {
            end: 0,
            first: None,
            last: None,
            len,
        });
    }
    if &magic != LOG_MAGIC {
        return Err(TxnLogError::Corrupt {
            path: path.to_path_buf(),
            reason: "bad magic".into(),
        });
    }
    let mut scan = Scan {
        end: LOG_MAGIC.len() as u64,
        first: None,
        last: None,
        len,
    };
    while let Some(t) = read_record(&mut r).map_err(io(path))? {
        if scan.last.is_some_and(|z| t.zxid <= z) || upto.is_some_and(|u| t.zxid > u) {
            break;
        }
        scan.first.get_or_insert(t.zxid);
        scan.last = Some(t.zxid);
        scan.end += RECORD_HEADER + t.data.len() as u64;
    }
    Ok(scan)
}

impl FileTxnLog {
    /// Opens the log in `dir` (created if missing) with `policy` and the default
    /// [`FileTxnLogOptions`], cutting a torn tail.
    pub fn open(dir: impl Into<PathBuf>, policy: FsyncPolicy) -> Result<Self, TxnLogError> {
        Self::open_with(dir, FileTxnLogOptions::new().with_fsync(policy))
    }

    /// Opens the log in `dir` (created if missing) with `opts`, cutting a torn tail of its
    /// last segment.
    pub fn open_with(
        dir: impl Into<PathBuf>,
        opts: FileTxnLogOptions,
    ) -> Result<Self, TxnLogError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        migrate_legacy(&dir)?;
        let mut segments = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let e = e.map_err(io(&dir))?;
            let name = e.file_name();
            let Some(first) = name
                .to_str()
                .and_then(|n| n.strip_prefix(LOG_PREFIX))
                .and_then(parse_hex_zxid)
            else {
                continue;
            };
            segments.push(Segment {
                first,
                path: e.path(),
            });
        }
        segments.sort_by_key(|s| s.first);
        let mut log = Self {
            dir,
            opts,
            segments,
            file: None,
            end: 0,
            last: None,
            roll_pending: false,
            snapshot_zxid: Zxid::ZERO,
            unsynced: false,
            resume: std::sync::Mutex::new(None),
        };
        log.recover_tail()?;
        log.snapshot_zxid = log.latest_snapshot()?.map(|s| s.zxid).unwrap_or(Zxid::ZERO);
        Ok(log)
    }

    /// Finds the end of the last segment, cutting its torn tail; deletes a last segment
    /// without any intact record (a crash right after it was created).
    fn recover_tail(&mut self) -> Result<(), TxnLogError> {
        while let Some(seg) = self.segments.last().cloned() {
            let scan = scan_segment(&seg.path, None)?;
            match scan.first {
                Some(first) if first != seg.first => {
                    return Err(TxnLogError::Corrupt {
                        path: seg.path,
                        reason: format!("first record is {first}, not the segment's zxid"),
                    })
                }
                Some(_) => {
                    let file = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&seg.path)
                        .map_err(io(&seg.path))?;
                    if scan.end < scan.len {
                        warn!(
                            file = %seg.path.display(),
                            kept = scan.end,
                            dropped = scan.len - scan.end,
                            "cutting a torn transaction log tail"
                        );
                        file.set_len(scan.end).map_err(io(&seg.path))?;
                        file.sync_all().map_err(io(&seg.path))?;
                    }
                    self.file = Some(file);
                    self.end = scan.end;
                    self.last = scan.last;
                    return Ok(());
                }
                None => {
                    warn!(file = %seg.path.display(), "deleting a log segment without records");
                    std::fs::remove_file(&seg.path).map_err(io(&seg.path))?;
                    self.sync_dir()?;
                    self.segments.pop();
                }
            }
        }
        Ok(())
    }

    /// The directory holding the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> FileTxnLogOptions {
        self.opts
    }

    /// The segment files, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments.iter().map(|s| s.path.clone()).collect()
    }

    fn current_path(&self) -> PathBuf {
        self.segments
            .last()
            .map(|s| s.path.clone())
            .unwrap_or_else(|| self.dir.clone())
    }

    fn read_snapshot(path: &Path) -> Result<Option<Snapshot>, TxnLogError> {
        let mut f = File::open(path).map_err(io(path))?;
        let mut h = [0u8; SNAP_HEADER];
        if !read_full(&mut f, &mut h).map_err(io(path))? || &h[..8] != SNAP_MAGIC {
            return Ok(None);
        }
        let mut z = [0u8; 8];
        z.copy_from_slice(&h[8..16]);
        let mut l = [0u8; 8];
        l.copy_from_slice(&h[16..24]);
        let mut c = [0u8; 4];
        c.copy_from_slice(&h[24..28]);
        let len = u64::from_be_bytes(l);
        if len > MAX_SNAPSHOT_DATA as u64 {
            return Ok(None);
        }
        let mut data = vec![0u8; len as usize];
        if !read_full(&mut f, &mut data).map_err(io(path))?
            || crc32c::crc32c(&data) != u32::from_be_bytes(c)
        {
            return Ok(None);
        }
        Ok(Some(Snapshot {
            zxid: Zxid(i64::from_be_bytes(z)),
            data: Bytes::from(data),
        }))
    }

    fn sync_dir(&self) -> Result<(), TxnLogError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))
    }

    /// Starts a segment for a batch whose first zxid is `first`: the previous one is fsynced
    /// first (a later sync covers only the new file), and the directory after creating it.
    fn roll(&mut self, first: Zxid) -> Result<(), TxnLogError> {
        if self.file.is_some() && self.end <= LOG_MAGIC.len() as u64 {
            // A segment left without a record by a failed write: replace it.
            self.file = None;
            if let Some(s) = self.segments.pop() {
                std::fs::remove_file(&s.path).map_err(io(&s.path))?;
            }
        }
        if let Some(f) = self.file.take() {
            if self.unsynced {
                let path = self.current_path();
                f.sync_data().map_err(io(&path))?;
                self.unsynced = false;
            }
        }
        let path = self.dir.join(segment_name(first));
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io(&path))?;
        f.write_all(LOG_MAGIC).map_err(io(&path))?;
        self.sync_dir()?;
        self.segments.push(Segment { first, path });
        self.file = Some(f);
        self.end = LOG_MAGIC.len() as u64;
        self.roll_pending = false;
        Ok(())
    }

    /// Writes `txns` as records after the last one, with an fsync if `durable`.
    fn write_records(&mut self, txns: &[Txn], durable: bool) -> Result<(), TxnLogError> {
        check_append(self.last, txns)?;
        let Some(first) = txns.first() else {
            if durable {
                return self.sync();
            }
            return Ok(());
        };
        if self.file.is_none()
            || self.roll_pending
            || self.end <= LOG_MAGIC.len() as u64
            || self.end >= self.opts.segment_size.max(LOG_MAGIC.len() as u64 + 1)
        {
            self.roll(first.zxid)?;
        }
        let mut buf = BytesMut::new();
        for t in txns {
            buf.put_u32(t.data.len() as u32);
            buf.put_u32(record_crc(t.zxid, &t.data));
            buf.put_i64(t.zxid.0);
            buf.put_slice(&t.data);
        }
        let path = self.current_path();
        let end = self.end;
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let written = file
            .seek(SeekFrom::Start(end))
            .and_then(|_| file.write_all(&buf))
            .and_then(|_| if durable { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            // Leave no partial records behind for the next append to follow.
            let _ = file.set_len(end);
            return Err(io(&path)(e));
        }
        self.end += buf.len() as u64;
        self.last = txns.last().map(|t| t.zxid);
        // A durable write's fsync covers every earlier record of the segment too (earlier
        // segments were fsynced when the log rolled).
        self.unsynced = !durable;
        Ok(())
    }

    /// Calls `f` with every logged transaction above `after`, in order, reading one record
    /// at a time: memory stays bounded by the largest record whatever the log's length.
    /// Stops early when `f` returns `false`.
    pub fn for_each_after(
        &self,
        after: Zxid,
        mut f: impl FnMut(Txn) -> bool,
    ) -> Result<(), TxnLogError> {
        if self.last.is_none_or(|l| l <= after) {
            return Ok(());
        }
        let resume = *self
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let resume = resume.filter(|r| r.after == after).and_then(|r| {
            let i = self.segments.iter().position(|s| s.first == r.segment)?;
            Some((i, r.offset))
        });
        let start = match resume {
            Some((i, _)) => i,
            None => self
                .segments
                .partition_point(|s| s.first <= after)
                .saturating_sub(1),
        };
        let n = self.segments.len();
        let mut prev: Option<Zxid> = resume.map(|_| after);
        for (i, seg) in self.segments.iter().enumerate().skip(start) {
            let path = &seg.path;
            let mut file = File::open(path).map_err(io(path))?;
            let limit = if i + 1 == n {
                self.end
            } else {
                file.metadata().map_err(io(path))?.len()
            };
            let mut pos = LOG_MAGIC.len() as u64;
            match resume {
                Some((j, offset)) if i == j && offset >= pos && offset <= limit => {
                    file.seek(SeekFrom::Start(offset)).map_err(io(path))?;
                    pos = offset;
                }
                _ => {
                    let mut magic = [0u8; 8];
                    if !read_full(&mut file, &mut magic).map_err(io(path))? || &magic != LOG_MAGIC {
                        return Err(corrupt(path, "bad magic"));
                    }
                }
            }
            let mut r = BufReader::new(file.take(limit.saturating_sub(pos)));
            while pos < limit {
                let start = pos;
                let Some(t) = read_record(&mut r).map_err(io(path))? else {
                    return Err(corrupt(path, &format!("damaged record at offset {pos}")));
                };
                if prev.is_some_and(|p| t.zxid <= p) {
                    return Err(corrupt(path, &format!("zxid {} out of order", t.zxid)));
                }
                pos += RECORD_HEADER + t.data.len() as u64;
                if t.zxid > after {
                    let zxid = t.zxid;
                    if !f(t) {
                        if let Some(p) = prev {
                            self.remember(p, seg.first, start);
                        }
                        return Ok(());
                    }
                    prev = Some(zxid);
                    continue;
                }
                prev = Some(t.zxid);
            }
            if i + 1 == n {
                if let Some(p) = prev {
                    self.remember(p, seg.first, pos);
                }
            }
        }
        Ok(())
    }

    fn remember(&self, after: Zxid, segment: Zxid, offset: u64) {
        *self
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Resume {
            after,
            segment,
            offset,
        });
    }

    fn forget_position(&self) {
        *self
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

fn corrupt(path: &Path, reason: &str) -> TxnLogError {
    TxnLogError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Turns the single `txnlog` file of an older version into the segment named after its
/// first record (or deletes it when it holds none).
fn migrate_legacy(dir: &Path) -> Result<(), TxnLogError> {
    let legacy = dir.join(LEGACY_LOG_FILE);
    if !legacy.exists() {
        return Ok(());
    }
    let scan = scan_segment(&legacy, None)?;
    match scan.first {
        Some(first) => {
            let to = dir.join(segment_name(first));
            std::fs::rename(&legacy, &to).map_err(io(&to))?;
        }
        None => std::fs::remove_file(&legacy).map_err(io(&legacy))?,
    }
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

impl TxnLog for FileTxnLog {
    fn append(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        // Under `EveryAppend` the fsync also covers earlier deferred appends.
        self.write_records(txns, self.opts.fsync == FsyncPolicy::EveryAppend)
    }

    /// Group commit: the records are written now (one `write`), the fsync waits for
    /// [`sync`](TxnLog::sync), which covers every append since the last one.
    fn append_deferred(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        self.write_records(txns, false)
    }

    /// One fsync for everything appended since the last one; nothing to do when every append
    /// is already durable.
    fn sync(&mut self) -> Result<(), TxnLogError> {
        if !self.unsynced {
            return Ok(());
        }
        let path = self.current_path();
        if let Some(f) = &self.file {
            f.sync_data().map_err(io(&path))?;
        }
        self.unsynced = false;
        Ok(())
    }

    /// Hands a duplicate of the file handle to the task, which fsyncs it: records written
    /// after this call are left for the next sync.
    fn start_sync(&mut self) -> Result<Option<PendingSync>, TxnLogError> {
        if !self.unsynced {
            return Ok(None);
        }
        let path = self.current_path();
        let Some(f) = &self.file else {
            self.unsynced = false;
            return Ok(None);
        };
        let file = f.try_clone().map_err(io(&path))?;
        self.unsynced = false;
        Ok(Some(Box::new(move || {
            file.sync_data()
                .map_err(|source| TxnLogError::Io { path, source })
        })))
    }

    fn last_zxid(&self) -> Zxid {
        self.last.unwrap_or(Zxid::ZERO).max(self.snapshot_zxid)
    }

    fn first_zxid(&self) -> Option<Zxid> {
        self.segments.first().map(|s| s.first)
    }

    fn read_after(&self, after: Zxid) -> Result<Vec<Txn>, TxnLogError> {
        let mut out = Vec::new();
        self.for_each_after(after, |t| {
            out.push(t);
            true
        })?;
        Ok(out)
    }

    fn scan_after(&self, after: Zxid, f: &mut dyn FnMut(Txn) -> bool) -> Result<(), TxnLogError> {
        self.for_each_after(after, f)
    }

    /// Reads only the segment that holds `z`.
    fn logged_at_or_before(&self, z: Zxid) -> Result<Option<Zxid>, TxnLogError> {
        let i = self.segments.partition_point(|s| s.first <= z);
        let Some(seg) = i.checked_sub(1).and_then(|j| self.segments.get(j)) else {
            return Ok(None);
        };
        let mut found = None;
        self.for_each_after(Zxid(seg.first.0.saturating_sub(1)), |t| {
            if t.zxid > z {
                return false;
            }
            found = Some(t.zxid);
            true
        })?;
        Ok(found)
    }

    /// Deletes the segments that start above `to` and cuts the one holding `to` after it.
    fn truncate(&mut self, to: Zxid) -> Result<(), TxnLogError> {
        self.forget_position();
        if self.last.is_none_or(|l| l <= to) {
            return Ok(());
        }
        if self.unsynced {
            // Whatever is kept must be durable before later segments disappear.
            self.sync()?;
        }
        self.file = None;
        let mut removed = false;
        while self.segments.last().is_some_and(|s| s.first > to) {
            if let Some(s) = self.segments.pop() {
                std::fs::remove_file(&s.path).map_err(io(&s.path))?;
                removed = true;
            }
        }
        if removed {
            self.sync_dir()?;
        }
        self.end = 0;
        self.last = None;
        if let Some(seg) = self.segments.last().cloned() {
            let scan = scan_segment(&seg.path, Some(to))?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&seg.path)
                .map_err(io(&seg.path))?;
            file.set_len(scan.end).map_err(io(&seg.path))?;
            file.sync_all().map_err(io(&seg.path))?;
            self.file = Some(file);
            self.end = scan.end;
            self.last = scan.last;
        }
        Ok(())
    }

    /// ZooKeeper's `PurgeTxnLog.purge`: keeps the newest
    /// [`snap_retain_count`](FileTxnLogOptions::snap_retain_count) snapshots, deletes older
    /// ones, and deletes every segment whose transactions all lie at or below both `upto`
    /// and the oldest kept snapshot. The segment being appended to always stays.
    fn purge(&mut self, upto: Zxid) -> Result<(), TxnLogError> {
        let (_, kept) = self.purge_snapshot_files(self.opts.snap_retain_count)?;
        let Some(oldest_kept) = kept else {
            return Ok(());
        };
        let covered = oldest_kept.min(upto);
        // Segment i holds zxids below segments[i + 1].first.
        let doomed = self
            .segments
            .windows(2)
            .take_while(|w| w[1].first.0 <= covered.0.saturating_add(1))
            .count();
        if doomed == 0 {
            return Ok(());
        }
        for s in self.segments.drain(..doomed) {
            std::fs::remove_file(&s.path).map_err(io(&s.path))?;
        }
        self.sync_dir()
    }

    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), TxnLogError> {
        let name = format!("{SNAP_PREFIX}{:016x}", snapshot.zxid.0);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let dst = self.dir.join(&name);
        let mut buf = BytesMut::with_capacity(SNAP_HEADER + snapshot.data.len());
        buf.put_slice(SNAP_MAGIC);
        buf.put_i64(snapshot.zxid.0);
        buf.put_u64(snapshot.data.len() as u64);
        buf.put_u32(crc32c::crc32c(&snapshot.data));
        buf.put_slice(&snapshot.data);
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&buf).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        std::fs::rename(&tmp, &dst).map_err(io(&dst))?;
        self.sync_dir()?;
        self.snapshot_zxid = self.snapshot_zxid.max(snapshot.zxid);
        // ZooKeeper rolls its log at every snapshot, so that purging can drop whole files.
        self.roll_pending = true;
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<Snapshot>, TxnLogError> {
        let mut found = Vec::new();
        for e in std::fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let e = e.map_err(io(&self.dir))?;
            let name = e.file_name();
            let Some(hex) = name.to_str().and_then(|n| n.strip_prefix(SNAP_PREFIX)) else {
                continue;
            };
            if let Ok(z) = u64::from_str_radix(hex, 16) {
                found.push((z as i64, e.path()));
            }
        }
        found.sort_by_key(|e| std::cmp::Reverse(e.0));
        for (z, path) in found {
            match Self::read_snapshot(&path)? {
                Some(s) if s.zxid.0 == z => return Ok(Some(s)),
                _ => warn!(file = %path.display(), "skipping a damaged snapshot"),
            }
        }
        Ok(None)
    }

    /// Reads only the newest snapshot file's header (its checksum is checked by
    /// [`latest_snapshot`](TxnLog::latest_snapshot)); a file shorter than its header says is
    /// skipped.
    fn latest_snapshot_info(&self) -> Result<Option<SnapshotInfo>, TxnLogError> {
        let mut found = Vec::new();
        for e in std::fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let e = e.map_err(io(&self.dir))?;
            let name = e.file_name();
            let Some(hex) = name.to_str().and_then(|n| n.strip_prefix(SNAP_PREFIX)) else {
                continue;
            };
            if let Ok(z) = u64::from_str_radix(hex, 16) {
                found.push((z as i64, e.path()));
            }
        }
        found.sort_by_key(|e| std::cmp::Reverse(e.0));
        for (z, path) in found {
            let mut f = File::open(&path).map_err(io(&path))?;
            let total = f.metadata().map_err(io(&path))?.len();
            let mut h = [0u8; SNAP_HEADER];
            if !read_full(&mut f, &mut h).map_err(io(&path))? || &h[..8] != SNAP_MAGIC {
                continue;
            }
            let mut zb = [0u8; 8];
            zb.copy_from_slice(&h[8..16]);
            let mut lb = [0u8; 8];
            lb.copy_from_slice(&h[16..24]);
            let len = u64::from_be_bytes(lb);
            if i64::from_be_bytes(zb) == z
                && len <= MAX_SNAPSHOT_DATA as u64
                && total >= SNAP_HEADER as u64 + len
            {
                return Ok(Some(SnapshotInfo {
                    zxid: Zxid(z),
                    size: len,
                }));
            }
        }
        Ok(None)
    }
}
