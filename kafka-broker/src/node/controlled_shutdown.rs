//! Kafka's `KafkaServer.controlledShutdown`: before stopping, a broker asks the active
//! controller to move its leaderships away (ControlledShutdown v3 with its broker epoch,
//! KIP-380) and asks again, `controlled.shutdown.retry.backoff.ms` apart and at most
//! `controlled.shutdown.max.retries` times, until the answer lists no partition it still
//! leads. Producers then see NOT_LEADER_OR_FOLLOWER (retriable) and move to the new leaders
//! while this broker still serves, instead of waiting for its session to time out.

use std::net::SocketAddr;
use std::time::Duration;

use kafka_controller::zk_data::KafkaZkClient;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::{ControlledShutdownRequest, ControlledShutdownResponse};
use kafka_wire::{RequestBody, ResponseBody};

use super::{endpoint_of, BrokerNode, LISTENER};
use crate::KafkaConnection;

/// The ControlledShutdown version sent (v2+ carries the broker epoch; v3 is flexible).
pub const CONTROLLED_SHUTDOWN_VERSION: i16 = 3;

/// Settings of the controlled shutdown (Kafka's `controlled.shutdown.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControlledShutdownConfig {
    /// `controlled.shutdown.enable` (true).
    pub enable: bool,
    /// `controlled.shutdown.max.retries` (3): attempts in all.
    pub max_retries: u32,
    /// `controlled.shutdown.retry.backoff.ms` (5000): the pause after a failed attempt.
    pub retry_backoff: Duration,
    /// How long one request may take (Kafka: `request.timeout.ms`, 30 s).
    pub request_timeout: Duration,
}

impl Default for ControlledShutdownConfig {
    fn default() -> Self {
        ControlledShutdownConfig {
            enable: true,
            max_retries: 3,
            retry_backoff: Duration::from_millis(5_000),
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl ControlledShutdownConfig {
    /// Enabled with `max_retries` attempts `retry_backoff` apart.
    pub fn new(max_retries: u32, retry_backoff: Duration) -> Self {
        ControlledShutdownConfig {
            max_retries,
            retry_backoff,
            ..Self::default()
        }
    }
}

/// How a controlled shutdown ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlledShutdownOutcome {
    /// The controller answered that this broker leads nothing any more.
    Succeeded {
        /// The attempt that succeeded (1-based).
        attempts: u32,
    },
    /// The retries ran out; the broker may still lead partitions.
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// What the last attempt ended with.
        last: String,
    },
    /// `controlled.shutdown.enable` is false.
    Disabled,
}

impl ControlledShutdownOutcome {
    /// Whether the controller confirmed that this broker leads nothing.
    pub fn succeeded(&self) -> bool {
        matches!(self, ControlledShutdownOutcome::Succeeded { .. })
    }
}

/// Why one attempt did not end the controlled shutdown.
enum Attempt {
    Done,
    Retry(String),
}

impl BrokerNode {
    /// Kafka's `controlledShutdown`: asks the active controller (found in `/controller`) to
    /// move this broker's leaderships, again after each failure or non-empty answer until it
    /// leads nothing or `max_retries` attempts were made. The node keeps serving meanwhile;
    /// call [`shutdown`](Self::shutdown) afterwards.
    pub async fn controlled_shutdown(&self) -> ControlledShutdownOutcome {
        let config = self.controlled_shutdown;
        if !config.enable {
            return ControlledShutdownOutcome::Disabled;
        }
        let mut last = String::from("no attempt made (controlled.shutdown.max.retries is 0)");
        for attempt in 1..=config.max_retries {
            match self
                .controlled_shutdown_attempt(config.request_timeout)
                .await
            {
                Attempt::Done => {
                    tracing::info!(
                        broker = self.id,
                        attempt,
                        "controlled shutdown succeeded: this broker leads no partition"
                    );
                    return ControlledShutdownOutcome::Succeeded { attempts: attempt };
                }
                Attempt::Retry(why) => {
                    last = why;
                    if attempt < config.max_retries {
                        tracing::warn!(
                            broker = self.id,
                            attempt,
                            reason = %last,
                            backoff_ms = config.retry_backoff.as_millis() as u64,
                            "controlled shutdown attempt failed; retrying"
                        );
                        tokio::time::sleep(config.retry_backoff).await;
                    }
                }
            }
        }
        tracing::warn!(
            broker = self.id,
            attempts = config.max_retries,
            reason = %last,
            "controlled shutdown retries exhausted; stopping anyway"
        );
        ControlledShutdownOutcome::RetriesExhausted {
            attempts: config.max_retries,
            last,
        }
    }

