//! The TCP transport against ZooKeeper 3.8's election-port rules (ZooKeeper's `QuorumCnxManager`): connection
//! header, one connection per pair kept by the larger sid, framing limits, resend of the last
//! message on reconnect, and bad input closing only the offending connection.

#![cfg(feature = "tokio")]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zab_core::transport::wire::{read_frame, ConnectionHeader, PROTOCOL_VERSION_V1};
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport, Transport, TransportEvent};
use zab_core::ServerId;

const WAIT: Duration = Duration::from_secs(5);

async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// Starts a transport for `sid` whose peer table is `peers`.
async fn transport(sid: i64, peers: HashMap<ServerId, PeerAddrs>, e: TcpListener) -> TcpTransport {
    let q = listener().await;
    let addr = e.local_addr().unwrap();
    TcpTransport::start(TcpConfig::new(ServerId(sid), addr, peers), e, q).unwrap()
}

async fn next_matching(
    t: &mut TcpTransport,
    mut f: impl FnMut(&TransportEvent) -> bool,
) -> TransportEvent {
    tokio::time::timeout(WAIT, async {
        loop {
            let ev = t.recv().await.expect("transport closed");
            if f(&ev) {
                return ev;
            }
        }
    })
    .await
    .expect("timed out waiting for an event")
}

fn header(sid: i64, addr: &str) -> Vec<u8> {
    ConnectionHeader {
        sid,
        addr: Some(addr.to_string()),
    }
    .encode()
    .to_vec()
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as i32).to_be_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

/// Reads until EOF (or reset) within the timeout: the server closed our connection.
async fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(WAIT, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(r.is_ok(), "connection was not closed");
}

fn addrs(e: SocketAddr) -> PeerAddrs {
    PeerAddrs {
        election: e,
        quorum: "127.0.0.1:1".parse().unwrap(),
    }
}

#[tokio::test]
async fn header_is_protocol_v1_sid_and_host_port() {
    let h = ConnectionHeader {
        sid: 2,
        addr: Some("127.0.0.1:38882".into()),
    }
    .encode();
    assert_eq!(&h[..8], &PROTOCOL_VERSION_V1.to_be_bytes());
    assert_eq!(&h[8..16], &2i64.to_be_bytes());
    assert_eq!(&h[16..20], &15i32.to_be_bytes());
    assert_eq!(&h[20..], b"127.0.0.1:38882");
}

#[tokio::test]
async fn smaller_sid_is_closed_and_dialled_back_by_the_larger() {
    // A fake server with sid 1 listens; our transport has sid 2 and knows it.
    let fake = listener().await;
    let fake_addr = fake.local_addr().unwrap();
    let e = listener().await;
    let our_addr = e.local_addr().unwrap();
    let mut t = transport(2, HashMap::from([(ServerId(1), addrs(fake_addr))]), e).await;

    // The fake (sid 1) dials us: we must close its connection ...
    let mut c = TcpStream::connect(our_addr).await.unwrap();
    c.write_all(&header(1, &fake_addr.to_string()))
        .await
        .unwrap();
    assert_closed(&mut c).await;
    // ... and dial back with our own header.
    let (mut back, _) = tokio::time::timeout(WAIT, fake.accept())
        .await
        .unwrap()
        .unwrap();
    let h = ConnectionHeader::read(&mut back).await.unwrap();
    assert_eq!(h.sid, 2);
    assert_eq!(h.addr.as_deref(), Some(our_addr.to_string().as_str()));
    next_matching(&mut t, |e| *e == TransportEvent::ConnectionUp(ServerId(1))).await;
    // The kept connection carries frames both ways.
    back.write_all(&frame(b"hello")).await.unwrap();
    let ev = next_matching(&mut t, |e| matches!(e, TransportEvent::Election { .. })).await;
    assert_eq!(
        ev,
        TransportEvent::Election {
            from: ServerId(1),
            payload: Bytes::from_static(b"hello")
        }
    );
    t.send_election(ServerId(1), Bytes::from_static(b"vote"));
    assert_eq!(&read_frame(&mut back).await.unwrap()[..], b"vote");
}

