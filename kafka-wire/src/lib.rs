//! # kafka-wire
//!
//! The Apache Kafka wire protocol, as ha-blocks speaks it: primitive types, request and
//! response headers, the messages the controller, replication and a reference broker exchange,
//! record batches (magic v2) and length-prefixed framing.
//!
//! Decoding never trusts a count: every length read from the input is checked against the
//! bytes that remain before anything is allocated, so arbitrary input yields a typed
//! [`DecodeError`] and never a panic or an unbounded allocation.
//!
//! Every message is a plain struct with public fields and a [`Default`]; encoding and decoding
//! take the version explicitly:
//!
//! ```
//! use bytes::Bytes;
//! use kafka_wire::messages::leader_and_isr_request::{
//!     LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
//! };
//! use kafka_wire::messages::LeaderAndIsrRequest;
//! use kafka_wire::smallvec::smallvec;
//! use kafka_wire::{Decode, Encode};
//!
//! let request = LeaderAndIsrRequest {
//!     controller_id: 1,
//!     controller_epoch: 7,
//!     broker_epoch: 42,
//!     topic_states: vec![LeaderAndIsrTopicState {
//!         topic_name: "orders".into(),
//!         partition_states: vec![LeaderAndIsrPartitionState {
//!             partition_index: 0,
//!             leader: 1,
//!             leader_epoch: 3,
//!             isr: smallvec![1, 2, 3],
//!             replicas: smallvec![1, 2, 3],
//!             ..Default::default()
//!         }],
//!         ..Default::default()
//!     }],
//!     ..Default::default()
//! };
//! let bytes: Bytes = request.encode_to_bytes(6)?;
//! assert_eq!(bytes.len(), request.encoded_len(6)?);
//! let back = LeaderAndIsrRequest::decode(&mut bytes.clone(), 6)?;
//! assert_eq!(back, request);
//!
//! // Fields a version cannot carry are refused rather than silently dropped.
//! assert!(request.encode_to_bytes(1).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod api;
pub mod encode;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod header;
pub mod records;
#[rustfmt::skip]
pub mod messages;
#[cfg(feature = "never-in-production")]
pub mod never_in_production;
pub mod primitives;
#[cfg(feature = "sample")]
pub mod sample;
pub mod types;
pub mod varint;

pub use api::ApiKey;
pub use encode::{
    BufferedWriter, ChunkedWriter, DataRecord, Decode, Encode, LenCounter, Message, SliceWriter,
    WireWrite,
};
pub use error::{DecodeError, EncodeError};
pub use header::{RequestHeader, ResponseHeader};
pub use messages::{RequestBody, ResponseBody};
pub use smallvec;
pub use types::{Int32Array, RawTaggedField, UnknownTaggedFields, Uuid};
