//! # ha-examples
//!
//! The reference composition of the ha-blocks crates into a Kafka broker, and the runnable
//! examples in `examples/`.
//!
//! - [`broker`]: the reference broker — request dispatch (`KafkaApis`), the replication driver,
//!   the TCP leader link and the `Broker` composition.
//! - [`cluster`]: the `cluster` demo's flow — three brokers with controllers on loopback, failovers
//!   and a verdict on the acknowledged records.
//! - [`glue`]: the broker's side of the coordination store — ISR writes on the partition-state
//!   znodes with ISR change notifications, and the broker's registration.
//! - [`node`]: one complete broker node — data plane, registration, ISR propagation and a
//!   campaigning controller on a coordination store — as the `broker` binary runs it.
//! - [`server`]: the network layer of a broker (SPEC K3): acceptor, processors, a bounded
//!   request channel and handler workers, responses in request order.
//! - [`zab_coordination`]: the controller's coordination store replicated by `zab-core` — an
//!   in-process ZAB ensemble and clients implementing `Coordination`.
//! - [`zookeeper_backend`]: the cluster demo's real-ZooKeeper backend, a `ConformanceHarness`
//!   whose sessions can be ended for real.

pub mod broker;
pub mod cluster;
pub mod glue;
pub mod node;
pub mod server;
pub mod zab_coordination;
pub mod zookeeper_backend;
