//! [`ReplicaManager`]: all partitions of one broker behind the Kafka requests that drive them —
//! LeaderAndIsr (K4.1–K4.5) and Fetch (K8.1–K8.6) with a delayed-fetch purgatory — sans-IO.
//!
//! Requests and responses are `kafka-wire` message types. Effects the manager cannot perform
//! itself come out of [`ReplicaManager::poll_action`]: ISR proposals for the
//! [`IsrWriter`](crate::isr::IsrWriter), fetcher changes, the start of the high-watermark
//! checkpoint task, and answers to fetches that waited in the purgatory.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::fetch_response::{
    EpochEndOffset as WireEpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_wire::messages::leader_and_isr_request::LeaderAndIsrPartitionState;
use kafka_wire::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_wire::messages::offset_for_leader_epoch_response::{
    EpochEndOffset as OffsetForLeaderEpochResult, OffsetForLeaderTopicResult,
};
use kafka_wire::messages::{
    FetchRequest, FetchResponse, LeaderAndIsrRequest, LeaderAndIsrResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use kafka_wire::Uuid;

use crate::isr::{BrokerId, IsrProposal, IsrResult, TopicPartition};
use crate::log::{LogError, LogStorage};
use crate::metadata_cache::MetadataCache;
use crate::partition::{
    FetchParams, Partition, PartitionConfig, PartitionError, PartitionState, CONSUMER_REPLICA_ID,
};
use crate::purgatory::{Admission, Purgatory};

/// The hasher of the manager's maps: fixed keys, so that one sequence of requests gives one
/// iteration order (and one order of actions) in every run — what a deterministic simulation
/// of the broker needs. The keys are partitions the controller assigned, not peer input.
pub(crate) type FixedState =
    std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// How many deleted partitions' last leader epochs a manager keeps.
pub const DELETED_PARTITIONS_KEPT: usize = 10_000;

/// Creates the log of a partition this broker is assigned.
pub type LogFactory<L> = Box<dyn FnMut(&TopicPartition) -> Result<L, LogError> + Send>;

/// Something the manager needs its driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaAction {
    /// K4.4: start the periodic high-watermark checkpoint (call
    /// [`ReplicaManager::checkpoint_high_watermarks`]); emitted once.
    StartHighWatermarkCheckpoint,
    /// K4.3: fetch these partitions from `leader`, truncating by leader epoch first.
    AddFetcherPartitions {
        /// The leader to fetch from.
        leader: BrokerId,
        /// The partitions.
        partitions: Vec<TopicPartition>,
    },
    /// Stop fetching these partitions (this broker leads them now, or they moved).
    RemoveFetcherPartitions {
        /// The partitions.
        partitions: Vec<TopicPartition>,
    },
    /// K4.5: the fetcher for `leader` has no partitions left: shut it down.
    ShutdownIdleFetcher {
        /// The leader it fetched from.
        leader: BrokerId,
    },
    /// Send to the [`IsrWriter`](crate::isr::IsrWriter); give the answer to
    /// [`ReplicaManager::on_isr_result`].
    AlterIsr(IsrProposal),
    /// The answer to an acks=-1 produce that waited for replication.
    ProduceResponse {
        /// The id [`ReplicaManager::produce`] returned for it.
        request_id: u64,
        /// The response.
        response: kafka_wire::messages::ProduceResponse,
    },
    /// K8.6: the answer to a fetch that waited in the purgatory.
    FetchResponse {
        /// The id [`ReplicaManager::fetch`] returned for it.
        request_id: u64,
        /// The response.
        response: FetchResponse,
    },
    /// K4.3: a LeaderAndIsr made this broker the leader of `topic_partition` at
    /// `leader_epoch` — every newer leader epoch applied as leader, also when it led before.
    /// `controller_epoch` is the partition state's: the epoch of the controller that made the
    /// leadership decision, which the ISR writes of this leadership carry (K4.1, Kafka's
    /// `Partition.controllerEpoch`).
    BecameLeader {
        /// The partition.
        topic_partition: TopicPartition,
        /// The leader epoch now led.
        leader_epoch: i32,
        /// The controller epoch of the partition state.
        controller_epoch: i32,
    },
    /// K4.3: a LeaderAndIsr made this broker a follower of `topic_partition` (it no longer
    /// leads it, if it did).
    BecameFollower {
        /// The partition.
        topic_partition: TopicPartition,
        /// The leader it follows (-1: none).
        leader: BrokerId,
        /// The leader epoch now followed.
        leader_epoch: i32,
    },
}

/// One partition a StopReplica request names (K2.1), whatever the request's layout: v0
/// lists partitions, v1–v2 group them by topic, v3+ (KIP-570) adds a leader epoch and a
/// delete flag per partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReplicaTarget {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The leader epoch the controller stops it at (-2: no check, before v3).
    pub leader_epoch: i32,
    /// Whether its log is deleted.
    pub delete: bool,
}

