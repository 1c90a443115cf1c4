//! # ha-coordination
//!
//! A coordination service with ZooKeeper's semantics, for anything that elects, registers or
//! fences through one: the [`Coordination`] trait, the embedded [`MemoryCoordination`] (on a
//! [`ZnodeTree`] shared by its sessions), the real-ZooKeeper `ZooKeeperCoordination` (feature
//! `zookeeper`), [`CoordinationCluster`] for stores whose sessions can be expired on demand,
//! [`CoordinationLayer`] for wrappers that change one method and forward the rest, and a
//! conformance suite any implementation can run (feature `testing`: `conformance`, with
//! [`CoordinationCluster`] as its builder and `conformance::test_all`). The feature is purely
//! additive: it adds the module and changes no behaviour. It knows nothing of
//! Kafka: `kafka-controller` keeps Kafka's znode layout on top of it.
//!
//! # Semantics in brief
//!
//! - Nodes are persistent or ephemeral (owned by the creating session), optionally sequential
//!   (a 10-digit sequence number appended). Every node has a [`Stat`]: `version` (data
//!   changes; the partition epoch of a partition-state znode), `czxid` (the broker epoch of a
//!   `/brokers/ids/<id>` znode, KIP-380), `mzxid`, `ephemeral_owner`, `num_children`.
//! - `set_data`, `delete` and [`Op::Check`] take an expected version ([`ANY_VERSION`] = any).
//! - [`Coordination::multi`] applies a list of [`Op`]s atomically; a controller fences each of
//!   its writes with `Op::Check("/controller_epoch", epoch_zk_version)` (KAFKA-6082, as Kafka's `KafkaZkClient` does).
//! - Watches are one-shot and arrive on [`Coordination::events`] together with session events.
//!   When a session expires the client reports `Expired`, opens a new session and reports
//!   `Connected` with the new id; the controller resigns, re-registers and re-reads then.
//!
//! ```
//! use ha_coordination::{
//!     Coordination, CoordinationError, CreateMode, MemoryCoordination, Op, ANY_VERSION,
//! };
//!
//! # futures::executor::block_on(async {
//! let zk = MemoryCoordination::new();
//! zk.create("/controller_epoch", b"0", CreateMode::Persistent).await?;
//! let (_, epoch_stat) = zk.get_data("/controller_epoch", false).await?;
//!
//! // Win the election: create /controller and bump the epoch in one transaction.
//! zk.multi(vec![
//!     Op::create("/controller", br#"{"version":1,"brokerid":1,"timestamp":"0"}"#.to_vec(),
//!                CreateMode::Ephemeral),
//!     Op::set_data("/controller_epoch", b"1".to_vec(), epoch_stat.version),
//! ]).await?;
//!
//! // A write fenced by an outdated epoch version fails as a whole.
//! let err = zk.multi(vec![
//!     Op::check("/controller_epoch", epoch_stat.version),
//!     Op::create("/stale", Vec::new(), CreateMode::Persistent),
//! ]).await.unwrap_err();
//! assert!(matches!(err, CoordinationError::MultiOpFailed { index: 0, .. }));
//! assert!(zk.exists("/stale", false).await?.is_none());
//! # let _ = ANY_VERSION;
//! # Ok::<(), CoordinationError>(())
//! # }).unwrap();
//! ```
//!
//! # On a real ZooKeeper (feature `zookeeper`)
//!
//! ```no_run
//! # #[cfg(feature = "zookeeper")]
//! # async fn run() -> Result<(), ha_coordination::CoordinationError> {
//! use std::sync::Arc;
//! use ha_coordination::{Coordination, ZooKeeperCoordination};
//!
//! let zk: Arc<dyn Coordination> =
//!     Arc::new(ZooKeeperCoordination::connect("127.0.0.1:2181,127.0.0.1:2182/kafka").await?);
//! let mut events = zk.events(); // watches + Connected / Disconnected / Expired
//! # let _ = &mut events;
//! # Ok(())
//! # }
//! ```
//!
//! Kafka's layout on top of either backend is `kafka_controller::zk_data` (paths, JSON, and
//! `KafkaZkClient`: controller election, fenced writes, broker registration).

mod cluster;
#[cfg(feature = "testing")]
pub mod conformance;
mod error;
mod layer;
mod memory;
pub mod path;
#[cfg(feature = "tokio")]
mod retry;
mod service;
mod types;
#[cfg(feature = "zookeeper")]
mod zookeeper;

pub use cluster::{CoordinationCluster, MemoryCluster};
pub use error::CoordinationError;
pub use layer::CoordinationLayer;
pub use memory::{MemoryCoordination, MemoryTree, TreeChange, ZnodeTree};
#[cfg(feature = "tokio")]
pub use retry::RetryUntilConnected;
pub use service::Coordination;
pub use types::{
    CoordinationEvent, CreateMode, EventStream, Op, OpResult, SessionEvent, SessionId,
    SessionState, Stat, WatchEvent, WatchEventKind, ANY_VERSION,
};
#[cfg(feature = "zookeeper")]
pub use zookeeper::{ZooKeeperCoordination, ZooKeeperOptions};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
