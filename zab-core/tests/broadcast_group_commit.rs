//! Group commit (Z2): the file log writes deferred appends at once and makes them durable
//! with one fsync at the next sync; a peer appends the log writes of every write and packet
//! already waiting, syncs once (on another thread, while the next group gathers), and only
//! then acknowledges them. Checked here: deferred appends read back and survive a reopen once
//! synced; in a 3-server ensemble whose log syncs are slow and finish on other threads, every
//! write is durable on a quorum before any server applies it, and a burst of writes costs the
//! leader fewer syncs than writes.

#![cfg(feature = "tokio")]

mod peer_support;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use peer_support::{config, settled};
use zab_core::peer::{PeerHandle, QuorumPeer};
use zab_core::state_machine::{RecordingStateMachine, SnapshotError, StateMachine};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::MemoryNetwork;
use zab_core::txnlog::{
    FileTxnLog, FsyncPolicy, MemoryTxnLog, PendingSync, Snapshot, Txn, TxnLog, TxnLogError,
};
use zab_core::{ServerId, Zxid};

const SETTLE: Duration = Duration::from_secs(10);

fn txn(counter: u32) -> Txn {
    Txn::new(Zxid::new(1, counter), format!("t{counter}"))
}

#[test]
fn txnlog_file_deferred_appends_read_back_at_once_and_survive_a_reopen_after_sync() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    log.append_deferred(&[txn(1), txn(2)]).unwrap();
    log.append_deferred(&[txn(3)]).unwrap();
    // Still ordered: an out-of-order deferred append is refused like any append.
    assert!(matches!(
        log.append_deferred(&[txn(3)]),
        Err(TxnLogError::OutOfOrder { .. })
    ));
    assert_eq!(log.last_zxid(), Zxid::new(1, 3));
    assert_eq!(
        log.read_after(Zxid::ZERO).unwrap(),
        [txn(1), txn(2), txn(3)]
    );
    log.sync().unwrap();
    // A durable append after deferred ones, and a sync with nothing pending.
    log.append(&[txn(4)]).unwrap();
    log.sync().unwrap();
    drop(log);
    let log = FileTxnLog::open(dir.path(), FsyncPolicy::EveryAppend).unwrap();
    assert_eq!(
        log.read_after(Zxid::ZERO).unwrap(),
        [txn(1), txn(2), txn(3), txn(4)]
    );
}

/// A log that publishes the last zxid it made durable, and counts its syncs.
#[derive(Clone)]
struct Watched {
    inner: MemoryTxnLog,
    durable: Arc<AtomicI64>,
    syncs: Arc<AtomicUsize>,
}

impl Watched {
    fn new() -> Self {
        Self {
            inner: MemoryTxnLog::new(),
            durable: Arc::default(),
            syncs: Arc::default(),
        }
    }
    fn mark_durable(&self) {
        self.durable
            .store(self.inner.last_zxid().0, Ordering::SeqCst);
    }
}

impl TxnLog for Watched {
    fn append(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        self.inner.append(txns)?;
        self.mark_durable();
        Ok(())
    }
    fn append_deferred(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        self.inner.append_deferred(txns)
    }
    fn sync(&mut self) -> Result<(), TxnLogError> {
        // A slow disk: leaves the other servers time to act on anything sent too early.
        std::thread::sleep(Duration::from_micros(300));
        self.inner.sync()?;
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.mark_durable();
        Ok(())
    }
    fn start_sync(&mut self) -> Result<Option<PendingSync>, TxnLogError> {
        // Durable only once the task (on another thread) has finished its slow fsync.
        self.syncs.fetch_add(1, Ordering::SeqCst);
        let upto = self.inner.last_zxid().0;
        let durable = self.durable.clone();
        let mut inner = self.inner.clone();
        Ok(Some(Box::new(move || {
            std::thread::sleep(Duration::from_micros(300));
            inner.sync()?;
            durable.fetch_max(upto, Ordering::SeqCst);
            Ok(())
        })))
    }
    fn last_zxid(&self) -> Zxid {
        self.inner.last_zxid()
    }
    fn first_zxid(&self) -> Option<Zxid> {
        self.inner.first_zxid()
    }
    fn read_after(&self, after: Zxid) -> Result<Vec<Txn>, TxnLogError> {
        self.inner.read_after(after)
    }
    fn truncate(&mut self, to: Zxid) -> Result<(), TxnLogError> {
        self.inner.truncate(to)?;
        self.durable
            .fetch_min(self.inner.last_zxid().0, Ordering::SeqCst);
        Ok(())
    }
    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), TxnLogError> {
        self.inner.save_snapshot(snapshot)
    }
    fn latest_snapshot(&self) -> Result<Option<Snapshot>, TxnLogError> {
        self.inner.latest_snapshot()
    }
}