#[tokio::test]
async fn larger_sid_keeps_the_connection_it_initiated() {
    let e = listener().await;
    let our_addr = e.local_addr().unwrap();
    let mut t = transport(2, HashMap::new(), e).await;
    let mut c = TcpStream::connect(our_addr).await.unwrap();
    c.write_all(&header(3, "127.0.0.1:9")).await.unwrap();
    next_matching(&mut t, |e| *e == TransportEvent::ConnectionUp(ServerId(3))).await;
    c.write_all(&frame(b"x")).await.unwrap();
    let ev = next_matching(&mut t, |e| matches!(e, TransportEvent::Election { .. })).await;
    assert_eq!(
        ev,
        TransportEvent::Election {
            from: ServerId(3),
            payload: Bytes::from_static(b"x")
        }
    );
}

#[tokio::test]
async fn smaller_sid_initiator_sends_its_header_then_closes() {
    // Our transport (sid 1) dials a fake sid 2: it sends the header and closes (ZooKeeper's rule).
    let fake = listener().await;
    let fake_addr = fake.local_addr().unwrap();
    let e = listener().await;
    let mut t = transport(1, HashMap::from([(ServerId(2), addrs(fake_addr))]), e).await;
    t.send_election(ServerId(2), Bytes::from_static(b"v"));
    let (mut s, _) = tokio::time::timeout(WAIT, fake.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ConnectionHeader::read(&mut s).await.unwrap().sid, 1);
    assert_closed(&mut s).await;
}

#[tokio::test]
async fn equal_sid_connection_is_dropped() {
    let e = listener().await;
    let our_addr = e.local_addr().unwrap();
    let _t = transport(2, HashMap::new(), e).await;
    let mut c = TcpStream::connect(our_addr).await.unwrap();
    c.write_all(&header(2, "127.0.0.1:9")).await.unwrap();
    assert_closed(&mut c).await;
}

#[tokio::test]
async fn bad_header_address_length_closes_that_connection_only() {
    let e = listener().await;
    let our_addr = e.local_addr().unwrap();
    let mut t = transport(2, HashMap::new(), e).await;
    for bad_len in [0i32, -1, 2049] {
        let mut c = TcpStream::connect(our_addr).await.unwrap();
        let mut h = PROTOCOL_VERSION_V1.to_be_bytes().to_vec();
        h.extend_from_slice(&5i64.to_be_bytes());
        h.extend_from_slice(&bad_len.to_be_bytes());
        c.write_all(&h).await.unwrap();
        assert_closed(&mut c).await;
    }
    // The acceptor still works.
    let mut c = TcpStream::connect(our_addr).await.unwrap();
    c.write_all(&header(5, "127.0.0.1:9")).await.unwrap();
    next_matching(&mut t, |e| *e == TransportEvent::ConnectionUp(ServerId(5))).await;
}

#[tokio::test]
async fn frame_length_limits_are_1_to_524288_and_a_bad_frame_closes_only_its_connection() {
    let e = listener().await;
    let our_addr = e.local_addr().unwrap();
    let mut t = transport(2, HashMap::new(), e).await;
    let mut good = TcpStream::connect(our_addr).await.unwrap();
    good.write_all(&header(4, "127.0.0.1:9")).await.unwrap();
    next_matching(&mut t, |e| *e == TransportEvent::ConnectionUp(ServerId(4))).await;

    // The largest legal frame is delivered.
    let big = vec![7u8; 524_288];
    good.write_all(&frame(&big)).await.unwrap();
    let ev = next_matching(&mut t, |e| matches!(e, TransportEvent::Election { .. })).await;
    assert!(
        matches!(ev, TransportEvent::Election { from: ServerId(4), payload } if payload.len() == 524_288)
    );

    for bad_len in [0i32, -5, 524_289] {
        let mut c = TcpStream::connect(our_addr).await.unwrap();
        c.write_all(&header(3, "127.0.0.1:9")).await.unwrap();
        next_matching(&mut t, |e| *e == TransportEvent::ConnectionUp(ServerId(3))).await;
        c.write_all(&bad_len.to_be_bytes()).await.unwrap();
        assert_closed(&mut c).await;
        next_matching(&mut t, |e| {
            *e == TransportEvent::ConnectionDown(ServerId(3))
        })
        .await;
    }
    // The other connection is untouched and the receiver still runs.
    good.write_all(&frame(b"still here")).await.unwrap();
    let ev = next_matching(&mut t, |e| matches!(e, TransportEvent::Election { .. })).await;
    assert_eq!(
        ev,
        TransportEvent::Election {
            from: ServerId(4),
            payload: Bytes::from_static(b"still here")
        }
    );
}

