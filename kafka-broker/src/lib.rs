//! # kafka-broker
//!
//! The reference composition of a ZooKeeper-mode Kafka broker from the ha-blocks crates: the
//! parts a broker builder would otherwise write, each usable alone.
//!
//! - [`server`]: the network layer of a broker (K3): acceptor, processors, a bounded request
//!   channel and handler workers, responses in request order.
//! - [`KafkaApis`]: request dispatch, one method per API, on `kafka-replication`'s
//!   `ReplicaManager` through the [`ReplicaDriver`].
//! - [`TcpLeaderLink`] and [`TcpBrokerChannel`]: the follower's link to its leader and the
//!   controller's channel to the brokers, as Kafka wire over TCP.
//! - [`glue`]: the broker's side of the coordination store — ISR writes on the partition-state
//!   znodes with ISR change notifications, the broker's registration, producer-id blocks.
//! - [`Broker`]: the data plane behind the K3 server, the shortest way to a running broker.
//! - [`config`]: `server.properties` with Kafka's keys, read into a node's settings.
//! - [`node`]: one complete broker node — data plane, registration, ISR propagation and a
//!   campaigning controller on a coordination store — as the `ha-broker` binary runs it.
//!
//! The binaries `ha-broker` and `ha-admin` need the `cli` feature; the library part has no
//! argument parser and installs no log subscriber.
//!
//! ## How the parts fit
//!
//! What trait goes where:
//!
//! ```text
//!  server::Server ──RequestHandler──▶ KafkaApis ──▶ ReplicaDriver ──▶ ReplicaManager<L: LogStorage>
//!                                                     │   ▲ actions (poll_action)
//!                        ISR proposals ───────────────┤   │
//!                        IsrWriter (W) ◀──────────────┘   │
//!                        fetcher task per leader ──LeaderLink (K, e.g. TcpLeaderLink)──▶ leader
//! ```
//!
//! - [`KafkaApis`] implements the server's `RequestHandler`: one method per API.
//! - [`ReplicaDriver`] (from `kafka_replication::replica_driver`, re-exported) owns the sans-IO
//!   `ReplicaManager` behind a mutex, feeds it time, answers delayed produces and fetches,
//!   carries ISR proposals to an `IsrWriter`, runs one `ReplicaFetcher` per leader over a
//!   `LeaderLink` made by a [`LinkFactory`], and tells the [`LeadershipListener`] the
//!   manager's `BecameLeader` / `BecameFollower` actions.
//! - [`TcpLeaderLink`] is that link over TCP (`kafka-wire` Fetch v12 and OffsetForLeaderEpoch).
//! - The `IsrWriter` on a coordination store (ZooKeeper or in memory) is `glue::ZkIsrWriter`;
//!   tests use `kafka_replication::isr::MemoryIsrWriter`. A [`Broker`] takes it as a
//!   [`BrokerIsrWriter`]: the writer moves into the driver, and the [`LeadershipListener`] it
//!   hands out hears from the driver the controller epoch of every LeaderAndIsr that made
//!   this broker leader, so its ISR writes carry it (K4.1, KIP-380).
//!
//! - [`TcpBrokerChannel`] is the controller's `BrokerChannel` over TCP: LeaderAndIsr,
//!   UpdateMetadata and StopReplica sent to each broker's listener.
//! - [`Broker`] puts them together behind the K3 server: the shortest way to a running
//!   broker.
//!
//! The controller side (LeaderAndIsr, UpdateMetadata, StopReplica) arrives as ordinary
//! requests, so a test can play the controller by sending them itself.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kafka_broker::{Broker, BrokerConfig};
//! use kafka_replication::isr::MemoryIsrWriter;
//! use kafka_replication::log::MemoryLog;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = Broker::start(
//!     BrokerConfig::new(1, "127.0.0.1:9092".parse()?),
//!     Box::new(|_| Ok(MemoryLog::new())), // LogStorage: FileLog for a data directory
//!     MemoryIsrWriter::new(),             // IsrWriter: glue::ZkIsrWriter on ZooKeeper
//!     Arc::new(|_leader| None),           // where the other brokers listen
//! )
//! .await?;
//! println!("broker 1 on {}", broker.local_addr());
//! broker.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod apis;
mod builder;
mod channel_tcp;
pub mod config;
pub mod glue;
pub mod group;
mod leader_link_tcp;
pub mod metrics;
pub mod node;
mod producer_ids;
pub mod server;

pub use apis::{KafkaApis, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, UNKNOWN_BROKER_EPOCH};
pub use builder::{Broker, BrokerConfig, BrokerIsrWriter};
pub use channel_tcp::TcpBrokerChannel;
/// The replication driver lives in `kafka-replication` (feature `tokio`); re-exported here
/// because a broker is composed around it.
pub use kafka_replication::replica_driver::{
    Core, DelayedAnswer, LeadershipListener, LinkFactory, ReplicaDriver,
};
pub use leader_link_tcp::{
    AddressBook, KafkaConnection, LinkError, TcpLeaderLink, FOLLOWER_FETCH_VERSION,
    OFFSET_FOR_LEADER_EPOCH_VERSION,
};
pub use producer_ids::{BrokerRangeProducerIds, ProducerIdError, ProducerIdSource};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
