//! The conformance suite of [`TxnLog`]: what every transaction log must do, per the trait's
//! documentation — strictly increasing zxids (a refused append appends nothing), reads after a
//! zxid in order, durable truncation (TRUNC), snapshots that raise `last_zxid`, purge that
//! never loses what no snapshot covers, durability of appends across a restart (on return, or
//! after `sync` / a finished `start_sync` for deferred appends); for logs on files, a torn
//! tail is dropped and a damaged record is caught on reopen.
//!
//! ```
//! use zab_core::txnlog::{MemoryTxnLog, TxnLogError};
//! use zab_core::testing::txn_log::{self, TxnLogBuilder};
//!
//! struct Memory;
//! impl TxnLogBuilder for Memory {
//!     type Log = MemoryTxnLog;
//!     fn build(&self) -> Result<MemoryTxnLog, TxnLogError> {
//!         Ok(MemoryTxnLog::new())
//!     }
//!     fn reopen(&self, log: MemoryTxnLog) -> Result<MemoryTxnLog, TxnLogError> {
//!         log.crash(); // what was not durable is gone
//!         Ok(log)
//!     }
//! }
//! txn_log::test_all(&Memory)?;
//! # Ok::<(), zab_core::testing::ConformanceError>(())
//! ```

use bytes::Bytes;

use super::{Case, ConformanceError};
use crate::txnlog::{Snapshot, Txn, TxnLog, TxnLogError, MAX_TXN_DATA};
use crate::zxid::Zxid;

/// Damage done to a closed log's files before it is opened again (see
/// [`TxnLogBuilder::reopen_damaged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// A torn write: the log file loses its last `bytes` bytes, all inside the last record.
    TornTail {
        /// How many bytes are cut off.
        bytes: usize,
    },
    /// A flipped byte: the byte `from_end` bytes before the end of the log file (inside the
    /// last record's checksummed payload) is inverted.
    FlippedByte {
        /// Its distance from the end of the file (1 is the last byte).
        from_end: usize,
    },
}

/// What the suite needs from a [`TxnLog`] implementation.
pub trait TxnLogBuilder {
    /// The log under test.
    type Log: TxnLog;

    /// A new, empty log, independent of every log built before, whose plain appends are
    /// durable on return ([`FsyncPolicy::EveryAppend`](crate::txnlog::FsyncPolicy)).
    fn build(&self) -> Result<Self::Log, TxnLogError>;

    /// Closes `log` as a crash does and opens the same storage again: what was durable must
    /// be there, what was not may be lost.
    fn reopen(&self, log: Self::Log) -> Result<Self::Log, TxnLogError>;

    /// Closes `log`, applies `damage` to its files and opens them again (the result of that
    /// open, which may be a typed error). `None` for logs without files: the damage cases
    /// ([`torn_tail_is_dropped_on_reopen`], [`flipped_byte_is_detected_on_reopen`]) then pass
    /// without checking anything. The default is `None`.
    fn reopen_damaged(
        &self,
        log: Self::Log,
        damage: Damage,
    ) -> Option<Result<Self::Log, TxnLogError>> {
        let _ = (log, damage);
        None
    }
}

/// Runs every case in order and stops at the first failure.
pub fn test_all<B: TxnLogBuilder>(builder: &B) -> Result<(), ConformanceError> {
    appends_are_read_back_in_order(builder)?;
    out_of_order_appends_are_refused_whole(builder)?;
    oversized_transactions_are_refused(builder)?;
    truncate_removes_everything_after_the_zxid(builder)?;
    snapshots_are_kept_and_raise_the_last_zxid(builder)?;
    sync_reads_agree_with_read_after(builder)?;
    purge_keeps_what_no_snapshot_covers(builder)?;
    restart_keeps_durable_appends_and_the_snapshot(builder)?;
    restart_keeps_deferred_appends_after_sync(builder)?;
    restart_after_truncation_keeps_the_truncated_log(builder)?;
    torn_tail_is_dropped_on_reopen(builder)?;
    flipped_byte_is_detected_on_reopen(builder)?;
    Ok(())
}

