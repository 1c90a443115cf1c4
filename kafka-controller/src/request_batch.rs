//! Controller → broker request batching (Kafka's `ControllerBrokerRequestBatch`, K1.4).
//!
//! One batch is filled by one state-machine pass and then drained with
//! [`ControllerBrokerRequestBatch::send_requests`], which yields, per broker, at most one
//! LeaderAndIsr, one UpdateMetadata and one StopReplica, in that order. The requests are an
//! internal model; converting them to `kafka-wire` messages is a thin layer on top.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_wire::Uuid;
use smallvec::SmallVec;

use crate::context::{
    BrokerId, BrokerInfo, ControllerContext, LeaderRecoveryState, PartitionLeadership,
    ReplicaAssignment, TopicPartition, EPOCH_DURING_DELETE, LEADER_DURING_DELETE, NO_EPOCH,
};
use crate::partition_map::PartitionMap;

/// Broker ids in a request's partition state (replicas, ISR, …): held inline up to four, so
/// the usual replication factors cost no allocation to build, copy or drop (the same
/// representation as the wire's `Int32Array`).
pub type BrokerList = SmallVec<[BrokerId; 4]>;

/// The state of one partition in a LeaderAndIsr request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrPartitionState {
    /// The partition.
    pub tp: TopicPartition,
    /// The epoch of the controller that made the leadership decision.
    pub controller_epoch: i32,
    /// The leader.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The ISR.
    pub isr: BrokerList,
    /// The state znode version (`PartitionEpoch` / `ZkVersion`).
    pub partition_epoch: i32,
    /// All replicas (RS).
    pub replicas: BrokerList,
    /// Replicas being added by a reassignment.
    pub adding_replicas: BrokerList,
    /// Replicas being removed by a reassignment.
    pub removing_replicas: BrokerList,
    /// True if the replica is new (create it rather than look for it on an offline log dir).
    pub is_new: bool,
    /// KIP-704 leader recovery state.
    pub leader_recovery_state: LeaderRecoveryState,
}

/// The state of one partition in an UpdateMetadata request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataPartitionState {
    /// The partition.
    pub tp: TopicPartition,
    /// The epoch of the controller that made the leadership decision.
    pub controller_epoch: i32,
    /// The leader, or [`LEADER_DURING_DELETE`] for topics being deleted.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The ISR.
    pub isr: BrokerList,
    /// The state znode version.
    pub zk_version: i32,
    /// All replicas.
    pub replicas: BrokerList,
    /// Replicas whose broker is not live.
    pub offline_replicas: BrokerList,
}

/// The state of one partition in a StopReplica request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReplicaPartitionState {
    /// The partition.
    pub tp: TopicPartition,
    /// The leader epoch: [`EPOCH_DURING_DELETE`] for topics being deleted, [`NO_EPOCH`] when
    /// unknown.
    pub leader_epoch: i32,
    /// Delete the replica's data.
    pub delete: bool,
}

/// The fields every control request carries (Kafka's `AbstractControlRequest`: controller id, controller epoch, broker epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlHeader {
    /// The controller's broker id.
    pub controller_id: BrokerId,
    /// The controller epoch.
    pub controller_epoch: i32,
    /// The target broker's epoch (-1: unknown).
    pub broker_epoch: i64,
}

