//! Controller → broker request batching (`ControllerBrokerRequestBatch`, KAFKA-NOTES §6, K1.4).
//!
//! One batch is filled by one state-machine pass and then drained with
//! [`ControllerBrokerRequestBatch::send_requests`], which yields, per broker, at most one
//! LeaderAndIsr, one UpdateMetadata and one StopReplica, in that order. The requests are an
//! internal model; converting them to `kafka-wire` messages is a thin layer on top.

use std::collections::{BTreeMap, BTreeSet};

use crate::context::{
    BrokerId, BrokerInfo, ControllerContext, LeaderRecoveryState, ReplicaAssignment,
    TopicPartition, EPOCH_DURING_DELETE, LEADER_DURING_DELETE, NO_EPOCH,
};

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
    pub isr: Vec<BrokerId>,
    /// The state znode version (`PartitionEpoch` / `ZkVersion`).
    pub partition_epoch: i32,
    /// All replicas (RS).
    pub replicas: Vec<BrokerId>,
    /// Replicas being added by a reassignment.
    pub adding_replicas: Vec<BrokerId>,
    /// Replicas being removed by a reassignment.
    pub removing_replicas: Vec<BrokerId>,
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
    pub isr: Vec<BrokerId>,
    /// The state znode version.
    pub zk_version: i32,
    /// All replicas.
    pub replicas: Vec<BrokerId>,
    /// Replicas whose broker is not live.
    pub offline_replicas: Vec<BrokerId>,
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

/// The fields every control request carries (KAFKA-NOTES §4.4, §4.6).
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
        topic_ids: BTreeMap<String, String>,
        /// The brokers leading the partitions named (`liveLeaders`).
        live_leaders: Vec<BrokerInfo>,
    },
    /// UpdateMetadata.
    UpdateMetadata {
        /// Controller id / epoch and the broker's epoch.
        header: ControlHeader,
        /// Partition states (possibly none).
        partitions: Vec<UpdateMetadataPartitionState>,
        /// Every live-or-shutting-down broker.
        live_brokers: Vec<BrokerInfo>,
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

/// `newBatch()` was called on a batch that was not drained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("controller request batch is not empty: a previous pass was not sent")]
pub struct BatchNotEmpty;

/// Requests accumulated by one state-machine pass.
#[derive(Clone, Debug, Default)]
pub struct ControllerBrokerRequestBatch {
    leader_and_isr: BTreeMap<BrokerId, BTreeMap<TopicPartition, LeaderAndIsrPartitionState>>,
    stop_replica: BTreeMap<BrokerId, BTreeMap<TopicPartition, StopReplicaPartitionState>>,
    update_metadata_brokers: BTreeSet<BrokerId>,
    update_metadata_partitions: BTreeMap<TopicPartition, UpdateMetadataPartitionState>,
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
        let assignment = ctx
            .partition_assignment(tp)
            .cloned()
            .unwrap_or_else(ReplicaAssignment::default);
        for &b in brokers.iter().filter(|b| **b >= 0) {
            let per_broker = self.leader_and_isr.entry(b).or_default();
            let already_new = per_broker.get(tp).is_some_and(|s| s.is_new);
            per_broker.insert(
                tp.clone(),
                LeaderAndIsrPartitionState {
                    tp: tp.clone(),
                    controller_epoch: lead.controller_epoch,
                    leader: lead.leader,
                    leader_epoch: lead.leader_epoch,
                    isr: lead.isr.clone(),
                    partition_epoch: lead.partition_epoch,
                    replicas: assignment.replicas.clone(),
                    adding_replicas: assignment.adding_replicas.clone(),
                    removing_replicas: assignment.removing_replicas.clone(),
                    is_new: is_new || already_new,
                    leader_recovery_state: lead.leader_recovery_state,
                },
            );
        }
        self.update_metadata_brokers
            .extend(ctx.live_or_shutting_down_brokers().map(|b| b.id));
        self.add_update_metadata(ctx, &[], std::slice::from_ref(tp));
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
        for tp in partitions {
            let Some(lead) = ctx.leadership(tp) else {
                continue;
            };
            let replicas = ctx.partition_replicas(tp);
            let offline_replicas = replicas
                .iter()
                .copied()
                .filter(|r| !ctx.is_replica_online(*r, false))
                .collect();
            let leader = if ctx.is_topic_queued_for_deletion(&tp.topic) {
                LEADER_DURING_DELETE
            } else {
                lead.leader
            };
            self.update_metadata_partitions.insert(
                tp.clone(),
                UpdateMetadataPartitionState {
                    tp: tp.clone(),
                    controller_epoch: lead.controller_epoch,
                    leader,
                    leader_epoch: lead.leader_epoch,
                    isr: lead.isr.clone(),
                    zk_version: lead.partition_epoch,
                    replicas,
                    offline_replicas,
                },
            );
        }
    }

    /// `sendRequestsToBrokers`: drains the batch into requests, in the order LeaderAndIsr (all
    /// brokers), UpdateMetadata, StopReplica, so that each broker's FIFO sees them in that
    /// order. Only live-or-shutting-down brokers receive anything; every request carries the
    /// controller id and epoch and the target broker's epoch.
    pub fn send_requests(&mut self, ctx: &ControllerContext) -> Vec<BrokerRequest> {
        let batch = std::mem::take(self);
        let header = |broker: BrokerId| ControlHeader {
            controller_id: ctx.controller_id,
            controller_epoch: ctx.epoch,
            broker_epoch: ctx.broker_epoch(broker),
        };
        let mut out = Vec::new();
        for (broker, parts) in batch.leader_and_isr {
            if !ctx.is_live_or_shutting_down(broker) {
                continue;
            }
            let partitions: Vec<LeaderAndIsrPartitionState> = parts.into_values().collect();
            let leaders: BTreeSet<BrokerId> = partitions.iter().map(|p| p.leader).collect();
            let live_leaders = leaders
                .into_iter()
                .filter_map(|l| ctx.broker(l).cloned())
                .collect();
            let topic_ids = partitions
                .iter()
                .filter_map(|p| {
                    ctx.topic_id(&p.tp.topic)
                        .map(|id| (p.tp.topic.clone(), id.to_owned()))
                })
                .collect();
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
        let live_brokers: Vec<BrokerInfo> = ctx.live_or_shutting_down_brokers().cloned().collect();
        let um_partitions: Vec<UpdateMetadataPartitionState> =
            batch.update_metadata_partitions.into_values().collect();
        for broker in batch.update_metadata_brokers {
            if !ctx.is_live_or_shutting_down(broker) {
                continue;
            }
            out.push(BrokerRequest {
                broker,
                request: ControlRequest::UpdateMetadata {
                    header: header(broker),
                    partitions: um_partitions.clone(),
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
