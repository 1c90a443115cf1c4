//! The transaction logs and the state-machine snapshot contract: append / read / truncate on
//! both implementations, torn-tail recovery and atomic snapshots of the file log, and bad bytes
//! on disk that never panic or allocate without bound.

use std::fs::OpenOptions;
use std::io::Write;

use zab_core::state_machine::{RecordingStateMachine, StateMachine};
use zab_core::txnlog::{FileTxnLog, FsyncPolicy, MemoryTxnLog, Snapshot, Txn, TxnLog, TxnLogError};
use zab_core::Zxid;

fn txn(epoch: i64, counter: u32) -> Txn {
    Txn::new(
        Zxid::new(epoch, counter),
        format!("txn {epoch}/{counter}").into_bytes(),
    )
}

fn exercise(log: &mut dyn TxnLog) {
    assert_eq!(log.last_zxid(), Zxid::ZERO);
    assert_eq!(log.first_zxid(), None);
    log.append(&[txn(1, 1), txn(1, 2)]).unwrap();
    log.append(&[txn(1, 3), txn(2, 1)]).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(2, 1));
    assert_eq!(log.first_zxid(), Some(Zxid::new(1, 1)));
    let after = log.read_after(Zxid::new(1, 2)).unwrap();
    assert_eq!(after, vec![txn(1, 3), txn(2, 1)]);
    assert_eq!(log.read_after(Zxid::ZERO).unwrap().len(), 4);
    assert!(log.read_after(Zxid::new(2, 1)).unwrap().is_empty());

    // Out of order, or a duplicate, is refused and appends nothing.
    let err = log.append(&[txn(2, 2), txn(2, 2)]).unwrap_err();
    assert!(matches!(err, TxnLogError::OutOfOrder { .. }));
    let err = log.append(&[txn(1, 9)]).unwrap_err();
    assert!(matches!(err, TxnLogError::OutOfOrder { .. }));
    assert_eq!(log.last_zxid(), Zxid::new(2, 1));

    // TRUNC to a zxid keeps everything up to it.
    log.truncate(Zxid::new(1, 2)).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(1, 2));
    log.append(&[txn(3, 1)]).unwrap();
    assert_eq!(
        log.read_after(Zxid::ZERO).unwrap(),
        vec![txn(1, 1), txn(1, 2), txn(3, 1)]
    );

    // Snapshots: the newest wins and counts for last_zxid.
    assert_eq!(log.latest_snapshot().unwrap(), None);
    let s = Snapshot {
        zxid: Zxid::new(4, 0),
        data: "state".into(),
    };
    log.save_snapshot(&s).unwrap();
    assert_eq!(log.latest_snapshot().unwrap(), Some(s));
    assert_eq!(log.last_zxid(), Zxid::new(4, 0));
    log.clear().unwrap();
    assert_eq!(log.first_zxid(), None);
}

#[test]
fn txnlog_memory_appends_reads_truncates_and_snapshots() {
    exercise(&mut MemoryTxnLog::new());
}

#[test]
fn txnlog_file_appends_reads_truncates_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&mut FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap());
}

#[test]
fn txnlog_memory_crash_loses_only_unsynced_appends() {
    let mut log = MemoryTxnLog::with_policy(FsyncPolicy::OnSync);
    log.append(&[txn(1, 1)]).unwrap();
    log.sync().unwrap();
    log.append(&[txn(1, 2)]).unwrap();
    log.crash();
    assert_eq!(log.txns(), vec![txn(1, 1)]);
}

#[test]
fn txnlog_file_reopens_with_every_record() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::OnSync).unwrap();
        log.append(&[txn(1, 1), txn(1, 2), txn(1, 3)]).unwrap();
        log.sync().unwrap();
    }
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(1, 3));
    assert_eq!(log.read_after(Zxid::ZERO).unwrap().len(), 3);
}

fn log_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("txnlog")
}

#[test]
fn txnlog_file_cuts_a_torn_tail_and_appends_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let full = {
        let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
        log.append(&[txn(1, 1), txn(1, 2), txn(1, 3)]).unwrap();
        std::fs::metadata(log_file(dir.path())).unwrap().len()
    };
    // A crash in the middle of the last record's write.
    let f = OpenOptions::new()
        .write(true)
        .open(log_file(dir.path()))
        .unwrap();
    f.set_len(full - 5).unwrap();
    drop(f);
    let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(1, 2));
    log.append(&[txn(1, 3), txn(1, 4)]).unwrap();
    drop(log);
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.read_after(Zxid::ZERO).unwrap().len(), 4);
}

