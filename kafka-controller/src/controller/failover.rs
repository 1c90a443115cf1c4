//! Controller election and failover (K6): watch `/controller`, campaign when it is absent
//! (the `/controller` create and `/controller_epoch` bump in one transaction, K6.1), run
//! `onControllerFailover` K6.2–K6.12 when elected, and resign when fenced, expired or moved.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::join_all;

use crate::broker_channel::ChannelManager;
use crate::context::ControllerContext;
use crate::partition_state_machine::{
    initialize_partition_states, trigger_online_partition_state_change,
};
use crate::replica_state_machine::{handle_state_changes, initialize_replica_states, ReplicaState};
use crate::request_batch::ControllerBrokerRequestBatch;
use crate::zk_data::{paths, Campaign, KafkaZkError};

use super::store::{assignment_from_znode, broker_info, Store};
use super::{Active, Controller, ControllerError, ControllerEvent};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Controller {
    /// `ControllerChange` / `Reelect`: resign if `/controller` no longer names this broker's
    /// session; campaign if it is absent (K6); otherwise keep watching it.
    pub(super) async fn elect(&mut self) -> Result<(), ControllerError> {
        let me = self.config.broker_id;
        let session = self.zk.coordination().session_id();
        match self.zk.controller(true).await {
            Ok(Some((c, owner))) => {
                if c.brokerid == me && owner == session {
                    return Ok(());
                }
                if self.active.is_some() {
                    tracing::info!(
                        broker = me,
                        controller = c.brokerid,
                        "controller moved; resigning"
                    );
                    self.resign();
                }
                Ok(())
            }
            Ok(None) => {
                if self.active.is_some() {
                    self.resign();
                }
                match self.zk.campaign(me, now_ms()).await? {
                    Campaign::Elected(epoch) => {
                        // Watch our own registration so its deletion or change reaches us.
                        self.zk.controller(true).await?;
                        self.on_controller_failover(epoch).await
                    }
                    Campaign::Lost { controller } => {
                        tracing::debug!(broker = me, ?controller, "lost controller election");
                        // Watch again (the holder may already be gone).
                        if self.zk.controller(true).await?.is_none() {
                            self.queue.put(ControllerEvent::ControllerChange);
                        }
                        Ok(())
                    }
                }
            }
            Err(KafkaZkError::Data { path, error }) => {
                // A malformed /controller: someone holds it; wait for it to change.
                tracing::warn!(broker = me, path, error = %error, "malformed controller znode");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `onControllerResignation`: stop the scheduler and the broker queues, drop the context.
    pub(super) fn resign(&mut self) {
        if let Some(a) = self.active.take() {
            tracing::info!(
                broker = self.config.broker_id,
                controller_epoch = a.ctx.epoch,
                "resigned as controller"
            );
        }
        self.publish_status();
    }

    /// K6.2–K6.12 (`onControllerFailover`), after winning epoch `epoch` (K6.1).
    async fn on_controller_failover(
        &mut self,
        epoch: crate::zk_data::ControllerEpoch,
    ) -> Result<(), ControllerError> {
        let store = Store::new(self.zk.clone(), epoch);
        let coord = self.zk.coordination().clone();
        // K6.2–K6.6: register the watches (and the ISR-change one).
        coord.exists(paths::REASSIGN_PARTITIONS, true).await?;
        coord
            .exists(paths::PREFERRED_REPLICA_ELECTION, true)
            .await?;
        let topics = children_or_empty(&*coord, paths::BROKER_TOPICS, true).await?;
        let deletions = if self.config.delete_topic_enable {
            children_or_empty(&*coord, paths::DELETE_TOPICS, true).await?
        } else {
            Vec::new()
        };
        // Delete stale ISR change notifications (as Kafka's `onControllerFailover` does).
        let notifications = self.zk.isr_change_notifications(true).await?;
        if notifications.is_empty() {
            coord.exists(paths::ISR_CHANGE_NOTIFICATION, true).await?;
        }
        self.zk
            .delete_isr_change_notifications(epoch, &notifications)
            .await?;
        // Log dir event notifications: watched, and the pending ones deleted (Kafka's
        // failover does; the LeaderAndIsr sent below tells which replicas are offline).
        let log_dir_events = self.zk.log_dir_event_notifications(true).await?;
        if log_dir_events.is_empty() {
            coord
                .exists(paths::LOG_DIR_EVENT_NOTIFICATION, true)
                .await?;
        }
        self.zk
            .delete_log_dir_event_notifications(epoch, &log_dir_events)
            .await?;
        // K6.6, K6.7: live brokers with their epochs, topics, assignments, partition states.
        let mut ctx = ControllerContext::new(self.config.broker_id, epoch.epoch, epoch.zk_version);
        for b in self.read_live_brokers().await? {
            ctx.add_live_broker(b);
        }
        // Each topic znode watched (partitions added later), with its config overrides.
        let zk = &self.zk;
        let topic_reads = join_all(topics.iter().map(|t| async move {
            let assignment = zk.topic_assignment(t, true).await;
            let config = zk.topic_config(t).await;
            (assignment, config)
        }))
        .await;
        let mut znodes = Vec::new();
        for (t, (assignment, config)) in topics.iter().zip(topic_reads) {
            match assignment {
                Ok(Some((a, version))) => {
                    ctx.set_topic_assignment(t.clone(), assignment_from_znode(&a));
                    znodes.push((t.clone(), a, version));
                }
                Ok(None) => {}
                Err(KafkaZkError::Data { error, .. }) => {
                    tracing::warn!(topic = %t, error = %error, "malformed topic znode; skipped")
                }
                Err(e) => return Err(e.into()),
            }
            let topic_setting = match config {
                Ok(Some(c)) => c.unclean_leader_election(),
                _ => None,
            };
            ctx.set_unclean_leader_election(
                t.clone(),
                topic_setting.unwrap_or(self.config.unclean_leader_election_enable),
            );
        }
        // KIP-516: topic ids from the topic znodes (created where missing).
        let ids =
            (self.config.channel.versions.leader_and_isr >= 5).then_some(&self.config.topic_ids);
        super::topics::load_topic_ids(&store, &mut ctx, znodes, ids).await?;
        let all = ctx.all_partitions();
        let reads = store.read_states(&all).await;
        for (tp, r) in all.iter().zip(reads) {
            match r {
                Ok(Some(l)) => ctx.put_leadership(tp.clone(), l),
                Ok(None) => {}
                Err(KafkaZkError::Data { path, error }) => {
                    tracing::warn!(path, error = %error, "malformed partition state; treated as missing")
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Channel manager: one queue per live broker.
        let mut channels = ChannelManager::new(
            self.channel.clone(),
            self.config.channel,
            &self.config.listener,
            self.responses.clone(),
        );
        for b in ctx.live_or_shutting_down_brokers() {
            channels.add_broker(b.clone());
        }
        // Topic deletion initialisation (K2.1): queued only when deletion is enabled.
        for t in &deletions {
            if ctx.topic_assignment(t).is_some() {
                ctx.queue_topic_for_deletion(t.clone());
            }
        }
        let mut active = Active {
            ctx,
            store,
            channels,
            batch: ControllerBrokerRequestBatch::new(),
            rebalance_task: None,
            session: self.zk.coordination().session_id(),
        };
        for tp in active.ctx.all_partitions() {
            if active
                .ctx
                .partition_assignment(&tp)
                .is_some_and(|a| a.is_being_reassigned())
            {
                active.ctx.mark_being_reassigned(tp.clone(), true);
            }
        }
        let being_reassigned: Vec<String> = active
            .ctx
            .partitions_being_reassigned()
            .iter()
            .map(|tp| tp.topic.to_string())
            .collect();
        for t in being_reassigned {
            if active.ctx.is_topic_queued_for_deletion(&t) {
                active.ctx.set_topic_ineligible_for_deletion(&t, true);
            }
        }
        // K6.10 (as Kafka's `onControllerFailover` does): UpdateMetadata with the live brokers to every broker
        // before any LeaderAndIsr.
        active.batch.add_update_metadata_to_all(&active.ctx, &[]);
        let requests = active.batch.send_requests(&active.ctx);
        active.channels.enqueue(requests);
        // K6.8: replica state machine start-up, then partition state machine start-up.
        let (online, offline) = initialize_replica_states(&mut active.ctx);
        let pass = handle_state_changes(
            &mut active.ctx,
            &mut active.batch,
            &online,
            ReplicaState::Online,
        );
        active
            .run_replica_pass(pass, self.config.max_cas_retries)
            .await?;
        let pass = handle_state_changes(
            &mut active.ctx,
            &mut active.batch,
            &offline,
            ReplicaState::Offline,
        );
        active
            .run_replica_pass(pass, self.config.max_cas_retries)
            .await?;
        initialize_partition_states(&mut active.ctx);
        let pass = trigger_online_partition_state_change(&mut active.ctx);
        active
            .run_partition_pass(pass, self.config.max_cas_retries)
            .await?;
        let requests = active.batch.send_requests(&active.ctx);
        active.channels.enqueue(requests);
        // K6.9: running as controller.
        tracing::info!(
            broker = self.config.broker_id,
            controller_epoch = epoch.epoch,
            partitions = all.len(),
            "controller failover complete"
        );
        self.active = Some(active);
        self.publish_status();
        // K7 resumption, K6.12 pending deletions, pending preferred elections.
        self.queue.put(ControllerEvent::PartitionReassignment);
        self.resume_reassignments_in_store().await?;
        self.resume_deletions().await?;
        self.queue.put(ControllerEvent::PreferredReplicaElection);
        // K6.11: the auto-rebalance scheduler.
        if self.config.auto_leader_rebalance_enable {
            let queue = self.queue.clone();
            let period = self.config.leader_imbalance_check_interval;
            let first = Duration::from_secs(crate::rebalance::FIRST_CHECK_DELAY_SECS).min(period);
            let task = tokio::spawn(async move {
                tokio::time::sleep(first).await;
                let mut tick = tokio::time::interval(period.max(Duration::from_millis(1)));
                loop {
                    tick.tick().await;
                    queue.put(ControllerEvent::AutoPreferredReplicaLeaderElection);
                }
            });
            if let Some(a) = self.active.as_mut() {
                a.rebalance_task = Some(task);
            }
        }
        Ok(())
    }

    /// Reads `/brokers/ids` (watching it) and every registration (watching each), pipelined. Malformed
    /// registrations are logged and left out.
    pub(super) async fn read_live_brokers(
        &self,
    ) -> Result<Vec<crate::context::BrokerInfo>, ControllerError> {
        let ids = self.zk.live_broker_ids(true).await?;
        // Each registration watched too: a change of its data is a BrokerModification.
        let reads = join_all(ids.iter().map(|id| self.zk.broker_watched(*id, true))).await;
        let mut out = Vec::new();
        for (id, r) in ids.iter().zip(reads) {
            match r {
                Ok(Some((reg, epoch))) => out.push(broker_info(*id, &reg, epoch)),
                Ok(None) => {}
                Err(KafkaZkError::Data { path, error }) => {
                    tracing::warn!(broker = *id, path, error = %error, "malformed broker registration; skipped")
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }
}

/// The children of `path` (none if it does not exist), optionally watching it.
pub(super) async fn children_or_empty(
    coord: &dyn ha_coordination::Coordination,
    path: &str,
    watch: bool,
) -> Result<Vec<String>, ControllerError> {
    match coord.children(path, watch).await {
        Ok(c) => Ok(c),
        Err(e) if e.is_no_node() => {
            if watch {
                coord.exists(path, true).await?;
            }
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}
