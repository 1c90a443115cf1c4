//! Consumer groups on a broker: the shell around `kafka-group-coordinator`.
//!
//! - [`GroupService`] owns the sans-IO [`GroupCoordinator`](kafka_group_coordinator::GroupCoordinator)
//!   in a tokio task, drives its deadlines with a timer, loads a `__consumer_offsets`
//!   partition when this broker becomes its leader (LeaderAndIsr) and unloads it when it
//!   stops (LeaderAndIsr as follower, StopReplica), and appends the coordinator's records
//!   through an [`OffsetsLog`].
//! - [`ReplicaOffsetsLog`] is that log over the broker's replica manager: reads from the log
//!   start, appends with `acks=-1` fenced by the leader epoch the partition was loaded at.
//! - [`GroupApis`] is the [`RequestHandler`] in front of the broker's other handlers: it
//!   answers FindCoordinator (v0-6, key type group; batched keys from v4), creating
//!   `__consumer_offsets` on the first lookup through the coordination store as topic
//!   auto-creation does (`offsets.topic.num.partitions` partitions of
//!   `offsets.topic.replication.factor` replicas, or as many as there are registered brokers
//!   if fewer — Kafka refuses instead, so that a lookup while brokers are still starting does
//!   not create the topic with fewer replicas: set the factor to what the cluster has — with
//!   `cleanup.policy=compact`), and JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//!   OffsetFetch, DescribeGroups and ListGroups at every version `kafka-wire` knows, mapping
//!   them to the coordinator's requests ([`wire`]); ApiVersions advertises them.
//!
//! The coordinator of a group is the leader of partition
//! `abs(hash(group_id)) % offsets.topic.num.partitions` of `__consumer_offsets`, so a
//! coordinator fails over with that partition's leadership (controller failover, broker
//! failure, controlled shutdown): the new leader loads the partition and answers
//! `COORDINATOR_LOAD_IN_PROGRESS` until done; the old one answers `NOT_COORDINATOR`.

mod offsets_log;
mod service;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use ha_coordination::{Coordination, CreateMode};
use kafka_controller::admin::{self, AdminError};
use kafka_controller::assignment::AssignmentStart;
use kafka_controller::zk_data::{paths, TopicConfig};
use kafka_group_coordinator::GroupCoordinatorConfig;
use kafka_replication::isr::{IsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::find_coordinator_response::Coordinator;
use kafka_wire::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};

pub use offsets_log::ReplicaOffsetsLog;
pub use service::{BothListeners, GroupService, OffsetsLog};

use crate::server::{RequestContext, RequestHandler, SupportedApis};
use crate::{KafkaApis, TcpLeaderLink};

/// The topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// FindCoordinator's key type of a consumer group.
pub const KEY_TYPE_GROUP: i8 = 0;

/// FindCoordinator's key type of a transactional id.
pub const KEY_TYPE_TRANSACTION: i8 = 1;

/// The APIs [`GroupApis`] answers.
pub const GROUP_APIS: [ApiKey; 8] = [
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
];

/// The settings of a broker's group coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupConfig {
    /// The coordinator's `group.*` and `offsets.*` settings (`offsets.topic.num.partitions`
    /// among them). A member-id salt of 0 is replaced by [`member_id_salt`] when the service
    /// starts.
    pub coordinator: GroupCoordinatorConfig,
    /// `offsets.topic.replication.factor` (3): replicas of each `__consumer_offsets`
    /// partition, or the number of registered brokers if fewer.
    pub offsets_topic_replication_factor: i32,
    /// `offsets.commit.timeout.ms` (5000): how long an append waits to be committed.
    pub offsets_commit_timeout_ms: i32,
}

impl Default for GroupConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        GroupConfig {
            coordinator: GroupCoordinatorConfig::default(),
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout_ms: 5_000,
        }
    }
}

impl GroupConfig {
    /// Kafka's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`coordinator`](Self::coordinator).
    #[must_use]
    pub fn with_coordinator(mut self, coordinator: GroupCoordinatorConfig) -> Self {
        self.coordinator = coordinator;
        self
    }

    /// Sets [`offsets_topic_replication_factor`](Self::offsets_topic_replication_factor).
    #[must_use]
    pub fn with_offsets_topic_replication_factor(mut self, rf: i32) -> Self {
        self.offsets_topic_replication_factor = rf.max(1);
        self
    }

    /// Sets [`offsets_commit_timeout_ms`](Self::offsets_commit_timeout_ms).
    #[must_use]
    pub fn with_offsets_commit_timeout_ms(mut self, ms: i32) -> Self {
        self.offsets_commit_timeout_ms = ms.max(1);
        self
    }
}

