//! A ZooKeeper server on `zab-core`: ZooKeeper 3.8's client protocol (jute framing on the
//! client port) served by an ensemble whose servers replicate ZooKeeper's data tree with ZAB.
//! Real ZooKeeper clients (the Java client, zkCli, kazoo, the `zookeeper-client` crate) and
//! ha-blocks' own brokers use it unchanged. The `ha-zookeeper` binary runs one server from a
//! ZooKeeper `zoo.cfg`.
//!
//! - [`types`]: operation and error codes, `Stat`, ACLs, create modes, watch event types.
//! - [`jute`] and [`proto`]: the jute encoding and every client record.
//! - [`tree`]: ZooKeeper's `DataTree`; [`txn`]: the transactions that change it;
//!   [`watches`]: the watch manager; [`machine`]: the ZAB state machine applying transactions.
//! - [`config`]: `zoo.cfg`; [`four_letter`]: the four-letter words.
//! - [`server`], [`connection`], [`sessions`]: the server process: client port, connections,
//!   sessions, request pipeline.

pub mod config;
pub mod connection;
pub mod four_letter;
pub mod jute;
pub mod machine;
pub mod proto;
pub mod server;
pub mod sessions;
pub mod tree;
pub mod txn;
pub mod types;
pub mod watches;
