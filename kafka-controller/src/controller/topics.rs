//! Topic creation (K2.2): on a change of `/brokers/topics`, new topics' partitions go New →
//! Online (the first live assigned replica leads, ISR = the live assigned replicas, the state
//! znode is created), their replicas New → Online, and LeaderAndIsr goes to the replicas.

use futures::future::join_all;

use crate::context::{ControllerContext, PartitionReplica, TopicPartition};
use crate::election::ElectionStrategy;
use crate::partition_state_machine::{handle_state_changes as partition_changes, PartitionState};
use crate::replica_state_machine::{handle_state_changes as replica_changes, ReplicaState};
use crate::topic_id_source::TopicIdGenerator;
use crate::zk_data::{paths, KafkaZkError, TopicAssignment};
use ha_coordination::Op;
use kafka_wire::Uuid;

use super::failover::children_or_empty;
use super::store::{assignment_from_znode, Store};
use super::{Controller, ControllerError};

impl Controller {
    /// `TopicChange`: reads `/brokers/topics` (watching again), forgets topics that are gone
    /// and creates the partitions of new ones (K2.2, `onNewPartitionCreation`).
    pub(super) async fn process_topic_change(&mut self) -> Result<(), ControllerError> {
        let coord = self.zk.coordination().clone();
        let topics = children_or_empty(&*coord, paths::BROKER_TOPICS, true).await?;
        let a = self.active()?;
        let known: Vec<String> = a.ctx.topics().map(str::to_string).collect();
        for t in &known {
            if topics.binary_search(t).is_err() && !a.ctx.is_topic_queued_for_deletion(t) {
                tracing::info!(topic = %t, "topic removed from the store");
                a.ctx.remove_topic(t);
            }
        }
        let new: Vec<&String> = topics
            .iter()
            .filter(|t| a.ctx.topic_assignment(t).is_none())
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        // The data watch reports partitions added later.
        let reads = join_all(new.iter().map(|t| self.zk.topic_assignment(t, true))).await;
        let unclean_default = self.config.unclean_leader_election_enable;
        let a = self.active()?;
        let mut partitions: Vec<TopicPartition> = Vec::new();
        let mut znodes = Vec::new();
        for (t, r) in new.iter().zip(reads) {
            match r {
                Ok(Some((assignment, version))) => {
                    let parts = assignment_from_znode(&assignment);
                    tracing::info!(topic = %t, partitions = parts.len(), "new topic");
                    a.ctx.set_topic_assignment((*t).clone(), parts);
                    // The broker default until the topic's own config says otherwise.
                    a.ctx
                        .set_unclean_leader_election((*t).clone(), unclean_default);
                    partitions.extend(a.ctx.partitions_for_topic(t));
                    znodes.push(((*t).clone(), assignment, version));
                }
                Ok(None) => {}
                Err(KafkaZkError::Data { error, .. }) => {
                    tracing::warn!(topic = %t, error = %error, "malformed topic znode; skipped")
                }
                Err(e) => return Err(e.into()),
            }
        }
        let ids = (self.config.channel.versions.leader_and_isr >= 5)
            .then(|| self.config.topic_ids.clone());
        let a = self.active()?;
        load_topic_ids(&a.store, &mut a.ctx, znodes, ids.as_ref()).await?;
        self.on_new_partition_creation(&partitions).await
    }

