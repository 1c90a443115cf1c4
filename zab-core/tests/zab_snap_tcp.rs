//! SNAP synchronisation between two of our peers over loopback TCP: the leader's transport
//! sends the SNAP (a size header, then the snapshot in 1 MiB chunks), the transactions after
//! it and NEWLEADER; the learner's transport delivers them in order to the real learner core,
//! which restores the snapshot, logs the rest and acknowledges NEWLEADER. A ZooKeeper-style SNAP (null data, raw
//! body ending in "BenWasHere") is still skipped, and the packets after it still arrive.

#![cfg(feature = "tokio")]

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use zab_core::broadcast::{
    choose_sync, leader_sync_packets, BroadcastAction, LearnerBroadcast, LearnerOptions, SyncPlan,
};
use zab_core::discovery::{packet_type, LearnerInfo, QuorumPacket};
use zab_core::state_machine::{RecordingStateMachine, StateMachine};
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport, Transport, TransportEvent};
use zab_core::txnlog::{Snapshot, Txn};
use zab_core::{ServerId, Zxid};

const WAIT: Duration = Duration::from_secs(10);

async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

async fn next_quorum(t: &mut TcpTransport) -> (ServerId, QuorumPacket) {
    tokio::time::timeout(WAIT, async {
        loop {
            if let TransportEvent::Quorum { from, packet } = t.recv().await.expect("open") {
                return (from, packet);
            }
        }
    })
    .await
    .expect("timed out waiting for a quorum packet")
}

/// A leader (sid 3) and a learner (sid 1) connected on the quorum port.
async fn pair() -> (TcpTransport, TcpTransport) {
    let (e3, q3) = (listener().await, listener().await);
    let q3_addr = q3.local_addr().unwrap();
    let e3_addr = e3.local_addr().unwrap();
    let mut leader =
        TcpTransport::start(TcpConfig::new(ServerId(3), e3_addr, HashMap::new()), e3, q3).unwrap();
    let (e1, q1) = (listener().await, listener().await);
    let e1_addr = e1.local_addr().unwrap();
    let peers = HashMap::from([(
        ServerId(3),
        PeerAddrs {
            election: e3_addr,
            quorum: q3_addr,
        },
    )]);
    let mut learner =
        TcpTransport::start(TcpConfig::new(ServerId(1), e1_addr, peers), e1, q1).unwrap();
    let info = LearnerInfo {
        sid: 1,
        protocol_version: 0x10000,
        config_version: 0,
    }
    .encode();
    learner.send_quorum(
        ServerId(3),
        QuorumPacket::with_data(packet_type::FOLLOWERINFO, 1 << 32, info),
    );
    let (from, p) = next_quorum(&mut leader).await;
    assert_eq!((from, p.kind), (ServerId(1), packet_type::FOLLOWERINFO));
    (leader, learner)
}

#[tokio::test]
async fn snap_sync_over_loopback_tcp_restores_the_snapshot_and_the_log_after_it() {
    let (mut leader, mut learner) = pair().await;
    // The leader's state: a snapshot of 2000 transactions (about 200 KiB), then two more.
    let mut state = RecordingStateMachine::default();
    for c in 1..=2000u32 {
        state.apply(&Txn::new(Zxid::new(1, c), vec![c as u8; 100]));
    }
    let snapshot: Snapshot = state.take_snapshot();
    let after = vec![
        Txn::new(Zxid::new(1, 2001), "x"),
        Txn::new(Zxid::new(1, 2002), "y"),
    ];
    let plan = choose_sync(Zxid::ZERO, snapshot.zxid, &after, Some(&snapshot)).unwrap();
    assert!(matches!(plan, SyncPlan::Snap { .. }));
    let packets = leader_sync_packets(&plan, 2);
    for p in packets.clone() {
        leader.send_quorum(ServerId(1), p);
    }
    // Every packet arrives, in order, whole.
    let mut core = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    for sent in &packets {
        let (from, got) = next_quorum(&mut learner).await;
        assert_eq!(from, ServerId(3));
        assert_eq!(&got, sent);
        core.handle_packet(got);
    }
    let actions: Vec<BroadcastAction> = std::iter::from_fn(|| core.poll_action()).collect();
    let Some(BroadcastAction::RestoreSnapshot(restored)) = actions.first() else {
        panic!("no snapshot restored: {actions:?}");
    };
    assert_eq!(restored, &snapshot);
    let mut replica = RecordingStateMachine::default();
    replica.restore(restored).unwrap();
    assert_eq!(replica, state);
    assert!(actions.contains(&BroadcastAction::Log(after.clone())));
    assert!(actions.iter().any(|a| matches!(
        a,
        BroadcastAction::Send { packet, .. } if packet.kind == packet_type::ACK && packet.zxid == 2 << 32
    )));
}

#[tokio::test]
async fn a_snap_without_a_snapshot_is_refused_by_a_learner_with_a_log() {
    // ZooKeeper's SNAP (null data) is followed by a raw data tree we cannot restore: a learner
    // keeping a log gives up on that leader instead of restoring an empty state.
    let with_log = LearnerOptions::default().with_follow_broadcast(true);
    let mut core = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, with_log);
    core.handle_packet(QuorumPacket::new(packet_type::SNAP, Zxid::new(1, 5).0));
    let actions: Vec<BroadcastAction> = std::iter::from_fn(|| core.poll_action()).collect();
    assert!(
        matches!(actions[..], [BroadcastAction::Abandon { .. }]),
        "{actions:?}"
    );
}

