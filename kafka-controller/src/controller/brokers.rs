//! Broker membership flows: broker change (new, dead and bounced brokers, KIP-380), broker
//! failure (K1), broker start-up (K5) and controlled shutdown.

use std::collections::BTreeSet;

use crate::context::{BrokerId, PartitionReplica, TopicPartition};
use crate::election::{begin_controlled_shutdown, partitions_still_led, ElectionStrategy};
use crate::partition_state_machine::{
    handle_state_changes as partition_changes, partitions_with_offline_leader,
    trigger_online_partition_state_change, PartitionState,
};
use crate::replica_state_machine::{handle_state_changes as replica_changes, ReplicaState};

use super::{Controller, ControllerError};

impl Controller {
    /// `BrokerChange`: reads the live brokers (watching again) and runs start-up for new
    /// brokers, failure then start-up for bounced ones (same id, larger czxid) and failure
    /// for dead ones.
    pub(super) async fn process_broker_change(&mut self) -> Result<(), ControllerError> {
        let current = self.read_live_brokers().await?;
        let a = self.active()?;
        let change = a.ctx.broker_change(&current);
        if change.new.is_empty() && change.dead.is_empty() && change.bounced.is_empty() {
            return Ok(());
        }
        tracing::info!(new = ?change.new.iter().map(|b| b.id).collect::<Vec<_>>(),
            dead = ?change.dead, bounced = ?change.bounced.iter().map(|b| b.id).collect::<Vec<_>>(),
            "broker change");
        for b in &change.bounced {
            a.channels.remove_broker(b.id);
        }
        for id in &change.dead {
            a.channels.remove_broker(*id);
            a.ctx.remove_live_broker(*id);
        }
        for b in &change.new {
            a.ctx.add_live_broker(b.clone());
            a.channels.add_broker(b.clone());
        }
        let new: Vec<BrokerId> = change.new.iter().map(|b| b.id).collect();
        if !new.is_empty() {
            self.on_broker_startup(&new).await?;
        }
        if !change.bounced.is_empty() {
            let bounced: Vec<BrokerId> = change.bounced.iter().map(|b| b.id).collect();
            let a = self.active()?;
            for id in &bounced {
                a.ctx.remove_live_broker(*id);
            }
            self.on_broker_failure(&bounced).await?;
            let a = self.active()?;
            for b in &change.bounced {
                a.ctx.add_live_broker(b.clone());
                a.channels.add_broker(b.clone());
            }
            self.on_broker_startup(&bounced).await?;
        }
        if !change.dead.is_empty() {
            self.on_broker_failure(&change.dead).await?;
        }
        Ok(())
    }

