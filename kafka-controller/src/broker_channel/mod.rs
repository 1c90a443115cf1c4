//! The controller → broker channel (Kafka's `ControllerChannelManager`): the
//! [`BrokerChannel`] trait that carries one `kafka-wire` LeaderAndIsr / UpdateMetadata /
//! StopReplica request to a broker and brings its response back, the classification of the
//! answers ([`is_retriable_response_error`]), the `ChannelManager` that gives every broker
//! one FIFO queue with one request in flight, retrying **the same item** with a backoff until
//! it succeeds or the broker is removed (feature `tokio`), and [`MemoryBrokerChannel`], an
//! in-memory channel for tests that records requests and can fail them on demand.
//!
//! An item is retried both when the transport fails and when the broker answers with a
//! top-level error that means "try again" ([`is_retriable_response_error`]: the broker is not
//! ready yet, a timeout, ...). Other answers, errors included, go back to the controller.
//!
//! Per-broker FIFO is what keeps UpdateMetadata ahead of LeaderAndIsr on failover and start-up
//! (Kafka's `ControllerChannelManager` per-broker queues): a failed item is never dropped or overtaken.

#[cfg(feature = "tokio")]
mod manager;
mod memory;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::{RequestBody, ResponseBody};

use crate::context::{BrokerId, BrokerInfo};
use crate::request_batch::{ControlRequest, ControlVersions};

#[cfg(feature = "tokio")]
pub use manager::ChannelManager;
pub use memory::{MemoryBrokerChannel, SentRequest};

/// Why one send to a broker failed (the manager retries it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The broker could not be reached or did not answer in time.
    #[error("broker {broker} unreachable: {reason}")]
    Unreachable {
        /// The broker.
        broker: BrokerId,
        /// What went wrong.
        reason: String,
    },
    /// The broker answered with a body that does not match the request.
    #[error("broker {broker} sent an unexpected response")]
    UnexpectedResponse {
        /// The broker.
        broker: BrokerId,
    },
}

/// Carries a control request to one broker and returns its response. Object safe: the
/// controller holds an `Arc<dyn BrokerChannel>`.
#[async_trait]
pub trait BrokerChannel: Send + Sync {
    /// Sends `request` at `version` to `broker` and waits for its response.
    async fn send(
        &self,
        broker: &BrokerInfo,
        version: i16,
        request: &RequestBody,
    ) -> Result<ResponseBody, ChannelError>;
}

/// The top-level error of a control response ([`ErrorCode::None`] for any other body).
pub fn response_error(response: &ResponseBody) -> ErrorCode {
    let code = match response {
        ResponseBody::LeaderAndIsr(r) => r.error_code,
        ResponseBody::UpdateMetadata(r) => r.error_code,
        ResponseBody::StopReplica(r) => r.error_code,
        _ => 0,
    };
    ErrorCode::from_code(code)
}

/// Whether a top-level error in a control response means "send the same request again":
/// the codes Kafka marks retriable, and `BROKER_NOT_AVAILABLE` (the broker is not ready).
/// `NOT_CONTROLLER`, `STALE_CONTROLLER_EPOCH` and `STALE_BROKER_EPOCH` are not: the same
/// request would fail the same way, so they go back to the controller, which checks whether
/// it is still the controller.
pub fn is_retriable_response_error(code: ErrorCode) -> bool {
    match code {
        ErrorCode::None
        | ErrorCode::NotController
        | ErrorCode::StaleControllerEpoch
        | ErrorCode::StaleBrokerEpoch => false,
        ErrorCode::BrokerNotAvailable => true,
        c => c.is_retriable(),
    }
}

/// A response delivered back to the controller (as Kafka's `*ResponseReceived` events).
#[derive(Debug, Clone)]
pub struct DeliveredResponse {
    /// The broker that answered.
    pub broker: BrokerId,
    /// The request as the controller built it.
    pub request: Arc<ControlRequest>,
    /// The broker's answer.
    pub response: ResponseBody,
}

/// Retry policy of the `ChannelManager`: [`ChannelConfig::default`] and the `with_*`
/// setters.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ChannelConfig {
    /// Wire versions of the control requests.
    pub versions: ControlVersions,
    /// Pause before retrying a failed item, after a transport failure or a retriable error
    /// response (Kafka: 100 ms after a failed connect).
    pub retry_backoff: Duration,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            versions: ControlVersions::KAFKA_2_8,
            retry_backoff: Duration::from_millis(100),
        }
    }
}

impl ChannelConfig {
    /// Kafka 2.8's wire versions and a 100 ms retry backoff (the [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The wire versions of the control requests.
    #[must_use]
    pub fn with_versions(mut self, versions: ControlVersions) -> Self {
        self.versions = versions;
        self
    }

    /// The pause before retrying a failed item.
    #[must_use]
    pub fn with_retry_backoff(mut self, retry_backoff: Duration) -> Self {
        self.retry_backoff = retry_backoff;
        self
    }
}
