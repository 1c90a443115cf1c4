//! Topic deletion (K2.1, Kafka's `TopicDeletionManager`). An admin creates
//! `/admin/delete_topics/<t>`; with `delete.topic.enable` the controller queues the topic,
//! takes its partitions Offline → NonExistent, sends UpdateMetadata (leader -2), moves live
//! replicas Offline → ReplicaDeletionStarted (StopReplica with delete, leader epoch -2) and
//! dead ones to ReplicaDeletionIneligible; StopReplica responses mark replicas successful or
//! ineligible; when all are successful the topic's znodes are deleted. Deletion pauses while
//! replicas are offline or a reassignment of the topic is in progress. Without
//! `delete.topic.enable` the request stays recorded and is never executed.

use std::sync::Arc;

use kafka_wire::ResponseBody;

use crate::broker_channel::DeliveredResponse;
use crate::context::PartitionReplica;
use crate::partition_state_machine::{handle_state_changes as partition_changes, PartitionState};
use crate::replica_state_machine::{handle_state_changes as replica_changes, ReplicaState};
use crate::request_batch::ControlRequest;
use crate::zk_data::paths;

use super::failover::children_or_empty;
use super::{Controller, ControllerError};

impl Controller {
    /// `TopicDeletion`: reads `/admin/delete_topics` (watching again) and queues its topics.
    pub(super) async fn process_topic_deletion(&mut self) -> Result<(), ControllerError> {
        if !self.config.delete_topic_enable {
            tracing::info!(
                "topic deletion requested but delete.topic.enable is false; not executed"
            );
            return Ok(());
        }
        let coord = self.zk.coordination().clone();
        let requested = children_or_empty(&*coord, paths::DELETE_TOPICS, true).await?;
        let a = self.active()?;
        let mut unknown = Vec::new();
        for t in &requested {
            if a.ctx.topic_assignment(t).is_none() {
                unknown.push(paths::delete_topic(t));
                continue;
            }
            if !a.ctx.is_topic_queued_for_deletion(t) {
                tracing::info!(topic = %t, "topic queued for deletion");
                a.ctx.queue_topic_for_deletion(t.clone());
            }
            let reassigning = a
                .ctx
                .partitions_being_reassigned()
                .iter()
                .any(|tp| &*tp.topic == t);
            if reassigning {
                a.ctx.set_topic_ineligible_for_deletion(t, true);
            }
        }
        if !unknown.is_empty() {
            tracing::info!(topics = ?unknown, "deletion requested for unknown topics; request removed");
            a.store.delete_all(&unknown).await?;
        }
        self.resume_deletions().await
    }

    /// Moves every queued topic forward: completes those whose replicas are all deleted and
    /// starts (or retries) deletion of eligible ones.
    pub(super) async fn resume_deletions(&mut self) -> Result<(), ControllerError> {
        if !self.config.delete_topic_enable {
            return Ok(());
        }
        let retries = self.config.max_cas_retries;
        let topics: Vec<String> = self
            .active()?
            .ctx
            .topics_to_delete()
            .iter()
            .cloned()
            .collect();
        for t in topics {
            let a = self.active()?;
            let replicas: Vec<PartitionReplica> = a
                .ctx
                .partitions_for_topic(&t)
                .into_iter()
                .flat_map(|tp| {
                    a.ctx
                        .partition_replicas(&tp)
                        .into_iter()
                        .map(move |b| PartitionReplica::new(tp.clone(), b))
                })
                .collect();
            let state = |r: &PartitionReplica| a.ctx.replica_state(r);
            if replicas
                .iter()
                .all(|r| state(r) == ReplicaState::DeletionSuccessful)
            {
                self.complete_topic_deletion(&t).await?;
                continue;
            }
            let a = self.active()?;
            let reassigning = a
                .ctx
                .partitions_being_reassigned()
                .iter()
                .any(|tp| *tp.topic == *t);
            let started = replicas
                .iter()
                .any(|r| a.ctx.replica_state(r) == ReplicaState::DeletionStarted);
            if started || reassigning {
                continue;
            }
            // Dead replicas make the topic ineligible until their broker returns.
            let (live, dead): (Vec<_>, Vec<_>) = replicas
                .into_iter()
                .filter(|r| a.ctx.replica_state(r) != ReplicaState::DeletionSuccessful)
                .partition(|r| a.ctx.is_replica_online_for(&r.tp, r.replica, true));
            if !dead.is_empty() {
                replica_changes(
                    &mut a.ctx,
                    &mut a.batch,
                    &dead,
                    ReplicaState::DeletionIneligible,
                );
                a.ctx.set_topic_ineligible_for_deletion(&t, true);
            } else {
                a.ctx.set_topic_ineligible_for_deletion(&t, false);
            }
            // Partitions Offline → NonExistent, UpdateMetadata with leader -2 to everyone.
            let partitions = a.ctx.partitions_for_topic(&t);
            let online_or_new: Vec<_> = partitions
                .iter()
                .filter(|tp| a.ctx.partition_state(tp) != PartitionState::NonExistent)
                .cloned()
                .collect();
            partition_changes(&mut a.ctx, &online_or_new, PartitionState::Offline, None);
            partition_changes(
                &mut a.ctx,
                &online_or_new,
                PartitionState::NonExistent,
                None,
            );
            a.batch.add_update_metadata_to_all(&a.ctx, &partitions);
            // Live replicas: Offline (ISR shrink in the store), then DeletionStarted.
            let pass = replica_changes(&mut a.ctx, &mut a.batch, &live, ReplicaState::Offline);
            a.run_replica_pass(pass, retries).await?;
            replica_changes(
                &mut a.ctx,
                &mut a.batch,
                &live,
                ReplicaState::DeletionStarted,
            );
            tracing::info!(topic = %t, replicas = live.len(), "topic deletion started");
            self.send_batch()?;
        }
        Ok(())
    }

