//! The administration APIs of a ZooKeeper-mode broker (Kafka's `KafkaApis` handlers with
//! `ZkAdminManager` and `AdminZkClient`): requests from admin clients become the same writes
//! to the coordination store the admin tools make, and the controller does the rest through
//! its watches. Each answer waits, up to the request's timeout, until this broker's metadata
//! shows the outcome (Kafka's `DelayedCreatePartitions`, `DelayedDeleteTopics`,
//! `DelayedElectLeader`, `DelayedDeleteRecords`): the wait re-checks after each step of the
//! replica manager ([`ReplicaDriver::wait_until`](kafka_replication::replica_driver::ReplicaDriver::wait_until)).
//!
//! - [`topics`]: CreateTopics, DeleteTopics, CreatePartitions (controller only).
//! - [`configs`]: DescribeConfigs and IncrementalAlterConfigs (any broker).
//! - [`elections`]: ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments
//!   (controller only).
//! - [`records`]: DeleteRecords (partition leaders).
//! - DescribeCluster (any broker), here.

mod configs;
mod elections;
mod records;
mod topics;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ha_coordination::Coordination;
use kafka_controller::zk_data::KafkaZkClient;
use kafka_replication::isr::IsrWriter;
use kafka_replication::log::LogStorage;
use kafka_replication::metadata_cache::MetadataCache;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_wire::messages::{DescribeClusterRequest, DescribeClusterResponse};
use kafka_wire::{RequestBody, ResponseBody};

pub use configs::{ConfigType, TopicConfigKey, TOPIC_CONFIGS};

use super::KafkaApis;

/// `cluster_authorized_operations` when the client did not ask for them (Kafka's
/// `Int.MinValue`).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// The cluster operations allowed without an authorizer (ALTER, CREATE, DESCRIBE,
/// CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE as bits of the ACL
/// operation codes).
pub const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

/// The broker settings the administration APIs need.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminSettings {
    /// `num.partitions` (1): CreateTopics' partitions when the request says -1.
    pub num_partitions: i32,
    /// `default.replication.factor` (1): CreateTopics' replication factor when the request
    /// says -1.
    pub default_replication_factor: i16,
    /// `delete.topic.enable` (true): DeleteTopics answers TOPIC_DELETION_DISABLED when false.
    pub delete_topic_enable: bool,
    /// The broker's static configs by Kafka key (`log.retention.ms`, `min.insync.replicas`,
    /// ...): DescribeConfigs reports them for the broker resource (read-only), and a topic
    /// config without an override takes its broker synonym's value from here.
    pub broker_configs: BTreeMap<String, String>,
}

impl AdminSettings {
    /// Kafka's defaults and no broker configs.
    pub fn new() -> Self {
        AdminSettings {
            num_partitions: 1,
            default_replication_factor: 1,
            delete_topic_enable: true,
            broker_configs: BTreeMap::new(),
        }
    }

    /// Sets [`num_partitions`](Self::num_partitions).
    #[must_use]
    pub fn with_num_partitions(mut self, num_partitions: i32) -> Self {
        self.num_partitions = num_partitions;
        self
    }

    /// Sets [`default_replication_factor`](Self::default_replication_factor).
    #[must_use]
    pub fn with_default_replication_factor(mut self, replication_factor: i16) -> Self {
        self.default_replication_factor = replication_factor;
        self
    }

    /// Sets [`delete_topic_enable`](Self::delete_topic_enable).
    #[must_use]
    pub fn with_delete_topic_enable(mut self, enable: bool) -> Self {
        self.delete_topic_enable = enable;
        self
    }

    /// Sets one of the [`broker_configs`](Self::broker_configs).
    #[must_use]
    pub fn with_broker_config(mut self, key: &str, value: impl ToString) -> Self {
        self.broker_configs
            .insert(key.to_owned(), value.to_string());
        self
    }
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self::new()
    }
}

/// What the administration handlers work on once a store is attached.
pub(crate) struct AdminState {
    store: Arc<dyn Coordination>,
    zk: KafkaZkClient,
    settings: AdminSettings,
}

/// The slot in [`KafkaApis`] holding the [`AdminState`].
#[derive(Default)]
pub(crate) struct AdminSlot(Mutex<Option<Arc<AdminState>>>);

/// Whether `body` is one of the administration requests of this module.
pub(crate) fn is_admin_request(body: &RequestBody) -> bool {
    matches!(
        body,
        RequestBody::CreateTopics(_)
            | RequestBody::DeleteTopics(_)
            | RequestBody::CreatePartitions(_)
            | RequestBody::ElectLeaders(_)
            | RequestBody::AlterPartitionReassignments(_)
            | RequestBody::ListPartitionReassignments(_)
            | RequestBody::DescribeConfigs(_)
            | RequestBody::IncrementalAlterConfigs(_)
            | RequestBody::DescribeCluster(_)
            | RequestBody::DeleteRecords(_)
    )
}

/// Why a request (or one of its entries) is refused: the code and the message.
pub(crate) type Refusal = (ErrorCode, Option<String>);

