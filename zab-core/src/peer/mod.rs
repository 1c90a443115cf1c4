//! A whole server: [`PeerCore`], the sans-IO state machine of one ZooKeeper server
//! (election, discovery, synchronisation, broadcast, the leader's and the learner's roles,
//! session liveness), and `QuorumPeer`, the tokio driver that runs it over a transport with a
//! durable store, a transaction log and timers.
//!
//! [`PeerCore`] takes [`PeerInput`]s (messages, connection changes, the embedder's writes,
//! barriers and session touches, durability reports, time) and returns [`PeerAction`]s, to be
//! carried out in order under the contract documented on [`PeerAction`] (what must be durable
//! before what may be sent). The crate's lib docs drive three of them by hand.
//!
//! `QuorumPeer` (feature `tokio`) runs a server through LOOKING → election →
//! LEADING / FOLLOWING / OBSERVING (Z3, Z7, Z8), with discovery fixing each new epoch with
//! a quorum (Z1, Z5) and heartbeats that send a server back to LOOKING (Z6). Embedders follow
//! its [`PeerStatus`] on a `tokio::sync::watch` channel.
//!
//! With [`QuorumPeer::with_replication`] a peer also keeps a transaction log and a state
//! machine (Z2): a new leader syncs its learners from its log (DIFF / TRUNC / SNAP), then
//! orders the writes given to [`PeerHandle::propose`] (followers forward theirs), and every
//! server applies the committed ones in zxid order.
//!
//! For a client library on top (a coordination service, say), a [`PeerHandle`] also offers
//! ZooKeeper's `sync` barrier ([`PeerHandle::sync`]) and client-session liveness: any server
//! touches the sessions of its clients ([`PeerHandle::touch_session`]), learners report the
//! touches to the leader in their PING replies, and the leader's [`SessionTracker`] reports
//! the sessions that timed out ([`PeerHandle::take_session_expiries`]) for the embedder to
//! close through a transaction. See [`PeerHandle::propose`] for how a caller learns the
//! result of its write.
//!
//! `QuorumPeer`'s own docs show three of them electing and failing over on the in-memory mesh.
//! The status is a `watch` channel: it holds the latest value, so a very short LOOKING phase
//! (a re-election decided at once) may not be observed by a slow reader.

mod action;
mod config;
mod core;
#[cfg(feature = "tokio")]
mod driver;
#[cfg(feature = "tokio")]
mod replication;
pub mod sessions;

pub use self::action::{PeerAction, PeerInput, SyncId};
pub use self::config::{LeaderFigures, PeerConfig, PeerStatus, RequestValidator};
pub use self::core::PeerCore;
#[cfg(feature = "tokio")]
pub use driver::{PeerError, PeerHandle, QuorumPeer, SyncError};
#[cfg(feature = "tokio")]
pub use replication::ReplicationError;
pub use sessions::{SessionId, SessionTracker};
