//! # kafka-controller
//!
//! The controller of a ZooKeeper-mode Kafka cluster (K1, K2, K5, K6, K7) and the
//! coordination-service trait it runs on.
//!
//! ## The pure controller core
//!
//! Everything but `controller` (the tokio event loop) and
//! `broker_channel::ChannelManager` (the per-broker tokio queues) builds without the default
//! feature `tokio`: `cargo build -p kafka-controller --no-default-features`. The core draws no
//! randomness either: fresh topic ids come from a [`topic_id_source::TopicIdGenerator`] the
//! caller passes in.
//!
//! Feature `testing` (implies `tokio`) adds `testing`, the conformance suite of
//! [`broker_channel::BrokerChannel`] (a builder trait, `test_all` and the single cases) for any
//! implementation to run in its own tests; purely additive, it changes no behaviour.
//!
//! The controller's decisions are plain functions over a [`context::ControllerContext`]:
//! the partition and replica state machines, leader election, replica assignment, request
//! batching, reassignment steps and the auto-rebalance check. They do no IO. Where Kafka's
//! controller would talk to ZooKeeper, they return the write to perform (with the version it
//! must expect) and take the store's answer back, so the event loop owns every round trip.
//!
//! A broker failure (K1), driven by hand against a map standing in for the store:
//!
//! ```
//! use std::collections::BTreeMap;
//! use kafka_controller::context::*;
//! use kafka_controller::partition_state_machine::*;
//! use kafka_controller::request_batch::{ControlRequest, ControllerBrokerRequestBatch};
//!
//! // Controller 1 at epoch 5; brokers 1, 2, 3; partition t-0 on [1, 2, 3] led by 1.
//! let mut ctx = ControllerContext::new(1, 5, 5);
//! for b in [1, 2, 3] {
//!     ctx.add_live_broker(BrokerInfo::new(b, 100 + i64::from(b)));
//! }
//! let t0 = TopicPartition::new("t", 0);
//! ctx.set_partition_assignment(&t0, ReplicaAssignment::new(vec![1, 2, 3]));
//! let state = PartitionLeadership::new(1, 0, vec![1, 2, 3], 5, 0);
//! ctx.put_leadership(t0.clone(), state.clone());
//! ctx.put_partition_state(t0.clone(), PartitionState::Online);
//! let mut store = BTreeMap::from([(t0.clone(), state)]);
//!
//! // Broker 1's znode vanished.
//! ctx.remove_live_broker(1);
//! let offline = partitions_with_offline_leader(&ctx);
//! handle_state_changes(&mut ctx, &offline, PartitionState::Offline, None);
//! let pass = trigger_online_partition_state_change(&mut ctx);
//!
//! let mut batch = ControllerBrokerRequestBatch::new();
//! for tp in &pass.elections {
//!     // K1.1: read the state and its version; K1.2: elect; K1.3: conditional write.
//!     let read = store.get(tp).cloned();
//!     let planned = plan_election(&ctx, tp, read.as_ref(), pass.strategy.unwrap()).unwrap();
//!     let WriteKind::Update { expected_version } = planned.write.kind else { unreachable!() };
//!     let current = store.get_mut(tp).unwrap();
//!     let outcome = if current.partition_epoch == expected_version {
//!         *current = planned.write.leadership.clone();
//!         current.partition_epoch += 1;
//!         WriteOutcome::Written { version: current.partition_epoch }
//!     } else {
//!         WriteOutcome::BadVersion // the loop would re-read and plan again
//!     };
//!     complete_election(&mut ctx, &mut batch, &planned, outcome);
//! }
//! let led = ctx.leadership(&t0).unwrap();
//! assert_eq!((led.leader, led.leader_epoch, led.isr.clone()), (2, 1, vec![2, 3]));
//!
//! // K1.4: one LeaderAndIsr per live broker, then UpdateMetadata.
//! let requests = batch.send_requests(&ctx);
//! let lai: Vec<i32> = requests
//!     .iter()
//!     .filter(|r| matches!(r.request, ControlRequest::LeaderAndIsr { .. }))
//!     .map(|r| r.broker)
//!     .collect();
//! assert_eq!(lai, vec![2, 3]);
//! ```

pub mod admin;
pub mod assignment;
pub mod broker_channel;
pub mod context;
#[cfg(feature = "tokio")]
pub mod controller;
pub use ha_coordination as coordination;
pub mod election;
mod partition_map;
pub mod partition_state_machine;
pub mod reassignment;
pub mod rebalance;
pub mod replica_state_machine;
pub mod request_batch;
#[cfg(feature = "testing")]
pub mod testing;
pub mod topic_id_source;
pub mod zk_data;