/// A control request for one broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlRequest {
    /// LeaderAndIsr.
    LeaderAndIsr {
        /// Controller id / epoch and the broker's epoch.
        header: ControlHeader,
        /// Partition states, ordered by partition.
        partitions: Vec<LeaderAndIsrPartitionState>,
        /// Topic ids of the topics named (KIP-516), where known.
        topic_ids: BTreeMap<Arc<str>, Uuid>,
        /// The brokers leading the partitions named (`liveLeaders`).
        live_leaders: Vec<BrokerInfo>,
    },
    /// UpdateMetadata.
    UpdateMetadata {
        /// Controller id / epoch and the broker's epoch.
        header: ControlHeader,
        /// Partition states (possibly none); shared by the UpdateMetadata of every broker in
        /// the pass.
        partitions: Arc<[UpdateMetadataPartitionState]>,
        /// Topic ids of the topics named (KIP-516), where known.
        topic_ids: BTreeMap<Arc<str>, Uuid>,
        /// Every live-or-shutting-down broker.
        live_brokers: Arc<[BrokerInfo]>,
    },
    /// StopReplica.
    StopReplica {
        /// Controller id / epoch and the broker's epoch.
        header: ControlHeader,
        /// Partitions to stop.
        partitions: Vec<StopReplicaPartitionState>,
    },
}

impl ControlRequest {
    /// The request's header.
    pub fn header(&self) -> &ControlHeader {
        match self {
            Self::LeaderAndIsr { header, .. }
            | Self::UpdateMetadata { header, .. }
            | Self::StopReplica { header, .. } => header,
        }
    }
}

/// A control request addressed to a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRequest {
    /// The destination broker.
    pub broker: BrokerId,
    /// The request.
    pub request: ControlRequest,
}

/// The ids of the topics named by `topics` (partitions in order, so a topic's partitions
/// come together: it is looked up once per run, not once per partition).
fn topic_ids_of<'a>(
    ctx: &ControllerContext,
    topics: impl Iterator<Item = &'a Arc<str>>,
) -> BTreeMap<Arc<str>, Uuid> {
    let mut out = BTreeMap::new();
    let mut last: Option<&Arc<str>> = None;
    for t in topics {
        if last.is_some_and(|l| Arc::ptr_eq(l, t) || l == t) {
            continue;
        }
        last = Some(t);
        if let Some(id) = ctx.topic_id(t) {
            out.insert(t.clone(), id);
        }
    }
    out
}

/// `newBatch()` was called on a batch that was not drained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("controller request batch is not empty: a previous pass was not sent")]
pub struct BatchNotEmpty;

/// A LeaderAndIsr state queued for some brokers: the state is built once, whatever the
/// number of brokers it goes to.
#[derive(Clone, Debug)]
struct QueuedLeaderAndIsr {
    /// The state (its `is_new` is unused: each recipient has its own).
    state: LeaderAndIsrPartitionState,
    /// The brokers it goes to, ascending, each with its OR-merged `is_new`.
    recipients: SmallVec<[(BrokerId, bool); 4]>,
}

impl QueuedLeaderAndIsr {
    /// True if the state is what the context now holds for the partition.
    fn is_current(&self, lead: &PartitionLeadership, assignment: &ReplicaAssignment) -> bool {
        let s = &self.state;
        s.controller_epoch == lead.controller_epoch
            && s.leader == lead.leader
            && s.leader_epoch == lead.leader_epoch
            && s.partition_epoch == lead.partition_epoch
            && s.leader_recovery_state == lead.leader_recovery_state
            && s.isr[..] == lead.isr[..]
            && s.replicas[..] == assignment.replicas[..]
            && s.adding_replicas[..] == assignment.adding_replicas[..]
            && s.removing_replicas[..] == assignment.removing_replicas[..]
    }
}

/// Requests accumulated by one state-machine pass.
#[derive(Clone, Debug, Default)]
pub struct ControllerBrokerRequestBatch {
    /// Per partition, the LeaderAndIsr states queued. Each broker gets the state of the last
    /// call that named it, so there is one entry unless the context changed between two
    /// calls for the partition (then the brokers of the later call move to a newer entry).
    leader_and_isr: PartitionMap<SmallVec<[QueuedLeaderAndIsr; 1]>>,
    stop_replica: BTreeMap<BrokerId, PartitionMap<StopReplicaPartitionState>>,
    update_metadata_brokers: BTreeSet<BrokerId>,
    update_metadata_partitions: PartitionMap<UpdateMetadataPartitionState>,
}

