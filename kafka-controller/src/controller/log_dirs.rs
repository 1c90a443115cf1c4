//! Failed log directories (Kafka's JBOD handling): replicas a broker reports with
//! `KAFKA_STORAGE_ERROR` in a LeaderAndIsr response are tracked per broker
//! (`replicasOnOfflineDirs`) and go offline (`onReplicasBecomeOffline`: new leaders for the
//! partitions they led, then OfflineReplica with ISR removal); a
//! `/log_dir_event_notification/log_dir_event_<seq>` znode makes the controller send the
//! broker LeaderAndIsr for all its replicas to learn which are offline
//! (`onBrokerLogDirFailure`), then delete the notification.

use std::collections::BTreeSet;

use crate::context::{BrokerId, PartitionReplica};
use crate::partition_state_machine::{
    handle_state_changes as partition_changes, partitions_with_offline_leader,
    trigger_online_partition_state_change, PartitionState,
};
use crate::replica_state_machine::{handle_state_changes as replica_changes, ReplicaState};
use crate::request_batch::ControlRequest;
use crate::zk_data::KafkaZkError;

use super::responses::PartitionError;
use super::{Controller, ControllerError};

impl Controller {
    /// `LeaderAndIsrResponseReceived`: partitions answered without error are online on
    /// `broker` again, those answered `KAFKA_STORAGE_ERROR` are on a failed log directory;
    /// replicas newly offline go through [`on_replicas_become_offline`](Self::on_replicas_become_offline).
    pub(super) async fn process_leader_and_isr_log_dirs(
        &mut self,
        broker: BrokerId,
        request: &ControlRequest,
        errors: &[PartitionError],
    ) -> Result<(), ControllerError> {
        let ControlRequest::LeaderAndIsr { partitions, .. } = request else {
            return Ok(());
        };
        let Ok(a) = self.active() else {
            return Ok(());
        };
        let errored: BTreeSet<(&str, i32)> = errors
            .iter()
            .map(|e| (e.topic.as_str(), e.partition))
            .collect();
        let offline: BTreeSet<(&str, i32)> = errors
            .iter()
            .filter(|e| e.error == kafka_wire::error_code::ErrorCode::KafkaStorageError)
            .map(|e| (e.topic.as_str(), e.partition))
            .collect();
        let previous = a
            .ctx
            .replicas_on_offline_dirs(broker)
            .cloned()
            .unwrap_or_default();
        let mut current = previous.clone();
        for p in partitions {
            let key = (&*p.tp.topic, p.tp.partition);
            if !errored.contains(&key) {
                current.remove(&p.tp);
            } else if offline.contains(&key) {
                current.insert(p.tp.clone());
            }
        }
        let new: Vec<PartitionReplica> = current
            .difference(&previous)
            .map(|tp| PartitionReplica::new(tp.clone(), broker))
            .collect();
        a.ctx.set_replicas_on_offline_dirs(broker, current);
        if new.is_empty() {
            return Ok(());
        }
        tracing::warn!(
            broker,
            replicas = new.len(),
            "replicas on a failed log directory go offline"
        );
        self.on_replicas_become_offline(&new).await
    }

    /// `onReplicasBecomeOffline`: partitions whose leader is now offline → Offline, then
    /// elections for every offline partition, the replicas → Offline (ISR removal), deletions
    /// of their topics marked ineligible; UpdateMetadata to every broker when no leader had to
    /// move.
    pub(super) async fn on_replicas_become_offline(
        &mut self,
        replicas: &[PartitionReplica],
    ) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let (deleting, others): (Vec<PartitionReplica>, Vec<PartitionReplica>) = replicas
            .iter()
            .cloned()
            .partition(|r| a.ctx.is_topic_queued_for_deletion(&r.tp.topic));
        let offline_led = partitions_with_offline_leader(&a.ctx);
        partition_changes(&mut a.ctx, &offline_led, PartitionState::Offline, None);
        let pass = trigger_online_partition_state_change(&mut a.ctx);
        a.run_partition_pass(pass, retries).await?;
        let pass = replica_changes(&mut a.ctx, &mut a.batch, &others, ReplicaState::Offline);
        a.run_replica_pass(pass, retries).await?;
        if !deleting.is_empty() {
            replica_changes(
                &mut a.ctx,
                &mut a.batch,
                &deleting,
                ReplicaState::DeletionIneligible,
            );
            for r in &deleting {
                a.ctx.set_topic_ineligible_for_deletion(&r.tp.topic, true);
            }
        }
        if offline_led.is_empty() {
            a.batch.add_update_metadata_to_all(&a.ctx, &[]);
        }
        self.send_batch()
    }

    /// `LogDirEventNotification`: reads the pending notifications (watching again), sends
    /// each named live broker LeaderAndIsr for all its replicas (`onBrokerLogDirFailure`: its
    /// answer says which are offline), then deletes the notifications, fenced.
    pub(super) async fn process_log_dir_event_notification(
        &mut self,
    ) -> Result<(), ControllerError> {
        let names = self.zk.log_dir_event_notifications(true).await?;
        if names.is_empty() {
            return Ok(());
        }
        let mut brokers = BTreeSet::new();
        for (name, read) in names
            .iter()
            .zip(self.zk.read_log_dir_event_notifications(&names).await)
        {
            match read {
                Ok(Some(n)) => {
                    brokers.insert(n.broker);
                }
                Ok(None) => {}
                Err(KafkaZkError::Data { path, error }) => {
                    tracing::warn!(path, error = %error, "malformed log dir event notification; deleted")
                }
                Err(e) => return Err(e.into()),
            }
            tracing::debug!(notification = %name, "log dir event notification");
        }
        let outcome = self.on_broker_log_dir_failure(&brokers).await;
        let a = self.active()?;
        let epoch = a.store.epoch;
        self.zk
            .delete_log_dir_event_notifications(epoch, &names)
            .await?;
        outcome
    }

    /// `onBrokerLogDirFailure`: every replica on `brokers` → Online again, which sends those
    /// brokers LeaderAndIsr for all of them.
    async fn on_broker_log_dir_failure(
        &mut self,
        brokers: &BTreeSet<BrokerId>,
    ) -> Result<(), ControllerError> {
        let a = self.active()?;
        let live: BTreeSet<BrokerId> = brokers
            .iter()
            .copied()
            .filter(|b| a.ctx.is_broker_live(*b))
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        tracing::info!(brokers = ?live, "log directory failure reported; asking the brokers");
        let replicas = a.ctx.replicas_on_brokers(&live);
        let pass = replica_changes(&mut a.ctx, &mut a.batch, &replicas, ReplicaState::Online);
        for (r, e) in &pass.failed {
            tracing::warn!(topic = %r.tp.topic, partition = r.tp.partition, broker = r.replica,
                error = %e, "replica state change failed");
        }
        self.send_batch()
    }
}
