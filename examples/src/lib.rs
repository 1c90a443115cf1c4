//! # ha-examples
//!
//! The demos and benchmarks of ha-blocks, built on the published crates as any user would
//! build on them (the reference broker is `kafka-broker`, the ZAB-replicated store
//! `zab-coordination`).
//!
//! - [`cluster`]: the `cluster` demo's flow — three brokers with controllers on loopback, failovers
//!   and a verdict on the acknowledged records.
//! - [`zookeeper_backend`]: the cluster demo's real-ZooKeeper backend, a
//!   [`CoordinationCluster`](ha_coordination::CoordinationCluster) whose sessions can be ended
//!   for real.

pub mod cluster;
pub mod zookeeper_backend;

/// The code of `docs/compose-a-broker.md`, compiled (and, where it starts no server, run) as
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/compose-a-broker.md")]
pub struct ComposeABrokerDoctests;
