//! `QuorumPeer`s over the TCP transport on loopback: start-up election and re-election after a
//! leader crash (Z7, Z8), and bad input from a stranger that never stops a receiver, including
//! the version-2 notification with config length 0 that kills ZooKeeper 3.8.0's receiver
//! thread (`FastLeaderElection.Messenger.WorkerReceiver`).

#![cfg(feature = "tokio")]

mod peer_support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use peer_support::{config, settled};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use zab_core::discovery::Timing;
use zab_core::peer::{PeerHandle, QuorumPeer};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::wire::{read_frame, ConnectionHeader};
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport};
use zab_core::{Notification, QuorumMaj, ServerEntry, ServerId, ServerState};

const SETTLE: Duration = Duration::from_secs(15);

struct Node {
    election: TcpListener,
    quorum: TcpListener,
}

async fn tcp_ensemble(n: i64) -> (Vec<PeerHandle>, HashMap<ServerId, PeerAddrs>) {
    tcp_ensemble_with(n, peer_support::timing()).await
}

async fn tcp_ensemble_with(
    n: i64,
    timing: Timing,
) -> (Vec<PeerHandle>, HashMap<ServerId, PeerAddrs>) {
    let mut nodes = Vec::new();
    let mut addrs = HashMap::new();
    for sid in 1..=n {
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
            (
                *sid,
                ServerEntry::participant(format!(
                    "127.0.0.1:{}:{}",
                    a.quorum.port(),
                    a.election.port()
                )),
            )
        })
        .collect();
    let qv = Arc::new(QuorumMaj::new(members, 0));
    let voters: Vec<i64> = (1..=n).collect();
    let mut handles = Vec::new();
    for (i, node) in nodes.into_iter().enumerate() {
        let sid = i as i64 + 1;
        let own: SocketAddr = addrs[&ServerId(sid)].election;
        let t = TcpTransport::start(
            TcpConfig::new(ServerId(sid), own, addrs.clone()),
            node.election,
            node.quorum,
        )
        .unwrap();
        let mut cfg = config(sid, &voters, &[]);
        cfg.quorum = qv.clone();
        cfg.timing = timing;
        handles.push(
            QuorumPeer::new(cfg, t, MemoryElectionStore::default())
                .await
                .unwrap()
                .spawn(),
        );
    }
    (handles, addrs)
}

#[tokio::test]
async fn z7_z8_three_tcp_peers_elect_and_reelect_after_the_leader_crashes() {
    // ZooKeeper's default timing: a crashed leader must be noticed from its closed
    // connections, not after syncLimit * tickTime = 10 s of silence.
    let (h, _) = tcp_ensemble_with(3, Timing::default()).await;
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch), (ServerId(3), 1));
    let t = std::time::Instant::now();
    h[2].kill();
    let (leader2, epoch2) = settled(&[&h[0], &h[1]], Duration::from_secs(5)).await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(leader2, ServerId(2));
    assert!(epoch2 > epoch);
}

fn notification_v2(state: i32, config: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(state);
    b.put_i64(9); // leader
    b.put_i64(0); // zxid
    b.put_i64(1); // round
    b.put_i64(0); // peer epoch
    b.put_i32(2); // version
    b.put_i32(config.len() as i32);
    b.put_slice(config);
    b.to_vec()
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as i32).to_be_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

#[tokio::test]
async fn zab_notes_6_config_length_0_and_garbage_notifications_do_not_stop_the_receiver() {
    let (h, addrs) = tcp_ensemble(3).await;
    // A stranger with sid 9 (larger than 1, so its connection is kept) talks to server 1.
    let mut s = TcpStream::connect(addrs[&ServerId(1)].election)
        .await
        .unwrap();
    let header = ConnectionHeader {
        sid: 9,
        addr: Some("127.0.0.1:9".into()),
    };
    s.write_all(&header.encode()).await.unwrap();
    // Short, bad state, negative config length, config length 0, garbage config.
    s.write_all(&frame(&[1, 2, 3])).await.unwrap();
    s.write_all(&frame(&notification_v2(7, b""))).await.unwrap();
    let mut neg = notification_v2(0, b"");
    neg[40..44].copy_from_slice(&(-5i32).to_be_bytes());
    s.write_all(&frame(&neg)).await.unwrap();
    s.write_all(&frame(&notification_v2(0, b""))).await.unwrap();
    s.write_all(&frame(&notification_v2(0, b"\xff\xfe not a config")))
        .await
        .unwrap();

    // The receiver lives on: the ensemble still elects ...
    let (leader, _) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!(leader, ServerId(3));
    // ... and server 1 answers a non-voter's vote with its own (the receive rule for strangers).
    s.write_all(&frame(&notification_v2(0, b""))).await.unwrap();
    let reply = tokio::time::timeout(SETTLE, async {
        loop {
            let f = read_frame(&mut s).await.expect("connection stays open");
            if let Ok(n) = Notification::decode(&f) {
                if n.state == ServerState::Following {
                    return n;
                }
            }
        }
    })
    .await
    .expect("server 1 answers the stranger");
    assert_eq!(reply.leader, ServerId(3));
}