    /// Kafka's `BrokerModifications`: broker `id` rewrote its registration (watched again).
    /// When the registration is of the broker epoch the context knows and its listeners or
    /// rack changed, the context takes the new ones and every live broker gets an
    /// UpdateMetadata with the new broker list (`onBrokerUpdate`). A registration of another
    /// epoch is a bounce, which `BrokerChange` handles.
    pub(super) async fn process_broker_modification(
        &mut self,
        id: BrokerId,
    ) -> Result<(), ControllerError> {
        let read = match self.zk.broker_watched(id, true).await {
            Ok(r) => r,
            Err(crate::zk_data::KafkaZkError::Data { path, error }) => {
                tracing::warn!(broker = id, path, error = %error, "malformed broker registration; ignored");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let Some((reg, epoch)) = read else {
            return Ok(());
        };
        let updated = super::store::broker_info(id, &reg, epoch);
        let a = self.active()?;
        let Some(old) = a.ctx.broker(id) else {
            return Ok(());
        };
        if old.epoch != epoch || *old == updated {
            return Ok(());
        }
        tracing::info!(
            broker = id,
            "broker registration changed; sending UpdateMetadata"
        );
        a.ctx.add_live_broker(updated);
        a.batch.add_update_metadata_to_all(&a.ctx, &[]);
        self.send_batch()
    }

    /// K5 (`onBrokerStartup`): UpdateMetadata to the other brokers (K5.1) and with every
    /// partition to the new ones, the new brokers' replicas → Online (K5.2), elections for
    /// partitions without a leader (K5.3), then reassignments and deletions waiting for them.
    pub(super) async fn on_broker_startup(
        &mut self,
        new: &[BrokerId],
    ) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let new_set: BTreeSet<BrokerId> = new.iter().copied().collect();
        for b in new {
            a.ctx.set_replicas_on_offline_dirs(*b, BTreeSet::new());
        }
        let existing: Vec<BrokerId> = a
            .ctx
            .live_or_shutting_down_broker_ids()
            .into_iter()
            .filter(|b| !new_set.contains(b))
            .collect();
        a.batch.add_update_metadata(&a.ctx, &existing, &[]);
        let requests = a.batch.send_requests(&a.ctx);
        a.channels.enqueue(requests);
        let all = a.ctx.all_partitions();
        a.batch.add_update_metadata(&a.ctx, new, &all);
        let requests = a.batch.send_requests(&a.ctx);
        a.channels.enqueue(requests);
        let replicas = a.ctx.replicas_on_brokers(&new_set);
        let pass = replica_changes(&mut a.ctx, &mut a.batch, &replicas, ReplicaState::Online);
        a.run_replica_pass(pass, retries).await?;
        let pass = trigger_online_partition_state_change(&mut a.ctx);
        a.run_partition_pass(pass, retries).await?;
        self.send_batch()?;
        // Reassignments whose targets include the new brokers, and paused deletions.
        let a = self.active()?;
        let topics: Vec<String> = replicas.iter().map(|r| r.tp.topic.to_string()).collect();
        for t in topics {
            a.ctx.set_topic_ineligible_for_deletion(&t, false);
        }
        self.resume_reassignments_in_store().await?;
        self.resume_deletions().await
    }

    /// K1 (`onBrokerFailure`): partitions led by a dead broker → Offline, then elections
    /// (K1.1–K1.3, CAS with re-read and retry), the dead brokers' replicas → Offline (ISR
    /// removal), deletions of their topics paused, and the batch sent: one LeaderAndIsr per
    /// broker (K1.4). UpdateMetadata goes out even when nothing changed.
    pub(super) async fn on_broker_failure(
        &mut self,
        dead: &[BrokerId],
    ) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let dead_set: BTreeSet<BrokerId> = dead.iter().copied().collect();
        for b in dead {
            a.ctx.set_replicas_on_offline_dirs(*b, BTreeSet::new());
        }
        let offline = partitions_with_offline_leader(&a.ctx);
        partition_changes(&mut a.ctx, &offline, PartitionState::Offline, None);
        let pass = trigger_online_partition_state_change(&mut a.ctx);
        a.run_partition_pass(pass, retries).await?;
        let replicas: Vec<PartitionReplica> = a
            .ctx
            .replicas_on_brokers(&dead_set)
            .into_iter()
            .filter(|r| !a.ctx.is_topic_queued_for_deletion(&r.tp.topic))
            .collect();
        let pass = replica_changes(&mut a.ctx, &mut a.batch, &replicas, ReplicaState::Offline);
        a.run_replica_pass(pass, retries).await?;
        // Deletions of topics with replicas on dead brokers cannot finish now.
        let deleting: Vec<PartitionReplica> = a
            .ctx
            .replicas_on_brokers(&dead_set)
            .into_iter()
            .filter(|r| a.ctx.is_topic_queued_for_deletion(&r.tp.topic))
            .collect();
        let pass = replica_changes(
            &mut a.ctx,
            &mut a.batch,
            &deleting,
            ReplicaState::DeletionIneligible,
        );
        let _ = pass;
        for r in &deleting {
            a.ctx.set_topic_ineligible_for_deletion(&r.tp.topic, true);
        }
        if a.batch.is_empty() {
            a.batch.add_update_metadata_to_all(&a.ctx, &[]);
        }
        self.send_batch()
    }

    /// Controlled shutdown (Kafka's `KafkaController.doControlledShutdown`): refused unless active and the broker epoch is
    /// current; leaderships of the broker move first (ControlledShutdown election), its
    /// follower replicas go Offline (StopReplica, ISR shrink); returns what it still leads.
    pub(super) async fn controlled_shutdown(
        &mut self,
        broker: BrokerId,
        broker_epoch: i64,
    ) -> Result<Vec<TopicPartition>, ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let plan = begin_controlled_shutdown(&mut a.ctx, broker, broker_epoch)?;
        tracing::info!(
            broker,
            led = plan.led.len(),
            followed = plan.followed.len(),
            "controlled shutdown"
        );
        let pass = partition_changes(
            &mut a.ctx,
            &plan.led,
            PartitionState::Online,
            Some(ElectionStrategy::ControlledShutdown),
        );
        a.run_partition_pass(pass, retries).await?;
        let followers: Vec<PartitionReplica> = plan
            .followed
            .iter()
            .map(|tp| PartitionReplica::new(tp.clone(), broker))
            .collect();
        let pass = replica_changes(&mut a.ctx, &mut a.batch, &followers, ReplicaState::Offline);
        a.run_replica_pass(pass, retries).await?;
        self.send_batch()?;
        let a = self.active()?;
        Ok(partitions_still_led(&a.ctx, broker))
    }
}