/// Transaction `counter` of `epoch`, with a payload naming it.
fn txn(epoch: i64, counter: u32) -> Txn {
    Txn::new(
        Zxid::new(epoch, counter),
        Bytes::from(format!("txn-{epoch}-{counter:08}")),
    )
}

fn txns(epoch: i64, counters: std::ops::RangeInclusive<u32>) -> Vec<Txn> {
    counters.map(|c| txn(epoch, c)).collect()
}

fn read_all<L: TxnLog>(c: Case, log: &L) -> Result<Vec<Txn>, ConformanceError> {
    c.op("read_after(0)", log.read_after(Zxid::ZERO))
}

/// Appends are read back after any zxid, in order; `first_zxid` / `last_zxid` follow.
pub fn appends_are_read_back_in_order<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("appends_are_read_back_in_order");
    let mut log = c.op("build", builder.build())?;
    c.eq("last zxid of a new log", log.last_zxid(), Zxid::ZERO)?;
    c.eq("first zxid of a new log", log.first_zxid(), None)?;
    c.eq("contents of a new log", read_all(c, &log)?, Vec::new())?;
    c.op("append", log.append(&txns(1, 1..=3)))?;
    c.op("append", log.append(&txns(2, 1..=2)))?;
    c.op("append nothing", log.append(&[]))?;
    let mut all = txns(1, 1..=3);
    all.extend(txns(2, 1..=2));
    c.eq("contents", read_all(c, &log)?, all.clone())?;
    c.eq(
        "read_after(1:2)",
        c.op("read_after", log.read_after(Zxid::new(1, 2)))?,
        all[2..].to_vec(),
    )?;
    c.eq(
        "read_after(1:7), between two zxids",
        c.op("read_after", log.read_after(Zxid::new(1, 7)))?,
        all[3..].to_vec(),
    )?;
    c.eq(
        "read_after(last)",
        c.op("read_after", log.read_after(Zxid::new(2, 2)))?,
        Vec::new(),
    )?;
    c.eq("first zxid", log.first_zxid(), Some(Zxid::new(1, 1)))?;
    c.eq("last zxid", log.last_zxid(), Zxid::new(2, 2))
}

/// A batch whose zxids do not strictly increase above the last one is refused with
/// `OutOfOrder` and appends nothing, not even its valid prefix.
pub fn out_of_order_appends_are_refused_whole<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("out_of_order_appends_are_refused_whole");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=3)))?;
    for (what, batch) in [
        ("the last zxid again", vec![txn(1, 3)]),
        ("an older zxid", vec![txn(1, 2)]),
        ("a valid prefix then a repeat", vec![txn(1, 4), txn(1, 4)]),
        ("a valid prefix then a decrease", vec![txn(1, 5), txn(1, 4)]),
    ] {
        match log.append(&batch) {
            Err(TxnLogError::OutOfOrder { .. }) => {}
            other => {
                return Err(c.fail(format!("{what}: expected OutOfOrder, got {other:?}")));
            }
        }
        match log.append_deferred(&batch) {
            Err(TxnLogError::OutOfOrder { .. }) => {}
            other => {
                return Err(c.fail(format!(
                    "{what} (deferred): expected OutOfOrder, got {other:?}"
                )));
            }
        }
    }
    c.eq("contents", read_all(c, &log)?, txns(1, 1..=3))?;
    c.eq("last zxid", log.last_zxid(), Zxid::new(1, 3))?;
    c.op("append after the refusals", log.append(&[txn(1, 4)]))
}

/// A payload above `MAX_TXN_DATA` is refused with `TooLarge` and appends nothing.
pub fn oversized_transactions_are_refused<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("oversized_transactions_are_refused");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&[txn(1, 1)]))?;
    let big = Txn::new(Zxid::new(1, 3), Bytes::from(vec![0u8; MAX_TXN_DATA + 1]));
    match log.append(&[txn(1, 2), big]) {
        Err(TxnLogError::TooLarge { .. }) => {}
        other => return Err(c.fail(format!("expected TooLarge, got {other:?}"))),
    }
    c.eq("contents", read_all(c, &log)?, vec![txn(1, 1)])
}

