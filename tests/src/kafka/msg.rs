//! The messages of the Kafka cluster model, carried by the simulated network.

use bytes::Bytes;
use kafka_replication::epoch_cache::EpochEndOffset;
use kafka_replication::isr::{IsrProposal, IsrResult};
use kafka_replication::partition::{FetchParams, PartitionState};
use kafka_wire::error_code::ErrorCode;

/// What a leader answers to a follower's fetch.
#[derive(Debug, Clone)]
pub struct FetchReply {
    /// Whole batches.
    pub records: Bytes,
    /// The leader's high watermark.
    pub high_watermark: i64,
    /// Set when the follower's log diverges.
    pub diverging: Option<EpochEndOffset>,
}

/// One message between nodes.
#[derive(Debug, Clone)]
pub enum Msg {
    /// Controller → broker (K4), stamped with the sender's controller epoch.
    LeaderAndIsr {
        /// The sender's controller epoch (K4.1).
        controller_epoch: i32,
        /// KIP-380: the recipient's broker epoch as the controller knows it, so that a
        /// request meant for a previous incarnation is refused.
        broker_epoch: u64,
        /// The partition's leadership.
        state: PartitionState,
    },
    /// Broker → coordination: the session is alive (the ephemeral `/brokers/ids/<id>`).
    Heartbeat {
        /// KIP-380: the broker epoch of this incarnation (its registration).
        broker_epoch: u64,
    },
    /// Follower → leader (K8).
    Fetch {
        /// Request id, matched by the answer.
        id: u64,
        /// The fetch.
        params: FetchParams,
    },
    /// Leader → follower.
    FetchResp {
        /// The request id.
        id: u64,
        /// Data or an error.
        result: Result<FetchReply, ErrorCode>,
    },
    /// Follower → leader: OffsetForLeaderEpoch.
    EpochQuery {
        /// Request id.
        id: u64,
        /// The follower's current leader epoch (KIP-320 fencing).
        current_leader_epoch: i32,
        /// The epoch asked about.
        epoch: i32,
    },
    /// Leader → follower.
    EpochAnswer {
        /// The request id.
        id: u64,
        /// The largest epoch ≤ the one asked and its end offset, or an error.
        result: Result<EpochEndOffset, ErrorCode>,
    },
    /// Leader → coordination: an ISR change (a conditional write on the partition epoch).
    IsrPropose {
        /// The proposing broker's epoch (KIP-497: AlterIsr carries it, so that a change sent
        /// by an earlier incarnation of the broker is refused).
        broker_epoch: u64,
        /// The proposal.
        proposal: IsrProposal,
    },
    /// Coordination → leader.
    IsrAnswer {
        /// The proposal answered.
        proposal: IsrProposal,
        /// The store's answer.
        result: IsrResult,
    },
    /// Producer → leader: one record, acks=all; its timestamp is `seq`.
    Produce {
        /// The producer's sequence number (unique per run).
        seq: i64,
    },
    /// Leader → producer.
    ProduceResp {
        /// The sequence number.
        seq: i64,
        /// The offset written, or why not.
        result: Result<i64, ErrorCode>,
    },
    /// Consumer → leader: read from `offset` up to the high watermark.
    ConsumerFetch {
        /// The offset.
        offset: i64,
    },
    /// Leader → consumer.
    ConsumerResp {
        /// The offset asked for.
        offset: i64,
        /// Whole batches.
        records: Bytes,
    },
}
