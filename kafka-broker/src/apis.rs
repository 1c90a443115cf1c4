//! [`KafkaApis`]: a broker's request dispatch (Kafka's `KafkaApis`) as the
//! [`RequestHandler`] of the network server, on top of a [`ReplicaDriver`].
//!
//! Client APIs (ApiVersions, Metadata, ListOffsets, Produce, Fetch, InitProducerId,
//! FindCoordinator, OffsetForLeaderEpoch) and the controller's (LeaderAndIsr, UpdateMetadata,
//! StopReplica, in [`control`], with KIP-380's broker-epoch check). ControlledShutdown is a
//! controller API: the broker's own controller answers it while active
//! ([`KafkaApis::serve_controller`]); otherwise NOT_CONTROLLER. Idempotent producers are checked
//! by each partition's producer state in the replica manager.
//! A version outside [`KafkaApis::supported_apis`] never gets here: the server refuses it as
//! Kafka does.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use kafka_controller::controller::ControllerHandle;
use kafka_replication::isr::{IsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_replication::partition::CONSUMER_REPLICA_ID;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_replication::replica_manager::{FetchOutcome, ProduceOutcome};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::find_coordinator_response::Coordinator;
use kafka_wire::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_wire::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_wire::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_wire::messages::{
    FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
};
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody, Uuid};
use tokio::sync::watch;

mod control;

use super::producer_ids::{BrokerRangeProducerIds, ProducerIdSource};
use crate::server::{RequestContext, RequestHandler, SupportedApis};
use kafka_replication::replica_driver::LeadershipListener;
use kafka_replication::replica_driver::{DelayedAnswer, ReplicaDriver};

/// ListOffsets timestamp asking for the log end (or high watermark) offset.
pub const LATEST_TIMESTAMP: i64 = -1;
/// ListOffsets timestamp asking for the log start offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;

/// The request handler of one broker.
pub struct KafkaApis<L, K, W> {
    driver: ReplicaDriver<L, K, W>,
    broker: i32,
    cluster_id: String,
    producer_ids: Mutex<Arc<dyn ProducerIdSource>>,
    /// KIP-380: the broker epoch of the current registration, -1 while unknown.
    broker_epoch: AtomicI64,
    /// Where the registration publishes its epoch (see [`KafkaApis::follow_registration`]).
    registration: Mutex<Option<watch::Receiver<Option<i64>>>>,
    /// The controller campaigning on this broker, which answers ControlledShutdown while
    /// active (see [`KafkaApis::serve_controller`]).
    controller: Mutex<Option<ControllerHandle>>,
}