/// `truncate(to)` removes every transaction above `to` (and nothing else); appends continue
/// above `to`; `clear` empties the log.
pub fn truncate_removes_everything_after_the_zxid<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("truncate_removes_everything_after_the_zxid");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=5)))?;
    c.op("truncate", log.truncate(Zxid::new(1, 3)))?;
    c.eq(
        "contents after truncate(1:3)",
        read_all(c, &log)?,
        txns(1, 1..=3),
    )?;
    c.eq("last zxid", log.last_zxid(), Zxid::new(1, 3))?;
    c.op("truncate above the end", log.truncate(Zxid::new(9, 0)))?;
    c.eq("contents", read_all(c, &log)?, txns(1, 1..=3))?;
    // A new leader's history continues where TRUNC cut.
    c.op("append a new epoch", log.append(&txns(2, 1..=2)))?;
    let mut want = txns(1, 1..=3);
    want.extend(txns(2, 1..=2));
    c.eq("contents", read_all(c, &log)?, want)?;
    c.op("clear", log.clear())?;
    c.eq("contents after clear", read_all(c, &log)?, Vec::new())?;
    c.eq("first zxid after clear", log.first_zxid(), None)?;
    c.eq("last zxid after clear", log.last_zxid(), Zxid::ZERO)
}

/// `latest_snapshot` returns the newest saved snapshot; `last_zxid` is the larger of the
/// last logged zxid and the snapshot's.
pub fn snapshots_are_kept_and_raise_the_last_zxid<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("snapshots_are_kept_and_raise_the_last_zxid");
    let mut log = c.op("build", builder.build())?;
    c.eq(
        "snapshot of a new log",
        c.op("latest_snapshot", log.latest_snapshot())?,
        None,
    )?;
    c.op("append", log.append(&txns(1, 1..=2)))?;
    let first = Snapshot {
        zxid: Zxid::new(1, 2),
        data: Bytes::from_static(b"state at 1:2"),
    };
    c.op("save a snapshot", log.save_snapshot(&first))?;
    c.eq(
        "latest snapshot",
        c.op("latest_snapshot", log.latest_snapshot())?,
        Some(first),
    )?;
    // SNAP sync: the log is cleared and a snapshot ahead of it arrives.
    c.op("clear", log.clear())?;
    let second = Snapshot {
        zxid: Zxid::new(3, 7),
        data: Bytes::from_static(b"state at 3:7"),
    };
    c.op("save a newer snapshot", log.save_snapshot(&second))?;
    c.eq(
        "latest snapshot",
        c.op("latest_snapshot", log.latest_snapshot())?,
        Some(second),
    )?;
    c.eq(
        "last zxid with only a snapshot",
        log.last_zxid(),
        Zxid::new(3, 7),
    )?;
    c.op("append after the snapshot", log.append(&[txn(3, 8)]))?;
    c.eq("last zxid", log.last_zxid(), Zxid::new(3, 8))
}

