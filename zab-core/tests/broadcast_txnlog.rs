//! The transaction logs and the state-machine snapshot contract: append / read / truncate on
//! both implementations, torn-tail recovery and atomic snapshots of the file log, and bad bytes
//! on disk that never panic or allocate without bound; the file log's segments (rolling,
//! reading and truncating across them, purge below the retained snapshots).

use std::fs::OpenOptions;
use std::io::Write;

use zab_core::state_machine::{RecordingStateMachine, StateMachine};
use zab_core::txnlog::{
    FileTxnLog, FileTxnLogOptions, FsyncPolicy, MemoryTxnLog, Snapshot, Txn, TxnLog, TxnLogError,
};
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

/// The newest log segment in `dir`.
fn log_file(dir: &std::path::Path) -> std::path::PathBuf {
    segments(dir).pop().expect("a log segment")
}

/// The log segments in `dir`, oldest first.
fn segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
        .collect();
    v.sort();
    v
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
    std::fs::write(
        dir.path().join(format!("log.{:016x}", Zxid::new(1, 1).0)),
        b"not a transaction log",
    )
    .unwrap();
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

/// A log rolling to a new segment after every ~100 bytes (each test record is ~27 bytes).
fn small_segments(dir: &std::path::Path) -> FileTxnLog {
    FileTxnLog::open_with(dir, FileTxnLogOptions::new().with_segment_size(100)).unwrap()
}

fn segment_names(dir: &std::path::Path) -> Vec<String> {
    segments(dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn txnlog_file_rolls_segments_named_by_their_first_zxid_and_reads_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Txn> = (1..=20).map(|c| txn(1, c)).collect();
    {
        let mut log = small_segments(dir.path());
        for t in &all {
            log.append(std::slice::from_ref(t)).unwrap();
        }
        assert!(log.segment_paths().len() > 3, "{:?}", log.segment_paths());
    }
    let names = segment_names(dir.path());
    assert_eq!(names[0], format!("log.{:016x}", Zxid::new(1, 1).0));
    let log = small_segments(dir.path());
    assert_eq!(log.last_zxid(), Zxid::new(1, 20));
    assert_eq!(log.first_zxid(), Some(Zxid::new(1, 1)));
    assert_eq!(log.read_after(Zxid::ZERO).unwrap(), all);
    // Every start point, including a segment's first and last record.
    for c in 0..=20u32 {
        let after = log.read_after(Zxid::new(1, c)).unwrap();
        assert_eq!(after, all[c as usize..].to_vec(), "after {c}");
    }
    // Each segment's name is its first record's zxid.
    for name in &names {
        let z = i64::from_str_radix(name.strip_prefix("log.").unwrap(), 16).unwrap();
        assert!(log.read_after(Zxid(z - 1)).unwrap()[0].zxid == Zxid(z));
    }
}

#[test]
fn txnlog_file_truncates_across_segments_and_appends_after_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = small_segments(dir.path());
    for c in 1..=20 {
        log.append(&[txn(1, c)]).unwrap();
    }
    let before = log.segment_paths().len();
    log.truncate(Zxid::new(1, 6)).unwrap();
    assert_eq!(log.last_zxid(), Zxid::new(1, 6));
    assert!(log.segment_paths().len() < before);
    log.append(&[txn(2, 1), txn(2, 2)]).unwrap();
    drop(log);
    let log = small_segments(dir.path());
    let mut want: Vec<Txn> = (1..=6).map(|c| txn(1, c)).collect();
    want.extend([txn(2, 1), txn(2, 2)]);
    assert_eq!(log.read_after(Zxid::ZERO).unwrap(), want);
    // Truncating to a zxid below every record empties the log.
    let mut log = log;
    log.truncate(Zxid::ZERO).unwrap();
    assert_eq!(log.first_zxid(), None);
    assert_eq!(log.last_zxid(), Zxid::ZERO);
    assert!(segments(dir.path()).is_empty());
    log.append(&[txn(3, 1)]).unwrap();
    assert_eq!(log.read_after(Zxid::ZERO).unwrap(), vec![txn(3, 1)]);
}