/// The broker epoch a control request carries when its sender does not set one (versions
/// before KIP-380): never stale.
pub const UNKNOWN_BROKER_EPOCH: i64 = -1;

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// The handler of broker `broker` in cluster `cluster_id`, over `driver`.
    pub fn new(broker: i32, cluster_id: impl Into<String>, driver: ReplicaDriver<L, K, W>) -> Self {
        KafkaApis {
            driver,
            broker,
            cluster_id: cluster_id.into(),
            producer_ids: Mutex::new(Arc::new(BrokerRangeProducerIds::new(broker))),
            broker_epoch: AtomicI64::new(UNKNOWN_BROKER_EPOCH),
            registration: Mutex::new(None),
            controller: Mutex::new(None),
        }
    }

    /// Takes InitProducerId's producer ids from `source` (e.g. `glue::ZkProducerIdManager`)
    /// instead of this broker's own range ([`BrokerRangeProducerIds`]).
    pub fn use_producer_ids(&self, source: Arc<dyn ProducerIdSource>) {
        *self
            .producer_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = source;
    }

    /// Tells `listener` (e.g. the ISR writer's controller epochs) every leadership this broker
    /// gains or loses through LeaderAndIsr (the driver hears it from the replica manager's
    /// actions, [`ReplicaDriver::set_leadership_listener`]) and StopReplica.
    pub fn with_leadership(self, listener: Option<Arc<dyn LeadershipListener>>) -> Self {
        self.driver.set_leadership_listener(listener);
        self
    }

    /// The driver this handler works through.
    pub fn driver(&self) -> &ReplicaDriver<L, K, W> {
        &self.driver
    }

    /// The APIs [`KafkaApis::handle`] answers; the others `kafka-wire` can decode are not
    /// advertised.
    const HANDLED: [ApiKey; 12] = [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::Metadata,
        ApiKey::LeaderAndIsr,
        ApiKey::StopReplica,
        ApiKey::UpdateMetadata,
        ApiKey::ControlledShutdown,
        ApiKey::FindCoordinator,
        ApiKey::ApiVersions,
        ApiKey::InitProducerId,
        ApiKey::OffsetForLeaderEpoch,
    ];

    /// The APIs and versions this broker implements (and advertises in ApiVersions).
    /// Produce from v3 and Fetch from v4: record batches of magic v2 only.
    pub fn supported() -> SupportedApis {
        let all = |k: ApiKey| k.versions();
        let mut apis = SupportedApis::new();
        for key in Self::HANDLED {
            let (lo, hi) = all(key);
            let lo = match key {
                ApiKey::Produce => lo.max(3),
                ApiKey::Fetch => lo.max(4),
                _ => lo,
            };
            apis = apis.with(key, lo, hi);
        }
        apis
    }

    /// Produce (K8): acks 0 / 1 answer at once (0: no response); acks -1 waits in the
    /// delayed-produce purgatory until the high watermark covers the append, refusing before
    /// writing when the ISR is below `min.insync.replicas`. Any other acks value gets
    /// INVALID_REQUIRED_ACKS, as in Kafka.
    ///
    /// Idempotent producers (KIP-98) are checked by each partition's producer state
    /// (`kafka_replication::producer_state`): a retried batch is answered with its original
    /// offset and not appended again — with acks -1 from the same purgatory, once the high
    /// watermark passes the original —, an old producer epoch gets INVALID_PRODUCER_EPOCH and
    /// a sequence gap OUT_OF_ORDER_SEQUENCE_NUMBER.
    pub async fn produce(&self, request: &ProduceRequest) -> Option<ProduceResponse> {
        if !matches!(request.acks, -1..=1) {
            return Some(produce_error(request, ErrorCode::InvalidRequiredAcks));
        }
        let (outcome, waiter) = self.driver.with_core(|core, now| {
            let outcome = core.manager.produce(now, request);
            let waiter = match outcome {
                ProduceOutcome::Delayed { request_id } => {
                    Some(ReplicaDriver::<L, K, W>::register(core, request_id))
                }
                _ => None,
            };
            (outcome, waiter)
        });
        match (outcome, waiter) {
            (ProduceOutcome::NoResponse, _) => None,
            (ProduceOutcome::Respond(r), _) => Some(r),
            (ProduceOutcome::Delayed { .. }, Some(rx)) => Some(match rx.await {
                Ok(DelayedAnswer::Produce(r)) => r,
                _ => produce_error(request, ErrorCode::RequestTimedOut),
            }),
            (ProduceOutcome::Delayed { .. }, None) => {
                Some(produce_error(request, ErrorCode::RequestTimedOut))
            }
        }
    }

    /// Fetch (K8.1–K8.6): consumers read to the high watermark, followers to the log end
    /// offset; a fetch that cannot be answered yet waits in the delayed-fetch purgatory.
    /// KIP-320 epoch errors come from the replica manager.
    pub async fn fetch(&self, request: &FetchRequest) -> FetchResponse {
        let (outcome, waiter) = self.driver.with_core(|core, now| {
            let outcome = core.manager.fetch(now, request);
            let waiter = match outcome {
                FetchOutcome::Delayed { request_id } => {
                    Some(ReplicaDriver::<L, K, W>::register(core, request_id))
                }
                FetchOutcome::Respond(_) => None,
            };
            (outcome, waiter)
        });
        match (outcome, waiter) {
            (FetchOutcome::Respond(r), _) => r,
            (FetchOutcome::Delayed { .. }, Some(rx)) => match rx.await {
                Ok(DelayedAnswer::Fetch(r)) => r,
                _ => FetchResponse::default(),
            },
            (FetchOutcome::Delayed { .. }, None) => FetchResponse::default(),
        }
    }

    /// ListOffsets: the earliest (log start) or latest offset — the high watermark for
    /// consumers, the log end offset for a replica — with the KIP-320 leader epoch checked
    /// before the leadership (FENCED / UNKNOWN_LEADER_EPOCH even on a follower).
    /// Lookups by timestamp are not implemented: they answer offset -1 ("none"), as Kafka does
    /// when no record is that recent.
    pub fn list_offsets(&self, version: i16, request: &ListOffsetsRequest) -> ListOffsetsResponse {
        self.driver.with_manager(|m, _| {
            let mut response = ListOffsetsResponse::default();
            for t in &request.topics {
                let mut topic = ListOffsetsTopicResponse {
                    name: t.name.clone(),
                    ..Default::default()
                };
                for p in &t.partitions {
                    let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                    let mut out = ListOffsetsPartitionResponse {
                        partition_index: p.partition_index,
                        ..Default::default()
                    };
                    let (code, offset, epoch) = match m.partition(&tp) {
                        None => (m.not_hosted_error(&tp), -1, -1),
                        Some(part) => {
                            let current = (version >= 4).then_some(p.current_leader_epoch);
                            match part.check_local_replica(current, true) {
                                Err(e) => (e.error_code(), -1, -1),
                                Ok(()) => {
                                    let offset = match p.timestamp {
                                        EARLIEST_TIMESTAMP => part.log_start_offset(),
                                        LATEST_TIMESTAMP
                                            if request.replica_id == CONSUMER_REPLICA_ID =>
                                        {
                                            part.high_watermark()
                                        }
                                        LATEST_TIMESTAMP => part.log_end_offset(),
                                        _ => -1,
                                    };
                                    let cache = part.log().epoch_cache();
                                    let epoch = if offset < 0 {
                                        None
                                    } else if offset >= part.log_end_offset() {
                                        cache.latest_epoch()
                                    } else {
                                        cache.epoch_for_offset(offset)
                                    };
                                    (ErrorCode::None, offset, epoch.unwrap_or(-1))
                                }
                            }
                        }
                    };
                    out.error_code = code.code();
                    // Each field exists only in some versions (v0: a list of offsets).
                    if version == 0 {
                        if offset >= 0 {
                            out.old_style_offsets = vec![offset];
                        }
                    } else {
                        out.timestamp = -1;
                        out.offset = offset;
                    }
                    if version >= 4 {
                        out.leader_epoch = epoch;
                    }
                    topic.partitions.push(out);
                }
                response.topics.push(topic);
            }
            response
        })
    }

    /// Metadata (K5.1) from the metadata cache: live brokers, the controller, and for each
    /// topic its id and every partition's leader, epoch, replicas, ISR and offline replicas.
    /// Topics are never created on demand.
    pub fn metadata(&self, version: i16, request: &MetadataRequest) -> MetadataResponse {
        self.driver.with_manager(|m, _| {
            let cache = m.metadata();
            let mut response = MetadataResponse {
                cluster_id: Some(self.cluster_id.as_str().into()),
                controller_id: cache.controller_id().unwrap_or(-1),
                ..Default::default()
            };
            for b in cache.live_brokers() {
                let (host, port) = match b.endpoints.first() {
                    Some(e) => (e.host.clone(), e.port),
                    None => (b.v0_host.clone(), b.v0_port),
                };
                response.brokers.push(MetadataResponseBroker {
                    node_id: b.id,
                    host,
                    port,
                    rack: b.rack.clone(),
                    ..Default::default()
                });
            }
            let mut by_topic: std::collections::BTreeMap<String, Vec<MetadataResponsePartition>> =
                std::collections::BTreeMap::new();
            for (tp, s) in cache.partitions() {
                let leader_alive = s.leader >= 0 && cache.is_alive(s.leader);
                let mut offline: Vec<i32> = s.offline_replicas.to_vec();
                for r in s.replicas.iter() {
                    if !cache.is_alive(*r) && !offline.contains(r) {
                        offline.push(*r);
                    }
                }
                by_topic
                    .entry(tp.topic.clone())
                    .or_default()
                    .push(MetadataResponsePartition {
                        error_code: if leader_alive {
                            ErrorCode::None.code()
                        } else {
                            ErrorCode::LeaderNotAvailable.code()
                        },
                        partition_index: tp.partition,
                        leader_id: if leader_alive { s.leader } else { -1 },
                        leader_epoch: s.leader_epoch,
                        replica_nodes: s.replicas.clone(),
                        isr_nodes: s.isr.clone(),
                        offline_replicas: offline.into_iter().collect(),
                        ..Default::default()
                    });
            }
            // Each wanted topic by name, or by id (v10+) when the name is null; Err: an id
            // we do not know.
            let wanted: Vec<Result<String, Uuid>> = match &request.topics {
                None => by_topic.keys().cloned().map(Ok).collect(),
                Some(t) if t.is_empty() && version == 0 => {
                    by_topic.keys().cloned().map(Ok).collect()
                }
                Some(t) => t
                    .iter()
                    .map(|t| match &t.name {
                        Some(n) => Ok(n.to_string()),
                        None => by_topic
                            .keys()
                            .find(|name| cache.topic_id(name) == Some(t.topic_id))
                            .cloned()
                            .ok_or(t.topic_id),
                    })
                    .collect(),
            };
            let mut seen = std::collections::HashSet::new();
            for want in wanted {
                if !seen.insert(want.clone()) {
                    continue;
                }
                let topic = match want {
                    Err(id) => MetadataResponseTopic {
                        error_code: ErrorCode::UnknownTopicId.code(),
                        name: None,
                        topic_id: id,
                        ..Default::default()
                    },
                    Ok(name) => match by_topic.get_mut(&name) {
                        Some(parts) => {
                            parts.sort_by_key(|p| p.partition_index);
                            MetadataResponseTopic {
                                name: Some(name.as_str().into()),
                                topic_id: cache.topic_id(&name).unwrap_or_default(),
                                partitions: std::mem::take(parts),
                                ..Default::default()
                            }
                        }
                        None => MetadataResponseTopic {
                            error_code: ErrorCode::UnknownTopicOrPartition.code(),
                            name: Some(name.as_str().into()),
                            ..Default::default()
                        },
                    },
                };
                response.topics.push(topic);
            }
            response
        })
    }

    /// InitProducerId: an idempotent producer gets a new producer id, unique in the cluster,
    /// at epoch 0, from the broker's [`ProducerIdSource`] (its own id range by default, or
    /// blocks claimed in the coordination store). Transactions are not implemented: a
    /// transactional id is refused with INVALID_REQUEST. A source that fails answers
    /// COORDINATOR_NOT_AVAILABLE, which clients retry.
    pub async fn init_producer_id(
        &self,
        request: &InitProducerIdRequest,
    ) -> InitProducerIdResponse {
        let refuse = |code: ErrorCode| InitProducerIdResponse {
            error_code: code.code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        };
        if request.transactional_id.is_some() {
            return refuse(ErrorCode::InvalidRequest);
        }
        let source = self
            .producer_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match source.next_producer_id().await {
            Ok(producer_id) => InitProducerIdResponse {
                producer_id,
                producer_epoch: 0,
                ..Default::default()
            },
            Err(error) => {
                tracing::warn!(broker = self.broker, %error, "no producer id to hand out");
                refuse(ErrorCode::CoordinatorNotAvailable)
            }
        }
    }

    /// FindCoordinator: there are no consumer groups nor transactions here, so every key gets
    /// COORDINATOR_NOT_AVAILABLE.
    pub fn find_coordinator(
        &self,
        version: i16,
        request: &FindCoordinatorRequest,
    ) -> FindCoordinatorResponse {
        let code = ErrorCode::CoordinatorNotAvailable.code();
        let message = Some("this broker has no group or transaction coordinator".into());
        // v0–v3 answer one key at the top level, v4+ a list of keys.
        let mut response = FindCoordinatorResponse::default();
        if version < 4 {
            response.error_code = code;
            response.error_message = message.clone();
            response.node_id = -1;
            response.host = "".into();
            response.port = -1;
        }
        if version >= 4 {
            response.coordinators = request
                .coordinator_keys
                .iter()
                .map(|key| Coordinator {
                    key: key.clone(),
                    node_id: -1,
                    host: "".into(),
                    port: -1,
                    error_code: code,
                    error_message: message.clone(),
                    ..Default::default()
                })
                .collect();
        }
        response
    }
}