/// The partitions of a StopReplica request, in request order.
pub fn stop_replica_targets(
    request: &kafka_wire::messages::StopReplicaRequest,
) -> Vec<StopReplicaTarget> {
    let mut targets = Vec::new();
    for p in &request.ungrouped_partitions {
        targets.push(StopReplicaTarget {
            topic_partition: TopicPartition::new(p.topic_name.to_string(), p.partition_index),
            leader_epoch: -2,
            delete: request.delete_partitions,
        });
    }
    for t in &request.topics {
        for i in t.partition_indexes.iter() {
            targets.push(StopReplicaTarget {
                topic_partition: TopicPartition::new(t.name.to_string(), *i),
                leader_epoch: -2,
                delete: request.delete_partitions,
            });
        }
    }
    for t in &request.topic_states {
        for p in &t.partition_states {
            targets.push(StopReplicaTarget {
                topic_partition: TopicPartition::new(t.topic_name.to_string(), p.partition_index),
                leader_epoch: p.leader_epoch,
                delete: p.delete_partition,
            });
        }
    }
    targets
}

/// What [`ReplicaManager::fetch`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchOutcome {
    /// K8.4: answered at once.
    Respond(FetchResponse),
    /// K8.5: parked as a delayed fetch; its answer comes as [`ReplicaAction::FetchResponse`].
    Delayed {
        /// The id the answer will carry.
        request_id: u64,
    },
}

/// The partitions of one topic in a fetch: name, id, and each partition's parameters.
type FetchTopicParams = (String, Uuid, Vec<(TopicPartition, FetchParams)>);

/// A fetch parked in the purgatory.
#[derive(Debug, Clone)]
struct DelayedFetch {
    request_id: u64,
    replica_id: BrokerId,
    min_bytes: usize,
    topics: Vec<FetchTopicParams>,
}

/// A snapshot of a broker's replication metrics (the gauges and meters of Kafka's
/// `ReplicaManager`), from [`ReplicaManager::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ReplicaStats {
    /// Partitions with a replica here (`PartitionCount`).
    pub partitions: usize,
    /// Partitions led here (`LeaderCount`).
    pub leaders: usize,
    /// Led partitions whose ISR is smaller than their replica set
    /// (`UnderReplicatedPartitions`).
    pub under_replicated_partitions: usize,
    /// Led partitions whose ISR is below `min.insync.replicas` (`UnderMinIsrPartitionCount`).
    pub under_min_isr_partitions: usize,
    /// Led partitions whose ISR is exactly `min.insync.replicas` (`AtMinIsrPartitionCount`).
    pub at_min_isr_partitions: usize,
    /// ISR shrinks committed since start (`IsrShrinksPerSec`' count).
    pub isr_shrinks: u64,
    /// ISR expansions committed since start (`IsrExpandsPerSec`' count).
    pub isr_expands: u64,
    /// Fetches waiting in the purgatory (`PurgatorySize` of `Fetch`).
    pub delayed_fetches: usize,
    /// Produces waiting in the purgatory (`PurgatorySize` of `Produce`).
    pub delayed_produces: usize,
}

/// One broker's partitions.
pub struct ReplicaManager<L> {
    broker: BrokerId,
    config: PartitionConfig,
    new_log: LogFactory<L>,
    partitions: HashMap<TopicPartition, Partition<L>, FixedState>,
    topic_ids: HashMap<Uuid, String, FixedState>,
    /// The leader epoch each deleted partition had, by topic id, so that a LeaderAndIsr of an
    /// older epoch delivered late cannot bring it back (oldest first, at most
    /// [`DELETED_PARTITIONS_KEPT`]).
    deleted: HashMap<(Uuid, i32), i32, FixedState>,
    /// The keys of `deleted`, oldest first.
    deleted_order: VecDeque<(Uuid, i32)>,
    metadata: MetadataCache,
    controller_epoch: i32,
    checkpoint_started: bool,
    fetchers: BTreeMap<BrokerId, BTreeSet<TopicPartition>>,
    fetch_purgatory: Purgatory<TopicPartition, DelayedFetch>,
    produce_purgatory: Purgatory<TopicPartition, produce::DelayedProduce>,
    next_request_id: u64,
    next_isr_check_ms: u64,
    now_ms: u64,
    actions: VecDeque<ReplicaAction>,
    retention: crate::log::RetentionPolicy,
    retention_check_interval_ms: u64,
    isr_shrinks: u64,
    isr_expands: u64,
    /// Test-only: ignore the controller epoch (K4.1) and the leader epoch (K4.2). Always
    /// false unless set through `set_ignore_epochs` (`never-in-production` builds).
    ignore_epochs: bool,
}

impl<L> std::fmt::Debug for ReplicaManager<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaManager")
            .field("broker", &self.broker)
            .field("partitions", &self.partitions.len())
            .field("controller_epoch", &self.controller_epoch)
            .finish_non_exhaustive()
    }
}

fn error_code_of(e: &PartitionError) -> i16 {
    e.error_code().code()
}

