//! The controller → broker channel (Kafka's `ControllerChannelManager`): the
//! [`BrokerChannel`] trait that carries one `kafka-wire` LeaderAndIsr / UpdateMetadata /
//! StopReplica request to a broker and brings its response back, the [`ChannelManager`] that
//! gives every broker one FIFO queue with one request in flight, retrying **the same item**
//! with a backoff until it succeeds or the broker is removed, and [`MemoryBrokerChannel`], an
//! in-memory channel for tests that records requests and can fail them on demand.
//!
//! An item is retried both when the transport fails and when the broker answers with a
//! top-level error that means "try again" ([`is_retriable_response_error`]: the broker is not
//! ready yet, a timeout, ...). Other answers, errors included, go back to the controller.
//!
//! Per-broker FIFO is what keeps UpdateMetadata ahead of LeaderAndIsr on failover and start-up
//! (Kafka's `ControllerChannelManager` per-broker queues): a failed item is never dropped or overtaken.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_wire::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaResponse, UpdateMetadataResponse,
};
use kafka_wire::{RequestBody, ResponseBody};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::context::{BrokerId, BrokerInfo};
use crate::request_batch::{BrokerRequest, ControlRequest, ControlVersions};

/// Why one send to a broker failed (the manager retries it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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

/// Retry policy of the [`ChannelManager`].
#[derive(Debug, Clone, Copy)]
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

struct BrokerQueue {
    tx: mpsc::UnboundedSender<Arc<ControlRequest>>,
    task: JoinHandle<()>,
}

/// One FIFO queue and one in-flight request per broker (`ControllerChannelManager`).
/// Must be used inside a tokio runtime.
pub struct ChannelManager {
    channel: Arc<dyn BrokerChannel>,
    config: ChannelConfig,
    listener: String,
    responses: mpsc::UnboundedSender<DeliveredResponse>,
    queues: BTreeMap<BrokerId, BrokerQueue>,
}

impl std::fmt::Debug for ChannelManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelManager")
            .field("brokers", &self.queues.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ChannelManager {
    /// A manager sending over `channel`, converting requests at `config.versions` with the
    /// endpoints of `listener`, and delivering responses to `responses`.
    pub fn new(
        channel: Arc<dyn BrokerChannel>,
        config: ChannelConfig,
        listener: &str,
        responses: mpsc::UnboundedSender<DeliveredResponse>,
    ) -> Self {
        Self {
            channel,
            config,
            listener: listener.to_string(),
            responses,
            queues: BTreeMap::new(),
        }
    }

    /// Starts the queue of `broker` (a no-op if it has one).
    pub fn add_broker(&mut self, broker: BrokerInfo) {
        if self.queues.contains_key(&broker.id) {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(send_loop(
            self.channel.clone(),
            broker.clone(),
            rx,
            self.responses.clone(),
            self.config,
            self.listener.clone(),
        ));
        self.queues.insert(broker.id, BrokerQueue { tx, task });
    }

    /// Stops the queue of `broker`, dropping what it still holds (the broker left).
    pub fn remove_broker(&mut self, broker: BrokerId) {
        if let Some(q) = self.queues.remove(&broker) {
            q.task.abort();
        }
    }

    /// Stops every queue (the controller resigned).
    pub fn shutdown(&mut self) {
        for (_, q) in std::mem::take(&mut self.queues) {
            q.task.abort();
        }
    }

    /// True if `broker` has a queue.
    pub fn has_broker(&self, broker: BrokerId) -> bool {
        self.queues.contains_key(&broker)
    }

    /// Queues the requests of a batch, in order, each on its broker's queue (the conversion to
    /// `kafka-wire` bodies happens on the queue's task, off the event loop). Requests for a
    /// broker without a queue are dropped (Kafka logs and drops them too).
    pub fn enqueue(&mut self, requests: Vec<BrokerRequest>) {
        for r in requests {
            let Some(q) = self.queues.get(&r.broker) else {
                tracing::warn!(broker = r.broker, "no queue for broker; request dropped");
                continue;
            };
            let _ = q.tx.send(Arc::new(r.request));
        }
    }
}

impl Drop for ChannelManager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn send_loop(
    channel: Arc<dyn BrokerChannel>,
    broker: BrokerInfo,
    mut rx: mpsc::UnboundedReceiver<Arc<ControlRequest>>,
    responses: mpsc::UnboundedSender<DeliveredResponse>,
    config: ChannelConfig,
    listener: String,
) {
    while let Some(request) = rx.recv().await {
        let bodies = match request.to_wire(config.versions, &listener) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(broker = broker.id, error = %e, "request cannot be encoded");
                continue;
            }
        };
        for (version, body) in bodies {
            loop {
                match channel.send(&broker, version, &body).await {
                    Ok(response) if is_retriable_response_error(response_error(&response)) => {
                        tracing::warn!(broker = broker.id, error = %response_error(&response),
                            "control request answered with a retriable error; retrying");
                        tokio::time::sleep(config.retry_backoff).await;
                    }
                    Ok(response) => {
                        let _ = responses.send(DeliveredResponse {
                            broker: broker.id,
                            request: request.clone(),
                            response,
                        });
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(broker = broker.id, error = %e,
                            "control request failed; retrying");
                        tokio::time::sleep(config.retry_backoff).await;
                    }
                }
            }
        }
    }
}