/// The reads a leader's sync uses agree with `read_after`: `scan_after` gives the same
/// transactions in order and stops when asked, `logged_at_or_before` the newest logged zxid at
/// or below a zxid, and `latest_snapshot_info` the newest snapshot's zxid and size.
pub fn sync_reads_agree_with_read_after<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("sync_reads_agree_with_read_after");
    let mut log = c.op("build", builder.build())?;
    c.eq(
        "logged_at_or_before in a new log",
        c.op(
            "logged_at_or_before",
            log.logged_at_or_before(Zxid::new(1, 1)),
        )?,
        None,
    )?;
    for batch in [txns(1, 1..=3), txns(1, 4..=6), txns(3, 1..=4)] {
        c.op("append", log.append(&batch))?;
    }
    for after in [
        Zxid::ZERO,
        Zxid::new(1, 2),
        Zxid::new(2, 9),
        Zxid::new(3, 4),
    ] {
        let mut seen = Vec::new();
        c.op(
            "scan_after",
            log.scan_after(after, &mut |t| {
                seen.push(t);
                true
            }),
        )?;
        c.eq(
            "scan_after",
            seen,
            c.op("read_after", log.read_after(after))?,
        )?;
    }
    let mut two = Vec::new();
    c.op(
        "scan_after stopped early",
        log.scan_after(Zxid::new(1, 1), &mut |t| {
            two.push(t);
            two.len() < 2
        }),
    )?;
    c.eq("scan_after stopped after two", two, txns(1, 2..=3))?;
    for (z, want) in [
        (Zxid::ZERO, None),
        (Zxid::new(1, 1), Some(Zxid::new(1, 1))),
        (Zxid::new(1, 5), Some(Zxid::new(1, 5))),
        (Zxid::new(2, 7), Some(Zxid::new(1, 6))),
        (Zxid::new(9, 0), Some(Zxid::new(3, 4))),
    ] {
        c.eq(
            "logged_at_or_before",
            c.op("logged_at_or_before", log.logged_at_or_before(z))?,
            want,
        )?;
    }
    c.eq(
        "latest_snapshot_info of a log without one",
        c.op("latest_snapshot_info", log.latest_snapshot_info())?,
        None,
    )?;
    let snapshot = Snapshot {
        zxid: Zxid::new(1, 6),
        data: Bytes::from_static(b"state at 1:6"),
    };
    c.op("save a snapshot", log.save_snapshot(&snapshot))?;
    c.eq(
        "latest_snapshot_info",
        c.op("latest_snapshot_info", log.latest_snapshot_info())?,
        Some(crate::broadcast::SnapshotInfo {
            zxid: snapshot.zxid,
            size: snapshot.data.len() as u64,
        }),
    )
}

/// `purge(upto)` after a snapshot at `upto` never drops a transaction above it (the log may
/// or may not keep those below).
pub fn purge_keeps_what_no_snapshot_covers<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("purge_keeps_what_no_snapshot_covers");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=6)))?;
    let snap = Snapshot {
        zxid: Zxid::new(1, 3),
        data: Bytes::from_static(b"state at 1:3"),
    };
    c.op("save a snapshot", log.save_snapshot(&snap))?;
    c.op("purge", log.purge(Zxid::new(1, 3)))?;
    c.eq(
        "read_after(1:3) after purge(1:3)",
        c.op("read_after", log.read_after(Zxid::new(1, 3)))?,
        txns(1, 4..=6),
    )?;
    let all = read_all(c, &log)?;
    c.ensure(all.ends_with(&txns(1, 4..=6)), || {
        format!("contents after purge: {all:?}")
    })?;
    c.ensure(all.iter().all(|t| txns(1, 1..=6).contains(t)), || {
        format!("purge changed a transaction: {all:?}")
    })?;
    c.eq("last zxid", log.last_zxid(), Zxid::new(1, 6))?;
    c.op("append after purge", log.append(&[txn(1, 7)]))
}

/// Appends (durable on return) and the snapshot survive a restart; appends continue.
pub fn restart_keeps_durable_appends_and_the_snapshot<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restart_keeps_durable_appends_and_the_snapshot");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=4)))?;
    let snap = Snapshot {
        zxid: Zxid::new(1, 2),
        data: Bytes::from_static(b"state at 1:2"),
    };
    c.op("save a snapshot", log.save_snapshot(&snap))?;
    c.op("append", log.append(&txns(1, 5..=6)))?;
    let mut log = c.op("reopen", builder.reopen(log))?;
    c.eq(
        "contents after the restart",
        read_all(c, &log)?,
        txns(1, 1..=6),
    )?;
    c.eq(
        "last zxid after the restart",
        log.last_zxid(),
        Zxid::new(1, 6),
    )?;
    c.eq(
        "snapshot after the restart",
        c.op("latest_snapshot", log.latest_snapshot())?,
        Some(snap),
    )?;
    c.op("append after the restart", log.append(&[txn(2, 1)]))?;
    match log.append(&[txn(1, 6)]) {
        Err(TxnLogError::OutOfOrder { .. }) => Ok(()),
        other => Err(c.fail(format!(
            "an old zxid after the restart: expected OutOfOrder, got {other:?}"
        ))),
    }
}