impl ControllerBrokerRequestBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.leader_and_isr.is_empty()
            && self.stop_replica.is_empty()
            && self.update_metadata_brokers.is_empty()
            && self.update_metadata_partitions.is_empty()
    }

    /// `newBatch()`: refuses if the previous pass left requests unsent.
    pub fn new_batch(&self) -> Result<(), BatchNotEmpty> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(BatchNotEmpty)
        }
    }

    /// Drops everything queued (after a failed pass, e.g. on resignation).
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Makes room for one more LeaderAndIsr state per occurrence of a broker in `brokers`
    /// (a pass about to queue many: the partition map grows once, not by doubling, to at
    /// least as many partitions as the broker named most often).
    pub fn reserve_leader_and_isr(&mut self, brokers: impl IntoIterator<Item = BrokerId>) {
        let mut counts: BTreeMap<BrokerId, usize> = BTreeMap::new();
        for b in brokers.into_iter().filter(|b| *b >= 0) {
            *counts.entry(b).or_default() += 1;
        }
        if let Some(most) = counts.into_values().max() {
            self.leader_and_isr.reserve(most);
        }
    }

    /// Queues a LeaderAndIsr for `tp` to `brokers` (negative ids ignored) carrying the
    /// context's cached leadership and full assignment; `is_new` is OR-merged with what is
    /// already queued. Also queues `tp` in UpdateMetadata for every live-or-shutting-down
    /// broker. Does nothing if the context has no leadership for `tp`.
    pub fn add_leader_and_isr(
        &mut self,
        ctx: &ControllerContext,
        brokers: &[BrokerId],
        tp: &TopicPartition,
        is_new: bool,
    ) {
        let Some(lead) = ctx.leadership(tp) else {
            return;
        };
        let empty = ReplicaAssignment::default();
        let assignment = ctx.partition_assignment(tp).unwrap_or(&empty);
        if brokers.iter().any(|b| *b >= 0) {
            let queued = self.leader_and_isr.get_or_insert_with(tp, SmallVec::new);
            if !queued
                .last()
                .is_some_and(|q| q.is_current(lead, assignment))
            {
                queued.push(QueuedLeaderAndIsr {
                    state: LeaderAndIsrPartitionState {
                        tp: tp.clone(),
                        controller_epoch: lead.controller_epoch,
                        leader: lead.leader,
                        leader_epoch: lead.leader_epoch,
                        isr: BrokerList::from_slice(&lead.isr),
                        partition_epoch: lead.partition_epoch,
                        replicas: BrokerList::from_slice(&assignment.replicas),
                        adding_replicas: BrokerList::from_slice(&assignment.adding_replicas),
                        removing_replicas: BrokerList::from_slice(&assignment.removing_replicas),
                        is_new: false,
                        leader_recovery_state: lead.leader_recovery_state,
                    },
                    recipients: SmallVec::new(),
                });
            }
            let Some((current, older)) = queued.split_last_mut() else {
                return; // unreachable: an entry was just pushed
            };
            for &b in brokers.iter().filter(|b| **b >= 0) {
                // A broker named before keeps its `is_new` and takes the current state.
                let mut merged = is_new;
                for q in older.iter_mut() {
                    if let Ok(i) = q.recipients.binary_search_by_key(&b, |r| r.0) {
                        merged |= q.recipients.remove(i).1;
                    }
                }
                match current.recipients.binary_search_by_key(&b, |r| r.0) {
                    Ok(i) => current.recipients[i].1 |= merged,
                    Err(i) => current.recipients.insert(i, (b, merged)),
                }
            }
            if !older.is_empty() {
                queued.retain(|q| !q.recipients.is_empty());
            }
        }
        for b in ctx.live_or_shutting_down_brokers() {
            if !self.update_metadata_brokers.contains(&b.id) {
                self.update_metadata_brokers.insert(b.id);
            }
        }
        self.add_update_metadata_partition(ctx, tp, lead, &assignment.replicas);
    }

    /// Queues a StopReplica for `tp` to `brokers`; `delete` is OR-merged. The leader epoch is
    /// -2 for a topic being deleted, else the cached leader epoch, else -1.
    pub fn add_stop_replica(
        &mut self,
        ctx: &ControllerContext,
        brokers: &[BrokerId],
        tp: &TopicPartition,
        delete: bool,
    ) {
        let leader_epoch = if ctx.is_topic_queued_for_deletion(&tp.topic) {
            EPOCH_DURING_DELETE
        } else {
            ctx.leadership(tp).map_or(NO_EPOCH, |l| l.leader_epoch)
        };
        for &b in brokers.iter().filter(|b| **b >= 0) {
            let per_broker = self.stop_replica.entry(b).or_default();
            let already_delete = per_broker.get(tp).is_some_and(|s| s.delete);
            per_broker.insert(
                tp.clone(),
                StopReplicaPartitionState {
                    tp: tp.clone(),
                    leader_epoch,
                    delete: delete || already_delete,
                },
            );
        }
    }

    /// UpdateMetadata for `partitions` to every live or shutting-down broker (Kafka's
    /// `sendUpdateMetadataRequest(liveOrShuttingDownBrokerIds, partitions)`); no partitions
    /// sends the broker list alone.
    pub fn add_update_metadata_to_all(
        &mut self,
        ctx: &ControllerContext,
        partitions: &[TopicPartition],
    ) {
        self.update_metadata_brokers
            .extend(ctx.live_or_shutting_down_brokers().map(|b| b.id));
        self.add_update_metadata_partitions(ctx, partitions);
    }

    /// Queues UpdateMetadata to `brokers` with `partitions` (those with cached leadership;
    /// topics being deleted get leader -2). With no partitions it still queues a request
    /// carrying the live broker list (K5.1, K6 failover).
    pub fn add_update_metadata(
        &mut self,
        ctx: &ControllerContext,
        brokers: &[BrokerId],
        partitions: &[TopicPartition],
    ) {
        self.update_metadata_brokers
            .extend(brokers.iter().copied().filter(|b| *b >= 0));
        self.add_update_metadata_partitions(ctx, partitions);
    }

    /// The partition states of an UpdateMetadata, for whichever brokers it goes to.
    fn add_update_metadata_partitions(
        &mut self,
        ctx: &ControllerContext,
        partitions: &[TopicPartition],
    ) {
        let empty = ReplicaAssignment::default();
        for tp in partitions {
            let Some(lead) = ctx.leadership(tp) else {
                continue;
            };
            let replicas = &ctx.partition_assignment(tp).unwrap_or(&empty).replicas;
            self.add_update_metadata_partition(ctx, tp, lead, replicas);
        }
    }

    /// The UpdateMetadata state of `tp` from its cached leadership `lead` and its replicas.
    fn add_update_metadata_partition(
        &mut self,
        ctx: &ControllerContext,
        tp: &TopicPartition,
        lead: &PartitionLeadership,
        replicas: &[BrokerId],
    ) {
        {
            let offline = |r: &BrokerId| !ctx.is_replica_online_for(tp, *r, false);
            let leader = if ctx.is_topic_queued_for_deletion(&tp.topic) {
                LEADER_DURING_DELETE
            } else {
                lead.leader
            };
            match self.update_metadata_partitions.get_mut(tp) {
                // Queued already in this pass: refresh it in place (no new allocations).
                Some(s) => {
                    s.controller_epoch = lead.controller_epoch;
                    s.leader = leader;
                    s.leader_epoch = lead.leader_epoch;
                    s.isr.clear();
                    s.isr.extend_from_slice(&lead.isr);
                    s.zk_version = lead.partition_epoch;
                    s.replicas.clear();
                    s.replicas.extend_from_slice(replicas);
                    s.offline_replicas.clear();
                    s.offline_replicas
                        .extend(replicas.iter().copied().filter(offline));
                }
                None => {
                    self.update_metadata_partitions.insert(
                        tp.clone(),
                        UpdateMetadataPartitionState {
                            tp: tp.clone(),
                            controller_epoch: lead.controller_epoch,
                            leader,
                            leader_epoch: lead.leader_epoch,
                            isr: BrokerList::from_slice(&lead.isr),
                            zk_version: lead.partition_epoch,
                            replicas: BrokerList::from_slice(replicas),
                            offline_replicas: replicas.iter().copied().filter(offline).collect(),
                        },
                    );
                }
            }
        }
    }

    /// `sendRequestsToBrokers`: drains the batch into requests, in the order LeaderAndIsr (all
    /// brokers), UpdateMetadata, StopReplica, so that each broker's FIFO sees them in that
    /// order. Only live-or-shutting-down brokers receive anything; every request carries the
    /// controller id and epoch and the target broker's epoch.
    #[must_use = "the batch is drained: dropped requests are never sent"]
    pub fn send_requests(&mut self, ctx: &ControllerContext) -> Vec<BrokerRequest> {
        let batch = std::mem::take(self);
        let header = |broker: BrokerId| ControlHeader {
            controller_id: ctx.controller_id,
            controller_epoch: ctx.epoch,
            broker_epoch: ctx.broker_epoch(broker),
        };
        let mut out = Vec::new();
        // Each live broker's states, in partition order: one walk over the partitions, each
        // state copied once per recipient but the last, which takes it.
        let mut per_broker: Vec<(BrokerId, Vec<LeaderAndIsrPartitionState>)> = Vec::new();
        let queued: Vec<SmallVec<[QueuedLeaderAndIsr; 1]>> =
            batch.leader_and_isr.into_values().collect();
        for q in queued.iter().flatten() {
            for &(b, _) in &q.recipients {
                if let Err(i) = per_broker.binary_search_by_key(&b, |e| e.0) {
                    per_broker.insert(i, (b, Vec::new()));
                }
            }
        }
        // Exact capacities: count first, then fill.
        per_broker.retain(|(b, _)| ctx.is_live_or_shutting_down(*b));
        let mut counts = vec![0usize; per_broker.len()];
        for q in queued.iter().flatten() {
            for &(b, _) in &q.recipients {
                if let Ok(i) = per_broker.binary_search_by_key(&b, |e| e.0) {
                    counts[i] += 1;
                }
            }
        }
        for ((_, states), n) in per_broker.iter_mut().zip(counts) {
            states.reserve_exact(n);
        }
        for q in queued.into_iter().flatten() {
            let live: SmallVec<[(usize, bool); 4]> = q
                .recipients
                .iter()
                .filter_map(|&(b, is_new)| {
                    per_broker
                        .binary_search_by_key(&b, |e| e.0)
                        .ok()
                        .map(|i| (i, is_new))
                })
                .collect();
            let Some((&(last, last_is_new), rest)) = live.split_last() else {
                continue;
            };
            for &(i, is_new) in rest {
                let mut s = q.state.clone();
                s.is_new = is_new;
                per_broker[i].1.push(s);
            }
            let mut s = q.state;
            s.is_new = last_is_new;
            per_broker[last].1.push(s);
        }
        for (broker, partitions) in per_broker {
            let leaders: BTreeSet<BrokerId> = partitions.iter().map(|p| p.leader).collect();
            let live_leaders = leaders
                .into_iter()
                .filter_map(|l| ctx.broker(l).cloned())
                .collect();
            let topic_ids = topic_ids_of(ctx, partitions.iter().map(|p| &p.tp.topic));
            out.push(BrokerRequest {
                broker,
                request: ControlRequest::LeaderAndIsr {
                    header: header(broker),
                    partitions,
                    topic_ids,
                    live_leaders,
                },
            });
        }
        let live_brokers: Arc<[BrokerInfo]> =
            ctx.live_or_shutting_down_brokers().cloned().collect();
        let um_partitions: Arc<[UpdateMetadataPartitionState]> =
            batch.update_metadata_partitions.into_values().collect();
        let um_topic_ids = topic_ids_of(ctx, um_partitions.iter().map(|p| &p.tp.topic));
        for broker in batch.update_metadata_brokers {
            if !ctx.is_live_or_shutting_down(broker) {
                continue;
            }
            out.push(BrokerRequest {
                broker,
                request: ControlRequest::UpdateMetadata {
                    header: header(broker),
                    partitions: um_partitions.clone(),
                    topic_ids: um_topic_ids.clone(),
                    live_brokers: live_brokers.clone(),
                },
            });
        }
        for (broker, parts) in batch.stop_replica {
            if !ctx.is_live_or_shutting_down(broker) {
                continue;
            }
            out.push(BrokerRequest {
                broker,
                request: ControlRequest::StopReplica {
                    header: header(broker),
                    partitions: parts.into_values().collect(),
                },
            });
        }
        out
    }
}

