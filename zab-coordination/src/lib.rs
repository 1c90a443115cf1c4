//! Coordination on `zab-core`: [`zookeeper`], a ZooKeeper 3.8-compatible server (the
//! `ha-zookeeper` binary) that real ZooKeeper clients use over its client port; and the Kafka
//! controller's in-process coordination store: a [`ZabEnsemble`] of in-process Zab servers, each holding the znode tree
//! ([`ha_coordination::ZnodeTree`]) as its state machine, and
//! [`ZabCoordination`] clients implementing the controller's
//! [`Coordination`](ha_coordination::Coordination) trait.
//!
//! # How it works
//!
//! - **Writes** (create, set, delete, multi, and opening / closing sessions) are transactions
//!   ([`codec`]) proposed through the client's server: the leader orders them, a quorum logs
//!   them, every server applies them in zxid order (Z2). Each carries its originating
//!   server's request id; that server hands its caller the result it computed when applying.
//!   Application is deterministic: a node's `czxid` / `mzxid` are the Zab zxid, a session's id
//!   is the zxid of the transaction that opened it.
//! - **Reads** are served by the client's server from its replica. `sync` makes the server
//!   catch up with the leader first (Zab's SYNC barrier, [`zab_core::peer::PeerHandle::sync`]).
//! - **Sessions**: clients touch their session at their server on each request and on a
//!   heartbeat; learners report the touches to the leader in their PING replies, and the
//!   leader's tracker expires a silent session. The leader's server then proposes a
//!   `CloseSession`; applying it deletes the session's ephemerals on every server. A new leader
//!   tracks every open session afresh, so sessions survive a re-election that is quicker than
//!   their timeout.
//! - **Watches** are one-shot and live at the server the client is connected to, which fires
//!   them as it applies transactions. A client whose server dies moves to another one, keeping
//!   its session, and re-registers its watches there (firing those whose node changed since
//!   the last transaction it saw).
//!
//! The servers talk over `zab-core`'s in-memory mesh by default, or over ZooKeeper-compatible
//! loopback TCP ports ([`EnsembleTransport::Tcp`]).
//!
//! [`ZabEnsemble`] implements the conformance suite's
//! [`CoordinationCluster`](ha_coordination::CoordinationCluster), with
//! clients spread over the servers, and offers [`ZabEnsemble::kill_leader`] for failover runs.

mod client;
pub mod codec;
mod ensemble;
mod server;
mod state;
pub mod zookeeper;

pub use client::{ClientTimeouts, ZabCoordination};
pub use ensemble::{EnsembleError, EnsembleTransport, ZabEnsemble, ZabEnsembleConfig};
pub use server::ZabServer;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
