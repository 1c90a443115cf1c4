//! Partition reassignment through `/admin/reassign_partitions` (K7, all 11 steps, resumable
//! by a successor from the assignment in the store), preferred replica elections (the admin
//! path `/admin/preferred_replica_election` and the auto-rebalance task).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Map;

use crate::context::{BrokerId, TopicPartition};
use crate::election::ElectionStrategy;
use crate::partition_state_machine::{handle_state_changes as partition_changes, PartitionState};
use crate::reassignment::{
    phase, step_10_assignment_write, step_11_complete, step_1_apply, step_1_assignment_write,
    step_3_start_new_replicas, step_5_adding_online, step_6_cache_target, step_7_leader_move,
    step_8_removed_offline, step_9_removed_deleted, AdminReassignmentUpdate, LeaderMove,
    PartitionReassignment, ReassignmentPhase,
};
use crate::rebalance::{partitions_to_rebalance, split_preferred_election};
use crate::zk_data::{paths, PreferredReplicaElection, ReassignPartitions, ReassignmentEntry};

use super::{Controller, ControllerError};
use ha_coordination::{Op, ANY_VERSION};

/// `/admin/reassign_partitions` as a map, `None` if absent; malformed content is logged and
/// reads as empty.
async fn read_admin_reassignments(
    c: &Controller,
    watch: bool,
) -> Result<Option<BTreeMap<TopicPartition, Vec<BrokerId>>>, ControllerError> {
    let coord = c.zk.coordination();
    if coord
        .exists(paths::REASSIGN_PARTITIONS, watch)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let data = match coord.get_data(paths::REASSIGN_PARTITIONS, false).await {
        Ok((d, _)) => d,
        Err(e) if e.is_no_node() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match ReassignPartitions::from_json(&data) {
        Ok(r) => Ok(Some(
            r.partitions
                .into_iter()
                .map(|e| {
                    (
                        TopicPartition::new(e.topic.as_str(), e.partition),
                        e.replicas,
                    )
                })
                .collect(),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "malformed /admin/reassign_partitions; ignored");
            Ok(Some(BTreeMap::new()))
        }
    }
}

impl Controller {
    /// `ZkPartitionReassignment`: starts the reassignments listed in
    /// `/admin/reassign_partitions` (watching it again) that are not already in progress.
    pub(super) async fn process_partition_reassignment(&mut self) -> Result<(), ControllerError> {
        let Some(admin) = read_admin_reassignments(self, true).await? else {
            return Ok(());
        };
        let mut invalid = Vec::new();
        for (tp, target) in &admin {
            let a = self.active()?;
            if let Some(r) = PartitionReassignment::from_context(&a.ctx, tp) {
                if r.target() == *target {
                    continue; // in progress
                }
            }
            let r = match PartitionReassignment::new(&a.ctx, tp, target) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e,
                        "invalid reassignment; removed");
                    invalid.push(tp.clone());
                    continue;
                }
            };
            let current = a.ctx.partition_assignment(tp).cloned().unwrap_or_default();
            if r.full == current {
                // Already at the target, in the same order: just complete it. A target that
                // only reorders the replicas still goes through the reassignment, which
                // writes the new order (Kafka compares the full assignments).
                a.ctx.mark_being_reassigned(tp.clone(), true);
                self.complete_admin_entry(&r).await?;
                continue;
            }
            self.on_partition_reassignment(r).await?;
        }
        for tp in invalid {
            let a = self.active()?;
            a.ctx.mark_being_reassigned(tp.clone(), true);
            let r = PartitionReassignment {
                tp: tp.clone(),
                full: a.ctx.partition_assignment(&tp).cloned().unwrap_or_default(),
            };
            self.complete_admin_entry(&r).await?;
        }
        Ok(())
    }

    /// Resumes the reassignments recorded in the topic znodes (adding / removing replicas
    /// written at step 1), optionally only those whose targets include `brokers`.
    pub(super) async fn resume_reassignments_in_store(&mut self) -> Result<(), ControllerError> {
        let a = self.active()?;
        let tps: Vec<TopicPartition> = a
            .ctx
            .partitions_being_reassigned()
            .iter()
            .cloned()
            .collect();
        for tp in tps {
            let a = self.active()?;
            if let Some(r) = PartitionReassignment::from_context(&a.ctx, &tp) {
                self.on_partition_reassignment(r).await?;
            }
        }
        Ok(())
    }

    /// `onPartitionReassignment`: K7 step 1 (store first), then phase A (steps 2–3) or, if
    /// the target replicas are all in the ISR (step 4), phase B (steps 5–11).
    async fn on_partition_reassignment(
        &mut self,
        r: PartitionReassignment,
    ) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let coord = self.zk.coordination().clone();
        let a = self.active()?;
        // Step 1 (U1 then U2, U3).
        if let Some(w) = step_1_assignment_write(&a.ctx, &r) {
            a.store.write_topic(&w).await?;
        }
        let unneeded = step_1_apply(&mut a.ctx, &r);
        if !unneeded.is_empty() {
            let pass = step_8_removed_offline(&mut a.ctx, &mut a.batch, &r.tp, &unneeded);
            a.run_replica_pass(pass, retries).await?;
            step_9_removed_deleted(&mut a.ctx, &mut a.batch, &r.tp, &unneeded);
        }
        // Watch the state znode: the ISR catching up (step 4) is learnt from it.
        coord
            .exists(&paths::partition_state(&r.tp.topic, r.tp.partition), true)
            .await?;
        if let Some(Ok(Some(l))) = a.store.read_states(std::slice::from_ref(&r.tp)).await.pop() {
            a.ctx.put_leadership(r.tp.clone(), l);
        }
        match phase(&a.ctx, &r) {
            ReassignmentPhase::WaitingForIsr => {
                // Step 2: bump the leader epoch, LeaderAndIsr to every replica of RS.
                a.bump_leader_epoch(&r.tp, retries).await?;
                // Step 3: RAR − OAR → NewReplica.
                step_3_start_new_replicas(&mut a.ctx, &mut a.batch, &r);
                tracing::info!(topic = %r.tp.topic, partition = r.tp.partition,
                    "reassignment waiting for the target replicas to join the ISR");
                self.send_batch()
            }
            ReassignmentPhase::Finishing => self.finish_reassignment(r).await,
        }
    }

    /// K7 steps 5–11 (phase B).
    async fn finish_reassignment(
        &mut self,
        r: PartitionReassignment,
    ) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        step_5_adding_online(&mut a.ctx, &mut a.batch, &r);
        step_6_cache_target(&mut a.ctx, &r);
        match step_7_leader_move(&a.ctx, &r) {
            LeaderMove::Elect => {
                let pass = partition_changes(
                    &mut a.ctx,
                    std::slice::from_ref(&r.tp),
                    PartitionState::Online,
                    Some(ElectionStrategy::Reassign),
                );
                a.run_partition_pass(pass, retries).await?;
            }
            LeaderMove::BumpEpoch => {
                a.bump_leader_epoch(&r.tp, retries).await?;
            }
        }
        let removed = r.removing().to_vec();
        let pass = step_8_removed_offline(&mut a.ctx, &mut a.batch, &r.tp, &removed);
        a.run_replica_pass(pass, retries).await?;
        step_9_removed_deleted(&mut a.ctx, &mut a.batch, &r.tp, &removed);
        let w = step_10_assignment_write(&a.ctx, &r);
        a.store.write_topic(&w).await?;
        self.complete_admin_entry(&r).await?;
        let a = self.active()?;
        a.ctx.set_topic_ineligible_for_deletion(&r.tp.topic, false);
        self.resume_deletions().await
    }

    /// K7 step 11: the partition leaves `/admin/reassign_partitions` (deleted when empty) and
    /// UpdateMetadata goes out.
    async fn complete_admin_entry(
        &mut self,
        r: &PartitionReassignment,
    ) -> Result<(), ControllerError> {
        let admin = read_admin_reassignments(self, false)
            .await?
            .unwrap_or_default();
        let a = self.active()?;
        match step_11_complete(&mut a.ctx, &mut a.batch, r, &admin) {
            AdminReassignmentUpdate::Delete => {
                a.store
                    .delete_all(&[paths::REASSIGN_PARTITIONS.to_string()])
                    .await?;
            }
            AdminReassignmentUpdate::Rewrite(rest) => {
                let znode = ReassignPartitions {
                    version: 1,
                    partitions: rest
                        .into_iter()
                        .map(|(tp, replicas)| ReassignmentEntry {
                            topic: tp.topic.to_string(),
                            partition: tp.partition,
                            replicas,
                            extra: Map::new(),
                        })
                        .collect(),
                    extra: Map::new(),
                };
                let data = znode
                    .to_json()
                    .map_err(|error| crate::zk_data::KafkaZkError::Data {
                        path: paths::REASSIGN_PARTITIONS.to_string(),
                        error,
                    })?;
                a.store
                    .fenced(vec![Op::set_data(
                        paths::REASSIGN_PARTITIONS,
                        data,
                        ANY_VERSION,
                    )])
                    .await?;
            }
            AdminReassignmentUpdate::Unchanged => {}
        }
        self.send_batch()
    }

    /// The state znode of a partition being reassigned changed: refresh it and, once the
    /// target replicas are all in the ISR (step 4), finish the reassignment.
    pub(super) async fn process_reassignment_isr_change(
        &mut self,
        tp: TopicPartition,
    ) -> Result<(), ControllerError> {
        let a = self.active()?;
        if !a.ctx.partitions_being_reassigned().contains(&tp) {
            return Ok(());
        }
        self.check_reassignments(&[tp]).await
    }

    /// Re-reads the states of `tps` that are being reassigned and finishes those whose
    /// target replicas are all in the ISR.
    pub(super) async fn check_reassignments(
        &mut self,
        tps: &[TopicPartition],
    ) -> Result<(), ControllerError> {
        let coord = self.zk.coordination().clone();
        for tp in tps {
            let a = self.active()?;
            if !a.ctx.partitions_being_reassigned().contains(tp) {
                continue;
            }
            coord
                .exists(&paths::partition_state(&tp.topic, tp.partition), true)
                .await?;
            if let Some(Ok(Some(l))) = a.store.read_states(std::slice::from_ref(tp)).await.pop() {
                a.ctx.put_leadership(tp.clone(), l);
            }
            let Some(r) = PartitionReassignment::from_context(&a.ctx, tp) else {
                continue;
            };
            if phase(&a.ctx, &r) == ReassignmentPhase::Finishing {
                self.finish_reassignment(r).await?;
            }
        }
        Ok(())
    }

    /// The admin preferred replica election (`/admin/preferred_replica_election`, watched
    /// again): elect the preferred replicas of the listed partitions, then delete the node.
    pub(super) async fn process_preferred_election(&mut self) -> Result<(), ControllerError> {
        let coord = self.zk.coordination().clone();
        if coord
            .exists(paths::PREFERRED_REPLICA_ELECTION, true)
            .await?
            .is_none()
        {
            return Ok(());
        }
        let data = match coord
            .get_data(paths::PREFERRED_REPLICA_ELECTION, false)
            .await
        {
            Ok((d, _)) => d,
            Err(e) if e.is_no_node() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let tps: Vec<TopicPartition> = match PreferredReplicaElection::from_json(&data) {
            Ok(p) => p
                .partitions
                .iter()
                .map(|e| TopicPartition::new(e.topic.as_str(), e.partition))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "malformed /admin/preferred_replica_election; removed");
                Vec::new()
            }
        };
        self.elect_preferred(&tps).await?;
        let a = self.active()?;
        a.store
            .delete_all(&[paths::PREFERRED_REPLICA_ELECTION.to_string()])
            .await
    }

    /// K6.11: the auto-rebalance check: preferred elections for brokers whose share of
    /// non-preferred leaders exceeds `leader.imbalance.per.broker.percentage`.
    pub(super) async fn process_auto_rebalance(&mut self) -> Result<(), ControllerError> {
        let pct = self.config.leader_imbalance_per_broker_percentage;
        let a = self.active()?;
        let tps: Vec<TopicPartition> = partitions_to_rebalance(&a.ctx, pct)
            .into_iter()
            .filter(|tp| !a.ctx.partitions_being_reassigned().contains(tp))
            .collect();
        if tps.is_empty() {
            return Ok(());
        }
        tracing::info!(
            partitions = tps.len(),
            "auto-rebalance: preferred replica election"
        );
        self.elect_preferred(&tps).await
    }

    async fn elect_preferred(&mut self, tps: &[TopicPartition]) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let split = split_preferred_election(&a.ctx, tps);
        let reassigning: BTreeSet<&TopicPartition> =
            a.ctx.partitions_being_reassigned().iter().collect();
        let to_elect: Vec<TopicPartition> = split
            .to_elect
            .into_iter()
            .filter(|tp| !reassigning.contains(tp))
            .collect();
        if to_elect.is_empty() {
            return Ok(());
        }
        let pass = partition_changes(
            &mut a.ctx,
            &to_elect,
            PartitionState::Online,
            Some(ElectionStrategy::Preferred),
        );
        a.run_partition_pass(pass, retries).await?;
        self.send_batch()
    }
}