/// A recording state machine that, on every apply, checks the write is already durable on a
/// quorum (2 of the 3 logs) and notes it if not.
#[derive(Clone)]
struct Checking {
    sm: Arc<Mutex<RecordingStateMachine>>,
    durable: Vec<Arc<AtomicI64>>,
    violations: Arc<Mutex<Vec<Zxid>>>,
}

impl Checking {
    fn applied(&self) -> usize {
        self.sm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .applied
            .len()
    }
    fn with<R>(&self, f: impl FnOnce(&mut RecordingStateMachine) -> R) -> R {
        f(&mut self.sm.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl StateMachine for Checking {
    fn apply(&mut self, txn: &Txn) {
        let copies = self
            .durable
            .iter()
            .filter(|d| d.load(Ordering::SeqCst) >= txn.zxid.0)
            .count();
        if copies < 2 {
            self.violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(txn.zxid);
        }
        self.with(|s| s.apply(txn));
    }
    fn last_applied(&self) -> Zxid {
        self.with(|s| s.last_applied())
    }
    fn take_snapshot(&self) -> Snapshot {
        self.with(|s| s.take_snapshot())
    }
    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        self.with(|s| s.restore(snapshot))
    }
    fn reset(&mut self) {
        self.with(|s| s.reset());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn z2_group_commit_applies_only_writes_durable_on_a_quorum_and_batches_syncs() {
    const WRITES: usize = 200;
    let net = MemoryNetwork::new();
    let logs: Vec<Watched> = (0..3).map(|_| Watched::new()).collect();
    let durable: Vec<Arc<AtomicI64>> = logs.iter().map(|l| l.durable.clone()).collect();
    let violations = Arc::new(Mutex::new(Vec::new()));
    let sms: Vec<Checking> = (0..3)
        .map(|_| Checking {
            sm: Arc::default(),
            durable: durable.clone(),
            violations: violations.clone(),
        })
        .collect();
    let mut h: Vec<PeerHandle> = Vec::new();
    for sid in 1..=3i64 {
        let i = sid as usize - 1;
        let peer = QuorumPeer::new(
            config(sid, &[1, 2, 3], &[]),
            net.endpoint(ServerId(sid)),
            MemoryElectionStore::default(),
        )
        .await
        .unwrap()
        .with_replication(Box::new(logs[i].clone()), Box::new(sms[i].clone()))
        .unwrap();
        h.push(peer.spawn());
    }
    let (leader, _) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    let l = (leader.0 - 1) as usize;
    let syncs_before = logs[l].syncs.load(Ordering::SeqCst);
    // A burst at the leader and at a follower (which forwards): queued before the peers run.
    for i in 0..WRITES {
        let at = if i % 2 == 0 { l } else { (l + 1) % 3 };
        assert!(h[at].propose(format!("w{i}").into()));
    }
    let deadline = tokio::time::Instant::now() + SETTLE;
    while sms.iter().any(|s| s.applied() < WRITES) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not applied everywhere: {:?}",
            sms.iter().map(Checking::applied).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let v = violations
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(v.is_empty(), "applied before durable on a quorum: {v:?}");
    let reference = sms[l].with(|s| s.applied.clone());
    for s in &sms {
        assert_eq!(s.with(|s| s.applied.clone()), reference);
    }
    let syncs = logs[l].syncs.load(Ordering::SeqCst) - syncs_before;
    assert!(
        syncs < WRITES / 2,
        "{syncs} leader syncs for {WRITES} writes: no group commit"
    );
}
