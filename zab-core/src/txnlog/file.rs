//! [`FileTxnLog`]: a transaction log and snapshots in one directory.
//!
//! - `txnlog`: the 8-byte magic `HATXLOG1`, then records
//!   `u32 len; u32 crc32c(zxid ++ data); i64 zxid; data[len]` (big-endian). On open, the first
//!   record that is short, over [`MAX_TXN_DATA`], fails its checksum or does not increase the
//!   zxid marks a torn tail: the file is cut there (a crash mid-append loses only that append,
//!   which was never acknowledged).
//! - `snapshot.<zxid as 16 hex digits>`: the magic `HASNAP01`, `i64 zxid; u64 len;
//!   u32 crc32c(data)`, then the data. Written to a temporary file, fsynced, renamed into place
//!   and the directory fsynced, so a crash leaves the old or the new snapshot. A snapshot that
//!   fails its checks is skipped for the next older one.
//!
//! Group commit: [`TxnLog::append_deferred`] writes the records at once and leaves the fsync
//! to the next [`TxnLog::sync`], which covers every record written since the last one (as
//! ZooKeeper's sync thread flushes a group of transactions with one fsync);
//! [`TxnLog::start_sync`] hands that fsync to another thread while appends go on.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use tracing::warn;

use super::{
    check_append, FsyncPolicy, PendingSync, Snapshot, Txn, TxnLog, TxnLogError, MAX_SNAPSHOT_DATA,
    MAX_TXN_DATA,
};
use crate::zxid::Zxid;

const LOG_MAGIC: &[u8; 8] = b"HATXLOG1";
const SNAP_MAGIC: &[u8; 8] = b"HASNAP01";
const RECORD_HEADER: u64 = 16;
const SNAP_HEADER: usize = 8 + 8 + 8 + 4;
const LOG_FILE: &str = "txnlog";
const SNAP_PREFIX: &str = "snapshot.";

/// A [`TxnLog`] in a directory (see the module documentation for the formats).
#[derive(Debug)]
pub struct FileTxnLog {
    dir: PathBuf,
    file: File,
    policy: FsyncPolicy,
    /// (zxid, offset of its record) for every record.
    index: Vec<(Zxid, u64)>,
    end: u64,
    snapshot_zxid: Zxid,
    /// Records were written since the last fsync.
    unsynced: bool,
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

impl FileTxnLog {
    /// Opens the log in `dir` (created if missing), cutting a torn tail.
    pub fn open(dir: impl Into<PathBuf>, policy: FsyncPolicy) -> Result<Self, TxnLogError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        let len = file.metadata().map_err(io(&path))?.len();
        let mut index = Vec::new();
        let mut end = LOG_MAGIC.len() as u64;
        if len < end {
            // New, or torn while writing the magic.
            file.set_len(0).map_err(io(&path))?;
            file.write_all(LOG_MAGIC).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        } else {
            let mut r = BufReader::new(&file);
            let mut magic = [0u8; 8];
            r.read_exact(&mut magic).map_err(io(&path))?;
            if &magic != LOG_MAGIC {
                return Err(TxnLogError::Corrupt {
                    path,
                    reason: "bad magic".into(),
                });
            }
            while let Some(t) = read_record(&mut r).map_err(io(&path))? {
                if index.last().is_some_and(|(z, _)| t.zxid <= *z) {
                    break;
                }
                index.push((t.zxid, end));
                end += RECORD_HEADER + t.data.len() as u64;
            }
            if end < len {
                warn!(
                    file = %path.display(),
                    kept = end,
                    dropped = len - end,
                    "cutting a torn transaction log tail"
                );
                file.set_len(end).map_err(io(&path))?;
                file.sync_all().map_err(io(&path))?;
            }
        }
        let mut log = Self {
            dir,
            file,
            policy,
            index,
            end,
            snapshot_zxid: Zxid::ZERO,
            unsynced: false,
        };
        log.snapshot_zxid = log.latest_snapshot()?.map(|s| s.zxid).unwrap_or(Zxid::ZERO);
        Ok(log)
    }

