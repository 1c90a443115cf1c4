//! The `LogStorage` conformance suite on `MemoryLog` and on `FileLog` (one segment, and
//! segments small enough to roll several times in a case), with torn and damaged files.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kafka_replication::log::{FileLog, FileLogConfig, FlushPolicy, LogError, MemoryLog};
use kafka_replication::testing::log_storage::{self, Damage, LogStorageBuilder};
use kafka_replication::testing::ConformanceError;

struct Memory;

impl LogStorageBuilder for Memory {
    type Log = MemoryLog;

    fn build(&self) -> Result<MemoryLog, LogError> {
        Ok(MemoryLog::new())
    }

    fn reopen(&self, log: MemoryLog) -> Result<MemoryLog, LogError> {
        Ok(log)
    }
}

/// `FileLog`s in numbered directories under one temporary directory.
struct Files {
    root: tempfile::TempDir,
    config: FileLogConfig,
    next: AtomicUsize,
}

impl Files {
    fn new(config: FileLogConfig) -> Files {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        Files {
            root,
            config,
            next: AtomicUsize::new(0),
        }
    }
}

/// The newest segment file of the log in `dir`.
fn last_segment(dir: &Path) -> std::io::Result<PathBuf> {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop()
        .ok_or_else(|| std::io::Error::other("no segment file"))
}

fn damage_files(dir: &Path, damage: Damage) -> std::io::Result<()> {
    let path = last_segment(dir)?;
    match damage {
        Damage::TornTail { bytes } => {
            let len = fs::metadata(&path)?.len();
            let f = OpenOptions::new().write(true).open(&path)?;
            f.set_len(len.saturating_sub(bytes as u64))
        }
        Damage::FlippedByte { from_end } => {
            let mut raw = fs::read(&path)?;
            let n = raw.len();
            let i = n
                .checked_sub(from_end)
                .ok_or_else(|| std::io::Error::other("segment shorter than the damage"))?;
            raw[i] ^= 0xff;
            fs::write(&path, raw)
        }
        other => Err(std::io::Error::other(format!("unknown damage {other:?}"))),
    }
}

impl LogStorageBuilder for Files {
    type Log = FileLog;

    fn build(&self) -> Result<FileLog, LogError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        FileLog::open(self.root.path().join(format!("log-{n}")), self.config)
    }

    fn reopen(&self, log: FileLog) -> Result<FileLog, LogError> {
        let dir = log.dir().to_path_buf();
        drop(log);
        FileLog::open(dir, self.config)
    }

    fn reopen_damaged(&self, log: FileLog, damage: Damage) -> Option<Result<FileLog, LogError>> {
        let dir = log.dir().to_path_buf();
        drop(log);
        Some(
            damage_files(&dir, damage)
                .map_err(LogError::from)
                .and_then(|()| FileLog::open(dir, self.config)),
        )
    }
}

#[test]
fn memory_log_passes_the_log_storage_suite() -> Result<(), ConformanceError> {
    log_storage::test_all(&Memory)
}

#[test]
fn file_log_passes_the_log_storage_suite() -> Result<(), ConformanceError> {
    log_storage::test_all(&Files::new(FileLogConfig::default()))
}

#[test]
fn file_log_with_small_segments_passes_the_log_storage_suite() -> Result<(), ConformanceError> {
    let config = FileLogConfig::default()
        .with_segment_bytes(200)
        .with_index_interval_bytes(64)
        .with_flush(FlushPolicy::Manual);
    log_storage::test_all(&Files::new(config))
}

#[test]
fn the_damage_cases_fail_on_a_log_that_keeps_the_damaged_batch() {
    // A builder whose "damage" leaves the files intact: the log then keeps the last batch,
    // which the damage cases must report rather than pass.
    struct Undamaged(Files);
    impl LogStorageBuilder for Undamaged {
        type Log = FileLog;
        fn build(&self) -> Result<FileLog, LogError> {
            self.0.build()
        }
        fn reopen(&self, log: FileLog) -> Result<FileLog, LogError> {
            self.0.reopen(log)
        }
        fn reopen_damaged(&self, log: FileLog, _: Damage) -> Option<Result<FileLog, LogError>> {
            Some(self.0.reopen(log))
        }
    }
    let b = Undamaged(Files::new(FileLogConfig::default()));
    let torn = log_storage::torn_tail_is_dropped_on_reopen(&b);
    assert!(
        matches!(&torn, Err(e) if e.case() == "torn_tail_is_dropped_on_reopen"),
        "{torn:?}"
    );
    let flipped = log_storage::flipped_byte_is_detected_on_reopen(&b);
    assert!(
        matches!(&flipped, Err(e) if e.case() == "flipped_byte_is_detected_on_reopen"),
        "{flipped:?}"
    );
}
