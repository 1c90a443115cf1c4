//! The controller's requests to a [`KafkaApis`]: LeaderAndIsr (K4), UpdateMetadata (K5.1) and
//! StopReplica (K2.1), each refused as a whole with STALE_BROKER_EPOCH when it carries a
//! broker epoch older than this broker's current registration (KIP-380), and the broker epoch
//! they are checked against; and ControlledShutdown (K6), which the broker's own controller
//! answers while it is the active one.

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use kafka_controller::controller::{ControllerError, ControllerHandle};
use kafka_controller::election::ControlledShutdownError;
use kafka_replication::isr::IsrWriter;
use kafka_replication::log::LogStorage;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_replication::replica_manager::stop_replica_targets;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::controlled_shutdown_response::RemainingPartition;
use kafka_wire::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_wire::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_wire::messages::{
    ControlledShutdownRequest, ControlledShutdownResponse, LeaderAndIsrRequest,
    LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse, UpdateMetadataRequest,
    UpdateMetadataResponse,
};
use tokio::sync::watch;

use super::{KafkaApis, UNKNOWN_BROKER_EPOCH};

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// Lets the controller campaigning on this broker answer ControlledShutdown requests sent
    /// here while it is the active controller (Kafka's controller broker hands them to its
    /// `KafkaController`).
    pub fn serve_controller(&self, controller: ControllerHandle) {
        *self
            .controller
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(controller);
    }

    /// K6, controlled shutdown: a broker asks to leave; the active controller moves its
    /// leaderships first and answers with the partitions it still leads (the broker asks again
    /// until none is left). NOT_CONTROLLER when this broker's controller is not active (the
    /// client then looks the controller up in Metadata and retries there);
    /// STALE_BROKER_EPOCH for a request from an earlier registration (KIP-380);
    /// BROKER_NOT_AVAILABLE for a broker that is not registered.
    pub async fn controlled_shutdown(
        &self,
        request: &ControlledShutdownRequest,
    ) -> ControlledShutdownResponse {
        let controller = self
            .controller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let error = |code: ErrorCode| ControlledShutdownResponse {
            error_code: code.code(),
            ..Default::default()
        };
        let Some(controller) = controller.filter(|c| c.status().active_epoch.is_some()) else {
            return error(ErrorCode::NotController);
        };
        match controller
            .controlled_shutdown(request.broker_id, request.broker_epoch)
            .await
        {
            Ok(remaining) => ControlledShutdownResponse {
                error_code: ErrorCode::None.code(),
                remaining_partitions: remaining
                    .into_iter()
                    .map(|tp| RemainingPartition {
                        topic_name: tp.topic.to_string().into(),
                        partition_index: tp.partition,
                        unknown_tagged_fields: Default::default(),
                    })
                    .collect(),
                ..Default::default()
            },
            Err(ControllerError::ControlledShutdown(
                ControlledShutdownError::StaleBrokerEpoch { .. },
            )) => error(ErrorCode::StaleBrokerEpoch),
            Err(ControllerError::ControlledShutdown(
                ControlledShutdownError::BrokerNotAvailable(_),
            )) => error(ErrorCode::BrokerNotAvailable),
            Err(ControllerError::NotController | ControllerError::ControllerMoved) => {
                error(ErrorCode::NotController)
            }
            Err(e) => {
                tracing::warn!(broker = request.broker_id, error = %e, "controlled shutdown failed");
                error(ErrorCode::UnknownServerError)
            }
        }
    }

    /// KIP-380: sets this broker's epoch (the czxid of its `/brokers/ids/<id>`); it only grows.
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.fetch_max(epoch, Ordering::SeqCst);
    }

    /// KIP-380: follows the broker epoch a registration publishes
    /// (`glue::RegisteredBroker::subscribe`), across re-registrations after session expiry.
    /// While unregistered, the last epoch stays in force.
    pub fn follow_registration(&self, epochs: watch::Receiver<Option<i64>>) {
        if let Some(epoch) = *epochs.borrow() {
            self.set_broker_epoch(epoch);
        }
        *self
            .registration
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(epochs);
    }

    /// This broker's current epoch, [`UNKNOWN_BROKER_EPOCH`] before it is known.
    pub fn broker_epoch(&self) -> i64 {
        let published = self
            .registration
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|rx| *rx.borrow());
        if let Some(epoch) = published {
            self.set_broker_epoch(epoch);
        }
        self.broker_epoch.load(Ordering::SeqCst)
    }

    /// KIP-380: a control request carrying a broker epoch older than this broker's current
    /// one was meant for an earlier registration of this broker id. [`UNKNOWN_BROKER_EPOCH`]
    /// is never stale, nor is a newer epoch (the controller may learn of a re-registration
    /// before the broker does).
    pub fn is_broker_epoch_stale(&self, request_epoch: i64) -> bool {
        request_epoch != UNKNOWN_BROKER_EPOCH && request_epoch < self.broker_epoch()
    }

    /// LeaderAndIsr (K4) from the controller, applied by the replica manager. The partitions
    /// it made this broker leader of come out as `ReplicaAction::BecameLeader` (with the
    /// deciding controller's epoch: K4.1, the ISR writes it makes as leader carry it) and those
    /// it follows as `ReplicaAction::BecameFollower`; the driver tells the leadership listener.
    ///
    /// KIP-380: a request from a stale broker epoch gets STALE_BROKER_EPOCH for every
    /// partition and changes nothing.
    pub fn leader_and_isr(
        &self,
        version: i16,
        request: &LeaderAndIsrRequest,
    ) -> LeaderAndIsrResponse {
        if self.is_broker_epoch_stale(request.broker_epoch) {
            tracing::info!(
                broker = self.broker,
                broker_epoch = request.broker_epoch,
                current = self.broker_epoch(),
                "LeaderAndIsr for an earlier registration refused"
            );
            return leader_and_isr_error(request, version, ErrorCode::StaleBrokerEpoch);
        }
        self.driver
            .with_manager(|m, now| m.become_leader_or_follower(now, request, version))
    }

    /// UpdateMetadata (K5.1) from the controller into the metadata cache. KIP-380: from a
    /// stale broker epoch it gets STALE_BROKER_EPOCH and changes nothing.
    pub fn update_metadata(&self, request: &UpdateMetadataRequest) -> UpdateMetadataResponse {
        if self.is_broker_epoch_stale(request.broker_epoch) {
            tracing::info!(
                broker = self.broker,
                broker_epoch = request.broker_epoch,
                current = self.broker_epoch(),
                "UpdateMetadata for an earlier registration refused"
            );
            return UpdateMetadataResponse {
                error_code: ErrorCode::StaleBrokerEpoch.code(),
                ..Default::default()
            };
        }
        self.driver.with_manager(|m, _| m.update_metadata(request))
    }

    /// StopReplica (K2.1) from the controller, all request versions: stops fetching and, when
    /// asked, drops the partition (its log is dropped with it). KIP-380: from a stale broker
    /// epoch it gets STALE_BROKER_EPOCH for every partition and changes nothing.
    pub fn stop_replica(&self, request: &StopReplicaRequest) -> StopReplicaResponse {
        let partitions = stop_replica_targets(request);
        if self.is_broker_epoch_stale(request.broker_epoch) {
            tracing::info!(
                broker = self.broker,
                broker_epoch = request.broker_epoch,
                current = self.broker_epoch(),
                "StopReplica for an earlier registration refused"
            );
            let code = ErrorCode::StaleBrokerEpoch.code();
            return StopReplicaResponse {
                error_code: code,
                partition_errors: partitions
                    .into_iter()
                    .map(|t| StopReplicaPartitionError {
                        topic_name: t.topic_partition.topic.into(),
                        partition_index: t.topic_partition.partition,
                        error_code: code,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
        }
        self.driver.with_manager(|m, _| {
            if request.controller_epoch < m.controller_epoch() {
                return StopReplicaResponse {
                    error_code: ErrorCode::StaleControllerEpoch.code(),
                    ..Default::default()
                };
            }
            let mut response = StopReplicaResponse::default();
            for t in partitions {
                let tp = t.topic_partition;
                let code =
                    match m.stop_replica(request.controller_epoch, &tp, t.leader_epoch, t.delete) {
                        Ok(_) => {
                            if let Some(listener) = self.driver.leadership_listener() {
                                listener.not_leading(&tp);
                            }
                            ErrorCode::None.code()
                        }
                        Err(code) => code.code(),
                    };
                response.partition_errors.push(StopReplicaPartitionError {
                    topic_name: tp.topic.into(),
                    partition_index: tp.partition,
                    error_code: code,
                    ..Default::default()
                });
            }
            response
        })
    }
}

/// A LeaderAndIsr response giving `code` to the request and to each of its partitions, in the
/// layout of `version` (v5+: grouped by topic id).
fn leader_and_isr_error(
    request: &LeaderAndIsrRequest,
    version: i16,
    code: ErrorCode,
) -> LeaderAndIsrResponse {
    let code = code.code();
    let mut response = LeaderAndIsrResponse {
        error_code: code,
        ..Default::default()
    };
    let error = |partition_index, topic_name: &str| LeaderAndIsrPartitionError {
        topic_name: topic_name.into(),
        partition_index,
        error_code: code,
        ..Default::default()
    };
    if version >= 5 {
        response.topics = request
            .topic_states
            .iter()
            .map(|t| LeaderAndIsrTopicError {
                topic_id: t.topic_id,
                partition_errors: t
                    .partition_states
                    .iter()
                    .map(|p| error(p.partition_index, ""))
                    .collect(),
                ..Default::default()
            })
            .collect();
    } else {
        let grouped = request.topic_states.iter().flat_map(|t| {
            t.partition_states
                .iter()
                .map(move |p| (t.topic_name.as_ref(), p.partition_index))
        });
        let ungrouped = request
            .ungrouped_partition_states
            .iter()
            .map(|p| (p.topic_name.as_ref(), p.partition_index));
        response.partition_errors = ungrouped
            .chain(grouped)
            .map(|(topic, partition)| error(partition, topic))
            .collect();
    }
    response
}