// ---- conversion to kafka-wire messages ----------------------------------------------------

use kafka_wire::messages::leader_and_isr_request as lai;
use kafka_wire::messages::stop_replica_request as sr;
use kafka_wire::messages::update_metadata_request as um;
use kafka_wire::{Message, RequestBody};

/// The wire versions the controller speaks to brokers (chosen from the inter-broker protocol
/// version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlVersions {
    /// LeaderAndIsr version.
    pub leader_and_isr: i16,
    /// UpdateMetadata version.
    pub update_metadata: i16,
    /// StopReplica version.
    pub stop_replica: i16,
}

impl ControlVersions {
    /// What a Kafka 2.8 controller sends (IBP 2.8): LeaderAndIsr v5, UpdateMetadata v7,
    /// StopReplica v3.
    pub const KAFKA_2_8: Self = Self {
        leader_and_isr: 5,
        update_metadata: 7,
        stop_replica: 3,
    };
    /// What a ZooKeeper-mode Kafka 3.9 controller sends without migration: LeaderAndIsr v6
    /// (KIP-704 leader recovery state), UpdateMetadata v7, StopReplica v3.
    pub const KAFKA_3_9: Self = Self {
        leader_and_isr: 6,
        update_metadata: 7,
        stop_replica: 3,
    };
}

