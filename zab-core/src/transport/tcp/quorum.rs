//! Quorum-port connections of the TCP transport: a learner dials its leader, a leader accepts
//! and names each learner by the sid in its FOLLOWERINFO / OBSERVERINFO; jute `QuorumPacket`s
//! flow in order both ways. Our SNAP carries its snapshot in the packets after it; ZooKeeper's
//! SNAP is followed by a raw snapshot body, which is skipped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{QuorumConn, Shared, QUORUM_QUEUE};
use crate::discovery::{packet_type, LearnerInfo, QuorumPacket};
use crate::transport::TransportEvent;
use crate::types::ServerId;

pub(super) async fn dial_quorum(
    shared: Arc<Shared>,
    sid: ServerId,
    generation: u64,
    addr: SocketAddr,
    rx: mpsc::Receiver<QuorumPacket>,
) {
    let stream =
        match tokio::time::timeout(shared.cfg.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                debug!(sid = sid.0, "quorum connect failed: {e}");
                quorum_conn_ended(&shared, sid, generation, false);
                return;
            }
            Err(_) => {
                debug!(sid = sid.0, "quorum connect timed out");
                quorum_conn_ended(&shared, sid, generation, false);
                return;
            }
        };
    let _ = stream.set_nodelay(true);
    run_quorum_conn(shared, sid, generation, stream, rx, BytesMut::new(), false).await;
}

async fn run_quorum_conn(
    shared: Arc<Shared>,
    sid: ServerId,
    generation: u64,
    stream: TcpStream,
    mut rx: mpsc::Receiver<QuorumPacket>,
    buffered: BytesMut,
    received: bool,
) {
    let (r, mut w) = stream.into_split();
    let s2 = shared.clone();
    let reader = tokio::spawn(async move {
        let (e, refused) = quorum_read_loop(&s2, sid, r, buffered, received).await;
        debug!(sid = sid.0, "quorum connection read side ended: {e}");
        quorum_conn_ended(&s2, sid, generation, refused);
    });
    if let Some(c) = shared.state().quorum.get_mut(&sid) {
        if c.generation == generation {
            c.tasks.push(reader.abort_handle());
        }
    }
    let mut out = BytesMut::new();
    while let Some(p) = rx.recv().await {
        out.clear();
        p.encode(&mut out);
        // Everything else already queued goes in the same write (PROPOSALs, COMMITs, a
        // sync's packets): one syscall for many small packets.
        while out.len() < MAX_WRITE_BATCH {
            match rx.try_recv() {
                Ok(p) => p.encode(&mut out),
                Err(_) => break,
            }
        }
        if let Err(e) = w.write_all(&out).await {
            debug!(sid = sid.0, "quorum write failed: {e}");
            break;
        }
    }
    reader.abort();
    quorum_conn_ended(&shared, sid, generation, false);
}

/// Bytes of queued packets gathered into one socket write.
const MAX_WRITE_BATCH: usize = 256 << 10;

/// The jute string ZooKeeper writes after a SNAP's snapshot body: `i32 10, "BenWasHere"`.
const SNAP_SIGNATURE: &[u8] = b"\x00\x00\x00\x0aBenWasHere";

/// Discards snapshot bytes from the front of `buf` up to and including the signature. Returns
/// whether the signature was found; otherwise keeps only a possible partial signature.
fn skip_snapshot(buf: &mut BytesMut) -> bool {
    if let Some(at) = buf
        .windows(SNAP_SIGNATURE.len())
        .position(|w| w == SNAP_SIGNATURE)
    {
        let _ = buf.split_to(at + SNAP_SIGNATURE.len());
        return true;
    }
    let keep = buf.len().min(SNAP_SIGNATURE.len() - 1);
    let _ = buf.split_to(buf.len() - keep);
    false
}

/// Whether `packet` is ZooKeeper's SNAP, whose data buffer is null and which a raw snapshot
/// body follows. Ours carries the snapshot's size, its chunks following as packets (see
/// `docs/protocol.md`).
fn is_zookeeper_snap(packet: &QuorumPacket) -> bool {
    packet.kind == packet_type::SNAP && packet.data.is_none()
}

