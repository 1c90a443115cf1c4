//! The controller's in-memory view of the cluster (`ControllerContext`): live and
//! shutting-down brokers with their epochs and racks, topics and their replica assignments
//! (including the adding / removing replicas of a reassignment), the leadership of every
//! partition as last read from or written to the store, partition and replica states, topics
//! queued for deletion and topic ids.
//!
//! Everything here is plain data: loading it from the coordination store (K6.7) and keeping
//! it in step with the store is the event loop's job. All maps iterate in order (the
//! per-partition ones by topic name, then partition, held per topic for fast lookups) so that
//! every pass over the context is deterministic.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use kafka_wire::Uuid;

use crate::partition_map::PartitionMap;
use crate::partition_state_machine::PartitionState;
use crate::replica_state_machine::ReplicaState;

/// A broker id, as in `/brokers/ids/<id>`.
pub type BrokerId = i32;

/// The leader of a partition that has no leader (`LeaderAndIsr.NoLeader`).
pub const NO_LEADER: BrokerId = -1;
/// The leader sent in UpdateMetadata for partitions of a topic being deleted
/// (`LeaderAndIsr.LeaderDuringDelete`).
pub const LEADER_DURING_DELETE: BrokerId = -2;
/// The leader epoch sent in StopReplica when no epoch is known (`LeaderAndIsr.NoEpoch`).
pub const NO_EPOCH: i32 = -1;
/// The leader epoch sent in StopReplica for partitions of a topic being deleted
/// (`LeaderAndIsr.EpochDuringDelete`).
pub const EPOCH_DURING_DELETE: i32 = -2;

/// A topic partition. Ordered by topic name, then partition.
#[derive(Clone, Debug)]
pub struct TopicPartition {
    /// The topic name (shared: cloning a partition does not copy the name).
    pub topic: Arc<str>,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic partition from a name and an index.
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

// Partitions of one topic share the name's allocation (the context hands out clones of one
// `Arc<str>` per topic), so comparisons first check for the same allocation and compare the
// names only for different ones: the controller's maps are keyed by partition and searched
// hundreds of thousands of times per failover.
impl PartialEq for TopicPartition {
    fn eq(&self, other: &Self) -> bool {
        self.partition == other.partition
            && (Arc::ptr_eq(&self.topic, &other.topic) || self.topic == other.topic)
    }
}

impl Eq for TopicPartition {}

// Equal partitions have equal names and indexes, so hashing those agrees with `eq`.
impl std::hash::Hash for TopicPartition {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.topic.hash(state);
        self.partition.hash(state);
    }
}

impl PartialOrd for TopicPartition {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TopicPartition {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.topic, &other.topic) {
            self.partition.cmp(&other.partition)
        } else {
            self.topic
                .cmp(&other.topic)
                .then(self.partition.cmp(&other.partition))
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// One replica of one partition (`PartitionAndReplica`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionReplica {
    /// The partition.
    pub tp: TopicPartition,
    /// The broker holding the replica.
    pub replica: BrokerId,
}

impl PartitionReplica {
    /// The replica of `tp` on `replica`.
    pub fn new(tp: TopicPartition, replica: BrokerId) -> Self {
        Self { tp, replica }
    }
}

/// One listener of a broker, as in the `endpoints` of `/brokers/ids/<id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    /// The listener name (e.g. `PLAINTEXT`).
    pub listener: String,
    /// Host name.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Kafka's security protocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL.
    pub security_protocol: i16,
}

/// A registered broker: its id, its epoch (the czxid of `/brokers/ids/<id>`, KIP-380), its
/// rack if it has one and its listeners.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    /// The broker id.
    pub id: BrokerId,
    /// The broker epoch.
    pub epoch: i64,
    /// The broker's rack (`broker.rack`), if set.
    pub rack: Option<String>,
    /// The broker's listeners.
    pub endpoints: Vec<BrokerEndpoint>,
}