    /// All replicas of `topic` are deleted: replicas → NonExistent, then the topic's znodes,
    /// config and deletion request are deleted (one fenced transaction).
    async fn complete_topic_deletion(&mut self, topic: &str) -> Result<(), ControllerError> {
        let a = self.active()?;
        let replicas: Vec<PartitionReplica> = a
            .ctx
            .partitions_for_topic(topic)
            .into_iter()
            .flat_map(|tp| {
                a.ctx
                    .partition_replicas(&tp)
                    .into_iter()
                    .map(move |b| PartitionReplica::new(tp.clone(), b))
            })
            .collect();
        replica_changes(
            &mut a.ctx,
            &mut a.batch,
            &replicas,
            ReplicaState::NonExistent,
        );
        let mut doomed = a.store.subtree(&paths::topic(topic)).await?;
        doomed.push(paths::topic_config(topic));
        doomed.push(paths::delete_topic(topic));
        a.store.delete_all(&doomed).await?;
        a.ctx.remove_topic(topic);
        tracing::info!(topic = %topic, "topic deleted");
        Ok(())
    }

    /// StopReplica (delete) answers move replicas of topics being deleted to
    /// ReplicaDeletionSuccessful or ReplicaDeletionIneligible.
    pub(super) async fn process_stop_replica_response(
        &mut self,
        r: DeliveredResponse,
    ) -> Result<(), ControllerError> {
        let (ControlRequest::StopReplica { partitions, .. }, ResponseBody::StopReplica(resp)) =
            (Arc::as_ref(&r.request), &r.response)
        else {
            return Ok(());
        };
        let a = self.active()?;
        let mut progressed = false;
        for p in partitions.iter().filter(|p| p.delete) {
            if !a.ctx.is_topic_queued_for_deletion(&p.tp.topic) {
                continue;
            }
            let replica = PartitionReplica::new(p.tp.clone(), r.broker);
            if a.ctx.replica_state(&replica) != ReplicaState::DeletionStarted {
                continue;
            }
            let failed = resp.error_code != 0
                || resp.partition_errors.iter().any(|e| {
                    e.error_code != 0
                        && e.partition_index == p.tp.partition
                        && (e.topic_name.is_empty() || *e.topic_name == *p.tp.topic)
                });
            let target = if failed {
                a.ctx.set_topic_ineligible_for_deletion(&p.tp.topic, true);
                ReplicaState::DeletionIneligible
            } else {
                ReplicaState::DeletionSuccessful
            };
            replica_changes(
                &mut a.ctx,
                &mut a.batch,
                std::slice::from_ref(&replica),
                target,
            );
            progressed = true;
        }
        if progressed {
            self.resume_deletions().await?;
        }
        Ok(())
    }
}
