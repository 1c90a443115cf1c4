//! The broker's side of the coordination store in ZooKeeper mode, over any
//! [`Coordination`](ha_coordination::Coordination) (in memory or real
//! ZooKeeper):
//!
//! - [`ZkIsrWriter`]: the leader's ISR compare-and-set on the partition-state znode
//!   (Kafka's `ReplicationUtils.updateLeaderAndIsr`), recording each change for propagation;
//! - [`IsrChangePropagator`] and [`PendingIsrChanges`]: batched
//!   `/isr_change_notification/isr_change_<seq>` nodes (Kafka's `IsrChangeNotificationZNode`);
//! - [`BrokerRegistrar`]: `/brokers/ids/<id>` with the broker epoch (KIP-380), registered again
//!   after session expiry; a registration still held by an older session (a restart before
//!   that session expired) is waited for, up to the session timeout plus a margin;
//! - [`ZkProducerIdManager`]: producer ids in blocks claimed from `/latest_producer_id_block`.
//!
//! ```
//! use std::sync::Arc;
//! use ha_coordination::{Coordination, MemoryCoordination};
//! use kafka_controller::zk_data::BrokerRegistration;
//! use kafka_broker::glue::{BrokerRegistrar, IsrChangePropagator, IsrChangeQueue,
//!                         IsrPropagationConfig, ZkIsrWriter};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
//! let broker = BrokerRegistrar::new(coord.clone(), 1,
//!     BrokerRegistration::plaintext("localhost", 9092, Some("r1"), 0)).start().await?;
//! assert!(broker.broker_epoch().is_some());
//!
//! let changes = IsrChangeQueue::new(tokio::time::Instant::now());
//! let isr_writer = ZkIsrWriter::new(coord.clone(), changes.clone()); // impl IsrWriter
//! let propagator = IsrChangePropagator::spawn(coord, changes, IsrPropagationConfig::default());
//! # drop((isr_writer, propagator));
//! # Ok::<(), kafka_controller::zk_data::KafkaZkError>(())
//! # }).unwrap();
//! ```

mod isr_writer;
mod producer_ids;
mod propagation;
mod registration;

pub use isr_writer::{ControllerEpochs, IsrWriteError, ZkIsrWriter};
pub use producer_ids::{
    ProducerIdBlock, ZkProducerIdManager, PRODUCER_ID_BLOCK_PATH, PRODUCER_ID_BLOCK_SIZE,
};
pub use propagation::{
    propagate_once, should_propagate, write_notification, IsrChangePropagator, IsrChangeQueue,
    IsrPropagationConfig, PendingIsrChanges,
};
pub use registration::{
    holder_wait_for, BrokerRegistrar, RegisteredBroker, DEFAULT_HOLDER_WAIT, HOLDER_WAIT_MARGIN,
};