/// A member-id salt for broker `broker` started now: the broker id and the start time, so
/// that a restarted broker does not hand out the member ids of its previous run.
pub fn member_id_salt(broker: i32) -> u64 {
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    (u64::from(broker as u32) << 44) ^ start
}

/// Where FindCoordinator points a group.
enum Lookup {
    /// `__consumer_offsets` is not in the metadata yet.
    NoTopic,
    /// The group's partition has no live leader.
    NoLeader,
    /// The leader's id, host and port.
    Leader(i32, String, i32),
}

/// The group APIs in front of a broker's other handler `H` (see the [module docs](self)).
pub struct GroupApis<H, L, W> {
    inner: Arc<H>,
    apis: Arc<KafkaApis<L, TcpLeaderLink, W>>,
    store: Arc<dyn Coordination>,
    service: GroupService,
    replication_factor: i32,
}

impl<H, L, W> GroupApis<H, L, W>
where
    H: RequestHandler,
    L: LogStorage + Send + 'static,
    W: IsrWriter + 'static,
{
    /// Starts the group coordinator of the broker of `apis` and puts it in front of `inner`;
    /// `__consumer_offsets` is created on `store`. The service learns the leaderships from
    /// the replica driver (added to the listener it already has).
    pub fn start(
        inner: Arc<H>,
        apis: Arc<KafkaApis<L, TcpLeaderLink, W>>,
        store: Arc<dyn Coordination>,
        config: GroupConfig,
    ) -> Self {
        let driver = apis.driver().clone();
        let broker = driver.with_manager(|m, _| m.broker_id());
        let log = Arc::new(ReplicaOffsetsLog::new(
            driver.clone(),
            config.offsets_commit_timeout_ms,
        ));
        let mut coordinator = config.coordinator.clone();
        if coordinator.member_id_salt == 0 {
            coordinator = coordinator.with_member_id_salt(member_id_salt(broker));
        }
        let service = GroupService::spawn(broker, coordinator, log);
        let existing = driver.leadership_listener();
        driver.set_leadership_listener(Some(Arc::new(BothListeners(
            existing,
            service.leadership(),
        ))));
        // Partitions this broker already leads (a handler started late) load now.
        let led: Vec<i32> = driver.with_manager(|m, _| {
            m.partitions()
                .filter(|tp| tp.topic == OFFSETS_TOPIC)
                .filter(|tp| m.partition(tp).is_some_and(|p| p.is_leader()))
                .map(|tp| tp.partition)
                .collect()
        });
        for p in led {
            service.leadership_changed(p, true);
        }
        GroupApis {
            inner,
            apis,
            store,
            service,
            replication_factor: config.offsets_topic_replication_factor,
        }
    }

    /// The coordinator service.
    pub fn service(&self) -> &GroupService {
        &self.service
    }

    fn lookup(&self, partition: i32) -> Lookup {
        self.apis.driver().with_manager(|m, _| {
            let cache = m.metadata();
            let tp = TopicPartition::new(OFFSETS_TOPIC.to_owned(), partition);
            if cache.partition(&tp).is_none() {
                return Lookup::NoTopic;
            }
            let Some(leader) = cache.leader(&tp) else {
                return Lookup::NoLeader;
            };
            match cache.live_brokers().find(|b| b.id == leader) {
                Some(b) => match b.endpoints.first() {
                    Some(e) => Lookup::Leader(leader, e.host.to_string(), e.port),
                    None => Lookup::Leader(leader, b.v0_host.to_string(), b.v0_port),
                },
                None => Lookup::NoLeader,
            }
        })
    }

    /// Creates `__consumer_offsets` (Kafka's `getOrCreateInternalTopic`).
    async fn create_offsets_topic(&self) {
        // The registered brokers, not the metadata cache (which lags behind registrations at
        // start-up): these are the brokers the assignment is made over.
        let live = match self.store.children(paths::BROKER_IDS, false).await {
            Ok(ids) => ids.iter().filter_map(|c| paths::parse_broker_id(c)).count() as i32,
            Err(error) => {
                tracing::warn!(topic = OFFSETS_TOPIC, %error, "offsets topic not created");
                return;
            }
        };
        let rf = self.replication_factor.min(live.max(1));
        let partitions = self.service.num_partitions();
        match admin::create_topic(
            self.store.as_ref(),
            OFFSETS_TOPIC,
            partitions,
            rf,
            AssignmentStart::fixed(0),
        )
        .await
        {
            Ok(_) => {
                tracing::info!(
                    topic = OFFSETS_TOPIC,
                    partitions,
                    replication_factor = rf,
                    "offsets topic created"
                );
                let mut config = BTreeMap::new();
                config.insert("cleanup.policy".to_owned(), "compact".to_owned());
                if let Ok(json) = TopicConfig::new(config).to_json() {
                    let path = paths::topic_config(OFFSETS_TOPIC);
                    let written = match self.store.set_data(&path, &json, -1).await {
                        Err(e) if e.is_no_node() => self
                            .store
                            .create(&path, &json, CreateMode::Persistent)
                            .await
                            .map(|_| ()),
                        other => other.map(|_| ()),
                    };
                    if let Err(error) = written {
                        tracing::warn!(topic = OFFSETS_TOPIC, %error, "offsets topic config not written");
                    }
                }
            }
            Err(AdminError::TopicExists(_)) => {}
            Err(error) => {
                tracing::warn!(topic = OFFSETS_TOPIC, %error, "offsets topic not created");
            }
        }
    }

    /// FindCoordinator: the leader of the group's offsets partition. Transaction
    /// coordinators do not exist here: COORDINATOR_NOT_AVAILABLE; other key types (share
    /// groups) get INVALID_REQUEST, as Kafka's `CoordinatorType.forId` refuses them.
    pub async fn find_coordinator(
        &self,
        version: i16,
        request: &FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let keys: Vec<String> = if version < 4 {
            vec![request.key.to_string()]
        } else {
            request
                .coordinator_keys
                .iter()
                .map(|k| k.to_string())
                .collect()
        };
        let mut answers = Vec::with_capacity(keys.len());
        let mut created = false;
        for key in keys {
            let answer = if request.key_type == KEY_TYPE_TRANSACTION {
                Err((
                    ErrorCode::CoordinatorNotAvailable,
                    "this broker has no transaction coordinator",
                ))
            } else if request.key_type != KEY_TYPE_GROUP {
                // Kafka's CoordinatorType.forId: share groups (2) and unknown types.
                Err((
                    ErrorCode::InvalidRequest,
                    "unsupported coordinator key type",
                ))
            } else {
                let partition = self.service.partition_for(&key);
                match self.lookup(partition) {
                    Lookup::Leader(node, host, port) => Ok((node, host, port)),
                    Lookup::NoLeader => Err((
                        ErrorCode::CoordinatorNotAvailable,
                        "the group's offsets partition has no leader",
                    )),
                    Lookup::NoTopic => {
                        if !created {
                            created = true;
                            self.create_offsets_topic().await;
                        }
                        Err((
                            ErrorCode::CoordinatorNotAvailable,
                            "the offsets topic is being created",
                        ))
                    }
                }
            };
            answers.push((key, answer));
        }
        type Answer = Result<(i32, String, i32), (ErrorCode, &'static str)>;
        let entry = |(key, answer): (String, Answer)| match answer {
            Ok((node_id, host, port)) => Coordinator {
                key: key.into(),
                node_id,
                host: host.into(),
                port,
                error_code: ErrorCode::None.code(),
                error_message: None,
                ..Default::default()
            },
            Err((error, message)) => Coordinator {
                key: key.into(),
                node_id: -1,
                host: "".into(),
                port: -1,
                error_code: error.code(),
                error_message: Some(message.into()),
                ..Default::default()
            },
        };
        let mut coordinators: Vec<Coordinator> = answers.into_iter().map(entry).collect();
        let mut response = FindCoordinatorResponse::default();
        if version < 4 {
            let c = coordinators.pop().unwrap_or_default();
            response.error_code = c.error_code;
            if version >= 1 {
                response.error_message = c.error_message;
            }
            response.node_id = c.node_id;
            response.host = c.host;
            response.port = c.port;
        } else {
            response.coordinators = coordinators;
        }
        response
    }

    fn supported(&self) -> SupportedApis {
        let mut apis = self.inner.supported_apis();
        for key in GROUP_APIS {
            let (lo, hi) = key.versions();
            apis = apis.with(key, lo, hi);
        }
        apis
    }
}

#[async_trait]
impl<H, L, W> RequestHandler for GroupApis<H, L, W>
where
    H: RequestHandler,
    L: LogStorage + Send + 'static,
    W: IsrWriter + 'static,
{
    fn supported_apis(&self) -> SupportedApis {
        self.supported()
    }

    async fn handle(
        &self,
        ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        let version = header.request_api_version;
        match body {
            RequestBody::ApiVersions(r) => Some(ResponseBody::ApiVersions(
                self.supported().answer_api_versions(version, &r),
            )),
            RequestBody::FindCoordinator(r) => Some(ResponseBody::FindCoordinator(
                self.find_coordinator(version, &r).await,
            )),
            body if wire::is_group_request(&body) => {
                let driver = self.apis.driver();
                let known = |topic: &str, partition: i32| {
                    driver.with_manager(|m, _| {
                        m.metadata()
                            .partition(&TopicPartition::new(topic.to_owned(), partition))
                            .is_some()
                    })
                };
                wire::handle(&self.service, ctx, header, body, known).await
            }
            body => self.inner.handle(ctx, header, body).await,
        }
    }
}