fn refusal(code: ErrorCode, message: impl Into<String>) -> Refusal {
    (code, Some(message.into()))
}

/// The answer when no coordination store is attached.
fn no_store() -> Refusal {
    refusal(
        ErrorCode::UnknownServerError,
        "this broker has no coordination store for administration requests",
    )
}

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// Lets this broker answer the administration APIs on `store` (the broker's own client of
    /// the coordination store) with `settings`. Without it, the store-backed ones answer
    /// UNKNOWN_SERVER_ERROR.
    pub fn serve_admin(&self, store: Arc<dyn Coordination>, settings: AdminSettings) {
        let zk = KafkaZkClient::new(store.clone());
        *self.admin.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(AdminState {
            store,
            zk,
            settings,
        }));
    }

    fn admin_state(&self) -> Option<Arc<AdminState>> {
        self.admin
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the controller campaigning on this broker is the active one (the
    /// controller-only APIs answer NOT_CONTROLLER otherwise, as ZooKeeper-mode Kafka does).
    fn is_active_controller(&self) -> bool {
        self.controller
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|c| c.status().active_epoch.is_some())
    }

    /// Waits until `done` holds on the metadata cache or `timeout_ms` passes (at once when
    /// it is ≤ 0); whether it held. Re-checked after each step of the replica manager
    /// (an UpdateMetadata applied, say), as Kafka's delayed admin operations are.
    async fn wait_for_metadata(
        &self,
        timeout_ms: i32,
        mut done: impl FnMut(&MetadataCache) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(u64::try_from(timeout_ms.max(0)).unwrap_or(0));
        self.driver
            .wait_until(deadline, |m| done(m.metadata()))
            .await
    }

    /// Answers one of the requests [`is_admin_request`] accepts.
    pub(crate) async fn handle_admin(
        &self,
        version: i16,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        Some(match body {
            RequestBody::CreateTopics(r) => {
                ResponseBody::CreateTopics(self.create_topics(version, &r).await)
            }
            RequestBody::DeleteTopics(r) => {
                ResponseBody::DeleteTopics(self.delete_topics(version, &r).await)
            }
            RequestBody::CreatePartitions(r) => {
                ResponseBody::CreatePartitions(self.create_partitions(&r).await)
            }
            RequestBody::ElectLeaders(r) => {
                ResponseBody::ElectLeaders(self.elect_leaders(version, &r).await)
            }
            RequestBody::AlterPartitionReassignments(r) => {
                ResponseBody::AlterPartitionReassignments(
                    self.alter_partition_reassignments(&r).await,
                )
            }
            RequestBody::ListPartitionReassignments(r) => ResponseBody::ListPartitionReassignments(
                self.list_partition_reassignments(&r).await,
            ),
            RequestBody::DescribeConfigs(r) => {
                ResponseBody::DescribeConfigs(self.describe_configs(version, &r).await)
            }
            RequestBody::IncrementalAlterConfigs(r) => {
                ResponseBody::IncrementalAlterConfigs(self.incremental_alter_configs(&r).await)
            }
            RequestBody::DescribeCluster(r) => {
                ResponseBody::DescribeCluster(self.describe_cluster(&r))
            }
            RequestBody::DeleteRecords(r) => {
                ResponseBody::DeleteRecords(self.delete_records(&r).await)
            }
            _ => return None,
        })
    }

    /// DescribeCluster (KIP-700): the live brokers, the controller and the cluster id from the
    /// metadata cache; the cluster's authorized operations when asked (everything: there is no
    /// authorizer). A v1 request for the controllers' endpoints gets UNSUPPORTED_ENDPOINT_TYPE,
    /// as a ZooKeeper-mode broker answers.
    pub fn describe_cluster(&self, request: &DescribeClusterRequest) -> DescribeClusterResponse {
        let mut response = DescribeClusterResponse {
            endpoint_type: request.endpoint_type,
            cluster_id: self.cluster_id.as_str().into(),
            controller_id: -1,
            cluster_authorized_operations: if request.include_cluster_authorized_operations {
                CLUSTER_OPERATIONS
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            },
            ..Default::default()
        };
        if request.endpoint_type != 1 {
            response.error_code = ErrorCode::UnsupportedEndpointType.code();
            response.error_message =
                Some("this broker describes only the brokers' endpoints (type 1)".into());
            return response;
        }
        self.driver.with_manager(|m, _| {
            let cache = m.metadata();
            response.controller_id = cache.controller_id().unwrap_or(-1);
            for b in cache.live_brokers() {
                let (host, port) = match b.endpoints.first() {
                    Some(e) => (e.host.clone(), e.port),
                    None => (b.v0_host.clone(), b.v0_port),
                };
                response.brokers.push(DescribeClusterBroker {
                    broker_id: b.id,
                    host,
                    port,
                    rack: b.rack.clone(),
                    ..Default::default()
                });
            }
        });
        response.brokers.sort_by_key(|b| b.broker_id);
        response
    }
}
