//! # kafka-controller
//!
//! The controller of a ZooKeeper-mode Kafka cluster (SPEC K1, K2, K5, K6, K7) and the
//! coordination-service trait it runs on.

pub mod assignment;
pub mod context;
pub mod coordination;
pub mod election;
pub mod partition_state_machine;
pub mod reassignment;
pub mod rebalance;
pub mod replica_state_machine;
pub mod request_batch;
pub mod zk_data;
