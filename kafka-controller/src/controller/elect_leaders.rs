//! Leader elections an admin client asks for (the ElectLeaders API; Kafka's
//! `KafkaController.electLeaders` and its `ReplicaLeaderElection` event with the
//! `AdminClientTriggered` trigger): preferred or unclean, with a result per partition. Like
//! every other leadership change it runs on the event loop, so the controller stays the only
//! writer of partition state.

use std::collections::{BTreeMap, BTreeSet};

use crate::context::{BrokerId, TopicPartition, NO_LEADER};
use crate::election::ElectionStrategy;
use crate::partition_state_machine::{handle_state_changes as partition_changes, PartitionState};
use crate::rebalance::split_preferred_election;

use super::{Controller, ControllerError};

/// The kind of election asked for (Kafka's `ElectionType`: 0 preferred, 1 unclean).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElectionType {
    /// Move the leadership to the first replica of the assignment, when it is live and in the
    /// ISR.
    Preferred,
    /// Elect a leader for a partition without a live one, from the ISR if possible, else from
    /// any live replica (data may be lost).
    Unclean,
}

impl ElectionType {
    /// The wire value (`ElectLeadersRequest.election_type`); `None` for an unknown one.
    pub fn from_wire(value: i8) -> Option<Self> {
        match value {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// Why a partition got no new leader (the per-partition errors of ElectLeaders).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The partition does not exist (UNKNOWN_TOPIC_OR_PARTITION).
    #[error("the partition does not exist")]
    UnknownPartition,
    /// The topic is queued for deletion (INVALID_TOPIC_EXCEPTION).
    #[error("the topic is being deleted")]
    TopicBeingDeleted,
    /// The leader is already the preferred replica, or (unclean) a live leader exists
    /// (ELECTION_NOT_NEEDED).
    #[error("leader election not needed")]
    ElectionNotNeeded,
    /// The preferred replica is not live or not in the ISR (PREFERRED_LEADER_NOT_AVAILABLE).
    #[error("the preferred leader is not available")]
    PreferredLeaderNotAvailable,
    /// No live replica can lead (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    #[error("no eligible leader is available")]
    EligibleLeadersNotAvailable,
}

/// The outcome of an election request: the new leader of each partition, or why not.
pub type ElectionResults = BTreeMap<TopicPartition, Result<BrokerId, ElectionError>>;

impl Controller {
    /// `processReplicaLeaderElection` for an admin request: sorts out unknown partitions,
    /// partitions of topics being deleted and partitions that need no election, elects the
    /// others with the strategy of `kind`, and sends the batch.
    pub(super) async fn elect_leaders(
        &mut self,
        partitions: Option<Vec<TopicPartition>>,
        kind: ElectionType,
    ) -> Result<ElectionResults, ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let wanted = partitions.unwrap_or_else(|| a.ctx.all_partitions());
        let mut results = ElectionResults::new();
        let mut to_elect = Vec::new();
        match kind {
            ElectionType::Preferred => {
                let split = split_preferred_election(&a.ctx, &wanted);
                for tp in split.unknown {
                    results.insert(tp, Err(ElectionError::UnknownPartition));
                }
                for tp in split.being_deleted {
                    results.insert(tp, Err(ElectionError::TopicBeingDeleted));
                }
                for tp in split.already_preferred {
                    results.insert(tp, Err(ElectionError::ElectionNotNeeded));
                }
                to_elect = split.to_elect;
            }
            ElectionType::Unclean => {
                let mut seen = BTreeSet::new();
                for tp in wanted {
                    if !seen.insert(tp.clone()) {
                        continue;
                    }
                    let error = match a.ctx.leadership(&tp) {
                        None => Some(ElectionError::UnknownPartition),
                        Some(_) if a.ctx.is_topic_queued_for_deletion(&tp.topic) => {
                            Some(ElectionError::TopicBeingDeleted)
                        }
                        Some(l) if l.leader != NO_LEADER && a.ctx.is_broker_live(l.leader) => {
                            Some(ElectionError::ElectionNotNeeded)
                        }
                        Some(_) => None,
                    };
                    match error {
                        Some(e) => {
                            results.insert(tp, Err(e));
                        }
                        None => to_elect.push(tp),
                    }
                }
            }
        }
        if to_elect.is_empty() {
            return Ok(results);
        }
        tracing::info!(partitions = to_elect.len(), election = ?kind, "admin leader election");
        let strategy = match kind {
            ElectionType::Preferred => ElectionStrategy::Preferred,
            ElectionType::Unclean => ElectionStrategy::Offline {
                allow_unclean: true,
            },
        };
        let pass = partition_changes(
            &mut a.ctx,
            &to_elect,
            PartitionState::Online,
            Some(strategy),
        );
        let elected: BTreeSet<TopicPartition> = a
            .run_partition_pass(pass, retries)
            .await?
            .into_iter()
            .collect();
        for tp in to_elect {
            let leader = a
                .ctx
                .leadership(&tp)
                .map(|l| l.leader)
                .filter(|_| elected.contains(&tp));
            let result = match (leader, kind) {
                (Some(l), _) => Ok(l),
                (None, ElectionType::Preferred) => Err(ElectionError::PreferredLeaderNotAvailable),
                (None, ElectionType::Unclean) => Err(ElectionError::EligibleLeadersNotAvailable),
            };
            results.insert(tp, result);
        }
        self.send_batch()?;
        Ok(results)
    }
}