/// Deferred appends are durable once `sync` returned, or once the task of `start_sync` ran
/// to `Ok`.
pub fn restart_keeps_deferred_appends_after_sync<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restart_keeps_deferred_appends_after_sync");
    let mut log = c.op("build", builder.build())?;
    c.op("append_deferred", log.append_deferred(&txns(1, 1..=2)))?;
    c.op("append_deferred", log.append_deferred(&txns(1, 3..=4)))?;
    c.eq("contents before sync", read_all(c, &log)?, txns(1, 1..=4))?;
    c.op("sync", log.sync())?;
    c.op("append_deferred", log.append_deferred(&txns(1, 5..=6)))?;
    if let Some(task) = c.op("start_sync", log.start_sync())? {
        c.op("the pending sync", task())?;
    }
    let log = c.op("reopen", builder.reopen(log))?;
    c.eq(
        "contents after the restart",
        read_all(c, &log)?,
        txns(1, 1..=6),
    )
}

/// A truncation survives a restart: the cut transactions do not come back.
pub fn restart_after_truncation_keeps_the_truncated_log<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restart_after_truncation_keeps_the_truncated_log");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=5)))?;
    c.op("truncate", log.truncate(Zxid::new(1, 2)))?;
    let mut log = c.op("reopen", builder.reopen(log))?;
    c.eq(
        "contents after the restart",
        read_all(c, &log)?,
        txns(1, 1..=2),
    )?;
    c.eq(
        "last zxid after the restart",
        log.last_zxid(),
        Zxid::new(1, 2),
    )?;
    c.op("append", log.append(&txns(2, 1..=1)))?;
    let log = c.op("reopen", builder.reopen(log))?;
    let mut want = txns(1, 1..=2);
    want.extend(txns(2, 1..=1));
    c.eq("contents after a second restart", read_all(c, &log)?, want)
}

/// A torn write — the last record cut short — is dropped on reopen and what precedes it is
/// kept; appends continue after it. Passes without checking when the builder has no files
/// ([`TxnLogBuilder::reopen_damaged`] returns `None`).
pub fn torn_tail_is_dropped_on_reopen<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("torn_tail_is_dropped_on_reopen");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=3)))?;
    let Some(reopened) = builder.reopen_damaged(log, Damage::TornTail { bytes: 5 }) else {
        return Ok(());
    };
    let mut log = c.op("reopen the torn log", reopened)?;
    c.eq("contents", read_all(c, &log)?, txns(1, 1..=2))?;
    c.eq("last zxid", log.last_zxid(), Zxid::new(1, 2))?;
    c.op("append where the torn record was", log.append(&[txn(1, 3)]))?;
    let log = c.op("reopen", builder.reopen(log))?;
    c.eq(
        "contents after a restart",
        read_all(c, &log)?,
        txns(1, 1..=3),
    )
}

/// A flipped byte in the last record is detected on reopen: the open fails with a typed error,
/// or the log ends before that record with everything before it intact — never a log that
/// returns the damaged payload. Passes without checking when the builder has no files.
pub fn flipped_byte_is_detected_on_reopen<B: TxnLogBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("flipped_byte_is_detected_on_reopen");
    let mut log = c.op("build", builder.build())?;
    c.op("append", log.append(&txns(1, 1..=3)))?;
    let Some(reopened) = builder.reopen_damaged(log, Damage::FlippedByte { from_end: 2 }) else {
        return Ok(());
    };
    let Ok(log) = reopened else {
        return Ok(()); // a typed error is a detection
    };
    match log.read_after(Zxid::ZERO) {
        Err(_) => Ok(()), // so is a typed error on the read
        Ok(all) => c.eq("contents (the damaged record must go)", all, txns(1, 1..=2)),
    }
}