/// A produce response giving `code` to every partition of `request`.
fn produce_error(request: &ProduceRequest, code: ErrorCode) -> ProduceResponse {
    ProduceResponse {
        responses: request
            .topic_data
            .iter()
            .map(|t| TopicProduceResponse {
                name: t.name.clone(),
                partition_responses: t
                    .partition_data
                    .iter()
                    .map(|p| PartitionProduceResponse {
                        index: p.index,
                        error_code: code.code(),
                        base_offset: -1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[async_trait]
impl<L, K, W> RequestHandler for KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    fn supported_apis(&self) -> SupportedApis {
        Self::supported()
    }

    async fn handle(
        &self,
        _ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        let version = header.request_api_version;
        tracing::trace!(broker = self.broker, api = ?body.api_key(), version, "request");
        Some(match body {
            RequestBody::ApiVersions(r) => {
                ResponseBody::ApiVersions(Self::supported().answer_api_versions(version, &r))
            }
            RequestBody::Metadata(r) => ResponseBody::Metadata(self.metadata(version, &r)),
            RequestBody::ListOffsets(r) => {
                ResponseBody::ListOffsets(self.list_offsets(version, &r))
            }
            RequestBody::Produce(r) => ResponseBody::Produce(self.produce(&r).await?),
            RequestBody::Fetch(r) => ResponseBody::Fetch(self.fetch(&r).await),
            RequestBody::InitProducerId(r) => {
                ResponseBody::InitProducerId(self.init_producer_id(&r).await)
            }
            RequestBody::FindCoordinator(r) => {
                ResponseBody::FindCoordinator(self.find_coordinator(version, &r))
            }
            RequestBody::OffsetForLeaderEpoch(r) => ResponseBody::OffsetForLeaderEpoch(
                self.driver
                    .with_manager(|m, _| m.offset_for_leader_epoch(&r)),
            ),
            RequestBody::LeaderAndIsr(r) => {
                ResponseBody::LeaderAndIsr(self.leader_and_isr(version, &r))
            }
            RequestBody::UpdateMetadata(r) => {
                ResponseBody::UpdateMetadata(self.update_metadata(&r))
            }
            RequestBody::StopReplica(r) => ResponseBody::StopReplica(self.stop_replica(&r)),
            RequestBody::ControlledShutdown(r) => {
                ResponseBody::ControlledShutdown(self.controlled_shutdown(&r).await)
            }
            // An API not in `HANDLED`: not advertised, and the server refuses it before it
            // gets here.
            _ => return None,
        })
    }
}