    /// `PartitionModifications`: partitions added to an existing topic's znode (watched
    /// again) are created as in K2.2.
    pub(super) async fn process_partition_modifications(
        &mut self,
        topic: String,
    ) -> Result<(), ControllerError> {
        let read = match self.zk.topic_assignment(&topic, true).await {
            Ok(read) => read,
            Err(KafkaZkError::Data { error, .. }) => {
                tracing::warn!(topic = %topic, error = %error, "malformed topic znode; ignored");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let Some((znode, _)) = read else {
            return Ok(());
        };
        let a = self.active()?;
        if a.ctx.is_topic_queued_for_deletion(&topic) || a.ctx.topic_assignment(&topic).is_none() {
            return Ok(());
        }
        let assignment = assignment_from_znode(&znode);
        let mut added = Vec::new();
        for (p, replicas) in assignment {
            let tp = TopicPartition::new(topic.as_str(), p);
            if a.ctx.partition_assignment(&tp).is_none() {
                a.ctx.set_partition_assignment(&tp, replicas);
                added.push(tp);
            }
        }
        if added.is_empty() {
            return Ok(());
        }
        tracing::info!(topic = %topic, partitions = added.len(), "partitions added");
        self.on_new_partition_creation(&added).await
    }

    /// K2.2 (`onNewPartitionCreation`): partitions → New, replicas → New, partitions → Online
    /// (state znodes created), replicas → Online; LeaderAndIsr to the replicas.
    async fn on_new_partition_creation(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<(), ControllerError> {
        let retries = self.config.max_cas_retries;
        let a = self.active()?;
        let replicas: Vec<PartitionReplica> = partitions
            .iter()
            .flat_map(|tp| {
                a.ctx
                    .partition_replicas(tp)
                    .into_iter()
                    .map(|b| PartitionReplica::new(tp.clone(), b))
            })
            .collect();
        partition_changes(&mut a.ctx, partitions, PartitionState::New, None);
        replica_changes(&mut a.ctx, &mut a.batch, &replicas, ReplicaState::New);
        let pass = partition_changes(
            &mut a.ctx,
            partitions,
            PartitionState::Online,
            Some(ElectionStrategy::Offline {
                allow_unclean: false,
            }),
        );
        a.run_partition_pass(pass, retries).await?;
        let pass = replica_changes(&mut a.ctx, &mut a.batch, &replicas, ReplicaState::Online);
        a.run_replica_pass(pass, retries).await?;
        self.send_batch()
    }
}

/// KIP-516 (Kafka's `processTopicIds`): records the ids of `topics` (each with its znode
/// content and version) in the context. With `assign_missing` (given when the controller
/// speaks LeaderAndIsr v5+, i.e. IBP 2.8), a topic without an id gets a fresh one from it, one
/// no other topic holds, written to its znode as version 3 with a check of the version read
/// (fenced, all writes in flight at once); a topic whose znode changed meanwhile keeps none
/// until the next failover. A malformed id is logged and ignored.
pub(super) async fn load_topic_ids(
    store: &Store,
    ctx: &mut ControllerContext,
    topics: Vec<(String, TopicAssignment, i32)>,
    assign_missing: Option<&TopicIdGenerator>,
) -> Result<(), ControllerError> {
    // The ids already held first, so that no fresh id repeats one of them.
    let mut missing = Vec::new();
    for (topic, znode, version) in topics {
        match znode.id() {
            Ok(Some(id)) => ctx.set_topic_id(topic, id),
            Ok(None) => missing.push((topic, znode, version)),
            Err(e) => tracing::warn!(topic = %topic, error = %e, "malformed topic id; ignored"),
        }
    }
    let Some(ids) = assign_missing else {
        return Ok(());
    };
    let mut writes: Vec<(String, Uuid, Vec<u8>, i32)> = Vec::new();
    for (topic, mut znode, version) in missing {
        let fresh = ids.fresh(|id| ctx.is_topic_id_in_use(id) || writes.iter().any(|w| w.1 == id));
        let Some(id) = fresh else {
            tracing::warn!(topic = %topic, "the topic id source gave no usable id");
            continue;
        };
        znode.set_id(id);
        match znode.to_json() {
            Ok(data) => writes.push((topic, id, data, version)),
            Err(e) => tracing::warn!(topic = %topic, error = %e, "cannot encode topic znode"),
        }
    }
    let results = futures::future::join_all(writes.iter().map(|(topic, _, data, version)| {
        store.fenced(vec![Op::set_data(
            paths::topic(topic),
            data.clone(),
            *version,
        )])
    }))
    .await;
    for ((topic, id, _, _), r) in writes.into_iter().zip(results) {
        match r {
            Ok(()) => {
                tracing::info!(topic = %topic, topic_id = %crate::zk_data::encode_topic_id(id),
                    "topic id assigned");
                ctx.set_topic_id(topic, id);
            }
            Err(ControllerError::ControllerMoved) => return Err(ControllerError::ControllerMoved),
            Err(ControllerError::Store(KafkaZkError::Coordination(e))) => {
                tracing::warn!(topic = %topic, error = %e, "topic id not written; topic znode changed");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
