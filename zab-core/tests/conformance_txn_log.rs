//! The `TxnLog` conformance suite on `MemoryTxnLog` and on `FileTxnLog`, with torn and
//! damaged log files.

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use zab_core::testing::txn_log::{self, Damage, TxnLogBuilder};
use zab_core::testing::ConformanceError;
use zab_core::txnlog::{FileTxnLog, FsyncPolicy, MemoryTxnLog, TxnLogError};

struct Memory;

impl TxnLogBuilder for Memory {
    type Log = MemoryTxnLog;

    fn build(&self) -> Result<MemoryTxnLog, TxnLogError> {
        Ok(MemoryTxnLog::with_policy(FsyncPolicy::EveryAppend))
    }

    fn reopen(&self, log: MemoryTxnLog) -> Result<MemoryTxnLog, TxnLogError> {
        log.crash();
        Ok(log)
    }
}

/// `FileTxnLog`s in numbered directories under one temporary directory.
struct Files {
    root: tempfile::TempDir,
    next: AtomicUsize,
}

impl Files {
    fn new() -> Files {
        Files {
            root: tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
            next: AtomicUsize::new(0),
        }
    }
}

/// Damages the last segment of a log (where the records the damage cases wrote last are).
fn damage_log(path: &Path, damage: Damage) -> std::io::Result<()> {
    match damage {
        Damage::TornTail { bytes } => {
            let len = fs::metadata(path)?.len();
            OpenOptions::new()
                .write(true)
                .open(path)?
                .set_len(len.saturating_sub(bytes as u64))
        }
        Damage::FlippedByte { from_end } => {
            let mut raw = fs::read(path)?;
            let i = raw
                .len()
                .checked_sub(from_end)
                .ok_or_else(|| std::io::Error::other("log shorter than the damage"))?;
            raw[i] ^= 0xff;
            fs::write(path, raw)
        }
        other => Err(std::io::Error::other(format!("unknown damage {other:?}"))),
    }
}

impl TxnLogBuilder for Files {
    type Log = FileTxnLog;

    fn build(&self) -> Result<FileTxnLog, TxnLogError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        FileTxnLog::open(
            self.root.path().join(format!("log-{n}")),
            FsyncPolicy::EveryAppend,
        )
    }

    fn reopen(&self, log: FileTxnLog) -> Result<FileTxnLog, TxnLogError> {
        let dir = log.dir().to_path_buf();
        drop(log);
        FileTxnLog::open(dir, FsyncPolicy::EveryAppend)
    }

    fn reopen_damaged(
        &self,
        log: FileTxnLog,
        damage: Damage,
    ) -> Option<Result<FileTxnLog, TxnLogError>> {
        let dir = log.dir().to_path_buf();
        let last = log.segment_paths().pop();
        drop(log);
        let damaged = match last {
            Some(path) => damage_log(&path, damage),
            None => Err(std::io::Error::other("the log has no segment to damage")),
        };
        Some(
            damaged
                .map_err(|source| TxnLogError::Io {
                    path: dir.clone(),
                    source,
                })
                .and_then(|()| FileTxnLog::open(&dir, FsyncPolicy::EveryAppend)),
        )
    }
}

#[test]
fn memory_txn_log_passes_the_txn_log_suite() -> Result<(), ConformanceError> {
    txn_log::test_all(&Memory)
}

#[test]
fn file_txn_log_passes_the_txn_log_suite() -> Result<(), ConformanceError> {
    txn_log::test_all(&Files::new())
}

#[test]
fn the_damage_cases_fail_on_a_log_that_keeps_the_damaged_record() {
    // A builder whose "damage" leaves the file intact: the last record survives, which the
    // damage cases must report.
    struct Undamaged(Files);
    impl TxnLogBuilder for Undamaged {
        type Log = FileTxnLog;
        fn build(&self) -> Result<FileTxnLog, TxnLogError> {
            self.0.build()
        }
        fn reopen(&self, log: FileTxnLog) -> Result<FileTxnLog, TxnLogError> {
            self.0.reopen(log)
        }
        fn reopen_damaged(
            &self,
            log: FileTxnLog,
            _: Damage,
        ) -> Option<Result<FileTxnLog, TxnLogError>> {
            Some(self.0.reopen(log))
        }
    }
    let b = Undamaged(Files::new());
    for r in [
        txn_log::torn_tail_is_dropped_on_reopen(&b),
        txn_log::flipped_byte_is_detected_on_reopen(&b),
    ] {
        assert!(
            matches!(&r, Err(ConformanceError::Expectation { .. })),
            "{r:?}"
        );
    }
}
