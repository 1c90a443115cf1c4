//! ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments: controller
//! APIs (NOT_CONTROLLER on the other brokers).
//!
//! ElectLeaders goes to the controller's event loop ([`ControllerHandle::elect_leaders`], as
//! ZooKeeper-mode Kafka 3.9 hands it to `KafkaController.electLeaders` for every version;
//! `/admin/preferred_replica_election` stays the path of the ZooKeeper admin tool) and then
//! waits until this broker's metadata shows each elected leader (`DelayedElectLeader`).
//! Reassignments are written to `/admin/reassign_partitions`, the path this controller
//! watches (a cancellation is a reassignment back to the original replicas, which is what
//! Kafka's controller does for one), and listed from the controller's context.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;

use kafka_controller::admin::{self, AdminError};
use kafka_controller::context::TopicPartition as ControllerPartition;
use kafka_controller::controller::{ControllerError, ElectionError, ElectionType};
use kafka_replication::isr::{IsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_wire::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_wire::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_wire::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ElectLeadersRequest,
    ElectLeadersResponse, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::{refusal, KafkaApis, Refusal};

fn election_refusal(e: ElectionError) -> Refusal {
    let code = match e {
        ElectionError::UnknownPartition => ErrorCode::UnknownTopicOrPartition,
        ElectionError::TopicBeingDeleted => ErrorCode::InvalidTopicException,
        ElectionError::ElectionNotNeeded => ErrorCode::ElectionNotNeeded,
        ElectionError::PreferredLeaderNotAvailable => ErrorCode::PreferredLeaderNotAvailable,
        ElectionError::EligibleLeadersNotAvailable => ErrorCode::EligibleLeadersNotAvailable,
        _ => ErrorCode::UnknownServerError,
    };
    (code, Some(e.to_string()))
}

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    fn controller_handle(&self) -> Option<kafka_controller::controller::ControllerHandle> {
        self.controller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .filter(|c| c.status().active_epoch.is_some())
    }

    /// ElectLeaders (KIP-183, KIP-460): preferred (0) or unclean (1) elections on the listed
    /// partitions (null: every partition in the metadata, and then the partitions that needed
    /// no election are left out of the answer, as Kafka does). Per partition:
    /// ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
    /// UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER, or REQUEST_TIMED_OUT when the new leader is
    /// not in this broker's metadata within the timeout.
    pub async fn elect_leaders(
        &self,
        version: i16,
        request: &ElectLeadersRequest,
    ) -> ElectLeadersResponse {
        let mut response = ElectLeadersResponse::default();
        let kind = if version == 0 {
            Some(ElectionType::Preferred)
        } else {
            ElectionType::from_wire(request.election_type)
        };
        let Some(kind) = kind else {
            response.error_code = ErrorCode::InvalidRequest.code();
            return response;
        };
        let all = request.topic_partitions.is_none();
        let partitions: Vec<TopicPartition> = match &request.topic_partitions {
            Some(topics) => topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| TopicPartition::new(t.topic.to_string(), *p))
                })
                .collect(),
            None => self.driver.with_manager(|m, _| {
                m.metadata()
                    .partitions()
                    .map(|(tp, _)| tp.clone())
                    .collect()
            }),
        };
        let mut results: BTreeMap<TopicPartition, Result<i32, Refusal>> = BTreeMap::new();
        match self.controller_handle() {
            None => {
                for tp in partitions {
                    results.insert(tp, Err((ErrorCode::NotController, None)));
                }
            }
            Some(controller) => {
                let asked: Vec<ControllerPartition> = partitions
                    .iter()
                    .map(|tp| ControllerPartition::new(tp.topic.as_str(), tp.partition))
                    .collect();
                match controller.elect_leaders(Some(asked), kind).await {
                    Ok(elected) => {
                        for (tp, r) in elected {
                            let tp = TopicPartition::new(tp.topic.to_string(), tp.partition);
                            results.insert(tp, r.map_err(election_refusal));
                        }
                    }
                    Err(e) => {
                        let code = match e {
                            ControllerError::NotController | ControllerError::ControllerMoved => {
                                ErrorCode::NotController
                            }
                            _ => ErrorCode::UnknownServerError,
                        };
                        for tp in partitions {
                            results.insert(tp, Err((code, Some(e.to_string()))));
                        }
                    }
                }
            }
        }
        // DelayedElectLeader: each elected leader shows in the metadata cache.
        let expected: Vec<(TopicPartition, i32)> = results
            .iter()
            .filter_map(|(tp, r)| r.as_ref().ok().map(|l| (tp.clone(), *l)))
            .collect();
        if !expected.is_empty() {
            self.wait_for_metadata(request.timeout_ms, |c| {
                expected.iter().all(|(tp, l)| c.leader(tp) == Some(*l))
            })
            .await;
        }
        let shown: BTreeSet<TopicPartition> = self.driver.with_manager(|m, _| {
            expected
                .iter()
                .filter(|(tp, l)| m.metadata().leader(tp) == Some(*l))
                .map(|(tp, _)| tp.clone())
                .collect()
        });
        let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
        for (tp, r) in results {
            let (code, message) = match r {
                Ok(_) if shown.contains(&tp) => (ErrorCode::None, None),
                Ok(_) => (
                    ErrorCode::RequestTimedOut,
                    Some("the leader was elected; this broker has not heard of it yet".into()),
                ),
                Err(r) => r,
            };
            if all && code == ErrorCode::ElectionNotNeeded {
                continue;
            }
            by_topic
                .entry(tp.topic.clone())
                .or_default()
                .push(PartitionResult {
                    partition_id: tp.partition,
                    error_code: code.code(),
                    error_message: message.map(Into::into),
                    ..Default::default()
                });
        }
        response.replica_election_results = by_topic
            .into_iter()
            .map(|(topic, partition_result)| ReplicaElectionResult {
                topic: topic.as_str().into(),
                partition_result,
                ..Default::default()
            })
            .collect();
        response
    }

    /// AlterPartitionReassignments (KIP-455): each partition's new replicas (live, distinct,
    /// non-empty; else INVALID_REPLICA_ASSIGNMENT), or null to cancel its reassignment
    /// (NO_REASSIGNMENT_IN_PROGRESS when none runs), written together to
    /// `/admin/reassign_partitions`. While an earlier request there is pending, the whole
    /// request gets REASSIGNMENT_IN_PROGRESS.
    pub async fn alter_partition_reassignments(
        &self,
        request: &AlterPartitionReassignmentsRequest,
    ) -> AlterPartitionReassignmentsResponse {
        let mut response = AlterPartitionReassignmentsResponse::default();
        let state = self.admin_state();
        let (Some(state), Some(controller)) = (state, self.controller_handle()) else {
            response.error_code = ErrorCode::NotController.code();
            return response;
        };
        let Some(ctx) = controller.context().await else {
            response.error_code = ErrorCode::NotController.code();
            return response;
        };
        let mut targets: BTreeMap<ControllerPartition, Vec<i32>> = BTreeMap::new();
        let mut results: Vec<(String, i32, Option<Refusal>)> = Vec::new();
        for topic in &request.topics {
            for p in &topic.partitions {
                let tp = ControllerPartition::new(&*topic.name, p.partition_index);
                let bad = |m: String| Some(refusal(ErrorCode::InvalidReplicaAssignment, m));
                let error = match (ctx.partition_assignment(&tp), &p.replicas) {
                    (None, _) => Some(refusal(
                        ErrorCode::UnknownTopicOrPartition,
                        "The partition does not exist.",
                    )),
                    (Some(a), None) if !a.is_being_reassigned() => Some(refusal(
                        ErrorCode::NoReassignmentInProgress,
                        "No reassignment is in progress for this partition.",
                    )),
                    (Some(a), None) => {
                        targets.insert(tp, a.origin_replicas());
                        None
                    }
                    (Some(_), Some(replicas)) => {
                        let replicas = replicas.to_vec();
                        if replicas.is_empty() {
                            bad("Empty replica list specified in partition reassignment.".into())
                        } else if replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len() {
                            bad(
                                "Duplicate replica ids in partition reassignment replica list."
                                    .into(),
                            )
                        } else if let Some(b) = replicas.iter().find(|b| !ctx.is_broker_live(**b)) {
                            bad(format!(
                                "Replica assignment has brokers that are not alive ({b}). \
                                 Replica list: {replicas:?}"
                            ))
                        } else {
                            targets.insert(tp, replicas);
                            None
                        }
                    }
                };
                results.push((topic.name.to_string(), p.partition_index, error));
            }
        }
        if !targets.is_empty() {
            match admin::reassign_partitions(state.store.as_ref(), &targets).await {
                Ok(()) => tracing::info!(partitions = targets.len(), "reassignment requested"),
                Err(AdminError::AlreadyPending(_)) => {
                    response.error_code = ErrorCode::ReassignmentInProgress.code();
                    response.error_message = Some(
                        "an earlier reassignment in /admin/reassign_partitions is pending".into(),
                    );
                    return response;
                }
                Err(e) => {
                    response.error_code = ErrorCode::UnknownServerError.code();
                    response.error_message = Some(e.to_string().into());
                    return response;
                }
            }
        }
        let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
        for (topic, partition, error) in results {
            let (code, message) = error.unwrap_or((ErrorCode::None, None));
            by_topic
                .entry(topic)
                .or_default()
                .push(ReassignablePartitionResponse {
                    partition_index: partition,
                    error_code: code.code(),
                    error_message: message.map(Into::into),
                    ..Default::default()
                });
        }
        response.responses = by_topic
            .into_iter()
            .map(|(name, partitions)| ReassignableTopicResponse {
                name: name.as_str().into(),
                partitions,
                ..Default::default()
            })
            .collect();
        response
    }

    /// ListPartitionReassignments (KIP-455): the partitions being reassigned (all, or those
    /// asked for), each with its replicas and the replicas being added and removed, from the
    /// controller's context.
    pub async fn list_partition_reassignments(
        &self,
        request: &ListPartitionReassignmentsRequest,
    ) -> ListPartitionReassignmentsResponse {
        let mut response = ListPartitionReassignmentsResponse::default();
        let ctx = match self.controller_handle() {
            Some(c) => c.context().await,
            None => None,
        };
        let Some(ctx) = ctx else {
            response.error_code = ErrorCode::NotController.code();
            return response;
        };
        let wanted: Vec<ControllerPartition> = match &request.topics {
            None => ctx.partitions_being_reassigned().iter().cloned().collect(),
            Some(topics) => topics
                .iter()
                .flat_map(|t| {
                    t.partition_indexes
                        .iter()
                        .map(|p| ControllerPartition::new(&*t.name, *p))
                })
                .collect(),
        };
        let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
        for tp in wanted {
            let Some(a) = ctx
                .partition_assignment(&tp)
                .filter(|a| a.is_being_reassigned())
            else {
                continue;
            };
            by_topic
                .entry(tp.topic.to_string())
                .or_default()
                .push(OngoingPartitionReassignment {
                    partition_index: tp.partition,
                    replicas: a.replicas.iter().copied().collect(),
                    adding_replicas: a.adding_replicas.iter().copied().collect(),
                    removing_replicas: a.removing_replicas.iter().copied().collect(),
                    ..Default::default()
                });
        }
        response.topics = by_topic
            .into_iter()
            .map(|(name, partitions)| OngoingTopicReassignment {
                name: name.as_str().into(),
                partitions,
                ..Default::default()
            })
            .collect();
        response
    }
}
