//! `QuorumPeer`s with a transaction log and a state machine on the in-memory mesh (Z2):
//! writes submitted to the leader or forwarded by a follower are applied by every server in
//! the same order; after the leader crashes the next epoch keeps every committed write, and the
//! restarted server catches up by sync.

#![cfg(feature = "tokio")]

mod peer_support;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use peer_support::{config, gone, settled};
use zab_core::peer::{PeerHandle, QuorumPeer};
use zab_core::state_machine::{RecordingStateMachine, SnapshotError, StateMachine};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::MemoryNetwork;
use zab_core::txnlog::{MemoryTxnLog, Snapshot, Txn};
use zab_core::{ServerId, Zxid};

const SETTLE: Duration = Duration::from_secs(10);

/// A recording state machine the test can read while the peer runs.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<RecordingStateMachine>>);

impl Shared {
    fn applied(&self) -> Vec<Txn> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .applied
            .clone()
    }
    fn with<R>(&self, f: impl FnOnce(&mut RecordingStateMachine) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl StateMachine for Shared {
    fn apply(&mut self, txn: &Txn) {
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

struct Server {
    store: MemoryElectionStore,
    log: MemoryTxnLog,
    sm: Shared,
}

async fn start(net: &MemoryNetwork, sid: i64, s: &Server) -> PeerHandle {
    QuorumPeer::new(
        config(sid, &[1, 2, 3], &[]),
        net.endpoint(ServerId(sid)),
        s.store.clone(),
    )
    .await
    .unwrap()
    .with_replication(Box::new(s.log.clone()), Box::new(s.sm.clone()))
    .unwrap()
    .spawn()
}

async fn wait_applied(servers: &[&Server], n: usize) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        if servers.iter().all(|s| s.sm.applied().len() >= n) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not applied everywhere: {:?}",
            servers
                .iter()
                .map(|s| s.sm.applied().len())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn z2_writes_are_applied_everywhere_in_one_order_and_survive_a_leader_crash() {
    let net = MemoryNetwork::new();
    let servers: Vec<Server> = (0..3)
        .map(|_| Server {
            store: MemoryElectionStore::default(),
            log: MemoryTxnLog::new(),
            sm: Shared::default(),
        })
        .collect();
    let mut h = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        h.push(start(&net, i as i64 + 1, s).await);
    }
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!(leader, ServerId(3));
    // Ten writes at the leader, ten forwarded by follower 1.
    for i in 0..20 {
        let at = if i % 2 == 0 { 2 } else { 0 };
        assert!(h[at].propose(format!("w{i}").into()));
    }
    wait_applied(&servers.iter().collect::<Vec<_>>(), 20).await;
    let reference = servers[2].sm.applied();
    for s in &servers {
        assert_eq!(s.sm.applied(), reference);
    }
    assert!(reference.iter().all(|t| t.zxid.epoch() == epoch));
    assert!(reference.windows(2).all(|w| w[0].zxid < w[1].zxid));

    // The leader crashes; 2 leads the next epoch with every committed write, and takes more.
    h[2].kill();
    let (leader2, epoch2) = settled(&[&h[0], &h[1]], SETTLE).await;
    assert_eq!(leader2, ServerId(2));
    assert!(epoch2 > epoch);
    for i in 20..25 {
        assert!(h[1].propose(format!("w{i}").into()));
    }
    wait_applied(&[&servers[0], &servers[1]], 25).await;

    // 3 restarts from its log and catches up by DIFF.
    gone(&h[2], SETTLE).await;
    servers[2].sm.with(|s| s.reset());
    h[2] = start(&net, 3, &servers[2]).await;
    settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    wait_applied(&servers.iter().collect::<Vec<_>>(), 25).await;
    let reference = servers[1].sm.applied();
    assert_eq!(reference.len(), 25);
    for s in &servers {
        assert_eq!(s.sm.applied(), reference);
        assert_eq!(s.log.txns(), reference);
    }
}

#[tokio::test]
async fn z2_observer_learns_committed_writes_and_forwards_its_own() {
    let net = MemoryNetwork::new();
    let servers: Vec<Server> = (0..4)
        .map(|_| Server {
            store: MemoryElectionStore::default(),
            log: MemoryTxnLog::new(),
            sm: Shared::default(),
        })
        .collect();
    let mut h = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        let sid = i as i64 + 1;
        h.push(
            QuorumPeer::new(
                config(sid, &[1, 2, 3], &[4]),
                net.endpoint(ServerId(sid)),
                s.store.clone(),
            )
            .await
            .unwrap()
            .with_replication(Box::new(s.log.clone()), Box::new(s.sm.clone()))
            .unwrap()
            .spawn(),
        );
    }
    settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    for i in 0..6 {
        let at = if i % 2 == 0 { 2 } else { 3 };
        assert!(h[at].propose(format!("w{i}").into()));
    }
    wait_applied(&servers.iter().collect::<Vec<_>>(), 6).await;
    let reference = servers[2].sm.applied();
    assert_eq!(servers[3].sm.applied(), reference);
    assert_eq!(servers[3].log.txns(), reference);
}

/// ZooKeeper's `snapCount` on a running ensemble: every server snapshots every 10 committed
/// writes and compacts its log; a server that was down while the others compacted past its
/// last zxid is brought back by SNAP from the leader's snapshot, then DIFF of the log after it.
#[tokio::test]
async fn z2_peers_snapshot_every_snap_count_and_a_server_behind_the_compaction_is_synced_by_snap() {
    use zab_core::txnlog::{SnapshotPolicy, TxnLog};

    let policy = SnapshotPolicy::every(10);
    let net = MemoryNetwork::new();
    let servers: Vec<Server> = (0..3)
        .map(|_| Server {
            store: MemoryElectionStore::default(),
            log: MemoryTxnLog::new(),
            sm: Shared::default(),
        })
        .collect();
    let start_snapping = |sid: i64, s: &Server| {
        let net = net.clone();
        let (store, log, sm) = (s.store.clone(), s.log.clone(), s.sm.clone());
        async move {
            QuorumPeer::new(
                config(sid, &[1, 2, 3], &[]),
                net.endpoint(ServerId(sid)),
                store,
            )
            .await
            .unwrap()
            .with_replication(Box::new(log), Box::new(sm))
            .unwrap()
            .with_snapshot_policy(policy)
            .spawn()
        }
    };
    let mut h = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        h.push(start_snapping(i as i64 + 1, s).await);
    }
    settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    for i in 0..5 {
        assert!(h[2].propose(format!("w{i}").into()));
    }
    wait_applied(&servers.iter().collect::<Vec<_>>(), 5).await;

    // Server 1 goes down; 40 more writes: the others snapshot and compact past its history.
    h[0].kill();
    for i in 5..45 {
        assert!(h[2].propose(format!("w{i}").into()));
    }
    wait_applied(&[&servers[1], &servers[2]], 45).await;
    // Snapshots are taken and the log compacted after the apply: wait for both.
    let w40 = servers[2].sm.applied()[39].zxid;
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !servers[1..].iter().all(|s| {
        s.log
            .latest_snapshot()
            .ok()
            .flatten()
            .is_some_and(|snap| snap.zxid >= w40 && s.log.txns().iter().all(|t| t.zxid > snap.zxid))
    }) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "servers 2 and 3 did not snapshot past the 40th write and compact their logs"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for s in &servers[1..] {
        let snap = s
            .log
            .latest_snapshot()
            .unwrap()
            .expect("a snapshot was taken");
        assert!(snap.zxid >= servers[2].sm.applied()[39].zxid, "{snap:?}");
        let logged = s.log.txns();
        assert!(
            logged.len() < 45,
            "the log was compacted: {} left",
            logged.len()
        );
        assert!(logged.iter().all(|t| t.zxid > snap.zxid));
    }

    // The leader goes down too; server 1 restarts from its own (old) log. Server 2 leads the
    // next epoch from its snapshot and the log after it, so 1, behind the compaction, can only
    // be synced by SNAP.
    h[2].kill();
    servers[0].sm.with(|s| s.reset());
    h[0] = start_snapping(1, &servers[0]).await;
    settled(&[&h[0], &h[1]], SETTLE).await;
    wait_applied(&[&servers[0], &servers[1]], 45).await;
    assert!(
        servers[0].log.latest_snapshot().unwrap().is_some(),
        "server 1 got the leader's snapshot"
    );
    // Server 3 comes back too; all three agree.
    servers[2].sm.with(|s| s.reset());
    h[2] = start_snapping(3, &servers[2]).await;
    settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    wait_applied(&servers.iter().collect::<Vec<_>>(), 45).await;
    let reference = servers[1].sm.applied();
    assert_eq!(reference.len(), 45);
    for s in &servers {
        assert_eq!(s.sm.applied(), reference);
    }
}