#[test]
fn txnlog_file_cuts_a_record_with_a_bad_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let full = {
        let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
        log.append(&[txn(1, 1), txn(1, 2)]).unwrap();
        std::fs::metadata(log_file(dir.path())).unwrap().len()
    };
    let mut bytes = std::fs::read(log_file(dir.path())).unwrap();
    let last = (full - 1) as usize;
    bytes[last] ^= 0xff;
    std::fs::write(log_file(dir.path()), &bytes).unwrap();
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(1, 1));
}

#[test]
fn txnlog_file_huge_length_field_is_a_torn_tail_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
        log.append(&[txn(1, 1)]).unwrap();
    }
    let mut f = OpenOptions::new()
        .append(true)
        .open(log_file(dir.path()))
        .unwrap();
    f.write_all(&[0xff; 16]).unwrap();
    drop(f);
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(1, 1));
}

#[test]
fn txnlog_file_with_a_foreign_header_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(log_file(dir.path()), b"not a transaction log").unwrap();
    let err = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap_err();
    assert!(matches!(err, TxnLogError::Corrupt { .. }));
}

#[test]
fn txnlog_file_snapshot_falls_back_past_damaged_and_partial_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    let old = Snapshot {
        zxid: Zxid::new(1, 5),
        data: "old".into(),
    };
    let new = Snapshot {
        zxid: Zxid::new(2, 1),
        data: "new".into(),
    };
    log.save_snapshot(&old).unwrap();
    log.save_snapshot(&new).unwrap();
    assert_eq!(log.latest_snapshot().unwrap(), Some(new.clone()));
    // A crash before the rename leaves a temporary file: never read.
    std::fs::write(dir.path().join("snapshot.0000000300000000.tmp"), b"partial").unwrap();
    // A newer snapshot damaged on disk is skipped.
    let newest = dir
        .path()
        .join(format!("snapshot.{:016x}", Zxid::new(2, 1).0));
    let mut b = std::fs::read(&newest).unwrap();
    let n = b.len();
    b[n - 1] ^= 1;
    std::fs::write(&newest, b).unwrap();
    drop(log);
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.latest_snapshot().unwrap(), Some(old));
    assert_eq!(log.last_zxid(), Zxid::new(1, 5));
}

#[test]
fn state_machine_snapshot_round_trips_and_bad_snapshots_are_typed_errors() {
    let mut sm = RecordingStateMachine::default();
    sm.apply(&txn(1, 1));
    sm.apply(&txn(1, 2));
    let snap = sm.take_snapshot();
    assert_eq!(snap.zxid, Zxid::new(1, 2));
    let mut other = RecordingStateMachine::default();
    other.restore(&snap).unwrap();
    assert_eq!(other, sm);
    let bad = Snapshot {
        zxid: snap.zxid,
        data: snap.data.slice(..snap.data.len() - 1),
    };
    assert!(other.restore(&bad).is_err());
}

#[test]
fn txnlog_file_keeps_the_newest_snapshots_and_still_falls_back_past_a_damaged_one() {
    use zab_core::txnlog::MIN_SNAP_RETAIN_COUNT;
    let dir = tempfile::tempdir().unwrap();
    let log = {
        let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
        for c in 1..=6u32 {
            let s = Snapshot {
                zxid: Zxid::new(1, c),
                data: format!("state {c}").into(),
            };
            log.save_snapshot(&s).unwrap();
        }
        log
    };
    // autopurge.snapRetainCount below ZooKeeper's minimum of 3 counts as 3.
    let deleted = log.purge_snapshots(1).unwrap();
    assert_eq!(deleted.len(), 6 - MIN_SNAP_RETAIN_COUNT);
    let left = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("snapshot.")
        })
        .count();
    assert_eq!(left, MIN_SNAP_RETAIN_COUNT);
    assert_eq!(
        log.latest_snapshot().unwrap().map(|s| s.zxid),
        Some(Zxid::new(1, 6))
    );
    // The newest is damaged on disk: the next kept one is used.
    let newest = dir
        .path()
        .join(format!("snapshot.{:016x}", Zxid::new(1, 6).0));
    let mut bytes = std::fs::read(&newest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&newest, bytes).unwrap();
    assert_eq!(
        log.latest_snapshot().unwrap().map(|s| s.zxid),
        Some(Zxid::new(1, 5))
    );
}
