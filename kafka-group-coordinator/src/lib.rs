//! # kafka-group-coordinator
//!
//! Kafka's classic consumer-group coordinator (Kafka 2.8's `GroupCoordinator` and
//! `GroupMetadataManager`) as a deterministic, sans-IO state machine: no clock, no IO, no
//! randomness, no async runtime. A broker (or a test) owns a [`GroupCoordinator`], feeds it
//! [`Input`]s with the current time, and carries out the [`Action`]s it asks for: answering
//! requests and appending records to `__consumer_offsets`.
//!
//! - Rebalances: the states Empty, PreparingRebalance, CompletingRebalance, Stable and Dead
//!   with Kafka's transitions; JoinGroup with the KIP-394 two-step join
//!   (`MEMBER_ID_REQUIRED`), static membership (KIP-345, `FENCED_INSTANCE_ID`), protocol
//!   selection by votes, the first joiner as leader, `group.initial.rebalance.delay.ms`
//!   (Kafka's `InitialDelayedJoin`), the rebalance timeout (`DelayedJoin`) and session
//!   timeouts (`DelayedHeartbeat`); SyncGroup, Heartbeat and LeaveGroup with generation
//!   fencing.
//! - Offsets: OffsetCommit (generation-checked for members, free for simple consumers),
//!   OffsetFetch, and the expiry of `offsets.retention.minutes`. A commit is visible only
//!   once its record is committed in `__consumer_offsets`.
//! - Failover: the coordinator of a group is the leader of its partition
//!   ([`partition_for`]); [`Input::Load`] rebuilds a partition's groups and offsets from its
//!   records, [`Input::Unload`] drops them, and each append carries the leader epoch the
//!   partition was loaded at so that a deposed coordinator cannot commit.
//!
//! ```
//! use kafka_group_coordinator::*;
//!
//! let mut c = GroupCoordinator::new(
//!     GroupCoordinatorConfig::new().with_initial_rebalance_delay_ms(0),
//! );
//! let partition = c.partition_for("g");
//! c.handle(0, Input::Load { partition, leader_epoch: 1, records: vec![] });
//!
//! // A consumer outside group management commits offset 42 of t-0.
//! let commit = OffsetCommitRequest {
//!     group_id: "g".into(),
//!     generation_id: NO_GENERATION,
//!     topics: vec![OffsetCommitTopic {
//!         name: "t".into(),
//!         partitions: vec![OffsetCommitPartition {
//!             partition_index: 0,
//!             committed_offset: 42,
//!             committed_leader_epoch: -1,
//!             committed_metadata: None,
//!         }],
//!     }],
//!     ..Default::default()
//! };
//! c.handle(1, Input::Request { request_id: 7, request: Request::OffsetCommit(commit) });
//! let mut append = None;
//! while let Some(action) = c.poll_action() {
//!     if let Action::Append { append_id, .. } = action {
//!         append = Some(append_id);
//!     }
//! }
//! // The answer waits for the shell to report the append committed.
//! c.handle(2, Input::AppendCompleted { append_id: append.unwrap(), result: Ok(0) });
//! let answered = std::iter::from_fn(|| c.poll_action()).any(|a| {
//!     matches!(a, Action::Respond { request_id: 7, response: Response::OffsetCommit(r) }
//!         if r.topics[0].partitions[0].error.is_none())
//! });
//! assert!(answered);
//! ```

pub mod config;
pub mod coordinator;
pub mod group;
pub mod partition;
pub mod records;
pub mod types;

pub use config::GroupCoordinatorConfig;
pub use coordinator::{Action, AppendRecord, GroupCoordinator, Input, LogRecord, PlantedBugs};
pub use group::GroupState;
pub use partition::partition_for;
pub use types::*;

#[cfg(test)]
mod tests;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
