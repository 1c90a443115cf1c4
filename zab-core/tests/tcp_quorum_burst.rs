//! The TCP transport's quorum connections under a burst (Z2): a leader that queues
//! thousands of 1 KiB PROPOSALs at once for a learner (as broadcast under load or a DIFF sync
//! does) keeps the connection, and the learner receives every packet, in order, none dropped,
//! even though it reads none of them until the burst is queued.

#![cfg(feature = "tokio")]

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use zab_core::discovery::{packet_type, LearnerInfo, QuorumPacket};
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport, Transport, TransportEvent};
use zab_core::ServerId;

const WAIT: Duration = Duration::from_secs(20);
const BURST: i64 = 3000;

async fn transport(sid: i64, peers: HashMap<ServerId, PeerAddrs>) -> (TcpTransport, PeerAddrs) {
    let e = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let q = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addrs = PeerAddrs {
        election: e.local_addr().unwrap(),
        quorum: q.local_addr().unwrap(),
    };
    let cfg = TcpConfig::new(ServerId(sid), addrs.election, peers);
    (TcpTransport::start(cfg, e, q).unwrap(), addrs)
}

async fn next_quorum(t: &mut TcpTransport) -> (ServerId, QuorumPacket) {
    tokio::time::timeout(WAIT, async {
        loop {
            match t.recv().await.expect("transport closed") {
                TransportEvent::Quorum { from, packet } => return (from, packet),
                TransportEvent::QuorumDown(s) => panic!("quorum connection with {s:?} closed"),
                _ => {}
            }
        }
    })
    .await
    .expect("timed out waiting for a quorum packet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z2_a_burst_of_proposals_reaches_the_learner_complete_and_in_order() {
    let (mut leader, leader_addrs) = transport(3, HashMap::new()).await;
    let peers = HashMap::from([(ServerId(3), leader_addrs)]);
    let (mut learner, _) = transport(1, peers).await;
    let info = LearnerInfo {
        sid: 1,
        protocol_version: 0x10000,
        config_version: 0,
    };
    learner.send_quorum(
        ServerId(3),
        QuorumPacket::with_data(packet_type::FOLLOWERINFO, 1 << 32, info.encode()),
    );
    let (from, first) = next_quorum(&mut leader).await;
    assert_eq!((from, first.kind), (ServerId(1), packet_type::FOLLOWERINFO));

    let payload = Bytes::from(vec![7u8; 1024]);
    for counter in 1..=BURST {
        leader.send_quorum(
            ServerId(1),
            QuorumPacket::with_data(packet_type::PROPOSAL, 1 << 32 | counter, payload.clone()),
        );
    }
    for counter in 1..=BURST {
        let (from, p) = next_quorum(&mut learner).await;
        assert_eq!(from, ServerId(3));
        assert_eq!((p.kind, p.zxid), (packet_type::PROPOSAL, 1 << 32 | counter));
        assert_eq!(p.data.as_ref(), Some(&payload));
    }
}