impl BrokerInfo {
    /// A broker without a rack or listeners.
    pub fn new(id: BrokerId, epoch: i64) -> Self {
        Self {
            id,
            epoch,
            rack: None,
            endpoints: Vec::new(),
        }
    }

    /// The same broker with a `PLAINTEXT` listener on `host:port`.
    pub fn with_plaintext(mut self, host: &str, port: i32) -> Self {
        self.endpoints.push(BrokerEndpoint {
            listener: "PLAINTEXT".to_owned(),
            host: host.to_owned(),
            port,
            security_protocol: 0,
        });
        self
    }

    /// The endpoint of `listener`, else the first one.
    pub fn endpoint(&self, listener: &str) -> Option<&BrokerEndpoint> {
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .or_else(|| self.endpoints.first())
    }
}

/// KIP-704 leader recovery state of a partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeaderRecoveryState {
    /// The leader is fully recovered (the default, not written to the store).
    #[default]
    Recovered,
    /// The leader was elected uncleanly and is still recovering (`leader_recovery_state: 1`).
    Recovering,
}

/// The leadership of one partition, as held by its state znode
/// (`/brokers/topics/<t>/partitions/<p>/state`) plus the znode version it was read at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionLeadership {
    /// The leader, or [`NO_LEADER`].
    pub leader: BrokerId,
    /// The leader epoch; bumped by every change the controller makes.
    pub leader_epoch: i32,
    /// The in-sync replicas; never empty in ZooKeeper mode.
    pub isr: Vec<BrokerId>,
    /// KIP-704 leader recovery state.
    pub leader_recovery_state: LeaderRecoveryState,
    /// The epoch of the controller that wrote this state.
    pub controller_epoch: i32,
    /// The znode version of the state (the partition epoch), used as the expected version of
    /// the next conditional write.
    pub partition_epoch: i32,
}

impl PartitionLeadership {
    /// A leadership as read from the store.
    pub fn new(
        leader: BrokerId,
        leader_epoch: i32,
        isr: Vec<BrokerId>,
        controller_epoch: i32,
        partition_epoch: i32,
    ) -> Self {
        Self {
            leader,
            leader_epoch,
            isr,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            controller_epoch,
            partition_epoch,
        }
    }

    /// K1.3 / Kafka's `PartitionLeaderElectionAlgorithms`: a new leader and ISR, with the leader epoch bumped by one and
    /// stamped with `controller_epoch`; the partition epoch is left as the expected version.
    pub fn new_leader_and_isr(
        &self,
        leader: BrokerId,
        isr: Vec<BrokerId>,
        controller_epoch: i32,
    ) -> Self {
        Self {
            leader,
            leader_epoch: self.leader_epoch.saturating_add(1),
            isr,
            leader_recovery_state: self.leader_recovery_state,
            controller_epoch,
            partition_epoch: self.partition_epoch,
        }
    }

    /// The same leader and ISR with the leader epoch bumped by one (`newEpoch`).
    pub fn new_epoch(&self, controller_epoch: i32) -> Self {
        self.new_leader_and_isr(self.leader, self.isr.clone(), controller_epoch)
    }

    /// True when the partition has a leader.
    pub fn has_leader(&self) -> bool {
        self.leader >= 0
    }
}

/// The replica assignment of one partition (`ReplicaAssignment`): the replica set RS and,
/// during a reassignment, the replicas being added (TRS − ORS) and removed (ORS − TRS).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaAssignment {
    /// All replicas, in preference order (RS; the first is the preferred replica).
    pub replicas: Vec<BrokerId>,
    /// Replicas being added by a reassignment.
    pub adding_replicas: Vec<BrokerId>,
    /// Replicas being removed by a reassignment.
    pub removing_replicas: Vec<BrokerId>,
}