/// Why a control request cannot be put on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireConversionError {
    /// The requested version does not exist for the message.
    #[error("{message} has no version {version}")]
    UnsupportedVersion {
        /// The message name.
        message: &'static str,
        /// The requested version.
        version: i16,
    },
}

fn check_version<M: Message>(
    message: &'static str,
    version: i16,
) -> Result<(), WireConversionError> {
    if (M::MIN_VERSION..=M::MAX_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(WireConversionError::UnsupportedVersion { message, version })
    }
}

/// Groups consecutive items by topic (the partitions of a request are ordered by topic).
fn by_topic<T>(items: &[T], topic: impl Fn(&T) -> &str) -> Vec<(&str, Vec<&T>)> {
    let mut out: Vec<(&str, Vec<&T>)> = Vec::new();
    for item in items {
        match out.last_mut() {
            Some((t, group)) if *t == topic(item) => group.push(item),
            _ => out.push((topic(item), vec![item])),
        }
    }
    out
}

impl ControlRequest {
    /// Converts to `kafka-wire` request bodies at `versions`, filling only the fields each
    /// version carries. Live leaders and UpdateMetadata v0 brokers use the endpoint of
    /// `listener` (the inter-broker listener), else a broker's first endpoint; a live leader
    /// without any endpoint is left out. StopReplica below v3 cannot mix delete flags, so it
    /// becomes one request per flag (Kafka does the same); every other request stays one.
    pub fn to_wire(
        &self,
        versions: ControlVersions,
        listener: &str,
    ) -> Result<Vec<(i16, RequestBody)>, WireConversionError> {
        match self {
            Self::LeaderAndIsr {
                header,
                partitions,
                topic_ids,
                live_leaders,
            } => {
                let v = versions.leader_and_isr;
                check_version::<kafka_wire::messages::LeaderAndIsrRequest>("LeaderAndIsr", v)?;
                let state = |p: &LeaderAndIsrPartitionState| lai::LeaderAndIsrPartitionState {
                    topic_name: if v <= 1 {
                        bytestring::ByteString::from(&*p.tp.topic)
                    } else {
                        Default::default()
                    },
                    partition_index: p.tp.partition,
                    controller_epoch: p.controller_epoch,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr.clone(),
                    partition_epoch: p.partition_epoch,
                    replicas: p.replicas.clone(),
                    adding_replicas: if v >= 3 {
                        p.adding_replicas.clone()
                    } else {
                        Vec::new().into()
                    },
                    removing_replicas: if v >= 3 {
                        p.removing_replicas.clone()
                    } else {
                        Vec::new().into()
                    },
                    is_new: v >= 1 && p.is_new,
                    leader_recovery_state: match p.leader_recovery_state {
                        LeaderRecoveryState::Recovering if v >= 6 => 1,
                        _ => 0,
                    },
                    unknown_tagged_fields: Default::default(),
                };
                let mut req = kafka_wire::messages::LeaderAndIsrRequest {
                    controller_id: header.controller_id,
                    controller_epoch: header.controller_epoch,
                    broker_epoch: if v >= 2 { header.broker_epoch } else { -1 },
                    ..Default::default()
                };
                if v <= 1 {
                    req.ungrouped_partition_states = partitions.iter().map(state).collect();
                } else {
                    req.topic_states = by_topic(partitions, |p| &*p.tp.topic)
                        .into_iter()
                        .map(|(topic, ps)| lai::LeaderAndIsrTopicState {
                            topic_name: topic.into(),
                            topic_id: if v >= 5 {
                                topic_ids.get(topic).copied().unwrap_or(Uuid::ZERO)
                            } else {
                                Uuid::ZERO
                            },
                            partition_states: ps.into_iter().map(state).collect(),
                            unknown_tagged_fields: Default::default(),
                        })
                        .collect();
                }
                req.live_leaders = live_leaders
                    .iter()
                    .filter_map(|b| {
                        b.endpoint(listener).map(|e| lai::LeaderAndIsrLiveLeader {
                            broker_id: b.id,
                            host_name: e.host.as_str().into(),
                            port: e.port,
                            unknown_tagged_fields: Default::default(),
                        })
                    })
                    .collect();
                Ok(vec![(v, RequestBody::LeaderAndIsr(req))])
            }
            Self::UpdateMetadata {
                header,
                partitions,
                topic_ids,
                live_brokers,
            } => {
                let v = versions.update_metadata;
                check_version::<kafka_wire::messages::UpdateMetadataRequest>("UpdateMetadata", v)?;
                let state = |p: &UpdateMetadataPartitionState| um::UpdateMetadataPartitionState {
                    topic_name: if v <= 4 {
                        bytestring::ByteString::from(&*p.tp.topic)
                    } else {
                        Default::default()
                    },
                    partition_index: p.tp.partition,
                    controller_epoch: p.controller_epoch,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr.clone(),
                    zk_version: p.zk_version,
                    replicas: p.replicas.clone(),
                    offline_replicas: if v >= 4 {
                        p.offline_replicas.clone()
                    } else {
                        Vec::new().into()
                    },
                    unknown_tagged_fields: Default::default(),
                };
                let mut req = kafka_wire::messages::UpdateMetadataRequest {
                    controller_id: header.controller_id,
                    controller_epoch: header.controller_epoch,
                    broker_epoch: if v >= 5 { header.broker_epoch } else { -1 },
                    ..Default::default()
                };
                if v <= 4 {
                    req.ungrouped_partition_states = partitions.iter().map(state).collect();
                } else {
                    req.topic_states = by_topic(partitions, |p| &*p.tp.topic)
                        .into_iter()
                        .map(|(topic, ps)| um::UpdateMetadataTopicState {
                            topic_name: topic.into(),
                            topic_id: if v >= 7 {
                                topic_ids.get(topic).copied().unwrap_or(Uuid::ZERO)
                            } else {
                                Uuid::ZERO
                            },
                            partition_states: ps.into_iter().map(state).collect(),
                            unknown_tagged_fields: Default::default(),
                        })
                        .collect();
                }
                req.live_brokers = live_brokers
                    .iter()
                    .map(|b| {
                        let mut broker = um::UpdateMetadataBroker {
                            id: b.id,
                            ..Default::default()
                        };
                        if v >= 2 {
                            broker.rack = b.rack.as_deref().map(Into::into);
                        }
                        if v == 0 {
                            if let Some(e) = b.endpoint(listener) {
                                broker.v0_host = e.host.as_str().into();
                                broker.v0_port = e.port;
                            }
                        } else {
                            broker.endpoints = b
                                .endpoints
                                .iter()
                                .map(|e| um::UpdateMetadataEndpoint {
                                    port: e.port,
                                    host: e.host.as_str().into(),
                                    listener: if v >= 3 {
                                        e.listener.as_str().into()
                                    } else {
                                        Default::default()
                                    },
                                    security_protocol: e.security_protocol,
                                    unknown_tagged_fields: Default::default(),
                                })
                                .collect();
                        }
                        broker
                    })
                    .collect();
                Ok(vec![(v, RequestBody::UpdateMetadata(req))])
            }
            Self::StopReplica { header, partitions } => {
                let v = versions.stop_replica;
                check_version::<kafka_wire::messages::StopReplicaRequest>("StopReplica", v)?;
                let base = kafka_wire::messages::StopReplicaRequest {
                    controller_id: header.controller_id,
                    controller_epoch: header.controller_epoch,
                    broker_epoch: if v >= 1 { header.broker_epoch } else { -1 },
                    ..Default::default()
                };
                if v >= 3 {
                    let mut req = base;
                    req.topic_states = by_topic(partitions, |p| &*p.tp.topic)
                        .into_iter()
                        .map(|(topic, ps)| sr::StopReplicaTopicState {
                            topic_name: topic.into(),
                            partition_states: ps
                                .into_iter()
                                .map(|p| sr::StopReplicaPartitionState {
                                    partition_index: p.tp.partition,
                                    leader_epoch: p.leader_epoch,
                                    delete_partition: p.delete,
                                    unknown_tagged_fields: Default::default(),
                                })
                                .collect(),
                            unknown_tagged_fields: Default::default(),
                        })
                        .collect();
                    return Ok(vec![(v, RequestBody::StopReplica(req))]);
                }
                let mut out = Vec::new();
                for delete in [false, true] {
                    let group: Vec<StopReplicaPartitionState> = partitions
                        .iter()
                        .filter(|p| p.delete == delete)
                        .cloned()
                        .collect();
                    if group.is_empty() {
                        continue;
                    }
                    let mut req = base.clone();
                    req.delete_partitions = delete;
                    if v == 0 {
                        req.ungrouped_partitions = group
                            .iter()
                            .map(|p| sr::StopReplicaPartitionV0 {
                                topic_name: bytestring::ByteString::from(&*p.tp.topic),
                                partition_index: p.tp.partition,
                                unknown_tagged_fields: Default::default(),
                            })
                            .collect();
                    } else {
                        req.topics = by_topic(&group, |p| &*p.tp.topic)
                            .into_iter()
                            .map(|(topic, ps)| sr::StopReplicaTopicV1 {
                                name: topic.into(),
                                partition_indexes: ps.into_iter().map(|p| p.tp.partition).collect(),
                                unknown_tagged_fields: Default::default(),
                            })
                            .collect();
                    }
                    out.push((v, RequestBody::StopReplica(req)));
                }
                Ok(out)
            }
        }
    }
}
