//! The produce path of [`ReplicaManager`]: leader appends with acks 0, 1 and -1, and the
//! delayed produce that waits until the high watermark covers an acks=-1 append.

use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_wire::messages::{ProduceRequest, ProduceResponse};

use super::{error_code_of, ReplicaAction, ReplicaManager};
use crate::isr::TopicPartition;
use crate::log::LogStorage;
use crate::partition::{AckCheck, Partition, PartitionError};
use crate::purgatory::{Admission, Outcome};
use std::collections::HashMap;

/// What [`ReplicaManager::produce`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum ProduceOutcome {
    /// acks=0: no response is sent.
    NoResponse,
    /// Answered at once (acks=1, or nothing was appended).
    Respond(ProduceResponse),
    /// acks=-1: the answer comes as [`ReplicaAction::ProduceResponse`] once the HW covers the
    /// append, or on timeout.
    Delayed {
        /// The id the answer will carry.
        request_id: u64,
    },
}

/// One partition of a produce: where its append ended and how it stands.
#[derive(Debug, Clone)]
pub(super) struct PartitionStatus {
    tp: TopicPartition,
    base_offset: i64,
    required_offset: i64,
    pending: bool,
    error: i16,
}

/// An acks=-1 produce waiting for replication.
#[derive(Debug, Clone)]
pub(super) struct DelayedProduce {
    request_id: u64,
    partitions: Vec<PartitionStatus>,
}

/// DelayedProduce.tryComplete: each pending partition is done once its HW reaches the
/// required offset (NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
/// min.insync.replicas) or it has an error (e.g. leadership moved).
pub(super) fn satisfied<L: LogStorage>(
    partitions: &HashMap<TopicPartition, Partition<L>, super::FixedState>,
    produce: &mut DelayedProduce,
) -> bool {
    for s in produce.partitions.iter_mut().filter(|s| s.pending) {
        let check = partitions
            .get(&s.tp)
            .ok_or(PartitionError::NotLeaderOrFollower)
            .and_then(|p| p.check_enough_replicas_reach_offset(s.required_offset));
        match check {
            Ok(AckCheck::Pending) => {}
            Ok(AckCheck::Done(code)) => {
                s.pending = false;
                s.error = code.code();
            }
            Err(e) => {
                s.pending = false;
                s.error = error_code_of(&e);
            }
        }
    }
    produce.partitions.iter().all(|s| !s.pending)
}

fn response(produce: &DelayedProduce) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    for s in &produce.partitions {
        let p = PartitionProduceResponse {
            index: s.tp.partition,
            error_code: s.error,
            // Kept with an after-append error, as Kafka does: the records are in the log.
            base_offset: s.base_offset,
            ..Default::default()
        };
        match response
            .responses
            .iter_mut()
            .find(|t| *t.name == *s.tp.topic)
        {
            Some(t) => t.partition_responses.push(p),
            None => response.responses.push(TopicProduceResponse {
                name: s.tp.topic.clone().into(),
                partition_responses: vec![p],
                ..Default::default()
            }),
        }
    }
    response
}

impl<L: LogStorage> ReplicaManager<L> {
    /// Number of acks=-1 produces waiting for replication.
    pub fn delayed_produces(&self) -> usize {
        self.produce_purgatory.waiting()
    }

    /// Produce: appends every partition as leader. acks=-1 refuses a partition before writing
    /// when its ISR is below `min.insync.replicas` (NOT_ENOUGH_REPLICAS) and waits, up to
    /// `timeout_ms`, for the HW to cover what was appended; a partition still waiting then
    /// answers REQUEST_TIMED_OUT.
    #[must_use = "the records are written; a delayed answer comes under the returned id"]
    pub fn produce(&mut self, now_ms: u64, request: &ProduceRequest) -> ProduceOutcome {
        self.now_ms = self.now_ms.max(now_ms);
        let acks = request.acks;
        let mut produce = DelayedProduce {
            request_id: self.next_request_id,
            partitions: Vec::new(),
        };
        self.next_request_id += 1;
        let mut appended = Vec::new();
        for t in &request.topic_data {
            for d in &t.partition_data {
                let tp = TopicPartition::new(t.name.to_string(), d.index);
                let not_hosted = self.not_hosted_error(&tp);
                let result = match (self.partitions.get_mut(&tp), d.records.clone()) {
                    (None, _) => Err(not_hosted.code()),
                    (Some(_), None) => Err(ErrorCode::CorruptMessage.code()),
                    (Some(p), Some(records)) => p
                        .append_as_leader(records, acks)
                        .map(|(info, _)| info)
                        .map_err(|e| error_code_of(&e)),
                };
                let status = match result {
                    Ok(info) => {
                        appended.push(tp.clone());
                        PartitionStatus {
                            tp,
                            base_offset: info.first_offset,
                            required_offset: info.last_offset + 1,
                            pending: acks == -1,
                            error: ErrorCode::RequestTimedOut.code(),
                        }
                    }
                    Err(code) => PartitionStatus {
                        tp,
                        base_offset: -1,
                        required_offset: -1,
                        pending: false,
                        error: code,
                    },
                };
                produce.partitions.push(status);
            }
        }
        for s in produce
            .partitions
            .iter_mut()
            .filter(|s| !s.pending && s.base_offset >= 0)
        {
            s.error = ErrorCode::None.code();
        }
        for tp in &appended {
            self.fetch_purgatory_wake(tp);
        }
        self.collect_isr_proposals();
        if acks == 0 {
            return ProduceOutcome::NoResponse;
        }
        if acks != -1 || appended.is_empty() {
            return ProduceOutcome::Respond(response(&produce));
        }
        let request_id = produce.request_id;
        let timeout = u64::try_from(request.timeout_ms).unwrap_or(0);
        let partitions = &self.partitions;
        let admission = self.produce_purgatory.try_complete_else_watch(
            now_ms,
            timeout,
            produce,
            appended,
            |p| satisfied(partitions, p),
        );
        self.drain_finished_produces();
        match admission {
            Ok(Admission::Watching(_)) | Ok(Admission::Done) => {
                ProduceOutcome::Delayed { request_id }
            }
            Err(_) => ProduceOutcome::Delayed { request_id },
        }
    }

    /// Finished produces (complete, or expired with REQUEST_TIMED_OUT left on the pending
    /// partitions) are answered.
    pub(super) fn drain_finished_produces(&mut self) {
        while let Some(done) = self.produce_purgatory.poll_completed() {
            let mut produce = done.op;
            if done.outcome == Outcome::Expired {
                for s in produce.partitions.iter_mut().filter(|s| s.pending) {
                    s.pending = false;
                    s.error = ErrorCode::RequestTimedOut.code();
                }
            }
            self.actions.push_back(ReplicaAction::ProduceResponse {
                request_id: produce.request_id,
                response: response(&produce),
            });
        }
    }
}
