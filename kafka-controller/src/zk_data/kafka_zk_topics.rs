//! [`KafkaZkClient`]'s reads and writes of topics, partition states, admin requests and ISR
//! change notifications, with the controller's writes fenced by its epoch and the bulk
//! operations pipelined (all requests in flight at once).

use futures::future::join_all;

use super::error::ZkDataError;
use super::kafka_zk::{ControllerEpoch, KafkaZkClient, KafkaZkError};
use super::paths;
use super::{
    IsrChangeNotification, LogDirEventNotification, PartitionStateZNode, PreferredReplicaElection,
    ReassignPartitions, TopicAssignment, TopicConfig, TopicPartitionEntry,
};
use ha_coordination::{CoordinationError, CreateMode, Op, OpResult, ANY_VERSION};

fn data_err(path: &str) -> impl FnOnce(ZkDataError) -> KafkaZkError + '_ {
    move |error| KafkaZkError::Data {
        path: path.to_string(),
        error,
    }
}

/// Name prefix of an ISR change notification under `/isr_change_notification`.
const ISR_CHANGE_NAME_PREFIX: &str = "isr_change_";

/// Name prefix of a log dir event notification under `/log_dir_event_notification`.
const LOG_DIR_EVENT_NAME_PREFIX: &str = "log_dir_event_";