/// A request a [`MemoryBrokerChannel`] received.
#[derive(Debug, Clone, PartialEq)]
pub struct SentRequest {
    /// The destination broker.
    pub broker: BrokerId,
    /// The wire version.
    pub version: i16,
    /// The request.
    pub body: RequestBody,
}

#[derive(Default)]
struct MemoryState {
    not_recording: bool,
    delivered: usize,
    sent: Vec<SentRequest>,
    failures: BTreeMap<BrokerId, usize>,
    down: std::collections::BTreeSet<BrokerId>,
    attempts: usize,
    error_answers: BTreeMap<BrokerId, (ErrorCode, usize)>,
    partition_errors: BTreeMap<BrokerId, BTreeMap<(String, i32), ErrorCode>>,
}

/// An in-memory [`BrokerChannel`]: records every delivered request and answers it with an
/// error-free response; tests can make a broker fail its next sends, be unreachable, answer
/// with a top-level error or fail single partitions of its LeaderAndIsr requests.
#[derive(Clone, Default)]
pub struct MemoryBrokerChannel {
    state: Arc<Mutex<MemoryState>>,
}

impl std::fmt::Debug for MemoryBrokerChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBrokerChannel").finish()
    }
}

impl MemoryBrokerChannel {
    /// An empty channel.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every request delivered so far, in delivery order.
    pub fn sent(&self) -> Vec<SentRequest> {
        self.lock().sent.clone()
    }

    /// The requests delivered to `broker`, in order.
    pub fn sent_to(&self, broker: BrokerId) -> Vec<SentRequest> {
        self.lock()
            .sent
            .iter()
            .filter(|r| r.broker == broker)
            .cloned()
            .collect()
    }

    /// Stops (`false`) or resumes (`true`) recording delivered requests; they are still
    /// counted by [`delivered`](Self::delivered).
    pub fn set_recording(&self, on: bool) {
        self.lock().not_recording = !on;
    }

    /// Number of requests delivered so far.
    pub fn delivered(&self) -> usize {
        self.lock().delivered
    }

    /// Forgets the recorded requests.
    pub fn clear(&self) {
        self.lock().sent.clear();
    }

    /// Send attempts so far, failed ones included.
    pub fn attempts(&self) -> usize {
        self.lock().attempts
    }

    /// The next `n` sends to `broker` fail (and are retried by the manager).
    pub fn fail_next(&self, broker: BrokerId, n: usize) {
        *self.lock().failures.entry(broker).or_default() += n;
    }

    /// The next `n` requests `broker` receives are answered with the top-level error `code`
    /// (they are delivered and recorded; the manager retries them if `code` is retriable).
    pub fn answer_error_next(&self, broker: BrokerId, code: ErrorCode, n: usize) {
        self.lock().error_answers.insert(broker, (code, n));
    }

