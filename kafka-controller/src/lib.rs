//! # kafka-controller
//!
//! The controller of a ZooKeeper-mode Kafka cluster (SPEC K1, K2, K5, K6, K7) and the
//! coordination-service trait it runs on.

pub mod coordination;
pub mod zk_data;