#[tokio::test]
async fn a_zookeeper_snap_body_is_skipped_and_the_packets_after_it_arrive() {
    // A raw socket plays a ZooKeeper leader on the quorum port.
    let zk = listener().await;
    let zk_addr = zk.local_addr().unwrap();
    let (e1, q1) = (listener().await, listener().await);
    let e1_addr = e1.local_addr().unwrap();
    let peers = HashMap::from([(
        ServerId(3),
        PeerAddrs {
            election: "127.0.0.1:1".parse().unwrap(),
            quorum: zk_addr,
        },
    )]);
    let mut learner =
        TcpTransport::start(TcpConfig::new(ServerId(1), e1_addr, peers), e1, q1).unwrap();
    learner.send_quorum(
        ServerId(3),
        QuorumPacket::with_data(packet_type::FOLLOWERINFO, 1 << 32, Bytes::new()),
    );
    let (mut sock, _) = tokio::time::timeout(WAIT, zk.accept())
        .await
        .unwrap()
        .unwrap();
    let mut out = BytesMut::new();
    QuorumPacket::new(packet_type::SNAP, Zxid::new(1, 5).0).encode(&mut out);
    out.extend_from_slice(b"a serialized data tree, opaque to us");
    out.extend_from_slice(b"\x00\x00\x00\x0aBenWasHere");
    QuorumPacket::new(packet_type::PING, 42).encode(&mut out);
    sock.write_all(&out).await.unwrap();
    let (_, snap) = next_quorum(&mut learner).await;
    assert_eq!((snap.kind, snap.data), (packet_type::SNAP, None));
    let (_, ping) = next_quorum(&mut learner).await;
    assert_eq!((ping.kind, ping.zxid), (packet_type::PING, 42));
}

#[tokio::test]
async fn a_20_mib_snap_goes_over_loopback_tcp_in_chunks_and_is_restored_whole() {
    let (mut leader, mut learner) = pair().await;
    let data: Vec<u8> = (0..20usize << 20).map(|i| (i % 253) as u8).collect();
    let snapshot = Snapshot {
        zxid: Zxid::new(1, 7),
        data: data.into(),
    };
    let after = vec![Txn::new(Zxid::new(1, 8), "z")];
    let plan = choose_sync(Zxid::ZERO, snapshot.zxid, &after, Some(&snapshot)).unwrap();
    let packets = leader_sync_packets(&plan, 2);
    // Header, 20 chunks of 1 MiB, PROPOSAL, COMMIT, NEWLEADER.
    assert_eq!(packets.len(), 24);
    for p in packets {
        leader.send_quorum(ServerId(1), p);
    }
    let mut core = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    let mut restored = None;
    let mut acked = false;
    while !acked {
        let (_, got) = next_quorum(&mut learner).await;
        core.handle_packet(got);
        while let Some(a) = core.poll_action() {
            match a {
                BroadcastAction::RestoreSnapshot(s) => restored = Some(s),
                BroadcastAction::Send { packet, .. } if packet.kind == packet_type::ACK => {
                    acked = true;
                }
                _ => {}
            }
        }
    }
    assert_eq!(restored.as_ref(), Some(&snapshot));
}

#[tokio::test]
async fn a_learner_50000_transactions_behind_gets_a_snap_and_the_log_after_it_and_catches_up() {
    let (mut leader, mut learner) = pair().await;
    // The leader committed 50,000 transactions and snapshotted at 49,000; the learner has
    // nothing. The DIFF would be 100,000 packets (more than a connection's queue): the
    // snapshotSizeFactor rule sends the snapshot and the 1,000 transactions after it.
    let log: Vec<Txn> = (1..=50_000u32)
        .map(|c| Txn::new(Zxid::new(1, c), c.to_be_bytes().repeat(4)))
        .collect();
    let mut state = RecordingStateMachine::default();
    for t in &log[..49_000] {
        state.apply(t);
    }
    let snapshot = state.take_snapshot();
    for t in &log[49_000..] {
        state.apply(t);
    }
    let plan = choose_sync(Zxid::ZERO, Zxid::ZERO, &log, Some(&snapshot)).unwrap();
    assert!(matches!(plan, SyncPlan::Snap { ref txns, .. } if txns.len() == 1_000));
    for p in leader_sync_packets(&plan, 2) {
        leader.send_quorum(ServerId(1), p);
    }
    let mut core = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    let mut replica = RecordingStateMachine::default();
    let mut acked = false;
    while !acked {
        let (_, got) = next_quorum(&mut learner).await;
        core.handle_packet(got);
        while let Some(a) = core.poll_action() {
            match a {
                BroadcastAction::RestoreSnapshot(s) => replica.restore(&s).unwrap(),
                BroadcastAction::Log(txns) => txns.iter().for_each(|t| replica.apply(t)),
                BroadcastAction::Send { packet, .. } if packet.kind == packet_type::ACK => {
                    acked = true;
                }
                _ => {}
            }
        }
    }
    assert_eq!(replica, state);
    assert_eq!(core.last_logged(), Zxid::new(1, 50_000));
}
