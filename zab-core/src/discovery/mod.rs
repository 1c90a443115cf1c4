//! Discovery on the quorum port (Zab 1.0 as ZooKeeper's `Leader` and `Learner` run it): the jute `QuorumPacket` codec and the sans-IO
//! state machines with which a leader and its learners fix the new epoch (Z1, Z5) and keep
//! each other alive (Z6).

mod action;
mod leader;
mod learner;

/// The packet types, re-exported from [`crate::packet`] where they live.
pub use crate::packet::{
    check_learner_claim, decode_i32_payload, epoch_zxid, i32_payload, packet_type, zxid_epoch,
    AuthId, LearnerInfo, PacketError, QuorumPacket, LEARNER_PROTOCOL_VERSION, MAX_ACCEPTED_EPOCH,
    MAX_AUTH_ENTRIES, MAX_AUTH_STRING, MAX_PACKET_DATA,
};
pub use action::{DiscoveryAction, Timing};
pub use leader::{
    LeaderDiscovery, LOG_READ_CHUNK_BYTES, LOG_READ_CHUNK_TXNS, SNAP_PACKETS_PER_BATCH,
};
pub use learner::LearnerDiscovery;