#[tokio::test]
async fn last_message_is_resent_on_reconnect_and_only_the_newest_is_queued() {
    let fake = listener().await;
    let fake_addr = fake.local_addr().unwrap();
    let e = listener().await;
    let mut t = transport(2, HashMap::from([(ServerId(1), addrs(fake_addr))]), e).await;
    // Queue two messages before any connection: only the newest survives.
    t.send_election(ServerId(1), Bytes::from_static(b"old"));
    t.send_election(ServerId(1), Bytes::from_static(b"new"));
    let (mut s, _) = tokio::time::timeout(WAIT, fake.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ConnectionHeader::read(&mut s).await.unwrap().sid, 2);
    assert_eq!(&read_frame(&mut s).await.unwrap()[..], b"new");
    drop(s);
    next_matching(&mut t, |e| {
        *e == TransportEvent::ConnectionDown(ServerId(1))
    })
    .await;
    t.connect_all();
    let (mut s, _) = tokio::time::timeout(WAIT, fake.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ConnectionHeader::read(&mut s).await.unwrap().sid, 2);
    assert_eq!(&read_frame(&mut s).await.unwrap()[..], b"new");
}

#[tokio::test]
async fn messages_to_self_are_looped_back() {
    let e = listener().await;
    let mut t = transport(2, HashMap::new(), e).await;
    t.send_election(ServerId(2), Bytes::from_static(b"me"));
    let ev = next_matching(&mut t, |_| true).await;
    assert_eq!(
        ev,
        TransportEvent::Election {
            from: ServerId(2),
            payload: Bytes::from_static(b"me")
        }
    );
}

#[tokio::test]
async fn two_transports_end_with_one_connection_and_exchange_messages() {
    let (e1, e2) = (listener().await, listener().await);
    let (a1, a2) = (e1.local_addr().unwrap(), e2.local_addr().unwrap());
    let peers = HashMap::from([(ServerId(1), addrs(a1)), (ServerId(2), addrs(a2))]);
    let mut t1 = transport(1, peers.clone(), e1).await;
    let mut t2 = transport(2, peers, e2).await;
    // The smaller sid speaks first: its connection is replaced by the larger's dial-back.
    t1.send_election(ServerId(2), Bytes::from_static(b"from1"));
    let ev = next_matching(&mut t2, |e| matches!(e, TransportEvent::Election { .. })).await;
    assert_eq!(
        ev,
        TransportEvent::Election {
            from: ServerId(1),
            payload: Bytes::from_static(b"from1")
        }
    );
    t2.send_election(ServerId(1), Bytes::from_static(b"from2"));
    let ev = next_matching(&mut t1, |e| matches!(e, TransportEvent::Election { .. })).await;
    assert_eq!(
        ev,
        TransportEvent::Election {
            from: ServerId(2),
            payload: Bytes::from_static(b"from2")
        }
    );
    assert_eq!(t1.connected_peers(), vec![ServerId(2)]);
    assert_eq!(t2.connected_peers(), vec![ServerId(1)]);
}

