//! Transports between peers: the [`Transport`] trait, an in-memory mesh with fault hooks
//! ([`MemoryNetwork`]) and a TCP transport wire-compatible with ZooKeeper 3.8's election port
//! ([`TcpTransport`], ZooKeeper's `QuorumCnxManager`).
//!
//! A transport carries two kinds of traffic:
//! - election messages: encoded notifications (ZooKeeper's `FastLeaderElection.buildMsg` layout), one per frame, best effort, newest
//!   wins per destination;
//! - quorum packets ([`QuorumPacket`]) between a leader and its learners, for discovery and
//!   heartbeats (Zab 1.0, as ZooKeeper's `Leader` and `Learner` run it), in order per connection.

mod memory;
mod tcp;
pub mod wire;

pub use memory::{LinkVerdict, MemoryNetwork, MemoryTransport, MessageKind};
pub use tcp::{PeerAddrs, TcpConfig, TcpTransport};

use async_trait::async_trait;
use bytes::Bytes;

use crate::discovery::QuorumPacket;
use crate::notification::Notification;
use crate::types::ServerId;

/// Something a transport hands to its peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportEvent {
    /// An election message (one frame's payload) from `from`. It has not been decoded yet;
    /// the receiver decodes and drops what is malformed.
    Election {
        /// The sender's sid (from the connection handshake, or our own sid for loopback).
        from: ServerId,
        /// The frame payload.
        payload: Bytes,
    },
    /// An election connection to `sid` came up.
    ConnectionUp(ServerId),
    /// The election connection to `sid` went down.
    ConnectionDown(ServerId),
    /// A quorum packet from `from`.
    Quorum {
        /// The sender's sid.
        from: ServerId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// The quorum connection with `sid` closed (a learner left, or our leader is gone).
    QuorumDown(ServerId),
    /// The server we dialled on its quorum port closed the connection without sending anything:
    /// it does not lead (a ZooKeeper server has no quorum listener then, and our peers refuse
    /// learners unless they lead or are still electing).
    QuorumRefused(ServerId),
}

/// How a peer talks to the others. Sending never blocks and never fails: delivery is best
/// effort, as in ZooKeeper (lost election messages are re-sent by the election's backoff,
/// lost quorum connections show up as [`TransportEvent::QuorumDown`] or heartbeat timeouts).
#[async_trait]
pub trait Transport: Send + 'static {
    /// Our own sid.
    fn my_sid(&self) -> ServerId;

    /// Queues an election message for `to`. Per destination only the newest unsent message is
    /// kept. A message to ourselves is looped back.
    fn send_election(&mut self, to: ServerId, payload: Bytes);

    /// Encodes `notification` (ZooKeeper's `FastLeaderElection.buildMsg` layout) and queues it for `to`, as
    /// [`send_election`](Self::send_election) does.
    fn send_notification(&mut self, to: ServerId, notification: &Notification) {
        self.send_election(to, Bytes::from(notification.encode()));
    }

    /// Asks the transport to (re)connect to every known peer (ZooKeeper's `connectAll`).
    fn connect_all(&mut self) {}

    /// Sends a quorum packet to `to`, opening a quorum connection if needed (a learner dials its
    /// leader; a leader answers on the connection its learner opened).
    fn send_quorum(&mut self, to: ServerId, packet: QuorumPacket);

    /// How many quorum packets to `to` are queued and not yet handed to its connection (zero
    /// without a connection, or for a transport that does not queue). A driver paces a
    /// learner's sync with it, so that a learner any distance behind never overflows the
    /// queue (see `QuorumPeer`).
    fn quorum_backlog(&self, to: ServerId) -> usize {
        let _ = to;
        0
    }

    /// Closes the quorum connection with `peer`, if any (for instance when leaving FOLLOWING).
    fn close_quorum(&mut self, peer: ServerId);

    /// Refuses a would-be learner's quorum connection (we do not lead): closes it without
    /// sending anything, so that the learner sees [`TransportEvent::QuorumRefused`].
    fn refuse_quorum(&mut self, peer: ServerId) {
        self.close_quorum(peer);
    }

    /// The next event; `None` once the transport is shut down.
    async fn recv(&mut self) -> Option<TransportEvent>;
}