#[test]
fn txnlog_file_restart_cuts_a_torn_tail_in_the_last_segment_only() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = small_segments(dir.path());
        for c in 1..=12 {
            log.append(&[txn(1, c)]).unwrap();
        }
    }
    let last = log_file(dir.path());
    let len = std::fs::metadata(&last).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let mut log = small_segments(dir.path());
    assert_eq!(log.last_zxid(), Zxid::new(1, 11));
    log.append(&[txn(1, 12), txn(1, 13)]).unwrap();
    drop(log);
    // A crash right after a segment was created leaves it without a whole record: it goes.
    let empty = dir.path().join(format!("log.{:016x}", Zxid::new(1, 14).0));
    std::fs::write(&empty, b"HATX").unwrap();
    let log = small_segments(dir.path());
    assert!(!empty.exists());
    assert_eq!(log.last_zxid(), Zxid::new(1, 13));
    assert_eq!(log.read_after(Zxid::ZERO).unwrap().len(), 13);
}

#[test]
fn txnlog_file_damaged_record_in_an_older_segment_is_a_typed_error_when_read() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = small_segments(dir.path());
        for c in 1..=12 {
            log.append(&[txn(1, c)]).unwrap();
        }
    }
    let first = segments(dir.path())[0].clone();
    let mut b = std::fs::read(&first).unwrap();
    let n = b.len();
    b[n - 1] ^= 0xff;
    std::fs::write(&first, b).unwrap();
    let log = small_segments(dir.path());
    assert_eq!(log.last_zxid(), Zxid::new(1, 12));
    let err = log.read_after(Zxid::ZERO).unwrap_err();
    assert!(matches!(err, TxnLogError::Corrupt { .. }), "{err}");
}

#[test]
fn txnlog_file_purge_keeps_snap_retain_count_snapshots_and_the_segments_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = small_segments(dir.path());
    // snapCount 10: a snapshot after every 10 transactions, then purge (as the peer does).
    for c in 1..=60u32 {
        log.append(&[txn(1, c)]).unwrap();
        if c % 10 == 0 {
            let s = Snapshot {
                zxid: Zxid::new(1, c),
                data: format!("state {c}").into(),
            };
            log.save_snapshot(&s).unwrap();
            log.purge(s.zxid).unwrap();
        }
    }
    let snaps: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snapshot."))
        .collect();
    assert_eq!(snaps.len(), 3, "{snaps:?}");
    // The oldest kept snapshot is at 40: every transaction above it is still readable, and
    // the segment holding it (the log rolled at the snapshot) starts above it.
    let first = log.first_zxid().unwrap();
    assert!(
        first > Zxid::new(1, 30) && first <= Zxid::new(1, 41),
        "{first}"
    );
    let after: Vec<Zxid> = log
        .read_after(Zxid::new(1, 40))
        .unwrap()
        .iter()
        .map(|t| t.zxid)
        .collect();
    assert_eq!(
        after,
        (41..=60).map(|c| Zxid::new(1, c)).collect::<Vec<_>>()
    );
    drop(log);
    let log = small_segments(dir.path());
    assert_eq!(log.first_zxid(), Some(first));
    assert_eq!(log.last_zxid(), Zxid::new(1, 60));
}

#[test]
fn txnlog_file_purge_keeps_more_snapshots_when_configured_and_never_the_current_segment() {
    let dir = tempfile::tempdir().unwrap();
    let opts = FileTxnLogOptions::new()
        .with_segment_size(u64::MAX)
        .with_snap_retain_count(5);
    let mut log = FileTxnLog::open_with(dir.path(), opts).unwrap();
    for c in 1..=8u32 {
        log.append(&[txn(1, c)]).unwrap();
        let s = Snapshot {
            zxid: Zxid::new(1, c),
            data: "s".into(),
        };
        log.save_snapshot(&s).unwrap();
        log.purge(s.zxid).unwrap();
    }
    // One segment per snapshot (the log rolls at each): those at or below the oldest of the
    // five kept snapshots (at 4) are gone; the current one (8, covered too) stays.
    assert_eq!(log.first_zxid(), Some(Zxid::new(1, 5)));
    assert_eq!(log.segment_paths().len(), 4);
    // Below the minimum of three counts as three.
    assert_eq!(
        FileTxnLogOptions::new()
            .with_snap_retain_count(1)
            .snap_retain_count,
        3
    );
}

#[test]
fn txnlog_file_turns_an_older_single_file_log_into_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let want = {
        let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
        log.append(&[txn(1, 1), txn(1, 2)]).unwrap();
        log.read_after(Zxid::ZERO).unwrap()
    };
    let seg = log_file(dir.path());
    std::fs::rename(&seg, dir.path().join("txnlog")).unwrap();
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(log.read_after(Zxid::ZERO).unwrap(), want);
    assert!(!dir.path().join("txnlog").exists());
    assert_eq!(segments(dir.path()), vec![seg]);
}
