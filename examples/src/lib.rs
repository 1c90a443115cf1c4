//! # ha-examples
//!
//! The reference composition of the ha-blocks crates into a Kafka broker, and the runnable
//! examples in `examples/`.
//!
//! - [`glue`]: the broker's side of the coordination store — ISR writes on the partition-state
//!   znodes with ISR change notifications, and the broker's registration.

pub mod glue;