impl ReplicaAssignment {
    /// An assignment with no reassignment in progress.
    pub fn new(replicas: Vec<BrokerId>) -> Self {
        Self {
            replicas,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }

    /// True while a reassignment is in progress.
    pub fn is_being_reassigned(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the partition had before the reassignment (ORS = RS − adding).
    pub fn origin_replicas(&self) -> Vec<BrokerId> {
        diff(&self.replicas, &self.adding_replicas)
    }

    /// The replicas the partition will have after the reassignment (TRS = RS − removing).
    pub fn target_replicas(&self) -> Vec<BrokerId> {
        diff(&self.replicas, &self.removing_replicas)
    }

    /// K7 step 1, U1 of Kafka's `KafkaController.onPartitionReassignment`: the assignment while moving to `target`:
    /// RS = TRS ++ (ORS − TRS), adding = TRS − ORS, removing = ORS − TRS. Applied to an
    /// assignment already moving to `target` it returns the same assignment, so a successor
    /// controller can recompute it from what the store holds.
    pub fn reassign_to(&self, target: &[BrokerId]) -> Self {
        let origin = self.origin_replicas();
        let mut full: Vec<BrokerId> = Vec::with_capacity(target.len() + origin.len());
        for r in target.iter().chain(origin.iter()) {
            if !full.contains(r) {
                full.push(*r);
            }
        }
        Self {
            adding_replicas: diff(&full, &origin),
            removing_replicas: diff(&full, target),
            replicas: full,
        }
    }
}

/// `a` without the members of `b`, keeping `a`'s order.
pub(crate) fn diff(a: &[BrokerId], b: &[BrokerId]) -> Vec<BrokerId> {
    a.iter().copied().filter(|r| !b.contains(r)).collect()
}

/// What changed in `/brokers/ids` (`processBrokerChange`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerChange {
    /// Brokers that appeared (run `onBrokerStartup`, K5).
    pub new: Vec<BrokerInfo>,
    /// Brokers whose znode vanished (run `onBrokerFailure`, K1).
    pub dead: Vec<BrokerId>,
    /// KIP-380: brokers registered again with a larger epoch (czxid) — they restarted within
    /// one watch: run `onBrokerFailure` then `onBrokerStartup` for them.
    pub bounced: Vec<BrokerInfo>,
}

/// The controller's in-memory cluster view (Kafka's `ControllerContext`).
#[derive(Clone, Debug, Default)]
pub struct ControllerContext {
    /// This controller's broker id.
    pub controller_id: BrokerId,
    /// The controller epoch this controller won (K6.1).
    pub epoch: i32,
    /// The znode version of `/controller_epoch` that fences every write (KAFKA-6082, as Kafka's `KafkaZkClient` does).
    pub epoch_zk_version: i32,
    /// KIP-704: under ZooKeeper-mode Kafka ≥ 3.2, an unclean election writes
    /// `leader_recovery_state = RECOVERING`. Off by default (Kafka 2.8).
    pub leader_recovery_on_unclean: bool,
    brokers: BTreeMap<BrokerId, BrokerInfo>,
    shutting_down: BTreeSet<BrokerId>,
    /// `brokers` minus `shutting_down`, kept in step by the broker methods.
    live: BTreeSet<BrokerId>,
    assignments: BTreeMap<Arc<str>, BTreeMap<i32, ReplicaAssignment>>,
    topic_ids: BTreeMap<String, Uuid>,
    unclean_topics: BTreeSet<String>,
    leadership: PartitionMap<PartitionLeadership>,
    partition_states: PartitionMap<PartitionState>,
    /// Per partition, the state of each replica that has one (in no particular order).
    replica_states: PartitionMap<Vec<(BrokerId, ReplicaState)>>,
    topics_to_delete: BTreeSet<String>,
    topics_ineligible_for_deletion: BTreeSet<String>,
    partitions_being_reassigned: BTreeSet<TopicPartition>,
    /// Kafka's `replicasOnOfflineDirs`: per broker, the partitions whose replica it reported
    /// on a failed log directory (`KAFKA_STORAGE_ERROR` in a LeaderAndIsr response).
    replicas_on_offline_dirs: BTreeMap<BrokerId, BTreeSet<TopicPartition>>,
    leader_elections: u64,
    unclean_leader_elections: u64,
}

/// A snapshot of what a controller's metrics report (Kafka's `KafkaController` and
/// `ControllerStats` gauges and meters), taken from its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ControllerStats {
    /// The controller epoch.
    pub controller_epoch: i32,
    /// Partitions of every topic (`GlobalPartitionCount`).
    pub global_partition_count: usize,
    /// Topics (`GlobalTopicCount`).
    pub global_topic_count: usize,
    /// Partitions without a live leader (`OfflinePartitionsCount`).
    pub offline_partitions: usize,
    /// Partitions not led by their preferred replica (`PreferredReplicaImbalanceCount`).
    pub preferred_replica_imbalance: usize,
    /// Live brokers (`ActiveBrokerCount`).
    pub live_brokers: usize,
    /// Topics queued for deletion (`TopicsToDeleteCount`).
    pub topics_to_delete: usize,
    /// Partitions being reassigned (`ReassigningPartitions`).
    pub reassigning_partitions: usize,
    /// Leader elections written since this controller took over
    /// (`LeaderElectionRateAndTimeMs`' count).
    pub leader_elections: u64,
    /// Of those, unclean ones (`UncleanLeaderElectionsPerSec`' count).
    pub unclean_leader_elections: u64,
}

