//! [`AutoCreateTopics`]: Kafka's `auto.create.topics.enable` in ZooKeeper mode, as a
//! [`RequestHandler`] in front of [`KafkaApis`]. A Metadata request naming a topic that does
//! not exist (and allowing creation: always before v4, `allow_auto_topic_creation` from v4)
//! creates it through the coordination store like the admin tools do
//! (`kafka_controller::admin::create_topic`: `num.partitions` partitions of
//! `default.replication.factor` replicas over the live brokers), and answers
//! `LEADER_NOT_AVAILABLE` for it until the controller has made its partitions online (K2.2).

use std::sync::Arc;

use async_trait::async_trait;
use ha_coordination::Coordination;
use kafka_controller::admin::{self, AdminError};
use kafka_controller::assignment::AssignmentStart;
use kafka_controller::zk_data::paths;
use kafka_replication::isr::IsrWriter;
use kafka_replication::log::LogStorage;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::{RequestBody, RequestHeader, ResponseBody};

use crate::server::{RequestContext, RequestHandler, SupportedApis};
use crate::{KafkaApis, TcpLeaderLink};

/// The settings of topic auto-creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoCreateConfig {
    /// Partitions of an auto-created topic (`num.partitions`, default 1).
    pub partitions: i32,
    /// Replicas per partition (`default.replication.factor`, default 1).
    pub replication_factor: i32,
}

impl AutoCreateConfig {
    /// Sets [`partitions`](Self::partitions).
    #[must_use]
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.partitions = partitions;
        self
    }

    /// Sets [`replication_factor`](Self::replication_factor).
    #[must_use]
    pub fn with_replication_factor(mut self, replication_factor: i32) -> Self {
        self.replication_factor = replication_factor;
        self
    }
}

impl Default for AutoCreateConfig {
    fn default() -> Self {
        AutoCreateConfig {
            partitions: 1,
            replication_factor: 1,
        }
    }
}

/// [`KafkaApis`] with topic auto-creation on Metadata when `config` is set; every other
/// request goes to [`KafkaApis`] unchanged.
pub struct AutoCreateTopics<L, W> {
    apis: Arc<KafkaApis<L, TcpLeaderLink, W>>,
    store: Arc<dyn Coordination>,
    config: Option<AutoCreateConfig>,
}

impl<L, W> AutoCreateTopics<L, W> {
    /// Wraps `apis`; topics are created on `store` when `config` is set.
    pub fn new(
        apis: Arc<KafkaApis<L, TcpLeaderLink, W>>,
        store: Arc<dyn Coordination>,
        config: Option<AutoCreateConfig>,
    ) -> Self {
        AutoCreateTopics {
            apis,
            store,
            config,
        }
    }

    /// The wrapped handler.
    pub fn apis(&self) -> &Arc<KafkaApis<L, TcpLeaderLink, W>> {
        &self.apis
    }

    /// K2.2: creates `topic`; the error code the Metadata answer then carries for it.
    async fn create(&self, topic: &str, config: AutoCreateConfig) -> ErrorCode {
        let created = admin::create_topic(
            self.store.as_ref(),
            topic,
            config.partitions,
            config.replication_factor,
            AssignmentStart::fixed(0),
        )
        .await;
        match created {
            Ok(_) => {
                tracing::info!(
                    topic,
                    partitions = config.partitions,
                    "topic auto-created on a Metadata request"
                );
                ErrorCode::LeaderNotAvailable
            }
            Err(AdminError::TopicExists(_)) => ErrorCode::LeaderNotAvailable,
            Err(AdminError::InvalidTopicName(_)) => ErrorCode::InvalidTopicException,
            Err(AdminError::Assignment(e)) => {
                tracing::warn!(topic, error = %e, "topic not auto-created");
                ErrorCode::InvalidReplicationFactor
            }
            Err(e) => {
                tracing::warn!(topic, error = %e, "topic not auto-created");
                ErrorCode::UnknownTopicOrPartition
            }
        }
    }
}

#[async_trait]
impl<L, W> RequestHandler for AutoCreateTopics<L, W>
where
    L: LogStorage + Send + 'static,
    W: IsrWriter + 'static,
{
    fn supported_apis(&self) -> SupportedApis {
        self.apis.supported_apis()
    }

    async fn handle(
        &self,
        ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        let config = match (&self.config, &body) {
            (Some(c), RequestBody::Metadata(m))
                if m.topics.is_some()
                    && (header.request_api_version < 4 || m.allow_auto_topic_creation) =>
            {
                *c
            }
            _ => return self.apis.handle(ctx, header, body).await,
        };
        let mut response = match self.apis.handle(ctx, header, body).await {
            Some(ResponseBody::Metadata(m)) => m,
            other => return other,
        };
        for topic in &mut response.topics {
            if topic.error_code != ErrorCode::UnknownTopicOrPartition.code() {
                continue;
            }
            let Some(name) = topic.name.as_ref().map(|n| n.to_string()) else {
                continue;
            };
            topic.error_code = if paths::is_valid_topic_name(&name) {
                self.create(&name, config).await.code()
            } else {
                ErrorCode::InvalidTopicException.code()
            };
        }
        Some(ResponseBody::Metadata(response))
    }
}
