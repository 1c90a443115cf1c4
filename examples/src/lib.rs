//! # ha-examples
//!
//! The reference composition of the ha-blocks crates into a Kafka broker, and the runnable
//! examples in `examples/`.

pub mod broker;
pub mod server;
