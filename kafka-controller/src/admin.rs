//! Admin requests written the way ZooKeeper-mode Kafka's admin tools write them: create a
//! topic (config, then `/brokers/topics/<t>` with Kafka's replica assignment, K2.2), request a
//! topic deletion (`/admin/delete_topics/<t>`, K2.1), a partition reassignment
//! (`/admin/reassign_partitions`, K7) or a preferred replica election
//! (`/admin/preferred_replica_election`). The controller reacts through its watches.

use std::collections::BTreeMap;

use serde_json::Map;

use crate::assignment::{assign_replicas_to_brokers, AssignmentError, AssignmentStart, BrokerRack};
use crate::context::{BrokerId, TopicPartition};
use crate::zk_data::{
    paths, BrokerRegistration, ConfigChangeNotification, KafkaZkError, PreferredReplicaElection,
    ReassignPartitions, ReassignmentEntry, TopicAssignment, TopicConfig, TopicPartitionEntry,
    ZkDataError,
};
use ha_coordination::{Coordination, CoordinationError, CreateMode};

/// Why an admin request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The topic already exists.
    #[error("topic {0} already exists")]
    TopicExists(String),
    /// The topic name is not a valid Kafka topic name.
    #[error("invalid topic name {0:?}")]
    InvalidTopicName(String),
    /// The topic does not exist.
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    /// The partition already exists.
    #[error("partition {0} already exists")]
    PartitionExists(i32),
    /// A reassignment or preferred election request is still pending.
    #[error("{0} is still pending")]
    AlreadyPending(&'static str),
    /// The assignment cannot be made (too few brokers, ...).
    #[error(transparent)]
    Assignment(#[from] AssignmentError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] KafkaZkError),
    /// JSON encoding failed.
    #[error(transparent)]
    Data(#[from] ZkDataError),
}

impl From<CoordinationError> for AdminError {
    fn from(e: CoordinationError) -> Self {
        AdminError::Store(e.into())
    }
}

/// K2.2: creates `topic` with `partitions` partitions of `replication_factor` replicas over
/// the live brokers (sorted by id, rack-aware when every broker has a rack), as
/// `AdminZkClient.createTopic` does; returns the assignment.
pub async fn create_topic(
    coord: &dyn Coordination,
    topic: &str,
    partitions: i32,
    replication_factor: i32,
    start: AssignmentStart,
) -> Result<BTreeMap<i32, Vec<BrokerId>>, AdminError> {
    let mut ids: Vec<BrokerId> = coord
        .children(paths::BROKER_IDS, false)
        .await?
        .iter()
        .filter_map(|c| paths::parse_broker_id(c))
        .collect();
    ids.sort_unstable();
    let mut brokers = Vec::new();
    for id in ids {
        match coord.get_data(&paths::broker(id), false).await {
            Ok((data, _)) => {
                let reg = BrokerRegistration::from_json(&data)?;
                brokers.push(BrokerRack::new(id, reg.rack.as_deref()));
            }
            Err(e) if e.is_no_node() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let assignment =
        assign_replicas_to_brokers(&brokers, partitions, replication_factor, start, 0)?;
    create_topic_with_assignment(coord, topic, &assignment).await?;
    Ok(assignment)
}

/// Creates `topic` with an explicit assignment: `/config/topics/<t>` first, then
/// `/brokers/topics/<t>` (which the controller watches).
pub async fn create_topic_with_assignment(
    coord: &dyn Coordination,
    topic: &str,
    assignment: &BTreeMap<i32, Vec<BrokerId>>,
) -> Result<(), AdminError> {
    create_topic_with_config(coord, topic, assignment, &BTreeMap::new()).await
}

/// Creates `topic` with an explicit assignment and topic-level config overrides, as
/// `AdminZkClient.createTopicWithAssignment` does: `/config/topics/<t>` holding `config`
/// first (no change notification: no broker has the topic yet), then `/brokers/topics/<t>`.
/// The config is not validated here.
pub async fn create_topic_with_config(
    coord: &dyn Coordination,
    topic: &str,
    assignment: &BTreeMap<i32, Vec<BrokerId>>,
    config: &BTreeMap<String, String>,
) -> Result<(), AdminError> {
    if !paths::is_valid_topic_name(topic) {
        return Err(AdminError::InvalidTopicName(topic.to_string()));
    }
    if coord.exists(&paths::topic(topic), false).await?.is_some() {
        return Err(AdminError::TopicExists(topic.to_string()));
    }
    let config = TopicConfig::new(config.clone()).to_json()?;
    match coord
        .create(&paths::topic_config(topic), &config, CreateMode::Persistent)
        .await
    {
        Ok(_) => {}
        Err(e) if e.is_node_exists() => {
            coord
                .set_data(&paths::topic_config(topic), &config, -1)
                .await?;
        }
        Err(e) => return Err(e.into()),
    }
    let data = TopicAssignment::new(assignment.clone()).to_json()?;
    match coord
        .create(&paths::topic(topic), &data, CreateMode::Persistent)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Err(AdminError::TopicExists(topic.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// Adds partitions to an existing topic by rewriting `/brokers/topics/<t>` (conditional on
/// the version read), as ZooKeeper-mode `kafka-topics --alter --partitions` does. Partition ids
/// already present are refused.
pub async fn add_partitions(
    coord: &dyn Coordination,
    topic: &str,
    added: &BTreeMap<i32, Vec<BrokerId>>,
) -> Result<(), AdminError> {
    let path = paths::topic(topic);
    let (data, stat) = coord.get_data(&path, false).await?;
    let mut znode = TopicAssignment::from_json(&data)?;
    for (p, replicas) in added {
        if znode.partitions.insert(*p, replicas.clone()).is_some() {
            return Err(AdminError::PartitionExists(*p));
        }
    }
    coord
        .set_data(&path, &znode.to_json()?, stat.version)
        .await?;
    Ok(())
}

/// Replaces the topic-level config overrides of `topic` (`AdminZkClient.changeTopicConfig`):
/// `/config/topics/<t>` is written (created if missing), then the change notification
/// `/config/changes/config_change_<seq>` (`{"version":2,"entity_path":"topics/<t>"}`) tells
/// the brokers to reload it. Refused for a topic that does not exist.
pub async fn change_topic_config(
    coord: &dyn Coordination,
    topic: &str,
    config: &BTreeMap<String, String>,
) -> Result<(), AdminError> {
    if coord.exists(&paths::topic(topic), false).await?.is_none() {
        return Err(AdminError::UnknownTopic(topic.to_string()));
    }
    let data = TopicConfig::new(config.clone()).to_json()?;
    let path = paths::topic_config(topic);
    match coord.set_data(&path, &data, -1).await {
        Ok(_) => {}
        Err(e) if e.is_no_node() => {
            match coord.create(&path, &data, CreateMode::Persistent).await {
                Ok(_) => {}
                Err(e) if e.is_node_exists() => {
                    coord.set_data(&path, &data, -1).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    }
    let notification = ConfigChangeNotification {
        version: 2,
        entity_path: format!("topics/{topic}"),
        extra: Map::new(),
    }
    .to_json()?;
    for parent in [paths::CONFIG, paths::CONFIG_CHANGES] {
        match coord.create(parent, b"", CreateMode::Persistent).await {
            Ok(_) => {}
            Err(e) if e.is_node_exists() => {}
            Err(e) => return Err(e.into()),
        }
    }
    coord
        .create(
            paths::CONFIG_CHANGE_PREFIX,
            &notification,
            CreateMode::PersistentSequential,
        )
        .await?;
    Ok(())
}

/// K2.1: requests the deletion of `topic` (`/admin/delete_topics/<t>`); a pending request is
/// not an error.
pub async fn delete_topic(coord: &dyn Coordination, topic: &str) -> Result<(), AdminError> {
    match coord
        .create(&paths::delete_topic(topic), b"", CreateMode::Persistent)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// K7: requests the reassignment of partitions to new replica lists
/// (`/admin/reassign_partitions`); refused while an earlier request is pending.
pub async fn reassign_partitions(
    coord: &dyn Coordination,
    targets: &BTreeMap<TopicPartition, Vec<BrokerId>>,
) -> Result<(), AdminError> {
    let znode = ReassignPartitions {
        version: 1,
        partitions: targets
            .iter()
            .map(|(tp, replicas)| ReassignmentEntry {
                topic: tp.topic.to_string(),
                partition: tp.partition,
                replicas: replicas.clone(),
                extra: Map::new(),
            })
            .collect(),
        extra: Map::new(),
    };
    let data = znode.to_json()?;
    match coord
        .create(paths::REASSIGN_PARTITIONS, &data, CreateMode::Persistent)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Err(AdminError::AlreadyPending("a reassignment")),
        Err(e) => Err(e.into()),
    }
}

/// Requests a preferred replica election for `partitions`
/// (`/admin/preferred_replica_election`); refused while an earlier request is pending.
pub async fn preferred_replica_election(
    coord: &dyn Coordination,
    partitions: &[TopicPartition],
) -> Result<(), AdminError> {
    let znode = PreferredReplicaElection {
        version: 1,
        partitions: partitions
            .iter()
            .map(|tp| TopicPartitionEntry::new(&tp.topic, tp.partition))
            .collect(),
        extra: Map::new(),
    };
    let data = znode.to_json()?;
    match coord
        .create(
            paths::PREFERRED_REPLICA_ELECTION,
            &data,
            CreateMode::Persistent,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Err(AdminError::AlreadyPending("a preferred election")),
        Err(e) => Err(e.into()),
    }
}
