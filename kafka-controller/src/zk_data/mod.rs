//! The znode layout of ZooKeeper-mode Kafka: paths and typed JSON contents (Kafka's
//! `ZkData.scala`), so the controller's state is where, and as, Kafka keeps it.
//!
//! Every JSON type keeps fields it does not know in `extra` and writes them back unchanged, so
//! a read-modify-write never drops what a newer Kafka wrote. Malformed content decodes to a
//! [`ZkDataError`], never a panic.
//!
//! ```
//! use kafka_controller::zk_data::{paths, PartitionStateZNode};
//!
//! let path = paths::partition_state("orders", 0);
//! assert_eq!(path, "/brokers/topics/orders/partitions/0/state");
//! let json = br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1,2]}"#;
//! let mut state = PartitionStateZNode::from_json(json)?;
//! state.isr.push(3);
//! assert_eq!(
//!     state.to_json()?,
//!     br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1,2,3]}"#.to_vec()
//! );
//! # Ok::<(), kafka_controller::zk_data::ZkDataError>(())
//! ```
//!
//! [`KafkaZkClient`] performs Kafka's reads and writes over any
//! [`Coordination`](ha_coordination::Coordination):
//!
//! ```
//! use std::sync::Arc;
//! use ha_coordination::MemoryTree;
//! use kafka_controller::zk_data::{BrokerRegistration, Campaign, KafkaZkClient};
//!
//! # futures::executor::block_on(async {
//! let tree = MemoryTree::new();
//! let broker = KafkaZkClient::new(Arc::new(tree.connect()));
//! broker.create_persistent_paths().await?;
//! // KIP-380: the broker epoch is the registration's czxid.
//! let broker_epoch = broker
//!     .register_broker(1, &BrokerRegistration::plaintext("h1", 9092, None, 0))
//!     .await?;
//! // K6.1: /controller and the epoch bump in one transaction.
//! let Campaign::Elected(epoch) = broker.campaign(1, 0).await? else { unreachable!() };
//! assert_eq!(epoch.epoch, 1);
//! // Every controller write is fenced by the epoch's znode version.
//! broker.fenced_multi(epoch, vec![]).await?;
//! # let _ = broker_epoch;
//! # Ok::<(), kafka_controller::zk_data::KafkaZkError>(())
//! # }).unwrap();
//! ```

mod admin;
mod broker;
mod config;
mod controller;
mod error;
mod kafka_zk;
mod kafka_zk_topics;
mod partition_state_json;
pub mod paths;
mod topic;
mod topic_id;

pub use admin::{
    IsrChangeNotification, LogDirEventNotification, PreferredReplicaElection, ReassignPartitions,
    ReassignmentEntry, TopicPartitionEntry,
};
pub use broker::{BrokerRegistration, FeatureRange};
pub use config::{ClusterId, ConfigChangeNotification, TopicConfig};
pub use controller::{decode_controller_epoch, encode_controller_epoch, ControllerZNode};
pub use error::ZkDataError;
pub use kafka_zk::{
    is_op_outcome, op_encoded_len, Campaign, ControllerEpoch, KafkaZkClient, KafkaZkError,
    FENCED_BATCH_ATTEMPTS, FENCED_BATCH_BYTES, FENCED_BATCH_OPS,
};
pub use topic::{PartitionStateZNode, TopicAssignment, LEADER_RECOVERED};
pub use topic_id::{decode_topic_id, encode_topic_id};