    async fn controlled_shutdown_attempt(&self, timeout: Duration) -> Attempt {
        let Some(broker_epoch) = self.broker_epoch() else {
            return Attempt::Retry("this broker is not registered".into());
        };
        let zk = KafkaZkClient::new(self.session.clone());
        let controller = match zk.controller(false).await {
            Ok(Some((c, _))) => c.brokerid,
            Ok(None) => return Attempt::Retry("no active controller".into()),
            Err(e) => return Attempt::Retry(format!("cannot read /controller: {e}")),
        };
        let request = ControlledShutdownRequest {
            broker_id: self.id,
            broker_epoch,
            ..Default::default()
        };
        let answer = if controller == self.id {
            // This broker's own controller: no round trip through the network.
            Ok(self.apis.controlled_shutdown(&request).await)
        } else {
            match tokio::time::timeout(timeout, self.send_to(controller, &zk, request)).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "controller {controller} did not answer within {} ms",
                    timeout.as_millis()
                )),
            }
        };
        let response = match answer {
            Ok(r) => r,
            Err(why) => return Attempt::Retry(why),
        };
        match ErrorCode::from_code(response.error_code) {
            ErrorCode::None if response.remaining_partitions.is_empty() => Attempt::Done,
            ErrorCode::None => {
                let remaining: Vec<String> = response
                    .remaining_partitions
                    .iter()
                    .map(|p| format!("{}-{}", p.topic_name, p.partition_index))
                    .collect();
                Attempt::Retry(format!(
                    "controller {controller} answered with partitions still led: {}",
                    remaining.join(", ")
                ))
            }
            code => Attempt::Retry(format!("controller {controller} answered {code:?}")),
        }
    }

    async fn send_to(
        &self,
        controller: i32,
        zk: &KafkaZkClient,
        request: ControlledShutdownRequest,
    ) -> Result<ControlledShutdownResponse, String> {
        let addr = match self.addresses.get(controller) {
            Some(a) => a,
            None => resolve(zk, controller).await?,
        };
        let client_id = format!("broker-{}-controlled-shutdown", self.id);
        let mut conn = KafkaConnection::connect(addr, &client_id)
            .await
            .map_err(|e| format!("cannot connect to controller {controller} at {addr}: {e}"))?;
        match conn
            .send(
                CONTROLLED_SHUTDOWN_VERSION,
                &RequestBody::ControlledShutdown(request),
            )
            .await
        {
            Ok(ResponseBody::ControlledShutdown(r)) => Ok(r),
            Ok(_) => Err(format!("controller {controller} sent an unexpected answer")),
            Err(e) => Err(format!("request to controller {controller} failed: {e}")),
        }
    }
}

/// The listener address of broker `id`, read from its registration.
async fn resolve(zk: &KafkaZkClient, id: i32) -> Result<SocketAddr, String> {
    let registration = match zk.broker(id).await {
        Ok(Some((r, _))) => r,
        Ok(None) => return Err(format!("controller {id} is not registered")),
        Err(e) => return Err(format!("cannot read the registration of {id}: {e}")),
    };
    let (host, port) = endpoint_of(&registration, LISTENER)
        .ok_or_else(|| format!("controller {id} has no {LISTENER} endpoint"))?;
    tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| format!("cannot resolve {host}:{port} of controller {id}"))
}
