//! # kafka-replication
//!
//! A broker's half of Kafka replication (SPEC K4, K8): logs, partitions, ISR / log end offset /
//! high watermark, leader-epoch truncation, and fetch with a delayed-fetch purgatory.

pub mod epoch_cache;
pub mod isr;
pub mod log;
pub mod partition;
pub mod purgatory;
pub mod timer;

#[cfg(test)]
mod sim;
