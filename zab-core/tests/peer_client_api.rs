//! What a client library needs from a running `QuorumPeer` (Z2): `sync` barriers that
//! give read-your-writes on any server, and client-session liveness carried to the leader
//! (learners report touched sessions in their PING replies; the leader expires the silent
//! ones, and a new leader starts tracking afresh).

#![cfg(feature = "tokio")]

mod peer_support;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use peer_support::{config, settled};
use zab_core::peer::{PeerHandle, QuorumPeer, SyncError};
use zab_core::state_machine::{RecordingStateMachine, SnapshotError, StateMachine};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::MemoryNetwork;
use zab_core::txnlog::{MemoryTxnLog, Snapshot, Txn};
use zab_core::{ServerId, ServerState, Zxid};

const SETTLE: Duration = Duration::from_secs(10);

/// A recording state machine the test can read while the peer runs.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<RecordingStateMachine>>);

impl Shared {
    fn payloads(&self) -> Vec<Vec<u8>> {
        self.with(|s| s.applied.iter().map(|t| t.data.to_vec()).collect())
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

async fn ensemble(net: &MemoryNetwork, sms: &[Shared]) -> Vec<PeerHandle> {
    let mut h = Vec::new();
    for (i, sm) in sms.iter().enumerate() {
        let sid = i as i64 + 1;
        h.push(
            QuorumPeer::new(
                config(sid, &[1, 2, 3], &[]),
                net.endpoint(ServerId(sid)),
                MemoryElectionStore::default(),
            )
            .await
            .unwrap()
            .with_replication(Box::new(MemoryTxnLog::new()), Box::new(sm.clone()))
            .unwrap()
            .spawn(),
        );
    }
    h
}

#[tokio::test]
async fn z2_sync_after_a_write_reads_it_on_every_server() {
    let net = MemoryNetwork::new();
    let sms: Vec<Shared> = (0..3).map(|_| Shared::default()).collect();
    let h = ensemble(&net, &sms).await;
    let (leader, _) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!(leader, ServerId(3));
    // On a follower (forwarded write, SYNC to the leader) and on the leader itself: a barrier
    // asked right after a write returns only once that write is applied locally.
    for round in 0..20 {
        for at in [0usize, 2] {
            let w = format!("w{round}-{at}").into_bytes();
            assert!(h[at].propose(w.clone().into()));
            let z = tokio::time::timeout(SETTLE, h[at].sync())
                .await
                .expect("sync answered")
                .expect("sync done");
            assert!(
                sms[at].payloads().contains(&w),
                "write {round} not read back at {at}"
            );
            assert!(sms[at].with(|s| s.last_applied()) >= z);
        }
    }
    // Another server's sync sees everything committed before it.
    let z = h[1].sync().await.expect("sync on the other follower");
    assert_eq!(sms[1].payloads().len(), 40);
    assert!(z.counter() >= 40);
}

#[tokio::test]
async fn z2_a_write_no_learner_could_accept_is_refused_and_the_ensemble_goes_on() {
    let net = MemoryNetwork::new();
    let sms: Vec<Shared> = (0..3).map(|_| Shared::default()).collect();
    let h = ensemble(&net, &sms).await;
    settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    let huge = vec![0u8; zab_core::discovery::MAX_PACKET_DATA + 1];
    assert!(!h[0].propose(huge.into()));
    assert!(h[0].propose(b"small".to_vec().into()));
    h[0].sync().await.expect("sync");
    assert_eq!(sms[0].payloads(), vec![b"small".to_vec()]);
}

#[tokio::test]
async fn z6_sync_fails_on_a_server_that_serves_no_epoch() {
    let net = MemoryNetwork::new();
    let sms: Vec<Shared> = (0..3).map(|_| Shared::default()).collect();
    let h = ensemble(&net, &sms[..1]).await; // alone: never established
    assert_eq!(h[0].sync().await, Err(SyncError::NotServing));
    // Alone it never comes to serve: that nothing changes for a while is the subject here, so
    // the test waits 300 ms (past the first notification timeouts) and asks again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h[0].current().state, ServerState::Looking);
    assert_eq!(h[0].sync().await, Err(SyncError::NotServing));
}

#[tokio::test]
async fn z2_sessions_touched_on_followers_stay_alive_and_silent_ones_expire_at_the_leader() {
    let net = MemoryNetwork::new();
    let sms: Vec<Shared> = (0..3).map(|_| Shared::default()).collect();
    let mut h = ensemble(&net, &sms).await;
    settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    let mut expiries = h[2]
        .take_session_expiries()
        .expect("leader's expiry stream");
    assert!(h[2].take_session_expiries().is_none());
    let timeout = Duration::from_millis(600);
    // Session 11's client talks to follower 1 and keeps touching it for 1.5 s (well past its
    // timeout); session 12's client (on follower 2) touches once and goes silent.
    assert!(h[0].touch_session(11, timeout));
    assert!(h[1].touch_session(12, timeout));
    let start = tokio::time::Instant::now();
    let mut expired = Vec::new();
    while start.elapsed() < Duration::from_millis(1500) {
        assert!(h[0].touch_session(11, timeout));
        if let Ok(Some(s)) = tokio::time::timeout(Duration::from_millis(100), expiries.recv()).await
        {
            expired.push((s, start.elapsed()));
        }
    }
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].0, 12);
    assert!(expired[0].1 >= timeout, "expired early: {expired:?}");

    // A closed session is forgotten: untouched from now on, 11 is not reported once ended.
    assert!(h[2].end_session(11));
    assert!(h[0].end_session(11));
    assert!(
        tokio::time::timeout(Duration::from_millis(1200), expiries.recv())
            .await
            .is_err(),
        "an ended session was reported"
    );

    // The leader dies: the next leader tracks the sessions touched at it afresh.
    assert!(h[1].touch_session(13, timeout));
    h[2].kill();
    let (leader2, _) = settled(&[&h[0], &h[1]], SETTLE).await;
    assert_eq!(leader2, ServerId(2));
    let mut expiries2 = h[1].take_session_expiries().expect("new leader's stream");
    assert!(h[1].touch_session(14, timeout));
    let s = tokio::time::timeout(SETTLE, expiries2.recv())
        .await
        .expect("expiry");
    assert!(matches!(s, Some(13 | 14)), "{s:?}");
}

#[tokio::test]
async fn leader_figures_count_the_synced_followers_on_the_leader_only() {
    let net = MemoryNetwork::new();
    let sms: Vec<Shared> = (0..3).map(|_| Shared::default()).collect();
    let h = ensemble(&net, &sms).await;
    let (leader, _) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    let li = (leader.0 - 1) as usize;
    // Both followers join the broadcast once they acknowledged NEWLEADER.
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let f = h[li]
            .leader_figures()
            .await
            .expect("the leader has figures");
        if f.synced_followers == 2 {
            assert_eq!((f.synced_observers, f.pending_syncs), (0, 0));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{f:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for (i, p) in h.iter().enumerate() {
        if i != li {
            assert_eq!(p.leader_figures().await, None, "server {}", i + 1);
        }
    }
}