async fn quorum_read_loop(
    shared: &Shared,
    sid: ServerId,
    mut r: OwnedReadHalf,
    mut buf: BytesMut,
    mut received: bool,
) -> (String, bool) {
    // Closed before sending anything: the server we dialled does not lead (it refuses us).
    received |= !buf.is_empty();
    // ZooKeeper's SNAP packet is followed by a raw serialized snapshot, not by packets. This
    // crate keeps no ZooKeeper data tree: that body is skipped, in bounded memory, up to its
    // signature. Our own SNAP carries the snapshot's size, and the snapshot follows in SNAP packets.
    let mut in_snapshot = false;
    loop {
        loop {
            if in_snapshot {
                if !skip_snapshot(&mut buf) {
                    break;
                }
                in_snapshot = false;
            }
            match QuorumPacket::decode(&mut buf) {
                Ok(Some(packet)) => {
                    received = true;
                    in_snapshot = is_zookeeper_snap(&packet);
                    // Quorum packets are never dropped (a lost PROPOSAL would break the
                    // learner's order): a full event queue holds back reading, and TCP the
                    // sender.
                    let ev = TransportEvent::Quorum { from: sid, packet };
                    if shared.events.send(ev).await.is_err() {
                        return ("transport shut down".into(), false);
                    }
                }
                Ok(None) => break,
                Err(e) => return (format!("malformed quorum packet: {e}"), false),
            }
        }
        match r.read_buf(&mut buf).await {
            Ok(0) => return ("closed by peer".into(), !received),
            Ok(_) => received = true,
            Err(e) => return (e.to_string(), false),
        }
    }
}

/// The quorum connection `generation` with `sid` ended; `refused` when the remote closed it
/// without ever sending anything.
pub(super) fn quorum_conn_ended(shared: &Shared, sid: ServerId, generation: u64, refused: bool) {
    let mut st = shared.state();
    match st.quorum.get(&sid) {
        Some(c) if c.generation == generation => {}
        _ => return,
    }
    if let Some(c) = st.quorum.remove(&sid) {
        for t in &c.tasks {
            t.abort();
        }
    }
    drop(st);
    shared.emit(if refused {
        TransportEvent::QuorumRefused(sid)
    } else {
        TransportEvent::QuorumDown(sid)
    });
}

pub(super) async fn accept_quorum(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(handle_incoming_quorum(shared.clone(), stream));
            }
            Err(e) => {
                warn!(sid = shared.cfg.my_sid.0, "quorum accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A learner connected: its first packet (FOLLOWERINFO / OBSERVERINFO) names its sid.
async fn handle_incoming_quorum(shared: Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = BytesMut::new();
    let first = tokio::time::timeout(shared.cfg.connect_timeout, async {
        loop {
            match QuorumPacket::decode(&mut buf) {
                Ok(Some(p)) => return Ok(p),
                Ok(None) => {}
                Err(e) => return Err(e.to_string()),
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) => return Err("closed before FOLLOWERINFO".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    })
    .await;
    let first = match first {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            warn!(sid = shared.cfg.my_sid.0, "quorum connection rejected: {e}");
            return;
        }
        Err(_) => {
            warn!(
                sid = shared.cfg.my_sid.0,
                "quorum connection sent nothing, closing"
            );
            return;
        }
    };
    if first.kind != packet_type::FOLLOWERINFO && first.kind != packet_type::OBSERVERINFO {
        warn!(
            kind = first.kind,
            "first quorum packet is not FOLLOWERINFO/OBSERVERINFO, closing"
        );
        return;
    }
    let sid = match first.data.as_deref().map(LearnerInfo::decode) {
        Some(Ok(info)) => ServerId(info.sid),
        _ => {
            warn!("malformed LearnerInfo, closing quorum connection");
            return;
        }
    };
    let (tx, rx) = mpsc::channel(QUORUM_QUEUE);
    let generation = {
        let mut st = shared.state();
        let generation = st.next_generation;
        st.next_generation += 1;
        if let Some(old) = st.quorum.remove(&sid) {
            for t in &old.tasks {
                t.abort();
            }
        }
        st.quorum.insert(
            sid,
            QuorumConn {
                generation,
                tx,
                tasks: Vec::new(),
            },
        );
        generation
    };
    shared.emit(TransportEvent::Quorum {
        from: sid,
        packet: first,
    });
    let task = tokio::spawn(run_quorum_conn(
        shared.clone(),
        sid,
        generation,
        stream,
        rx,
        buf,
        true,
    ));
    match shared.state().quorum.get_mut(&sid) {
        Some(c) if c.generation == generation => c.tasks.push(task.abort_handle()),
        _ => task.abort(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_body_is_skipped_up_to_its_signature_even_when_split() {
        let mut buf = BytesMut::from(&b"snapshot bytes\x00\x00\x00\x0aBenWas"[..]);
        assert!(!skip_snapshot(&mut buf));
        assert!(buf.len() < SNAP_SIGNATURE.len());
        buf.extend_from_slice(b"Here\x00\x00\x00\x0a");
        assert!(skip_snapshot(&mut buf));
        assert_eq!(&buf[..], b"\x00\x00\x00\x0a");
    }
}
