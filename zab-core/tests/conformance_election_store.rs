//! The `ElectionStore` conformance suite on `MemoryElectionStore` and on
//! `FileElectionStore`, with interrupted saves, torn and damaged state files.

use std::fs::{self, OpenOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use zab_core::store::{FileElectionStore, MemoryElectionStore, StoreError};
use zab_core::testing::election_store::{self, Damage, ElectionStoreBuilder};
use zab_core::testing::ConformanceError;

struct Memory;

impl ElectionStoreBuilder for Memory {
    type Store = MemoryElectionStore;

    fn build(&self) -> Result<MemoryElectionStore, StoreError> {
        Ok(MemoryElectionStore::default())
    }

    fn reopen(&self, store: MemoryElectionStore) -> Result<MemoryElectionStore, StoreError> {
        Ok(store)
    }
}

/// `FileElectionStore`s in numbered directories under one temporary directory.
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

fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Applies `damage` to the store whose state file is `path`.
fn damage_files(path: &std::path::Path, damage: Damage) -> Result<(), StoreError> {
    match damage {
        Damage::InterruptedSave { next } => {
            // The store writes `election-state.tmp` in full, fsyncs it and renames it over
            // the state file: a crash before the rename leaves part of it behind (here, the
            // new state in the file's format up to the middle of its last field).
            let partial = format!(
                "zab-core election state v1\ncurrentEpoch={}\nacceptedEpoch={}\nlastZxid={}",
                next.current_epoch,
                next.accepted_epoch,
                next.last_zxid / 1000
            );
            let tmp = path.with_file_name("election-state.tmp");
            fs::write(&tmp, partial).map_err(io(&tmp))
        }
        Damage::TornTail { bytes } => {
            let len = fs::metadata(path).map_err(io(path))?.len();
            OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(len.saturating_sub(bytes as u64)))
                .map_err(io(path))
        }
        Damage::FlippedByte { from_end } => {
            let mut raw = fs::read(path).map_err(io(path))?;
            let Some(i) = raw.len().checked_sub(from_end) else {
                return Err(StoreError::Corrupt {
                    path: path.to_path_buf(),
                    reason: "shorter than the damage".into(),
                });
            };
            // Change a digit into another digit where there is one, so that only the
            // checksum can tell.
            raw[i] = match raw[i] {
                b'0'..=b'8' => raw[i] + 1,
                b'9' => b'0',
                other => other ^ 0x20,
            };
            fs::write(path, raw).map_err(io(path))
        }
        other => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("unknown damage {other:?}"),
        }),
    }
}

impl ElectionStoreBuilder for Files {
    type Store = FileElectionStore;

    fn build(&self) -> Result<FileElectionStore, StoreError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        FileElectionStore::create_fresh(self.root.path().join(format!("store-{n}")))
    }

    fn reopen(&self, store: FileElectionStore) -> Result<FileElectionStore, StoreError> {
        let dir = dir_of(&store);
        drop(store);
        FileElectionStore::open(dir)
    }

    fn reopen_damaged(
        &self,
        store: FileElectionStore,
        damage: Damage,
    ) -> Option<Result<FileElectionStore, StoreError>> {
        let path = store.path();
        let dir = dir_of(&store);
        drop(store);
        Some(damage_files(&path, damage).and_then(|()| FileElectionStore::open(dir)))
    }
}

fn dir_of(store: &FileElectionStore) -> PathBuf {
    let path = store.path();
    path.parent().map(PathBuf::from).unwrap_or(path)
}

#[tokio::test]
async fn memory_election_store_passes_the_election_store_suite() -> Result<(), ConformanceError> {
    election_store::test_all(&Memory).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn file_election_store_passes_the_election_store_suite() -> Result<(), ConformanceError> {
    election_store::test_all(&Files::new()).await
}
