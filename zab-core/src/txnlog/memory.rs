//! [`MemoryTxnLog`]: a transaction log in memory, for tests and simulations. Clones share one
//! log, so a test can keep a handle across a simulated crash; [`MemoryTxnLog::crash`] drops what
//! was appended but not yet synced under [`FsyncPolicy::OnSync`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{check_append, FsyncPolicy, Snapshot, Txn, TxnLog, TxnLogError};
use crate::zxid::Zxid;

#[derive(Debug, Default)]
struct Inner {
    txns: Vec<Txn>,
    durable: usize,
    snapshot: Option<Snapshot>,
}

/// An in-memory [`TxnLog`]; clones share the same log.
#[derive(Debug, Clone, Default)]
pub struct MemoryTxnLog {
    inner: Arc<Mutex<Inner>>,
    policy: FsyncPolicy,
}

impl MemoryTxnLog {
    /// An empty log that makes every append durable at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty log with the given fsync policy.
    pub fn with_policy(policy: FsyncPolicy) -> Self {
        Self {
            inner: Arc::default(),
            policy,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Simulates a crash: transactions appended since the last sync are lost.
    pub fn crash(&self) {
        let mut g = self.lock();
        let keep = g.durable;
        g.txns.truncate(keep);
    }

    /// Every logged transaction, in order.
    pub fn txns(&self) -> Vec<Txn> {
        self.lock().txns.clone()
    }
}

impl TxnLog for MemoryTxnLog {
    fn append(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        let mut g = self.lock();
        check_append(g.txns.last().map(|t| t.zxid), txns)?;
        g.txns.extend_from_slice(txns);
        if self.policy == FsyncPolicy::EveryAppend {
            g.durable = g.txns.len();
        }
        Ok(())
    }

    fn append_deferred(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        let mut g = self.lock();
        check_append(g.txns.last().map(|t| t.zxid), txns)?;
        g.txns.extend_from_slice(txns);
        Ok(())
    }

    fn sync(&mut self) -> Result<(), TxnLogError> {
        let mut g = self.lock();
        g.durable = g.txns.len();
        Ok(())
    }

    fn last_zxid(&self) -> Zxid {
        let g = self.lock();
        let log = g.txns.last().map(|t| t.zxid).unwrap_or(Zxid::ZERO);
        let snap = g.snapshot.as_ref().map(|s| s.zxid).unwrap_or(Zxid::ZERO);
        log.max(snap)
    }

    fn first_zxid(&self) -> Option<Zxid> {
        self.lock().txns.first().map(|t| t.zxid)
    }

    fn read_after(&self, after: Zxid) -> Result<Vec<Txn>, TxnLogError> {
        let g = self.lock();
        let i = g.txns.partition_point(|t| t.zxid <= after);
        Ok(g.txns[i..].to_vec())
    }

    fn scan_after(&self, after: Zxid, f: &mut dyn FnMut(Txn) -> bool) -> Result<(), TxnLogError> {
        let g = self.lock();
        let i = g.txns.partition_point(|t| t.zxid <= after);
        for t in &g.txns[i..] {
            if !f(t.clone()) {
                break;
            }
        }
        Ok(())
    }

    fn logged_at_or_before(&self, z: Zxid) -> Result<Option<Zxid>, TxnLogError> {
        let g = self.lock();
        let i = g.txns.partition_point(|t| t.zxid <= z);
        Ok(i.checked_sub(1).map(|j| g.txns[j].zxid))
    }

    fn truncate(&mut self, to: Zxid) -> Result<(), TxnLogError> {
        let mut g = self.lock();
        let i = g.txns.partition_point(|t| t.zxid <= to);
        g.txns.truncate(i);
        g.durable = g.durable.min(i);
        Ok(())
    }

    fn purge(&mut self, upto: Zxid) -> Result<(), TxnLogError> {
        let mut g = self.lock();
        // Only what a snapshot covers may go.
        let covered = g.snapshot.as_ref().map_or(Zxid::ZERO, |s| s.zxid).min(upto);
        let n = g.txns.partition_point(|t| t.zxid <= covered);
        g.txns.drain(..n);
        g.durable = g.durable.saturating_sub(n);
        Ok(())
    }

    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), TxnLogError> {
        self.lock().snapshot = Some(snapshot.clone());
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<Snapshot>, TxnLogError> {
        Ok(self.lock().snapshot.clone())
    }
}