impl ControllerContext {
    /// Counts a written leader election (the `LeaderElectionRateAndTimeMs` and
    /// `UncleanLeaderElectionsPerSec` meters).
    pub fn record_leader_election(&mut self, unclean: bool) {
        self.leader_elections += 1;
        if unclean {
            self.unclean_leader_elections += 1;
        }
    }

    /// The metrics snapshot: counts over every partition (linear in the partitions; meant to
    /// be taken every few seconds, not per event).
    pub fn stats(&self) -> ControllerStats {
        let mut offline = 0;
        let mut imbalance = 0;
        for (tp, lead) in self.leadership.iter() {
            if lead.leader < 0 || !self.live.contains(&lead.leader) {
                offline += 1;
            }
            let preferred = self
                .partition_assignment(tp)
                .and_then(|a| a.replicas.first().copied());
            if preferred.is_some_and(|p| p != lead.leader) {
                imbalance += 1;
            }
        }
        ControllerStats {
            controller_epoch: self.epoch,
            global_partition_count: self.assignments.values().map(BTreeMap::len).sum(),
            global_topic_count: self.assignments.len(),
            offline_partitions: offline,
            preferred_replica_imbalance: imbalance,
            live_brokers: self.live.len(),
            topics_to_delete: self.topics_to_delete.len(),
            reassigning_partitions: self.partitions_being_reassigned.len(),
            leader_elections: self.leader_elections,
            unclean_leader_elections: self.unclean_leader_elections,
        }
    }
}

impl ControllerContext {
    /// An empty context for controller `controller_id` at controller epoch `epoch`.
    pub fn new(controller_id: BrokerId, epoch: i32, epoch_zk_version: i32) -> Self {
        Self {
            controller_id,
            epoch,
            epoch_zk_version,
            ..Self::default()
        }
    }

    // ---- brokers -------------------------------------------------------------------------

    /// Registers (or re-registers with a new epoch) a live broker.
    pub fn add_live_broker(&mut self, broker: BrokerInfo) {
        if !self.shutting_down.contains(&broker.id) {
            self.live.insert(broker.id);
        }
        self.brokers.insert(broker.id, broker);
    }

    /// Removes a broker that left (its znode vanished); it also stops shutting down.
    pub fn remove_live_broker(&mut self, id: BrokerId) -> Option<BrokerInfo> {
        self.shutting_down.remove(&id);
        self.live.remove(&id);
        self.brokers.remove(&id)
    }

