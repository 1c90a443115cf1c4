//! Discovery on the quorum port (ZAB-NOTES §7): the jute `QuorumPacket` codec and the packets
//! a leader and its learners exchange to fix the new epoch (Z1) and to keep each other alive (Z6).

mod packet;

pub use packet::{
    decode_i32_payload, i32_payload, packet_type, AuthId, LearnerInfo, PacketError, QuorumPacket,
    LEARNER_PROTOCOL_VERSION, MAX_AUTH_ENTRIES, MAX_AUTH_STRING, MAX_PACKET_DATA,
};
