//! Snapshot retention for [`FileTxnLog`] (ZooKeeper's `autopurge.snapRetainCount`): old
//! snapshot files are deleted, the newest ones kept, so that a damaged newest snapshot still
//! has older ones to fall back to.

use std::path::PathBuf;

use super::file::SNAP_PREFIX;
use super::{FileTxnLog, TxnLogError};
use crate::zxid::Zxid;

/// ZooKeeper's minimum (and default) `autopurge.snapRetainCount`.
pub const MIN_SNAP_RETAIN_COUNT: usize = 3;

impl FileTxnLog {
    /// Deletes every snapshot file but the newest `retain` (at least
    /// [`MIN_SNAP_RETAIN_COUNT`], as ZooKeeper enforces), by zxid; returns the deleted files.
    /// Leftover temporary files of an interrupted snapshot are deleted too.
    pub fn purge_snapshots(&self, retain: usize) -> Result<Vec<PathBuf>, TxnLogError> {
        self.purge_snapshot_files(retain)
            .map(|(deleted, _)| deleted)
    }

    /// [`purge_snapshots`](Self::purge_snapshots), also returning the zxid of the oldest
    /// snapshot kept.
    pub(super) fn purge_snapshot_files(
        &self,
        retain: usize,
    ) -> Result<(Vec<PathBuf>, Option<Zxid>), TxnLogError> {
        let retain = retain.max(MIN_SNAP_RETAIN_COUNT);
        let dir = self.dir();
        let io = |source| TxnLogError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut snaps = Vec::new();
        let mut doomed = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io)? {
            let path = e.map_err(io)?.path();
            let Some(rest) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(SNAP_PREFIX))
            else {
                continue;
            };
            if rest.ends_with(".tmp") {
                doomed.push(path);
            } else if let Ok(z) = u64::from_str_radix(rest, 16) {
                snaps.push((z, path));
            }
        }
        snaps.sort_by_key(|(z, _)| std::cmp::Reverse(*z));
        let oldest_kept = snaps
            .get(..retain.min(snaps.len()))
            .and_then(|kept| kept.last())
            .map(|(z, _)| Zxid(*z as i64));
        doomed.extend(snaps.into_iter().skip(retain).map(|(_, p)| p));
        for p in &doomed {
            std::fs::remove_file(p).map_err(|source| TxnLogError::Io {
                path: p.clone(),
                source,
            })?;
        }
        Ok((doomed, oldest_kept))
    }
}
