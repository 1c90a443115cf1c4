//! The embedder's side of a leader's sync reads: what a [`TxnLog`] answers to
//! [`PeerAction::LoadHistory`](crate::peer::PeerAction::LoadHistory) and
//! [`PeerAction::ReadLog`](crate::peer::PeerAction::ReadLog), shared by the tokio driver and
//! the simulators. They read the log one record at a time ([`TxnLog::scan_after`]), so that
//! memory stays bounded by what they return.

use std::collections::VecDeque;

use super::{Txn, TxnLog, TxnLogError};
use crate::broadcast::{sync_weight, LogRead};
use crate::zxid::Zxid;

/// The answer to [`PeerAction::LoadHistory`](crate::peer::PeerAction::LoadHistory): the
/// newest at most `max` logged transactions (ZooKeeper's `committedLog`) and the zxid they
/// follow in the history without a gap: the logged transaction before the first of them, else
/// the newest snapshot's (only transactions after it are returned then), else zero.
///
/// Reads the log after the newest snapshot (all of it without one).
pub fn read_committed_window(
    log: &dyn TxnLog,
    max: usize,
) -> Result<(Zxid, Vec<Txn>), TxnLogError> {
    let snapshot = log.latest_snapshot_info()?.map(|s| s.zxid);
    let floor = snapshot.unwrap_or(Zxid::ZERO);
    let mut window: VecDeque<Txn> = VecDeque::with_capacity(max.min(4096) + 1);
    let mut before = floor;
    log.scan_after(floor, &mut |t| {
        window.push_back(t);
        if window.len() > max {
            if let Some(old) = window.pop_front() {
                before = old.zxid;
            }
        }
        true
    })?;
    Ok((before, window.into()))
}

/// The answer to [`PeerAction::ReadLog`](crate::peer::PeerAction::ReadLog) `{ after, upto,
/// max_bytes, max_txns }`, read from `log`: the log's first zxid, the newest snapshot's zxid
/// and size, and
///
/// - a probe (`max_bytes == 0`): the newest logged zxid at or below `after`, and how many
///   logged transactions lie in `(after, upto]` and their [`sync_weight`], without keeping
///   them;
/// - a read: the logged transactions of `(after, upto]` in order, stopping before the one
///   that would bring their weight above `max_bytes` or their number above `max_txns` (the
///   first is always read), with `complete` telling whether the range was read to its end.
pub fn read_for_sync(
    log: &dyn TxnLog,
    after: Zxid,
    upto: Zxid,
    max_bytes: u64,
    max_txns: usize,
) -> Result<LogRead, TxnLogError> {
    let probe = max_bytes == 0;
    let prev = if probe {
        log.logged_at_or_before(after)?
    } else {
        None
    };
    let snapshot = log.latest_snapshot_info()?;
    let mut count = 0u64;
    let mut weight = 0u64;
    let mut txns = Vec::new();
    let mut complete = true;
    if after < upto {
        log.scan_after(after, &mut |t| {
            if t.zxid > upto {
                return false;
            }
            let w = sync_weight(&t);
            if !probe {
                if !txns.is_empty()
                    && (weight.saturating_add(w) > max_bytes || txns.len() >= max_txns)
                {
                    complete = false;
                    return false;
                }
                txns.push(t);
            }
            count += 1;
            weight = weight.saturating_add(w);
            true
        })?;
    }
    Ok(LogRead::new(
        after,
        upto,
        log.first_zxid(),
        prev,
        snapshot,
        count,
        weight,
        txns,
        complete,
    ))
}