impl<L: LogStorage> ReplicaManager<L> {
    /// A manager for broker `broker` whose clock starts at `now_ms`; `new_log` creates the log
    /// of a partition when it is first assigned here.
    pub fn new(
        broker: BrokerId,
        config: PartitionConfig,
        now_ms: u64,
        new_log: LogFactory<L>,
    ) -> Self {
        ReplicaManager {
            broker,
            config,
            new_log,
            partitions: HashMap::default(),
            topic_ids: HashMap::default(),
            deleted: HashMap::default(),
            deleted_order: VecDeque::new(),
            metadata: MetadataCache::new(),
            controller_epoch: -1,
            checkpoint_started: false,
            fetchers: BTreeMap::new(),
            fetch_purgatory: Purgatory::new(now_ms),
            produce_purgatory: Purgatory::new(now_ms),
            next_request_id: 0,
            next_isr_check_ms: now_ms + config.isr_check_interval_ms(),
            now_ms,
            actions: VecDeque::new(),
            retention: crate::log::RetentionPolicy::keep_all(),
            retention_check_interval_ms: 300_000,
            isr_shrinks: 0,
            isr_expands: 0,
            ignore_epochs: false,
        }
    }

    /// Sets the retention policy of every partition's log (`log.retention.ms`,
    /// `log.retention.bytes`) and how often the driver runs it
    /// (`log.retention.check.interval.ms`, Kafka's default 300 000). The default keeps
    /// everything.
    pub fn set_retention(&mut self, policy: crate::log::RetentionPolicy, check_interval_ms: u64) {
        self.retention = policy;
        self.retention_check_interval_ms = check_interval_ms.max(1);
    }

    /// `log.retention.check.interval.ms`.
    pub fn retention_check_interval_ms(&self) -> u64 {
        self.retention_check_interval_ms
    }

