//! # kafka-wire
//!
//! The Apache Kafka wire protocol, as ha-blocks speaks it: primitive types, request and
//! response headers, the messages the controller, replication and a reference broker exchange,
//! record batches (magic v2) and length-prefixed framing.
//!
//! Decoding never trusts a count: every length read from the input is checked against the
//! bytes that remain before anything is allocated, so arbitrary input yields a typed
//! [`DecodeError`] and never a panic or an unbounded allocation.

pub mod error;
pub mod error_code;
pub mod frame;
pub mod records;
pub mod varint;

pub use error::{DecodeError, EncodeError};