    /// From now on, every LeaderAndIsr `broker` receives naming `topic`-`partition` is
    /// answered with `code` for that partition (the request itself succeeds).
    pub fn answer_partition_error(
        &self,
        broker: BrokerId,
        topic: &str,
        partition: i32,
        code: ErrorCode,
    ) {
        self.lock()
            .partition_errors
            .entry(broker)
            .or_default()
            .insert((topic.to_string(), partition), code);
    }

    /// Makes `broker` unreachable (`true`) or reachable again (`false`).
    pub fn set_down(&self, broker: BrokerId, down: bool) {
        let mut s = self.lock();
        if down {
            s.down.insert(broker);
        } else {
            s.down.remove(&broker);
        }
    }
}

#[async_trait]
impl BrokerChannel for MemoryBrokerChannel {
    async fn send(
        &self,
        broker: &BrokerInfo,
        version: i16,
        request: &RequestBody,
    ) -> Result<ResponseBody, ChannelError> {
        let mut s = self.lock();
        s.attempts += 1;
        let unreachable = |reason: &str| ChannelError::Unreachable {
            broker: broker.id,
            reason: reason.to_string(),
        };
        if s.down.contains(&broker.id) {
            return Err(unreachable("down"));
        }
        if let Some(n) = s.failures.get_mut(&broker.id) {
            if *n > 0 {
                *n -= 1;
                return Err(unreachable("injected failure"));
            }
        }
        let mut response = match request {
            RequestBody::LeaderAndIsr(r) => ResponseBody::LeaderAndIsr(leader_and_isr_answer(
                r,
                version,
                s.partition_errors.get(&broker.id),
            )),
            RequestBody::UpdateMetadata(_) => {
                ResponseBody::UpdateMetadata(UpdateMetadataResponse::default())
            }
            RequestBody::StopReplica(_) => {
                ResponseBody::StopReplica(StopReplicaResponse::default())
            }
            _ => return Err(ChannelError::UnexpectedResponse { broker: broker.id }),
        };
        if let Some((code, n)) = s.error_answers.get_mut(&broker.id) {
            if *n > 0 {
                *n -= 1;
                let code = code.code();
                match &mut response {
                    ResponseBody::LeaderAndIsr(r) => r.error_code = code,
                    ResponseBody::UpdateMetadata(r) => r.error_code = code,
                    ResponseBody::StopReplica(r) => r.error_code = code,
                    _ => {}
                }
            }
        }
        s.delivered += 1;
        if !s.not_recording {
            s.sent.push(SentRequest {
                broker: broker.id,
                version,
                body: request.clone(),
            });
        }
        Ok(response)
    }
}

/// The answer of a [`MemoryBrokerChannel`] to a LeaderAndIsr: no top-level error, and the
/// injected per-partition errors of the partitions it names (v0–v4 by name, v5+ by topic id).
fn leader_and_isr_answer(
    request: &LeaderAndIsrRequest,
    version: i16,
    errors: Option<&BTreeMap<(String, i32), ErrorCode>>,
) -> LeaderAndIsrResponse {
    let mut response = LeaderAndIsrResponse::default();
    let Some(errors) = errors else {
        return response;
    };
    let error_of = |topic: &str, partition: i32| {
        errors
            .get(&(topic.to_string(), partition))
            .map_or(0, |c| c.code())
    };
    if version < 5 {
        for p in &request.ungrouped_partition_states {
            response.partition_errors.push(LeaderAndIsrPartitionError {
                topic_name: p.topic_name.clone(),
                partition_index: p.partition_index,
                error_code: error_of(&p.topic_name, p.partition_index),
                ..LeaderAndIsrPartitionError::default()
            });
        }
    } else {
        for t in &request.topic_states {
            response.topics.push(LeaderAndIsrTopicError {
                topic_id: t.topic_id,
                partition_errors: t
                    .partition_states
                    .iter()
                    .map(|p| LeaderAndIsrPartitionError {
                        partition_index: p.partition_index,
                        error_code: error_of(&t.topic_name, p.partition_index),
                        ..LeaderAndIsrPartitionError::default()
                    })
                    .collect(),
                ..LeaderAndIsrTopicError::default()
            });
        }
    }
    response
}
