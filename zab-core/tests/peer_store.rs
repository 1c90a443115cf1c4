//! The durable election store: atomic replace, typed errors for missing and corrupt files,
//! never a silent reset (Z1 depends on `acceptedEpoch` surviving restarts).

use zab_core::store::{
    ElectionStore, FileElectionStore, MemoryElectionStore, PersistedEpochs, StoreError,
};

#[tokio::test]
async fn z1_file_store_persists_epochs_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileElectionStore::create_fresh(dir.path()).unwrap();
    assert_eq!(store.load().await.unwrap(), PersistedEpochs::default());
    store.save_accepted_epoch(4).await.unwrap();
    store.save_current_epoch(3).await.unwrap();
    drop(store);
    let reopened = FileElectionStore::open(dir.path()).unwrap();
    let s = reopened.load().await.unwrap();
    assert_eq!((s.current_epoch, s.accepted_epoch, s.last_zxid), (3, 4, 0));
    // the temporary file of the atomic replace is gone
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("election-state")]);
}

#[test]
fn missing_state_file_is_a_typed_error_not_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        FileElectionStore::open(dir.path()),
        Err(StoreError::Missing { .. })
    ));
}

#[tokio::test]
async fn corrupt_state_file_is_a_typed_error_not_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileElectionStore::create_fresh(dir.path()).unwrap();
    store.save_accepted_epoch(7).await.unwrap();
    let path = store.path();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("acceptedEpoch=7", "acceptedEpoch=1")).unwrap();
    assert!(matches!(
        store.load().await,
        Err(StoreError::Corrupt { .. })
    ));
    std::fs::write(&path, b"").unwrap();
    assert!(matches!(
        FileElectionStore::open(dir.path()),
        Err(StoreError::Corrupt { .. })
    ));
    std::fs::write(&path, vec![b'x'; 100_000]).unwrap();
    assert!(matches!(
        FileElectionStore::open(dir.path()),
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn create_fresh_refuses_to_overwrite_existing_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileElectionStore::create_fresh(dir.path()).unwrap();
    store.save_accepted_epoch(2).await.unwrap();
    assert!(matches!(
        FileElectionStore::create_fresh(dir.path()),
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(store.load().await.unwrap().accepted_epoch, 2);
}

#[tokio::test]
async fn memory_store_clones_share_state_like_a_disk_across_restarts() {
    let a = MemoryElectionStore::default();
    let b = a.clone();
    a.save_accepted_epoch(5).await.unwrap();
    assert_eq!(b.load().await.unwrap().accepted_epoch, 5);
    assert_eq!(b.snapshot().accepted_epoch, 5);
}
