//! Zab recovery (synchronisation) and atomic broadcast (Zab's phases 2 and 3, Z2)
//! as sans-IO state machines, continuing where discovery fixed the new epoch:
//!
//! - [`choose_sync`] and [`leader_sync_packets`]: the leader's DIFF / TRUNC / SNAP choice from
//!   its committed log and snapshot (a SNAP instead of a DIFF that outweighs
//!   [`SNAPSHOT_SIZE_FACTOR`] of the snapshot), and the packet sequence with NEWLEADER queued
//!   after the sync data (ZOOKEEPER-3104); a snapshot goes as [`snap_packets`]: a size header
//!   and chunks of at most [`SNAP_CHUNK`] bytes.
//! - [`LearnerBroadcast`]: a follower or observer through synchronisation (it persists the
//!   synced transactions, then `currentEpoch`, then acknowledges NEWLEADER: ZOOKEEPER-3911) and
//!   broadcast (log, then ACK each PROPOSAL; apply COMMITs in zxid order; observers apply
//!   INFORMs), forwarding writes (REQUEST) and `sync` barriers to the leader.
//! - [`LeaderBroadcast`]: the leader assigns zxids, proposes, and commits in zxid order once a
//!   quorum (its own log write counts) acknowledged; observers get INFORM; a zxid counter that
//!   would reach `0xffffffff` forces a new epoch (ZOOKEEPER-1277).
//!
//! Both emit [`BroadcastAction`]s that the driver carries out **in order**; a `Log` must be
//! durable before any later action (an ACK after it vouches for the write).
//!
//! REQUEST payloads are opaque here (ZooKeeper's carry a session id, cxid and op code; the
//! embedder's state machine defines its own).

mod action;
mod leader;
mod learner;
mod sync;

pub use action::{BroadcastAction, BroadcastError};
pub use leader::LeaderBroadcast;
pub use learner::{LearnerBroadcast, LearnerOptions};
pub use sync::{
    choose_sync, diff_exceeds_snapshot_factor, leader_sync_packets, snap_packet_count,
    snap_packets, sync_weight, LogRead, SnapshotInfo, SyncPlan, COMMIT_LOG_COUNT,
    SNAPSHOT_SIZE_FACTOR, SNAP_CHUNK, SNAP_HEADER_LEN,
};