    /// The directory holding the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
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
}

impl FileTxnLog {
    /// Writes `txns` as records after the last one, with an fsync if `durable`.
    fn write_records(&mut self, txns: &[Txn], durable: bool) -> Result<(), TxnLogError> {
        check_append(self.index.last().map(|(z, _)| *z), txns)?;
        let mut buf = BytesMut::new();
        let mut offsets = Vec::with_capacity(txns.len());
        for t in txns {
            offsets.push((t.zxid, self.end + buf.len() as u64));
            buf.put_u32(t.data.len() as u32);
            buf.put_u32(record_crc(t.zxid, &t.data));
            buf.put_i64(t.zxid.0);
            buf.put_slice(&t.data);
        }
        let path = self.log_path();
        let written = self
            .file
            .seek(SeekFrom::Start(self.end))
            .and_then(|_| self.file.write_all(&buf))
            .and_then(|_| {
                if durable {
                    self.file.sync_data()
                } else {
                    Ok(())
                }
            });
        if let Err(e) = written {
            // Leave no partial records behind for the next append to follow.
            let _ = self.file.set_len(self.end);
            return Err(io(&path)(e));
        }
        self.end += buf.len() as u64;
        self.index.extend(offsets);
        // A durable write's fsync covers every earlier record too.
        self.unsynced = !durable;
        Ok(())
    }
}

impl TxnLog for FileTxnLog {
    fn append(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        // Under `EveryAppend` the fsync also covers earlier deferred appends.
        self.write_records(txns, self.policy == FsyncPolicy::EveryAppend)
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
        let path = self.log_path();
        self.file.sync_data().map_err(io(&path))?;
        self.unsynced = false;
        Ok(())
    }

    /// Hands a duplicate of the file handle to the task, which fsyncs it: records written
    /// after this call are left for the next sync.
    fn start_sync(&mut self) -> Result<Option<PendingSync>, TxnLogError> {
        if !self.unsynced {
            return Ok(None);
        }
        let path = self.log_path();
        let file = self.file.try_clone().map_err(io(&path))?;
        self.unsynced = false;
        Ok(Some(Box::new(move || {
            file.sync_data()
                .map_err(|source| TxnLogError::Io { path, source })
        })))
    }

    fn last_zxid(&self) -> Zxid {
        let log = self.index.last().map(|(z, _)| *z).unwrap_or(Zxid::ZERO);
        log.max(self.snapshot_zxid)
    }

    fn first_zxid(&self) -> Option<Zxid> {
        self.index.first().map(|(z, _)| *z)
    }

    fn read_after(&self, after: Zxid) -> Result<Vec<Txn>, TxnLogError> {
        let i = self.index.partition_point(|(z, _)| *z <= after);
        let Some((_, start)) = self.index.get(i) else {
            return Ok(Vec::new());
        };
        let path = self.log_path();
        let mut f = File::open(&path).map_err(io(&path))?;
        f.seek(SeekFrom::Start(*start)).map_err(io(&path))?;
        let mut r = BufReader::new(f);
        let mut out = Vec::with_capacity(self.index.len() - i);
        for (zxid, _) in &self.index[i..] {
            match read_record(&mut r).map_err(io(&path))? {
                Some(t) if t.zxid == *zxid => out.push(t),
                _ => {
                    return Err(TxnLogError::Corrupt {
                        path,
                        reason: format!("record {zxid} changed on disk"),
                    })
                }
            }
        }
        Ok(out)
    }

    fn truncate(&mut self, to: Zxid) -> Result<(), TxnLogError> {
        let i = self.index.partition_point(|(z, _)| *z <= to);
        let Some((_, cut)) = self.index.get(i).copied() else {
            return Ok(());
        };
        let path = self.log_path();
        self.file.set_len(cut).map_err(io(&path))?;
        self.file.sync_all().map_err(io(&path))?;
        self.index.truncate(i);
        self.end = cut;
        Ok(())
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
}