    /// K1 / K5 / KIP-380: compares the registered brokers with `current` (what
    /// `/brokers/ids` holds now) without changing the context; apply the result with
    /// [`Self::apply_broker_change`].
    pub fn broker_change(&self, current: &[BrokerInfo]) -> BrokerChange {
        let mut change = BrokerChange::default();
        let mut seen = BTreeSet::new();
        for b in current {
            if !seen.insert(b.id) {
                continue;
            }
            match self.brokers.get(&b.id) {
                None => change.new.push(b.clone()),
                Some(old) if b.epoch > old.epoch => change.bounced.push(b.clone()),
                Some(_) => {}
            }
        }
        change.dead = self
            .brokers
            .keys()
            .copied()
            .filter(|id| !seen.contains(id))
            .collect();
        change
    }

    /// Applies a [`BrokerChange`]: removes the dead, registers the new and the bounced (with
    /// their new epochs; a bounced broker is no longer shutting down).
    pub fn apply_broker_change(&mut self, change: &BrokerChange) {
        for id in &change.dead {
            self.remove_live_broker(*id);
        }
        for b in &change.bounced {
            self.remove_live_broker(b.id);
            self.add_live_broker(b.clone());
        }
        for b in &change.new {
            self.add_live_broker(b.clone());
        }
    }

    /// Marks a live broker as shutting down (controlled shutdown).
    pub fn mark_shutting_down(&mut self, id: BrokerId) {
        if self.brokers.contains_key(&id) {
            self.shutting_down.insert(id);
            self.live.remove(&id);
        }
    }

    /// The registered broker `id`, live or shutting down.
    pub fn broker(&self, id: BrokerId) -> Option<&BrokerInfo> {
        self.brokers.get(&id)
    }

    /// The epoch of broker `id`, or -1 (unknown, bypasses the broker's check) if not live.
    pub fn broker_epoch(&self, id: BrokerId) -> i64 {
        self.brokers.get(&id).map_or(-1, |b| b.epoch)
    }

    /// Live brokers that are not shutting down (`liveBrokerIds`).
    pub fn live_broker_ids(&self) -> &BTreeSet<BrokerId> {
        &self.live
    }

    /// Every registered broker, shutting down or not (`liveOrShuttingDownBrokerIds`).
    pub fn live_or_shutting_down_broker_ids(&self) -> BTreeSet<BrokerId> {
        self.brokers.keys().copied().collect()
    }

    /// Every registered broker's info, ordered by id.
    pub fn live_or_shutting_down_brokers(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers.values()
    }

    /// Brokers in controlled shutdown.
    pub fn shutting_down_broker_ids(&self) -> &BTreeSet<BrokerId> {
        &self.shutting_down
    }

    /// True if `id` is live and not shutting down.
    pub fn is_broker_live(&self, id: BrokerId) -> bool {
        self.live.contains(&id)
    }

    /// True if `id` is registered (live or shutting down).
    pub fn is_live_or_shutting_down(&self, id: BrokerId) -> bool {
        self.brokers.contains_key(&id)
    }

    /// `isReplicaOnline`: the replica's broker is live (shutting-down brokers count only when
    /// `include_shutting_down`).
    pub fn is_replica_online(&self, replica: BrokerId, include_shutting_down: bool) -> bool {
        if include_shutting_down {
            self.is_live_or_shutting_down(replica)
        } else {
            self.is_broker_live(replica)
        }
    }

    /// Kafka's `isReplicaOnline(broker, partition)`: the broker is live (or shutting down,
    /// with `include_shutting_down`) and has not reported this partition's replica on a failed
    /// log directory.
    pub fn is_replica_online_for(
        &self,
        tp: &TopicPartition,
        replica: BrokerId,
        include_shutting_down: bool,
    ) -> bool {
        self.is_replica_online(replica, include_shutting_down)
            && !self
                .replicas_on_offline_dirs
                .get(&replica)
                .is_some_and(|s| s.contains(tp))
    }