impl KafkaZkClient {
    /// Reads and decodes `path`, `None` if it does not exist; with `watch`, an exists watch
    /// (fires on creation too).
    async fn read_json<T>(
        &self,
        path: &str,
        watch: bool,
        decode: impl FnOnce(&[u8]) -> Result<T, ZkDataError>,
    ) -> Result<Option<(T, i32)>, KafkaZkError> {
        let coord = self.coordination();
        if watch && coord.exists(path, true).await?.is_none() {
            return Ok(None);
        }
        match coord.get_data(path, false).await {
            Ok((data, stat)) => Ok(Some((decode(&data).map_err(data_err(path))?, stat.version))),
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Children of `path`, sorted; an absent `path` has none.
    async fn children_or_empty(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<Vec<String>, KafkaZkError> {
        match self.coordination().children(path, watch).await {
            Ok(c) => Ok(c),
            Err(e) if e.is_no_node() => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// The topics (children of `/brokers/topics`); with `watch`, watches the set (K6.4).
    pub async fn topics(&self, watch: bool) -> Result<Vec<String>, KafkaZkError> {
        self.children_or_empty(paths::BROKER_TOPICS, watch).await
    }

    /// A topic's assignment and its znode version; with `watch`, watches it (partition
    /// additions).
    pub async fn topic_assignment(
        &self,
        topic: &str,
        watch: bool,
    ) -> Result<Option<(TopicAssignment, i32)>, KafkaZkError> {
        self.read_json(&paths::topic(topic), watch, TopicAssignment::from_json)
            .await
    }

    /// Reads the assignments of `topics` pipelined, in order.
    pub async fn topic_assignments(
        &self,
        topics: &[String],
    ) -> Vec<Result<Option<(TopicAssignment, i32)>, KafkaZkError>> {
        join_all(topics.iter().map(|t| self.topic_assignment(t, false))).await
    }

    /// A topic's config overrides (`/config/topics/<t>`), if any.
    pub async fn topic_config(&self, topic: &str) -> Result<Option<TopicConfig>, KafkaZkError> {
        Ok(self
            .read_json(&paths::topic_config(topic), false, TopicConfig::from_json)
            .await?
            .map(|(c, _)| c))
    }

    /// Topics marked for deletion (children of `/admin/delete_topics`); with `watch`, watches
    /// the set (K6.5).
    pub async fn topics_to_delete(&self, watch: bool) -> Result<Vec<String>, KafkaZkError> {
        self.children_or_empty(paths::DELETE_TOPICS, watch).await
    }

    /// The pending `/admin/reassign_partitions` request and its version; with `watch`, watches
    /// it (creation included, K6.2).
    pub async fn reassignment_request(
        &self,
        watch: bool,
    ) -> Result<Option<(ReassignPartitions, i32)>, KafkaZkError> {
        self.read_json(
            paths::REASSIGN_PARTITIONS,
            watch,
            ReassignPartitions::from_json,
        )
        .await
    }

    /// The pending `/admin/preferred_replica_election` request and its version; with
    /// `watch`, watches it (creation included, K6.3).
    pub async fn preferred_replica_election_request(
        &self,
        watch: bool,
    ) -> Result<Option<(PreferredReplicaElection, i32)>, KafkaZkError> {
        self.read_json(
            paths::PREFERRED_REPLICA_ELECTION,
            watch,
            PreferredReplicaElection::from_json,
        )
        .await
    }

    /// Creates a topic's assignment `/brokers/topics/<t>`, fenced (K2.2).
    pub async fn create_topic_assignment(
        &self,
        epoch: ControllerEpoch,
        topic: &str,
        assignment: &TopicAssignment,
    ) -> Result<(), KafkaZkError> {
        let path = paths::topic(topic);
        let data = assignment.to_json().map_err(data_err(&path))?;
        self.fenced_multi(epoch, vec![Op::create(path, data, CreateMode::Persistent)])
            .await
            .map(|_| ())
    }

    /// Replaces a topic's assignment if its version is `expected_version`, fenced (K7 steps 1
    /// and 10); returns the new version.
    pub async fn set_topic_assignment(
        &self,
        epoch: ControllerEpoch,
        topic: &str,
        assignment: &TopicAssignment,
        expected_version: i32,
    ) -> Result<i32, KafkaZkError> {
        let path = paths::topic(topic);
        let data = assignment.to_json().map_err(data_err(&path))?;
        let results = self
            .fenced_multi(epoch, vec![Op::set_data(path, data, expected_version)])
            .await?;
        set_data_version(&results)
    }

    /// Creates the state znodes of new partitions (with their `partitions` and
    /// `partitions/<p>` parents when missing), each partition in its own fenced transaction,
    /// all pipelined (K2.2 / K5: NewPartition → OnlinePartition). Per partition: the new
    /// state's version (0), or the error (`NodeExists` if a state already exists).
    pub async fn create_partition_states(
        &self,
        epoch: ControllerEpoch,
        states: &[(String, i32, PartitionStateZNode)],
    ) -> Vec<Result<i32, KafkaZkError>> {
        let mut topics: Vec<&str> = states.iter().map(|(t, _, _)| t.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        // Parents first; "already exists" is fine.
        let parents = join_all(topics.iter().map(|t| async move {
            self.ensure_persistent(epoch, &paths::topic_partitions(t))
                .await
        }))
        .await;
        if let Some(Err(e)) = parents.into_iter().find(|r| r.is_err()) {
            return states.iter().map(|_| Err(e.clone())).collect();
        }
        let writes = states.iter().map(|(topic, partition, state)| async move {
            let state_path = paths::partition_state(topic, *partition);
            let data = state.to_json().map_err(data_err(&state_path))?;
            self.ensure_persistent(epoch, &paths::partition(topic, *partition))
                .await?;
            self.fenced_multi(
                epoch,
                vec![Op::create(state_path, data, CreateMode::Persistent)],
            )
            .await
            .map(|_| 0)
        });
        join_all(writes).await
    }

    /// Creates `path` (persistent, empty) fenced unless it exists.
    pub async fn ensure_persistent(
        &self,
        epoch: ControllerEpoch,
        path: &str,
    ) -> Result<(), KafkaZkError> {
        match self
            .fenced_multi(
                epoch,
                vec![Op::create(path, Vec::new(), CreateMode::Persistent)],
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(KafkaZkError::Coordination(e)) if e.is_node_exists() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes many partition states pipelined, each a fenced compare-and-set on its own
    /// expected version (K1: a `BadVersion` result means "re-read and retry that one").
    pub async fn set_partition_states(
        &self,
        epoch: ControllerEpoch,
        updates: &[(String, i32, PartitionStateZNode, i32)],
    ) -> Vec<Result<i32, KafkaZkError>> {
        join_all(
            updates
                .iter()
                .map(|(topic, partition, state, expected_version)| {
                    self.set_partition_state(epoch, topic, *partition, state, *expected_version)
                }),
        )
        .await
    }

    /// Broker side: records partitions whose ISR changed as one persistent sequential
    /// `/isr_change_notification/isr_change_<seq>` and returns its path.
    pub async fn create_isr_change_notification(
        &self,
        partitions: Vec<TopicPartitionEntry>,
    ) -> Result<String, KafkaZkError> {
        let data = IsrChangeNotification::new(partitions)
            .to_json()
            .map_err(data_err(paths::ISR_CHANGE_PREFIX))?;
        let (path, _) = self
            .coordination()
            .create(
                paths::ISR_CHANGE_PREFIX,
                &data,
                CreateMode::PersistentSequential,
            )
            .await?;
        Ok(path)
    }

    /// The names of the pending ISR change notifications, oldest first; with `watch`, watches
    /// the set.
    pub async fn isr_change_notifications(&self, watch: bool) -> Result<Vec<String>, KafkaZkError> {
        let mut names: Vec<String> = self
            .children_or_empty(paths::ISR_CHANGE_NOTIFICATION, watch)
            .await?
            .into_iter()
            .filter(|n| n.starts_with(ISR_CHANGE_NAME_PREFIX))
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    /// Reads the notifications `names` pipelined; a notification deleted meanwhile is `None`.
    pub async fn read_isr_change_notifications(
        &self,
        names: &[String],
    ) -> Vec<Result<Option<IsrChangeNotification>, KafkaZkError>> {
        join_all(names.iter().map(|name| async move {
            let path = format!("{}/{name}", paths::ISR_CHANGE_NOTIFICATION);
            Ok(self
                .read_json(&path, false, IsrChangeNotification::from_json)
                .await?
                .map(|(n, _)| n))
        }))
        .await
    }

    /// Deletes processed notifications `names`, fenced, pipelined; already deleted ones are
    /// fine.
    pub async fn delete_isr_change_notifications(
        &self,
        epoch: ControllerEpoch,
        names: &[String],
    ) -> Result<(), KafkaZkError> {
        let results = join_all(names.iter().map(|name| async move {
            let path = format!("{}/{name}", paths::ISR_CHANGE_NOTIFICATION);
            match self
                .fenced_multi(epoch, vec![Op::delete(path, ANY_VERSION)])
                .await
            {
                Err(KafkaZkError::Coordination(e)) if e.is_no_node() => Ok(()),
                other => other.map(|_| ()),
            }
        }))
        .await;
        results.into_iter().collect()
    }

    /// Broker side (Kafka's `propagateLogDirEvent`): records that a log directory of `broker`
    /// failed as one persistent sequential
    /// `/log_dir_event_notification/log_dir_event_<seq>` and returns its path.
    pub async fn create_log_dir_event_notification(
        &self,
        broker: i32,
    ) -> Result<String, KafkaZkError> {
        let data = LogDirEventNotification::failure(broker)
            .to_json()
            .map_err(data_err(paths::LOG_DIR_EVENT_PREFIX))?;
        let (path, _) = self
            .coordination()
            .create(
                paths::LOG_DIR_EVENT_PREFIX,
                &data,
                CreateMode::PersistentSequential,
            )
            .await?;
        Ok(path)
    }

    /// The names of the pending log dir event notifications, oldest first; with `watch`,
    /// watches the set.
    pub async fn log_dir_event_notifications(
        &self,
        watch: bool,
    ) -> Result<Vec<String>, KafkaZkError> {
        let mut names: Vec<String> = self
            .children_or_empty(paths::LOG_DIR_EVENT_NOTIFICATION, watch)
            .await?
            .into_iter()
            .filter(|n| n.starts_with(LOG_DIR_EVENT_NAME_PREFIX))
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    /// Reads the log dir event notifications `names` pipelined; one deleted meanwhile is
    /// `None`.
    pub async fn read_log_dir_event_notifications(
        &self,
        names: &[String],
    ) -> Vec<Result<Option<LogDirEventNotification>, KafkaZkError>> {
        join_all(names.iter().map(|name| async move {
            let path = format!("{}/{name}", paths::LOG_DIR_EVENT_NOTIFICATION);
            Ok(self
                .read_json(&path, false, LogDirEventNotification::from_json)
                .await?
                .map(|(n, _)| n))
        }))
        .await
    }

    /// Deletes processed log dir event notifications `names`, fenced, pipelined; already
    /// deleted ones are fine.
    pub async fn delete_log_dir_event_notifications(
        &self,
        epoch: ControllerEpoch,
        names: &[String],
    ) -> Result<(), KafkaZkError> {
        let results = join_all(names.iter().map(|name| async move {
            let path = format!("{}/{name}", paths::LOG_DIR_EVENT_NOTIFICATION);
            match self
                .fenced_multi(epoch, vec![Op::delete(path, ANY_VERSION)])
                .await
            {
                Err(KafkaZkError::Coordination(e)) if e.is_no_node() => Ok(()),
                other => other.map(|_| ()),
            }
        }))
        .await;
        results.into_iter().collect()
    }

    /// Deletes a pending admin request znode (`/admin/reassign_partitions` when every entry
    /// is done, K7 step 11; `/admin/preferred_replica_election` once handled), fenced;
    /// absent is fine.
    pub async fn delete_admin_request(
        &self,
        epoch: ControllerEpoch,
        path: &str,
        expected_version: i32,
    ) -> Result<(), KafkaZkError> {
        match self
            .fenced_multi(epoch, vec![Op::delete(path, expected_version)])
            .await
        {
            Err(KafkaZkError::Coordination(e)) if e.is_no_node() => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

fn set_data_version(results: &[OpResult]) -> Result<i32, KafkaZkError> {
    match results.first() {
        Some(OpResult::SetData { stat }) => Ok(stat.version),
        _ => Err(CoordinationError::Backend("unexpected set_data result".into()).into()),
    }
}
