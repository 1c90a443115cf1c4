//! The partition core's 0.8-design switches as partition hooks, shared by the tests that show
//! the simulator catching them (`never-in-production`, a dev-dependency feature only).

use kafka_replication::log::MemoryLog;
use kafka_replication::partition::{Legacy, Partition};

/// Pre-KIP-101: a new follower truncates to its high watermark.
pub fn truncate_to_high_watermark(p: &mut Partition<MemoryLog>) {
    p.set_legacy(Legacy::default().with_truncate_to_high_watermark(true));
}

/// Pre-KIP-279: OffsetForLeaderEpoch v0, an end offset without its epoch.
pub fn offset_for_leader_epoch_v0(p: &mut Partition<MemoryLog>) {
    p.set_legacy(Legacy::default().with_offset_for_leader_epoch_v0(true));
}
