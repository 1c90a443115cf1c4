//! `QuorumPeer`: the tokio driver that runs a server through LOOKING → election →
//! LEADING / FOLLOWING / OBSERVING (SPEC Z3, Z7, Z8), with discovery fixing each new epoch with
//! a quorum (Z1, Z5) and heartbeats that send a server back to LOOKING (Z6). Embedders follow
//! its [`PeerStatus`] on a `tokio::sync::watch` channel.

mod driver;

pub use driver::{PeerConfig, PeerError, PeerHandle, PeerStatus, QuorumPeer};