    /// Runs retention on every partition's log at wall-clock time `now_ms` (Kafka's
    /// `LogManager.cleanupLogs`, run every `log.retention.check.interval.ms`): whole segments
    /// older or beyond the size limit go, never one at or above the partition's high watermark.
    /// Returns the segments deleted; a log that fails is reported and skipped.
    pub fn apply_retention(&mut self, now_ms: i64) -> usize {
        let policy = self.retention;
        let mut deleted = 0;
        for (tp, p) in self.partitions.iter_mut() {
            match p.apply_retention(now_ms, &policy) {
                Ok(o) => {
                    if o.segments_deleted > 0 {
                        tracing::info!(
                            topic = %tp.topic,
                            partition = tp.partition,
                            segments = o.segments_deleted,
                            bytes = o.bytes_deleted,
                            log_start_offset = o.log_start_offset,
                            "retention deleted segments"
                        );
                    }
                    deleted += o.segments_deleted;
                }
                Err(error) => tracing::warn!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    %error,
                    "retention failed"
                ),
            }
        }
        deleted
    }

    /// Test-only broken variant (`never-in-production` builds): apply every LeaderAndIsr
    /// whatever its controller epoch (no K4.1) and leader epoch (no K4.2), as a broker that
    /// forgets what it applied would; the simulator shows that its checks catch it.
    #[cfg(any(test, feature = "never-in-production"))]
    pub fn set_ignore_epochs(&mut self, on: bool) {
        self.ignore_epochs = on;
    }

    fn ignores_epochs(&self) -> bool {
        self.ignore_epochs
    }

    /// Takes the manager apart into its partitions' logs, in partition order (the broker
    /// stops; what is on disk stays).
    pub fn into_logs(self) -> Vec<(TopicPartition, L)> {
        let mut logs: Vec<(TopicPartition, L)> = self
            .partitions
            .into_iter()
            .map(|(tp, p)| (tp, p.into_log()))
            .collect();
        logs.sort_by(|a, b| a.0.cmp(&b.0));
        logs
    }

    /// The topic id of `topic`, if a LeaderAndIsr named it.
    fn topic_id_of(&self, topic: &str) -> Option<Uuid> {
        self.topic_ids
            .iter()
            .find(|(_, name)| name.as_str() == topic)
            .map(|(id, _)| *id)
    }

    /// The leader epoch partition `partition` of topic `topic_id` had when it was deleted here.
    fn deleted_epoch(&self, topic_id: Uuid, partition: i32) -> Option<i32> {
        if topic_id == Uuid::default() {
            return None;
        }
        self.deleted.get(&(topic_id, partition)).copied()
    }

    /// The partitions this broker holds (in no particular order).
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.partitions.keys()
    }

    /// The partition `tp`, if this broker holds it.
    pub fn partition(&self, tp: &TopicPartition) -> Option<&Partition<L>> {
        self.partitions.get(tp)
    }

    /// The partition `tp` for a follower-side change (truncation, append of fetched data).
    pub fn partition_mut(&mut self, tp: &TopicPartition) -> Option<&mut Partition<L>> {
        self.partitions.get_mut(tp)
    }

    /// OffsetForLeaderEpoch on the leader (KIP-279, fenced by KIP-320): for every partition,
    /// the largest epoch ≤ the requested one and its end offset, or the error.
    pub fn offset_for_leader_epoch(
        &self,
        request: &OffsetForLeaderEpochRequest,
    ) -> OffsetForLeaderEpochResponse {
        let mut response = OffsetForLeaderEpochResponse::default();
        for t in &request.topics {
            let mut topic = OffsetForLeaderTopicResult {
                topic: t.topic.clone(),
                ..Default::default()
            };
            for p in &t.partitions {
                let tp = TopicPartition::new(t.topic.to_string(), p.partition);
                let mut result = OffsetForLeaderEpochResult {
                    partition: p.partition,
                    ..Default::default()
                };
                let answer = match self.partitions.get(&tp) {
                    None => Err(self.not_hosted_error(&tp).code()),
                    Some(part) => part
                        .last_offset_for_leader_epoch(Some(p.current_leader_epoch), p.leader_epoch)
                        .map_err(|e| error_code_of(&e)),
                };
                match answer {
                    Ok(end) => {
                        result.leader_epoch = end.epoch;
                        result.end_offset = end.end_offset;
                    }
                    Err(code) => result.error_code = code,
                }
                topic.partitions.push(result);
            }
            response.topics.push(topic);
        }
        response
    }

    /// K5.1: UpdateMetadata into the metadata cache (STALE_CONTROLLER_EPOCH from a
    /// controller older than the newest seen).
    pub fn update_metadata(
        &mut self,
        request: &kafka_wire::messages::UpdateMetadataRequest,
    ) -> kafka_wire::messages::UpdateMetadataResponse {
        if request.controller_epoch < self.controller_epoch {
            return kafka_wire::messages::UpdateMetadataResponse {
                error_code: ErrorCode::StaleControllerEpoch.code(),
                ..Default::default()
            };
        }
        self.controller_epoch = request.controller_epoch;
        self.metadata.update(request)
    }

    /// The metadata cache.
    pub fn metadata(&self) -> &MetadataCache {
        &self.metadata
    }

    /// The error for a request naming a partition this broker does not host (Kafka's
    /// `ReplicaManager.getPartitionOrError`): NOT_LEADER_OR_FOLLOWER when the metadata cache
    /// knows the partition (the client's metadata is stale, e.g. a restarted broker that has
    /// its UpdateMetadata but not yet its LeaderAndIsr), UNKNOWN_TOPIC_OR_PARTITION otherwise.
    pub fn not_hosted_error(&self, tp: &TopicPartition) -> ErrorCode {
        if self.metadata.partition(tp).is_some() {
            ErrorCode::NotLeaderOrFollower
        } else {
            ErrorCode::UnknownTopicOrPartition
        }
    }

    /// The newest controller epoch seen.
    pub fn controller_epoch(&self) -> i32 {
        self.controller_epoch
    }

    /// The id of this broker.
    pub fn broker_id(&self) -> BrokerId {
        self.broker
    }

    /// Number of fetches waiting in the purgatory.
    pub fn delayed_fetches(&self) -> usize {
        self.fetch_purgatory.waiting()
    }

    /// The metrics snapshot (Kafka's `ReplicaManager` gauges and ISR meters): counts over
    /// every partition, so meant to be taken every few seconds, not per request.
    pub fn stats(&self) -> ReplicaStats {
        let mut s = ReplicaStats {
            partitions: self.partitions.len(),
            isr_shrinks: self.isr_shrinks,
            isr_expands: self.isr_expands,
            delayed_fetches: self.fetch_purgatory.waiting(),
            delayed_produces: self.produce_purgatory.waiting(),
            ..ReplicaStats::default()
        };
        for p in self.partitions.values() {
            if !p.is_leader() {
                continue;
            }
            s.leaders += 1;
            let isr = p.isr().len();
            if isr < p.replicas().len() {
                s.under_replicated_partitions += 1;
            }
            if isr < p.config().min_insync_replicas {
                s.under_min_isr_partitions += 1;
            } else if isr == p.config().min_insync_replicas {
                s.at_min_isr_partitions += 1;
            }
        }
        s
    }

    /// The next effect to perform.
    #[must_use = "dropping it loses the effect (an ISR write, an answer)"]
    pub fn poll_action(&mut self) -> Option<ReplicaAction> {
        self.actions.pop_front()
    }

    /// When [`ReplicaManager::tick`] should next run.
    pub fn next_deadline(&self) -> u64 {
        [
            self.fetch_purgatory.next_deadline(),
            self.produce_purgatory.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .fold(self.next_isr_check_ms, u64::min)
    }

    /// K4: `becomeLeaderOrFollower`. `version` selects the response layout (topics with ids
    /// from v5). Each partition made leader or follower is reported as a
    /// [`ReplicaAction::BecameLeader`] / [`ReplicaAction::BecameFollower`] (leaders first, in
    /// request order), so that the caller need not walk the request again.
    pub fn become_leader_or_follower(
        &mut self,
        now_ms: u64,
        request: &LeaderAndIsrRequest,
        version: i16,
    ) -> LeaderAndIsrResponse {
        self.now_ms = self.now_ms.max(now_ms);
        let states: Vec<(Uuid, &LeaderAndIsrPartitionState, String)> = request
            .ungrouped_partition_states
            .iter()
            .map(|s| (Uuid::default(), s, s.topic_name.to_string()))
            .chain(request.topic_states.iter().flat_map(|t| {
                t.partition_states
                    .iter()
                    .map(move |s| (t.topic_id, s, t.topic_name.to_string()))
            }))
            .collect();
        // K4.1: a stale controller is refused as a whole.
        if request.controller_epoch < self.controller_epoch && !self.ignores_epochs() {
            tracing::warn!(
                controller_epoch = request.controller_epoch,
                current = self.controller_epoch,
                "ignoring LeaderAndIsr from a stale controller"
            );
            let errors = states
                .iter()
                .map(|(id, s, topic)| {
                    (
                        *id,
                        topic.clone(),
                        s.partition_index,
                        ErrorCode::StaleControllerEpoch.code(),
                    )
                })
                .collect();
            return Self::leader_and_isr_response(
                ErrorCode::StaleControllerEpoch.code(),
                errors,
                version,
            );
        }
        self.controller_epoch = request.controller_epoch;
        let mut errors = Vec::new();
        let mut leaders = Vec::new();
        let mut followers = Vec::new();
        for (topic_id, s, topic) in &states {
            let tp = TopicPartition::new(topic.clone(), s.partition_index);
            if *topic_id != Uuid::default() {
                self.topic_ids.insert(*topic_id, topic.clone());
            }
            // A partition deleted here keeps its last leader epoch (by topic id): a late
            // LeaderAndIsr from before the deletion does not bring back a stray replica.
            let current = match self.partitions.get(&tp) {
                Some(p) => p.leader_epoch(),
                None => self
                    .deleted_epoch(*topic_id, s.partition_index)
                    .unwrap_or(-1),
            };
            // K4.2: only a newer leader epoch is applied, and only where we are a replica.
            let code = if s.leader_epoch <= current && !self.ignores_epochs() {
                tracing::warn!(topic = %tp.topic, partition = tp.partition, leader_epoch = s.leader_epoch, current, "stale leader epoch in LeaderAndIsr");
                ErrorCode::FencedLeaderEpoch
            } else if !s.replicas.contains(&self.broker) {
                tracing::warn!(topic = %tp.topic, partition = tp.partition, broker = self.broker, "LeaderAndIsr for a partition not assigned here");
                ErrorCode::UnknownTopicOrPartition
            } else {
                ErrorCode::None
            };
            if code == ErrorCode::None {
                let state = PartitionState {
                    controller_epoch: s.controller_epoch,
                    leader: s.leader,
                    leader_epoch: s.leader_epoch,
                    isr: s.isr.to_vec(),
                    partition_epoch: s.partition_epoch,
                    replicas: s.replicas.to_vec(),
                };
                if s.leader == self.broker {
                    leaders.push((tp.clone(), state));
                } else {
                    followers.push((tp.clone(), state));
                }
            }
            errors.push((*topic_id, topic.clone(), s.partition_index, code.code()));
        }
        let mut codes: HashMap<(String, i32), i16> = HashMap::new();
        // K4.3: make leaders, then followers.
        let mut stop_fetching = Vec::new();
        for (tp, state) in leaders {
            match self
                .partition_or_create(&tp)
                .and_then(|p| p.make_leader(now_ms, &state))
            {
                Ok(_) => {
                    stop_fetching.push(tp.clone());
                    self.actions.push_back(ReplicaAction::BecameLeader {
                        topic_partition: tp.clone(),
                        leader_epoch: state.leader_epoch,
                        controller_epoch: state.controller_epoch,
                    });
                }
                Err(e) => {
                    codes.insert((tp.topic.clone(), tp.partition), error_code_of(&e));
                }
            }
            self.fetch_purgatory_wake(&tp);
        }
        let mut start_fetching: BTreeMap<BrokerId, Vec<TopicPartition>> = BTreeMap::new();
        for (tp, state) in followers {
            let made = self
                .partition_or_create(&tp)
                .and_then(|p| p.make_follower(&state));
            if made.is_ok() {
                self.actions.push_back(ReplicaAction::BecameFollower {
                    topic_partition: tp.clone(),
                    leader: state.leader,
                    leader_epoch: state.leader_epoch,
                });
            }
            match made {
                Ok(true) if state.leader >= 0 => {
                    stop_fetching.push(tp.clone());
                    start_fetching
                        .entry(state.leader)
                        .or_default()
                        .push(tp.clone());
                }
                Ok(true) => stop_fetching.push(tp.clone()),
                Ok(false) => {}
                Err(e) => {
                    codes.insert((tp.topic.clone(), tp.partition), error_code_of(&e));
                }
            }
            self.fetch_purgatory_wake(&tp);
        }
        self.remove_from_fetchers(&stop_fetching);
        for (leader, partitions) in start_fetching {
            self.fetchers
                .entry(leader)
                .or_default()
                .extend(partitions.iter().cloned());
            self.actions
                .push_back(ReplicaAction::AddFetcherPartitions { leader, partitions });
        }
        // K4.4: the HW checkpoint task starts once.
        if !self.checkpoint_started {
            self.checkpoint_started = true;
            self.actions
                .push_back(ReplicaAction::StartHighWatermarkCheckpoint);
        }
        // K4.5: fetchers left without partitions are shut down.
        let idle: Vec<BrokerId> = self
            .fetchers
            .iter()
            .filter(|(_, p)| p.is_empty())
            .map(|(l, _)| *l)
            .collect();
        for leader in idle {
            self.fetchers.remove(&leader);
            self.actions
                .push_back(ReplicaAction::ShutdownIdleFetcher { leader });
        }
        self.collect_isr_proposals();
        for e in &mut errors {
            if let Some(code) = codes.get(&(e.1.clone(), e.2)) {
                e.3 = *code;
            }
        }
        Self::leader_and_isr_response(ErrorCode::None.code(), errors, version)
    }

    fn leader_and_isr_response(
        error_code: i16,
        errors: Vec<(Uuid, String, i32, i16)>,
        version: i16,
    ) -> LeaderAndIsrResponse {
        let mut response = LeaderAndIsrResponse {
            error_code,
            ..Default::default()
        };
        if version >= 5 {
            let mut topics: Vec<LeaderAndIsrTopicError> = Vec::new();
            for (id, _, partition, code) in errors {
                let err = LeaderAndIsrPartitionError {
                    partition_index: partition,
                    error_code: code,
                    ..Default::default()
                };
                match topics.iter_mut().find(|t| t.topic_id == id) {
                    Some(t) => t.partition_errors.push(err),
                    None => topics.push(LeaderAndIsrTopicError {
                        topic_id: id,
                        partition_errors: vec![err],
                        ..Default::default()
                    }),
                }
            }
            response.topics = topics;
        } else {
            response.partition_errors = errors
                .into_iter()
                .map(|(_, topic, partition, code)| LeaderAndIsrPartitionError {
                    topic_name: topic.into(),
                    partition_index: partition,
                    error_code: code,
                    ..Default::default()
                })
                .collect();
        }
        response
    }

    fn partition_or_create(
        &mut self,
        tp: &TopicPartition,
    ) -> Result<&mut Partition<L>, PartitionError> {
        if !self.partitions.contains_key(tp) {
            let log = (self.new_log)(tp)?;
            self.partitions.insert(
                tp.clone(),
                Partition::new(tp.clone(), self.broker, log, self.config),
            );
        }
        self.partitions
            .get_mut(tp)
            .ok_or(PartitionError::NotLeaderOrFollower)
    }

    fn remove_from_fetchers(&mut self, partitions: &[TopicPartition]) {
        let mut removed = Vec::new();
        for set in self.fetchers.values_mut() {
            for tp in partitions {
                if set.remove(tp) {
                    removed.push(tp.clone());
                }
            }
        }
        if !removed.is_empty() {
            self.actions
                .push_back(ReplicaAction::RemoveFetcherPartitions {
                    partitions: removed,
                });
        }
    }

    fn collect_isr_proposals(&mut self) {
        for p in self.partitions.values_mut() {
            if let Some(proposal) = p.poll_isr_proposal() {
                self.actions.push_back(ReplicaAction::AlterIsr(proposal));
            }
        }
    }

    /// The store's answer to the [`ReplicaAction::AlterIsr`] `proposal` (ignored if the
    /// partition has moved on to another proposal or leadership since).
    pub fn on_isr_result(&mut self, proposal: &IsrProposal, result: IsrResult) {
        let tp = &proposal.topic_partition;
        let before = self.partitions.get(tp).map(|p| p.isr().len());
        let advanced = self
            .partitions
            .get_mut(tp)
            .is_some_and(|p| p.on_isr_result(proposal, result));
        let after = self.partitions.get(tp).map(|p| p.isr().len());
        if let (Some(b), Some(a)) = (before, after) {
            if a < b {
                self.isr_shrinks += 1;
            } else if a > b {
                self.isr_expands += 1;
            }
        }
        if advanced {
            self.fetch_purgatory_wake(tp);
        }
        self.collect_isr_proposals();
    }

    /// Persists every partition's high watermark (the K4.4 task calls this periodically).
    pub fn checkpoint_high_watermarks(&mut self) -> Result<(), PartitionError> {
        for p in self.partitions.values_mut() {
            p.checkpoint_high_watermark()?;
        }
        Ok(())
    }

    /// Advances time: expires delayed fetches and runs the ISR shrink check every
    /// `replica.lag.time.max.ms / 2`.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        if now_ms >= self.next_isr_check_ms {
            self.next_isr_check_ms = now_ms + self.config.isr_check_interval_ms().max(1);
            for p in self.partitions.values_mut() {
                p.retry_unknown_isr_proposal();
                p.maybe_shrink_isr(now_ms);
            }
            self.collect_isr_proposals();
        }
        self.fetch_purgatory.advance(now_ms);
        self.drain_finished_fetches();
        self.produce_purgatory.advance(now_ms);
        self.drain_finished_produces();
    }

    /// Appends as leader (acks 0 / 1 semantics: the append itself; acks=-1 is refused before
    /// writing when the ISR is below `min.insync.replicas`). Wakes delayed fetches.
    pub fn append_records(
        &mut self,
        tp: &TopicPartition,
        records: Bytes,
        required_acks: i16,
    ) -> Result<crate::log::LogAppendInfo, PartitionError> {
        let p = self
            .partitions
            .get_mut(tp)
            .ok_or(PartitionError::NotLeaderOrFollower)?;
        let (info, _) = p.append_as_leader(records, required_acks)?;
        self.fetch_purgatory_wake(tp);
        self.collect_isr_proposals();
        Ok(info)
    }

    /// K8: `handleFetchRequest` / `fetchMessages`. Followers read to the LEO and update their
    /// state on the leader (K8.2); consumers read to the HW. Answers at once (K8.4) when
    /// `max_wait_ms ≤ 0`, no partition was asked for, enough bytes are readable, or any
    /// partition has an error or a diverging epoch; otherwise parks a delayed fetch (K8.5).
    #[must_use = "a delayed fetch is answered under the returned id"]
    pub fn fetch(&mut self, now_ms: u64, request: &FetchRequest) -> FetchOutcome {
        self.now_ms = self.now_ms.max(now_ms);
        let replica_id = if request.replica_id != CONSUMER_REPLICA_ID {
            request.replica_id
        } else {
            request.replica_state.replica_id
        };
        let mut topics = Vec::new();
        for t in &request.topics {
            let name = if t.topic.is_empty() {
                self.topic_ids.get(&t.topic_id).cloned().unwrap_or_default()
            } else {
                t.topic.to_string()
            };
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    (
                        TopicPartition::new(name.clone(), p.partition),
                        FetchParams {
                            replica_id,
                            fetch_offset: p.fetch_offset,
                            log_start_offset: p.log_start_offset,
                            max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                            min_one_batch: true,
                            current_leader_epoch: Some(p.current_leader_epoch),
                            last_fetched_epoch: (p.last_fetched_epoch >= 0)
                                .then_some(p.last_fetched_epoch),
                        },
                    )
                })
                .collect();
            topics.push((name, t.topic_id, parts));
        }
        let fetch = DelayedFetch {
            request_id: self.next_request_id,
            replica_id,
            min_bytes: usize::try_from(request.min_bytes).unwrap_or(0),
            topics,
        };
        self.next_request_id += 1;
        // K8.1–K8.3: read, update follower state, count bytes.
        let (response, bytes, must_answer) = self.read_all(now_ms, &fetch, true);
        self.collect_isr_proposals();
        let partitions: Vec<TopicPartition> = fetch
            .topics
            .iter()
            .flat_map(|(_, _, p)| p.iter().map(|(tp, _)| tp.clone()))
            .collect();
        // K8.4
        if request.max_wait_ms <= 0
            || partitions.is_empty()
            || bytes >= fetch.min_bytes
            || must_answer
        {
            return FetchOutcome::Respond(response);
        }
        // K8.5: park; check once more after watching, then wait for the timer.
        let request_id = fetch.request_id;
        let timeout = u64::try_from(request.max_wait_ms).unwrap_or(0);
        let partitions_map = &self.partitions;
        let admission =
            self.fetch_purgatory
                .try_complete_else_watch(now_ms, timeout, fetch, partitions, |f| {
                    Self::delayed_fetch_satisfied(partitions_map, f)
                });
        self.drain_finished_fetches();
        match admission {
            Ok(Admission::Watching(_)) | Ok(Admission::Done) => {
                FetchOutcome::Delayed { request_id }
            }
            Err(_) => FetchOutcome::Respond(response),
        }
    }

    /// DelayedFetch.tryComplete: an error condition on any partition (not leader, unknown,
    /// fenced epoch, offset beyond the end, diverging epoch) or enough readable bytes.
    fn delayed_fetch_satisfied(
        partitions: &HashMap<TopicPartition, Partition<L>, FixedState>,
        fetch: &DelayedFetch,
    ) -> bool {
        let mut bytes = 0usize;
        for (_, _, parts) in &fetch.topics {
            for (tp, params) in parts {
                let Some(p) = partitions.get(tp) else {
                    return true;
                };
                if p.check_local_replica(params.current_leader_epoch, true)
                    .is_err()
                {
                    return true;
                }
                let end = if fetch.replica_id == CONSUMER_REPLICA_ID {
                    p.high_watermark()
                } else {
                    p.log_end_offset()
                };
                if params.fetch_offset > end {
                    return true;
                }
                if let Some(epoch) = params.last_fetched_epoch {
                    if p.diverging_epoch(params.fetch_offset, epoch).is_some() {
                        return true;
                    }
                }
                if params.fetch_offset < end {
                    bytes += p
                        .log()
                        .readable_bytes(params.fetch_offset, params.max_bytes, end, false)
                        .unwrap_or(0);
                }
            }
        }
        bytes >= fetch.min_bytes
    }

    /// Reads every partition of `fetch`; returns the response, the bytes read and whether
    /// an error or diverging epoch forces an immediate answer.
    fn read_all(
        &mut self,
        now_ms: u64,
        fetch: &DelayedFetch,
        update_followers: bool,
    ) -> (FetchResponse, usize, bool) {
        let mut response = FetchResponse::default();
        let mut bytes = 0;
        let mut must_answer = false;
        let mut woken = Vec::new();
        for (name, topic_id, parts) in &fetch.topics {
            let mut topic = FetchableTopicResponse {
                topic: name.clone().into(),
                topic_id: *topic_id,
                ..Default::default()
            };
            for (tp, params) in parts {
                let mut data = PartitionData {
                    partition_index: tp.partition,
                    ..Default::default()
                };
                let not_hosted = self.not_hosted_error(tp);
                let result = match self.partitions.get_mut(tp) {
                    None => Err(not_hosted.code()),
                    // A delayed fetch re-reads without recording: the follower's state was
                    // updated when the fetch arrived (Kafka's DelayedFetch.onComplete).
                    Some(p) if update_followers => p
                        .fetch_records(now_ms, params)
                        .map_err(|e| error_code_of(&e)),
                    Some(p) => p.read_records(params).map_err(|e| error_code_of(&e)),
                };
                match result {
                    Ok(read) => {
                        if read.high_watermark_advanced {
                            woken.push(tp.clone());
                        }
                        data.high_watermark = read.high_watermark;
                        data.last_stable_offset = read.high_watermark;
                        data.log_start_offset = read.log_start_offset;
                        if let Some(d) = read.diverging_epoch {
                            must_answer = true;
                            data.diverging_epoch = WireEpochEndOffset {
                                epoch: d.epoch,
                                end_offset: d.end_offset,
                                ..Default::default()
                            };
                        }
                        bytes += read.records.len();
                        data.records = Some(read.records);
                    }
                    Err(code) => {
                        must_answer = true;
                        data.error_code = code;
                        data.high_watermark = -1;
                        data.records = Some(Bytes::new());
                        // Kafka answers -1 here and its follower asks ListOffsets next; the log
                        // start offset saves a follower that fell below it that round trip
                        // (clients ignore it on an error).
                        if code == ErrorCode::OffsetOutOfRange.code() {
                            if let Some(p) = self.partitions.get(tp) {
                                data.log_start_offset = p.log_start_offset();
                            }
                        }
                    }
                }
                topic.partitions.push(data);
            }
            response.responses.push(topic);
        }
        for tp in woken {
            self.fetch_purgatory_wake(&tp);
        }
        (response, bytes, must_answer)
    }

    /// Checks the delayed fetches and produces watching `tp` (HW, LEO, ISR or leadership
    /// changed).
    fn fetch_purgatory_wake(&mut self, tp: &TopicPartition) {
        let partitions = &self.partitions;
        self.fetch_purgatory
            .check_and_complete(tp, |f| Self::delayed_fetch_satisfied(partitions, f));
        self.drain_finished_fetches();
        let partitions = &self.partitions;
        self.produce_purgatory
            .check_and_complete(tp, |p| produce::satisfied(partitions, p));
        self.drain_finished_produces();
    }

    /// Completed or expired delayed fetches re-read their partitions and are answered.
    fn drain_finished_fetches(&mut self) {
        while let Some(done) = self.fetch_purgatory.poll_completed() {
            let fetch = done.op;
            let (response, _, _) = self.read_all(self.now_ms, &fetch, false);
            self.actions.push_back(ReplicaAction::FetchResponse {
                request_id: fetch.request_id,
                response,
            });
        }
    }

    /// StopReplica for one partition (K2.1): refused with STALE_CONTROLLER_EPOCH from an old
    /// controller, FENCED_LEADER_EPOCH for an old leader epoch (KIP-570; -2 skips the check).
    /// Returns the partition's log when `delete` is set, for the caller to remove. A deleted
    /// partition's last leader epoch is kept by topic id: a LeaderAndIsr sent before the
    /// deletion and delivered after it is refused (FENCED_LEADER_EPOCH) instead of bringing
    /// back a stray replica; a re-assignment comes with a newer epoch, a re-created topic with
    /// a new id.
    pub fn stop_replica(
        &mut self,
        controller_epoch: i32,
        tp: &TopicPartition,
        leader_epoch: i32,
        delete: bool,
    ) -> Result<Option<L>, ErrorCode> {
        if controller_epoch < self.controller_epoch {
            return Err(ErrorCode::StaleControllerEpoch);
        }
        self.controller_epoch = controller_epoch;
        let Some(p) = self.partitions.get(tp) else {
            return Ok(None);
        };
        let current_epoch = p.leader_epoch();
        if leader_epoch != -2 && leader_epoch < current_epoch {
            return Err(ErrorCode::FencedLeaderEpoch);
        }
        self.remove_from_fetchers(std::slice::from_ref(tp));
        if delete {
            if let Some(id) = self.topic_id_of(&tp.topic) {
                let key = (id, tp.partition);
                if self
                    .deleted
                    .insert(key, current_epoch.max(leader_epoch))
                    .is_none()
                {
                    self.deleted_order.push_back(key);
                }
                if self.deleted_order.len() > DELETED_PARTITIONS_KEPT {
                    if let Some(oldest) = self.deleted_order.pop_front() {
                        self.deleted.remove(&oldest);
                    }
                }
            }
            let p = self.partitions.remove(tp);
            self.fetch_purgatory_wake(tp);
            return Ok(p.map(Partition::into_log));
        }
        self.fetch_purgatory_wake(tp);
        Ok(None)
    }
}

#[path = "replica_manager_produce.rs"]
mod produce;

pub use produce::ProduceOutcome;

#[cfg(test)]
#[path = "replica_manager_tests.rs"]
mod tests;
