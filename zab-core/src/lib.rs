//! # zab-core
//!
//! Apache ZooKeeper's fast leader election (SPEC Z1–Z8), as a sans-IO state machine with an
//! async driver on top.

pub mod discovery;
pub mod store;
#[cfg(feature = "tokio")]
pub mod transport;
