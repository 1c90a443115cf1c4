//! [`MemoryBrokerChannel`]: an in-memory [`BrokerChannel`] for tests, recording what it
//! delivers and failing sends on demand. It needs no runtime.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_wire::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaResponse, UpdateMetadataResponse,
};
use kafka_wire::{RequestBody, ResponseBody};

use super::{BrokerChannel, ChannelError};
use crate::context::{BrokerId, BrokerInfo};

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
