//! A learner far behind, over TCP: the leader's DIFF from its log is longer than a quorum
//! connection's send queue holds (8,192 packets), and the driver hands the leader's core the
//! next chunk only once the queue towards that learner drained, so the learner is brought
//! back, never dropped.

#![cfg(feature = "tokio")]

mod peer_support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use peer_support::config;
use tokio::net::TcpListener;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerHandle, QuorumPeer};
use zab_core::state_machine::RecordingStateMachine;
use zab_core::store::MemoryElectionStore;
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport};
use zab_core::txnlog::{MemoryTxnLog, TxnLog};
use zab_core::{QuorumMaj, ServerEntry, ServerId, ServerState};

/// Writes committed while server 2 is down: their DIFF is 24,000 packets.
const WRITES: usize = 12_000;
const WAIT: Duration = Duration::from_secs(120);

struct Node {
    election: TcpListener,
    quorum: TcpListener,
}

async fn start(
    sid: i64,
    node: Node,
    addrs: &HashMap<ServerId, PeerAddrs>,
    qv: Arc<QuorumMaj>,
    log: MemoryTxnLog,
) -> PeerHandle {
    let own: SocketAddr = addrs[&ServerId(sid)].election;
    let t = TcpTransport::start(
        TcpConfig::new(ServerId(sid), own, addrs.clone()),
        node.election,
        node.quorum,
    )
    .unwrap();
    let mut cfg = config(sid, &[1, 2, 3], &[]);
    cfg.quorum = qv;
    // tick 100 ms, initLimit 10, syncLimit 5: initLimit bounds the wait for each packet of
    // the sync, not the whole sync.
    cfg.timing = Timing::new(Duration::from_millis(100), 10, 5);
    QuorumPeer::new(cfg, t, MemoryElectionStore::default())
        .await
        .unwrap()
        .with_replication(Box::new(log), Box::new(RecordingStateMachine::default()))
        .unwrap()
        .spawn()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z2_a_learner_further_behind_than_the_send_queue_holds_catches_up_over_tcp() {
    let mut nodes = Vec::new();
    let mut addrs = HashMap::new();
    for sid in 1..=3 {
        let election = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let quorum = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.insert(
            ServerId(sid),
            PeerAddrs {
                election: election.local_addr().unwrap(),
                quorum: quorum.local_addr().unwrap(),
            },
        );
        nodes.push(Node { election, quorum });
    }
    let members = addrs
        .iter()
        .map(|(sid, a)| {
            let hosts = format!("127.0.0.1:{}:{}", a.quorum.port(), a.election.port());
            (*sid, ServerEntry::participant(hosts))
        })
        .collect();
    let qv = Arc::new(QuorumMaj::new(members, 0));
    let logs: Vec<MemoryTxnLog> = (0..3).map(|_| MemoryTxnLog::new()).collect();
    let mut nodes = nodes.into_iter();
    let (n1, n2, n3) = (
        nodes.next().unwrap(),
        nodes.next().unwrap(),
        nodes.next().unwrap(),
    );
    let p1 = start(1, n1, &addrs, qv.clone(), logs[0].clone()).await;
    let p3 = start(3, n3, &addrs, qv.clone(), logs[2].clone()).await;
    let led = p3
        .wait_for(WAIT, |s| s.is_established_leader())
        .await
        .expect("server 3 leads servers 1 and 3");
    assert_eq!(led.leader, Some(ServerId(3)));
    p1.wait_for(WAIT, |s| s.epoch.is_some())
        .await
        .expect("1 follows");

    let payload = Bytes::from(vec![5u8; 64]);
    let mut sent = 0;
    while sent < WRITES {
        if p3.propose(payload.clone()) {
            sent += 1;
        } else {
            // The queue is full: let the peer take it in.
            p3.sync().await.expect("the leader serves");
        }
        if sent % 1000 == 0 {
            p3.sync().await.expect("the leader serves");
        }
    }
    let last = p3.sync().await.expect("the leader serves");
    assert_eq!(last.counter() as usize, WRITES);
    assert_eq!(logs[0].last_zxid(), last);

    // Server 2 comes back with nothing: 12,000 transactions behind.
    let p2 = start(2, n2, &addrs, qv.clone(), logs[1].clone()).await;
    // Every status it goes through: a learner dropped mid-sync goes LOOKING again.
    let mut rx = p2.status();
    let seen = tokio::spawn(async move {
        let mut seen = vec![*rx.borrow_and_update()];
        while rx.changed().await.is_ok() {
            let s = *rx.borrow_and_update();
            seen.push(s);
            if s.epoch.is_some() {
                break;
            }
        }
        seen
    });
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let done = p2.current().epoch.is_some() && logs[1].last_zxid() >= last;
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server 2 did not catch up: {:?}, log at {}",
            p2.current(),
            logs[1].last_zxid()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(logs[1].txns(), logs[2].txns());
    let seen = tokio::time::timeout(WAIT, seen).await.unwrap().unwrap();
    let following = seen
        .iter()
        .position(|s| s.state == ServerState::Following)
        .expect("2 followed");
    let dropped = seen[following..]
        .iter()
        .filter(|s| s.state != ServerState::Following)
        .count();
    assert_eq!(
        dropped, 0,
        "server 2 was dropped during its sync {dropped} times"
    );
    assert_eq!(p3.current().leader, Some(ServerId(3)), "no re-election");
}