fn quorum_packet(kind: i32, zxid: i64, data: &[u8]) -> Vec<u8> {
    let mut v = kind.to_be_bytes().to_vec();
    v.extend_from_slice(&zxid.to_be_bytes());
    v.extend_from_slice(&(data.len() as i32).to_be_bytes());
    v.extend_from_slice(data);
    v.extend_from_slice(&(-1i32).to_be_bytes());
    v
}

#[tokio::test]
async fn quorum_port_names_the_learner_by_its_learnerinfo_and_closes_only_malformed_streams() {
    use zab_core::discovery::{packet_type, LearnerInfo};
    let e = listener().await;
    let q = listener().await;
    let q_addr = q.local_addr().unwrap();
    let addr = e.local_addr().unwrap();
    let mut t =
        TcpTransport::start(TcpConfig::new(ServerId(3), addr, HashMap::new()), e, q).unwrap();

    // Garbage (a negative data length) closes that connection.
    let mut bad = TcpStream::connect(q_addr).await.unwrap();
    bad.write_all(&quorum_packet(packet_type::FOLLOWERINFO, 0, b"")[..12])
        .await
        .unwrap();
    bad.write_all(&(-7i32).to_be_bytes()).await.unwrap();
    assert_closed(&mut bad).await;
    // A first packet other than FOLLOWERINFO / OBSERVERINFO closes that connection.
    let mut ping = TcpStream::connect(q_addr).await.unwrap();
    ping.write_all(&quorum_packet(packet_type::PING, 0, b""))
        .await
        .unwrap();
    assert_closed(&mut ping).await;

    // A learner is named by the sid in its LearnerInfo, and answered on its connection.
    let mut good = TcpStream::connect(q_addr).await.unwrap();
    let info = LearnerInfo {
        sid: 1,
        protocol_version: 0x10000,
        config_version: 0,
    }
    .encode();
    good.write_all(&quorum_packet(packet_type::FOLLOWERINFO, 4 << 32, &info))
        .await
        .unwrap();
    let ev = next_matching(&mut t, |e| matches!(e, TransportEvent::Quorum { .. })).await;
    let TransportEvent::Quorum { from, packet } = ev else {
        unreachable!()
    };
    assert_eq!(
        (from, packet.kind, packet.zxid),
        (ServerId(1), packet_type::FOLLOWERINFO, 4 << 32)
    );
    t.send_quorum(
        ServerId(1),
        zab_core::discovery::QuorumPacket::new(packet_type::PING, 9),
    );
    let mut answer = [0u8; 20];
    good.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer[..4], &packet_type::PING.to_be_bytes());
    assert_eq!(&answer[4..12], &9i64.to_be_bytes());
    // Closing it is reported.
    drop(good);
    next_matching(&mut t, |e| *e == TransportEvent::QuorumDown(ServerId(1))).await;
}

#[tokio::test]
async fn unconfigured_smaller_sid_is_dialled_back_at_its_announced_address_but_never_a_wildcard() {
    let e = listener().await;
    let our_addr = e.local_addr().unwrap();
    let _t = transport(5, HashMap::new(), e).await;

    // A wildcard address is never dialled (ZOOKEEPER-2164).
    let wild = listener().await;
    let wild_port = wild.local_addr().unwrap().port();
    let mut c = TcpStream::connect(our_addr).await.unwrap();
    c.write_all(&header(1, &format!("0.0.0.0:{wild_port}")))
        .await
        .unwrap();
    assert_closed(&mut c).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), wild.accept())
            .await
            .is_err(),
        "dialled a wildcard address"
    );

    // A concrete address is dialled back, as ZooKeeper does for servers it does not know.
    let fake = listener().await;
    let fake_addr = fake.local_addr().unwrap();
    let mut c = TcpStream::connect(our_addr).await.unwrap();
    c.write_all(&header(2, &fake_addr.to_string()))
        .await
        .unwrap();
    assert_closed(&mut c).await;
    let (mut back, _) = tokio::time::timeout(WAIT, fake.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ConnectionHeader::read(&mut back).await.unwrap().sid, 5);
}
