//! Broker responses to control requests (Kafka's `LeaderAndIsrResponseReceived`,
//! `UpdateMetadataResponseReceived` and `TopicDeletionStopReplicaResponseReceived`).
//!
//! Retriable top-level errors never get here: the channel sends the same request again. What
//! does arrive is handled as Kafka does: `STALE_CONTROLLER_EPOCH` means the broker has seen a
//! newer controller, so this controller checks `/controller` and resigns if it moved; other
//! top-level errors are logged; per-partition LeaderAndIsr errors are logged with `broker`,
//! `topic` and `partition`; StopReplica answers drive topic deletion.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::LeaderAndIsrResponse;
use kafka_wire::{ResponseBody, Uuid};

use crate::broker_channel::{response_error, DeliveredResponse};
use crate::context::BrokerId;
use crate::request_batch::ControlRequest;

use super::{Controller, ControllerError};

/// One partition a broker reported an error for in a LeaderAndIsr response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionError {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) error: ErrorCode,
}

/// The per-partition errors of a LeaderAndIsr response (v0–v4 name topics, v5+ carry topic
/// ids, resolved through the ids the request was sent with; an unknown id is kept as text).
pub(crate) fn leader_and_isr_partition_errors(
    request: &ControlRequest,
    response: &LeaderAndIsrResponse,
) -> Vec<PartitionError> {
    let mut out = Vec::new();
    for e in response
        .partition_errors
        .iter()
        .filter(|e| e.error_code != 0)
    {
        out.push(PartitionError {
            topic: e.topic_name.to_string(),
            partition: e.partition_index,
            error: ErrorCode::from_code(e.error_code),
        });
    }
    let names: BTreeMap<Uuid, &str> = match request {
        ControlRequest::LeaderAndIsr { topic_ids, .. } => {
            topic_ids.iter().map(|(n, id)| (*id, n.as_ref())).collect()
        }
        _ => BTreeMap::new(),
    };
    for t in &response.topics {
        for e in t.partition_errors.iter().filter(|e| e.error_code != 0) {
            let topic = names
                .get(&t.topic_id)
                .map_or_else(|| format!("{:?}", t.topic_id), |n| n.to_string());
            out.push(PartitionError {
                topic,
                partition: e.partition_index,
                error: ErrorCode::from_code(e.error_code),
            });
        }
    }
    out
}

impl Controller {
    /// A broker's answer to a control request. StopReplica answers drive topic deletion; a
    /// `STALE_CONTROLLER_EPOCH` answer makes this controller check whether it still is one
    /// (K6: a fenced controller resigns); every other error is logged and the request is not
    /// repeated (retriable ones were already repeated by the channel).
    pub(super) async fn process_broker_response(
        &mut self,
        r: DeliveredResponse,
    ) -> Result<(), ControllerError> {
        let error = response_error(&r.response);
        let broker: BrokerId = r.broker;
        let controller_epoch = r.request.header().controller_epoch;
        if error != ErrorCode::None {
            tracing::warn!(broker, controller_epoch, error = %error,
                "broker answered a control request with an error");
        }
        if let ResponseBody::LeaderAndIsr(resp) = &r.response {
            let errors = leader_and_isr_partition_errors(&r.request, resp);
            for e in &errors {
                if e.error == ErrorCode::KafkaStorageError {
                    tracing::error!(broker, topic = %e.topic, partition = e.partition,
                        error = %e.error, "replica is on an offline log directory");
                } else {
                    tracing::warn!(broker, topic = %e.topic, partition = e.partition,
                        error = %e.error, "broker could not apply LeaderAndIsr to a partition");
                }
            }
            if error == ErrorCode::None {
                self.process_leader_and_isr_log_dirs(broker, &r.request, &errors)
                    .await?;
            }
        }
        let stale = error == ErrorCode::StaleControllerEpoch;
        if matches!(Arc::as_ref(&r.request), ControlRequest::StopReplica { .. }) {
            self.process_stop_replica_response(r).await?;
        }
        if stale && self.active.is_some() {
            tracing::warn!(
                broker,
                controller_epoch,
                "broker has seen a newer controller epoch; checking /controller"
            );
            self.elect().await?;
        }
        Ok(())
    }
}