    /// The live brokers whose replica of `tp` is online (not on a failed log directory).
    pub fn live_broker_ids_for(
        &self,
        tp: &TopicPartition,
    ) -> std::borrow::Cow<'_, BTreeSet<BrokerId>> {
        if self
            .replicas_on_offline_dirs
            .values()
            .any(|s| s.contains(tp))
        {
            std::borrow::Cow::Owned(
                self.live
                    .iter()
                    .copied()
                    .filter(|b| self.is_replica_online_for(tp, *b, false))
                    .collect(),
            )
        } else {
            std::borrow::Cow::Borrowed(&self.live)
        }
    }

    /// The partitions broker `broker` reported on failed log directories.
    pub fn replicas_on_offline_dirs(&self, broker: BrokerId) -> Option<&BTreeSet<TopicPartition>> {
        self.replicas_on_offline_dirs.get(&broker)
    }

    /// Replaces the partitions broker `broker` has on failed log directories (none: forgets
    /// the broker, as when it starts again or dies).
    pub fn set_replicas_on_offline_dirs(
        &mut self,
        broker: BrokerId,
        partitions: BTreeSet<TopicPartition>,
    ) {
        if partitions.is_empty() {
            self.replicas_on_offline_dirs.remove(&broker);
        } else {
            self.replicas_on_offline_dirs.insert(broker, partitions);
        }
    }

    // ---- topics and assignments ----------------------------------------------------------

    /// Sets the whole assignment of a topic (as loaded from `/brokers/topics/<t>`).
    pub fn set_topic_assignment(
        &mut self,
        topic: impl Into<Arc<str>>,
        partitions: BTreeMap<i32, ReplicaAssignment>,
    ) {
        self.assignments.insert(topic.into(), partitions);
    }

    /// Sets the assignment of one partition.
    pub fn set_partition_assignment(&mut self, tp: &TopicPartition, assignment: ReplicaAssignment) {
        self.assignments
            .entry(tp.topic.clone())
            .or_default()
            .insert(tp.partition, assignment);
    }

    /// The full assignment of a partition, if the partition exists.
    pub fn partition_assignment(&self, tp: &TopicPartition) -> Option<&ReplicaAssignment> {
        self.assignments.get(&tp.topic)?.get(&tp.partition)
    }

    /// The replicas of a partition (RS), empty if unknown.
    pub fn partition_replicas(&self, tp: &TopicPartition) -> Vec<BrokerId> {
        self.partition_assignment(tp)
            .map(|a| a.replicas.clone())
            .unwrap_or_default()
    }

    /// The assignment of every partition of `topic`.
    pub fn topic_assignment(&self, topic: &str) -> Option<&BTreeMap<i32, ReplicaAssignment>> {
        self.assignments.get(topic)
    }

    /// Every known topic.
    pub fn topics(&self) -> impl Iterator<Item = &str> {
        self.assignments.keys().map(|t| &**t)
    }

    /// Every partition of every topic, ordered.
    pub fn all_partitions(&self) -> Vec<TopicPartition> {
        self.assignments
            .iter()
            .flat_map(|(t, ps)| ps.keys().map(move |p| TopicPartition::new(t.clone(), *p)))
            .collect()
    }

    /// Every partition of `topic`.
    pub fn partitions_for_topic(&self, topic: &str) -> Vec<TopicPartition> {
        self.assignments
            .get_key_value(topic)
            .map(|(t, ps)| {
                ps.keys()
                    .map(|p| TopicPartition::new(t.clone(), *p))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every partition with a replica on `broker` (K1: `set_p` for a failed broker).
    pub fn partitions_on_broker(&self, broker: BrokerId) -> Vec<TopicPartition> {
        self.assignments
            .iter()
            .flat_map(|(t, ps)| {
                ps.iter()
                    .filter(move |(_, a)| a.replicas.contains(&broker))
                    .map(move |(p, _)| TopicPartition::new(t.clone(), *p))
            })
            .collect()
    }

    /// Every replica of every partition, ordered by partition, then as in the assignment.
    pub fn all_replicas(&self) -> Vec<PartitionReplica> {
        let mut out = Vec::new();
        for (t, ps) in &self.assignments {
            for (p, a) in ps {
                let tp = TopicPartition::new(t.clone(), *p);
                out.extend(
                    a.replicas
                        .iter()
                        .map(|r| PartitionReplica::new(tp.clone(), *r)),
                );
            }
        }
        out
    }

    /// Every replica hosted on any of `brokers`.
    pub fn replicas_on_brokers(&self, brokers: &BTreeSet<BrokerId>) -> Vec<PartitionReplica> {
        let mut out = Vec::new();
        for (t, ps) in &self.assignments {
            for (p, a) in ps {
                for r in a.replicas.iter().filter(|r| brokers.contains(r)) {
                    out.push(PartitionReplica::new(
                        TopicPartition::new(t.clone(), *p),
                        *r,
                    ));
                }
            }
        }
        out
    }

    /// Partitions with cached leadership whose leader is `broker`.
    pub fn partitions_led_by(&self, broker: BrokerId) -> Vec<TopicPartition> {
        self.leadership
            .iter()
            .filter(|(_, l)| l.leader == broker)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Partitions with cached leadership, and that leadership.
    pub fn leaderships(&self) -> impl Iterator<Item = (&TopicPartition, &PartitionLeadership)> {
        self.leadership.iter()
    }

    /// Forgets a topic entirely (after deletion completes).
    pub fn remove_topic(&mut self, topic: &str) {
        self.assignments.remove(topic);
        self.topic_ids.remove(topic);
        self.unclean_topics.remove(topic);
        self.topics_to_delete.remove(topic);
        self.topics_ineligible_for_deletion.remove(topic);
        self.leadership.remove_topic(topic);
        self.partition_states.remove_topic(topic);
        self.replica_states.remove_topic(topic);
        self.partitions_being_reassigned
            .retain(|tp| &*tp.topic != topic);
        for dirs in self.replicas_on_offline_dirs.values_mut() {
            dirs.retain(|tp| &*tp.topic != topic);
        }
        self.replicas_on_offline_dirs
            .retain(|_, dirs| !dirs.is_empty());
    }

    /// Records a topic's id (KIP-516; `/brokers/topics/<t>` holds it in base64).
    pub fn set_topic_id(&mut self, topic: impl Into<String>, id: Uuid) {
        self.topic_ids.insert(topic.into(), id);
    }

    /// The id of a topic, if known.
    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.topic_ids.get(topic).copied()
    }

    /// Whether some topic already has the id `id`.
    pub fn is_topic_id_in_use(&self, id: Uuid) -> bool {
        self.topic_ids.values().any(|&i| i == id)
    }

    /// Records the topic's `unclean.leader.election.enable` config (default false).
    pub fn set_unclean_leader_election(&mut self, topic: impl Into<String>, enabled: bool) {
        let topic = topic.into();
        if enabled {
            self.unclean_topics.insert(topic);
        } else {
            self.unclean_topics.remove(&topic);
        }
    }

    /// The topic's `unclean.leader.election.enable` (default false since Kafka 0.11).
    pub fn unclean_leader_election_enabled(&self, topic: &str) -> bool {
        self.unclean_topics.contains(topic)
    }

    // ---- leadership ----------------------------------------------------------------------

    /// Caches a partition's leadership (after a read or a successful write).
    pub fn put_leadership(&mut self, tp: TopicPartition, leadership: PartitionLeadership) {
        self.leadership.insert(tp, leadership);
    }

    /// The cached leadership of a partition.
    pub fn leadership(&self, tp: &TopicPartition) -> Option<&PartitionLeadership> {
        self.leadership.get(tp)
    }

    /// Drops the cached leadership of a partition.
    pub fn remove_leadership(&mut self, tp: &TopicPartition) -> Option<PartitionLeadership> {
        self.leadership.remove(tp)
    }

    // ---- states --------------------------------------------------------------------------

    /// A partition's state; partitions never seen are NonExistent.
    pub fn partition_state(&self, tp: &TopicPartition) -> PartitionState {
        self.partition_states
            .get(tp)
            .copied()
            .unwrap_or(PartitionState::NonExistent)
    }

    /// Sets a partition's state (the state machines call this; tests may too).
    pub fn put_partition_state(&mut self, tp: TopicPartition, state: PartitionState) {
        self.partition_states.insert(tp, state);
    }

    /// Partitions currently in `state`.
    pub fn partitions_in_state(&self, state: PartitionState) -> Vec<TopicPartition> {
        self.partition_states
            .iter()
            .filter(|(_, s)| **s == state)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// A replica's state; replicas never seen are NonExistent.
    pub fn replica_state(&self, r: &PartitionReplica) -> ReplicaState {
        self.replica_states
            .get(&r.tp)
            .and_then(|states| states.iter().find(|(b, _)| *b == r.replica))
            .map_or(ReplicaState::NonExistent, |(_, s)| *s)
    }

    /// Sets a replica's state.
    pub fn put_replica_state(&mut self, r: PartitionReplica, state: ReplicaState) {
        let states = self.replica_states.get_or_insert_with(&r.tp, Vec::new);
        match states.iter_mut().find(|(b, _)| *b == r.replica) {
            Some((_, s)) => *s = state,
            None => states.push((r.replica, state)),
        }
    }

    /// Forgets a replica's state (NonExistentReplica).
    pub fn remove_replica_state(&mut self, r: &PartitionReplica) {
        let Some(states) = self.replica_states.get_mut(&r.tp) else {
            return;
        };
        states.retain(|(b, _)| *b != r.replica);
        if states.is_empty() {
            self.replica_states.remove(&r.tp);
        }
    }

    // ---- deletion and reassignment bookkeeping -------------------------------------------

    /// Queues a topic for deletion (K2.1, only when `delete.topic.enable`).
    pub fn queue_topic_for_deletion(&mut self, topic: impl Into<String>) {
        self.topics_to_delete.insert(topic.into());
    }

    /// True if the topic is queued for deletion.
    pub fn is_topic_queued_for_deletion(&self, topic: &str) -> bool {
        self.topics_to_delete.contains(topic)
    }

    /// Topics queued for deletion.
    pub fn topics_to_delete(&self) -> &BTreeSet<String> {
        &self.topics_to_delete
    }

    /// Marks a queued topic as (in)eligible for deletion progress.
    pub fn set_topic_ineligible_for_deletion(&mut self, topic: &str, ineligible: bool) {
        if ineligible {
            self.topics_ineligible_for_deletion.insert(topic.to_owned());
        } else {
            self.topics_ineligible_for_deletion.remove(topic);
        }
    }

    /// True if deletion of the topic is paused.
    pub fn is_topic_ineligible_for_deletion(&self, topic: &str) -> bool {
        self.topics_ineligible_for_deletion.contains(topic)
    }

    /// Records that a partition is being reassigned.
    pub fn mark_being_reassigned(&mut self, tp: TopicPartition, being: bool) {
        if being {
            self.partitions_being_reassigned.insert(tp);
        } else {
            self.partitions_being_reassigned.remove(&tp);
        }
    }

    /// Partitions being reassigned.
    pub fn partitions_being_reassigned(&self) -> &BTreeSet<TopicPartition> {
        &self.partitions_being_reassigned
    }
}
