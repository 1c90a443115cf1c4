//! Snapshot retention for [`FileTxnLog`] (ZooKeeper's `autopurge.snapRetainCount`): old
//! snapshot files are deleted, the newest ones kept, so that a damaged newest snapshot still
//! has older ones to fall back to.

use std::path::PathBuf;

use super::{FileTxnLog, TxnLogError};

/// ZooKeeper's minimum (and default) `autopurge.snapRetainCount`.
pub const MIN_SNAP_RETAIN_COUNT: usize = 3;

/// The file-name prefix of snapshots in a [`FileTxnLog`] directory (`snapshot.<zxid hex>`).
const SNAP_PREFIX: &str = "snapshot.";

impl FileTxnLog {
    /// Deletes every snapshot file but the newest `retain` (at least
    /// [`MIN_SNAP_RETAIN_COUNT`], as ZooKeeper enforces), by zxid; returns the deleted files.
    /// Leftover temporary files of an interrupted snapshot are deleted too.
    pub fn purge_snapshots(&self, retain: usize) -> Result<Vec<PathBuf>, TxnLogError> {
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
        doomed.extend(snaps.into_iter().skip(retain).map(|(_, p)| p));
        for p in &doomed {
            std::fs::remove_file(p).map_err(|source| TxnLogError::Io {
                path: p.clone(),
                source,
            })?;
        }
        Ok(doomed)
    }
}
