//! The coordinator: Kafka's `GroupCoordinator` and `GroupMetadataManager` as a sans-IO
//! state machine.
//!
//! Feed it [`Input`]s with [`GroupCoordinator::handle`], drain [`Action`]s with
//! [`GroupCoordinator::poll_action`], and call `handle(now, Input::Tick)` by
//! [`GroupCoordinator::next_deadline`]. Every `handle` first fires the timers due at `now`
//! (Kafka's `DelayedJoin`, `InitialDelayedJoin`, `DelayedHeartbeat` and the offsets-retention
//! task), so a shell that only ticks late still sees them in order.
//!
//! Writes go through the shell: [`Action::Append`] names the `__consumer_offsets` partition,
//! the leader epoch the partition was loaded at (an append from a coordinator that lost the
//! leadership is fenced by it) and the records; the shell appends them with `acks=-1` and
//! reports [`Input::AppendCompleted`] once the high watermark passed them (or the error).
//! Responses that depend on a write (OffsetCommit, the leader's SyncGroup, a static member's
//! rejoin of a Stable group) are answered only then.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;

use crate::config::{GroupCoordinatorConfig, NEW_MEMBER_JOIN_TIMEOUT_MS};
use crate::group::{CommittedOffset, Group, GroupState, JoinTimer, Member};
use crate::partition::partition_for;
use crate::records::{GroupMetadataValue, OffsetCommitValue, RecordKey};
use crate::types::*;

/// A record read from a `__consumer_offsets` partition when loading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The record's offset in the partition.
    pub offset: i64,
    /// The key bytes.
    pub key: Bytes,
    /// The value bytes; `None` for a tombstone.
    pub value: Option<Bytes>,
}

/// A record to append to a `__consumer_offsets` partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRecord {
    /// The key bytes.
    pub key: Bytes,
    /// The value bytes; `None` for a tombstone.
    pub value: Option<Bytes>,
}

/// What the coordinator is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A client request; its response comes back as [`Action::Respond`] with the same id.
    Request {
        /// The shell's id for the request.
        request_id: RequestId,
        /// The request.
        request: Request,
    },
    /// This broker became leader of an offsets partition and started reading it: its groups
    /// answer `COORDINATOR_LOAD_IN_PROGRESS` until [`Input::Load`].
    BeginLoad {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The leader epoch this broker leads it at.
        leader_epoch: i32,
    },
    /// The records of an offsets partition, read from its start to its log end: the
    /// coordinator rebuilds the partition's groups and offsets and becomes their coordinator.
    /// A load older than the partition's current epoch is ignored; any other replaces what
    /// was there.
    Load {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The leader epoch this broker leads it at.
        leader_epoch: i32,
        /// The records, in log order.
        records: Vec<LogRecord>,
    },
    /// This broker, which has led the partition without interruption since it loaded it, leads
    /// it at a newer leader epoch (the controller bumps the epoch when the ISR loses a
    /// replica): the groups stay as they are and later appends carry the new epoch, as Kafka's
    /// coordinator keeps a partition it already owns. Ignored unless the partition is loaded
    /// at an older epoch.
    Reelected {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The new leader epoch.
        leader_epoch: i32,
    },
    /// This broker is no longer leader of the partition: its groups are dropped, their waiting
    /// JoinGroup / SyncGroup requests answered `NOT_COORDINATOR`.
    Unload {
        /// The `__consumer_offsets` partition.
        partition: i32,
    },
    /// An [`Action::Append`] finished: `Ok(base offset)` once committed, or the error.
    AppendCompleted {
        /// The append's id.
        append_id: u64,
        /// The log offset of the first record, or the error of the append.
        result: Result<i64, ErrorCode>,
    },
    /// Time passed (fire the timers due).
    Tick,
}

/// What the coordinator asks the shell to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Answer a request.
    Respond {
        /// The request's id.
        request_id: RequestId,
        /// The response.
        response: Response,
    },
    /// Append records to an offsets partition with `acks=-1` at the given leader epoch and
    /// report [`Input::AppendCompleted`].
    Append {
        /// The append's id.
        append_id: u64,
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The leader epoch the partition was loaded at.
        leader_epoch: i32,
        /// The records.
        records: Vec<AppendRecord>,
    },
    /// A partition finished loading (for the shell's log).
    Loaded {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// Its leader epoch.
        leader_epoch: i32,
        /// Groups loaded.
        groups: usize,
        /// Offsets loaded.
        offsets: usize,
        /// Records that could not be read and were skipped.
        skipped: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartitionStatus {
    Loading { leader_epoch: i32 },
    Loaded { leader_epoch: i32 },
}

impl PartitionStatus {
    fn epoch(self) -> i32 {
        match self {
            PartitionStatus::Loading { leader_epoch }
            | PartitionStatus::Loaded { leader_epoch } => leader_epoch,
        }
    }
}

/// A write waiting for [`Input::AppendCompleted`].
#[derive(Debug, Clone)]
enum PendingAppend {
    /// An OffsetCommit.
    Offsets {
        request_id: RequestId,
        group_id: String,
        incarnation: u64,
        response: OffsetCommitResponse,
        /// Where each appended commit's error goes in the response.
        slots: Vec<(usize, usize)>,
        commits: Vec<((String, i32), CommittedOffset)>,
        /// Already answered (only with [`PlantedBugs::answer_commit_before_append`]).
        answered: bool,
    },
    /// The leader's SyncGroup assignment.
    Sync {
        group_id: String,
        incarnation: u64,
        generation: i32,
        assignment: BTreeMap<String, Bytes>,
    },
    /// A static member replacing its old member id in a Stable group.
    StaticRejoin {
        request_id: RequestId,
        group_id: String,
        incarnation: u64,
        instance_id: String,
        old_member_id: String,
        new_member_id: String,
        old_protocols: Vec<(String, Bytes)>,
        old_rebalance_timeout_ms: i32,
        old_session_timeout_ms: i32,
        current_leader: Option<String>,
    },
    /// A write nobody waits for (an Empty group's metadata, tombstones).
    Unanswered,
}

/// Deliberately wrong behaviours, for simulations that must show they catch them. All off by
/// default; they can only be turned on through [`GroupCoordinator::set_planted_bugs`], which
/// exists with the test-only `never-in-production` feature alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlantedBugs {
    /// Answer an OffsetCommit without error as soon as its append is asked for, before the
    /// append is committed (or refused).
    pub answer_commit_before_append: bool,
    /// Take an offsets append refused by the leader-epoch fence (`NOT_LEADER_OR_FOLLOWER`,
    /// `FENCED_LEADER_EPOCH`) as committed: a deposed coordinator keeps acknowledging commits.
    pub accept_fenced_appends: bool,
}

impl PlantedBugs {
    /// No planted bug.
    pub fn none() -> Self {
        Self::default()
    }

    /// With [`answer_commit_before_append`](Self::answer_commit_before_append) set.
    pub fn with_answer_commit_before_append(mut self, on: bool) -> Self {
        self.answer_commit_before_append = on;
        self
    }

    /// With [`accept_fenced_appends`](Self::accept_fenced_appends) set.
    pub fn with_accept_fenced_appends(mut self, on: bool) -> Self {
        self.accept_fenced_appends = on;
        self
    }
}

/// Kafka's `GroupMetadataManager.storeGroup` error mapping.
fn map_store_error(e: ErrorCode) -> ErrorCode {
    match e {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower
        | ErrorCode::KafkaStorageError
        | ErrorCode::FencedLeaderEpoch => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge
        | ErrorCode::RecordListTooLarge
        | ErrorCode::InvalidFetchSize => ErrorCode::UnknownServerError,
        other => other,
    }
}

/// Kafka's `GroupMetadataManager.storeOffsets` error mapping.
fn map_commit_error(e: ErrorCode) -> ErrorCode {
    match e {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower
        | ErrorCode::KafkaStorageError
        | ErrorCode::FencedLeaderEpoch => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge
        | ErrorCode::RecordListTooLarge
        | ErrorCode::InvalidFetchSize => ErrorCode::InvalidCommitOffsetSize,
        other => other,
    }
}

/// The part of the coordinator group operations write to (split from the groups so that a
/// group and the outbox can be borrowed together).
#[derive(Debug)]
struct Core {
    config: GroupCoordinatorConfig,
    now: u64,
    actions: VecDeque<Action>,
    appends: BTreeMap<u64, PendingAppend>,
    /// Appends that failed before they were asked for (their records could not be encoded):
    /// completed with UNKNOWN_SERVER_ERROR at the end of the input that made them.
    failed_appends: VecDeque<u64>,
    next_append_id: u64,
    next_incarnation: u64,
    member_counter: u64,
    planted: PlantedBugs,
}

impl Core {
    fn now_i64(&self) -> i64 {
        self.now.min(i64::MAX as u64) as i64
    }

    fn respond(&mut self, request_id: RequestId, response: Response) {
        self.actions.push_back(Action::Respond {
            request_id,
            response,
        });
    }

    fn join_error(&mut self, request_id: RequestId, member_id: &str, error: ErrorCode) {
        self.respond(
            request_id,
            Response::JoinGroup(JoinGroupResponse::error(member_id, error)),
        );
    }

    fn sync_error(&mut self, request_id: RequestId, error: ErrorCode) {
        self.respond(
            request_id,
            Response::SyncGroup(SyncGroupResponse::error(error)),
        );
    }

    fn append(
        &mut self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<AppendRecord>,
        pending: PendingAppend,
    ) {
        let append_id = self.next_append_id;
        self.next_append_id += 1;
        self.appends.insert(append_id, pending);
        self.actions.push_back(Action::Append {
            append_id,
            partition,
            leader_epoch,
            records,
        });
    }

    /// An append whose records could not be encoded: its waiters get the failure (as from a
    /// failed append) once the current input is handled.
    fn fail_append(&mut self, pending: PendingAppend) {
        let append_id = self.next_append_id;
        self.next_append_id += 1;
        self.appends.insert(append_id, pending);
        self.failed_appends.push_back(append_id);
    }

    fn incarnation(&mut self) -> u64 {
        self.next_incarnation += 1;
        self.next_incarnation
    }

    /// `prefix + "-" + a uuid-like string`, unique per partition, leader epoch, salt and
    /// counter (Kafka draws a random UUID; this core draws no randomness).
    fn new_member_id(&mut self, prefix: &str, partition: i32, leader_epoch: i32) -> String {
        self.member_counter += 1;
        format!(
            "{prefix}-{:08x}-{:04x}-{:016x}-{:012x}",
            leader_epoch as u32,
            partition as u16,
            self.config.member_id_salt,
            self.member_counter & 0xffff_ffff_ffff
        )
    }

    fn heartbeat(&self, m: &mut Member) {
        m.heartbeat_deadline = Some(self.now + m.session_timeout_ms.max(0) as u64);
    }

    fn store_group(
        &mut self,
        g: &Group,
        leader_epoch: i32,
        assignment: &BTreeMap<String, Bytes>,
        pending: PendingAppend,
    ) {
        let key = RecordKey::GroupMetadata {
            group: g.id.clone(),
        }
        .encode();
        let value = g.metadata_value(assignment).encode();
        match (key, value) {
            (Ok(key), Ok(value)) => self.append(
                g.partition,
                leader_epoch,
                vec![AppendRecord {
                    key,
                    value: Some(value),
                }],
                pending,
            ),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(group = %g.id, error = %e, "group metadata cannot be written");
                self.fail_append(pending);
            }
        }
    }

    // ---- rebalances ----

    fn maybe_prepare_rebalance(&mut self, g: &mut Group) {
        if g.can_rebalance() {
            self.prepare_rebalance(g);
        }
    }

    /// Kafka's `prepareRebalance`.
    fn prepare_rebalance(&mut self, g: &mut Group) {
        if g.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment_error(g, ErrorCode::RebalanceInProgress);
        }
        let rebalance_timeout = g.rebalance_timeout_ms();
        let timer = if g.is(GroupState::Empty) {
            let delay = self.config.group_initial_rebalance_delay_ms.max(0) as u64;
            JoinTimer::Initial {
                deadline: self.now + delay,
                configured_delay: delay,
                delay,
                remaining: rebalance_timeout.saturating_sub(delay),
            }
        } else {
            JoinTimer::Regular {
                deadline: self.now + rebalance_timeout,
            }
        };
        g.transition(GroupState::PreparingRebalance, self.now_i64());
        g.join_timer = Some(timer);
        self.try_complete_join(g);
    }

    /// Kafka's `DelayedJoin.tryComplete`: a regular join completes once everyone rejoined.
    fn try_complete_join(&mut self, g: &mut Group) {
        if g.is(GroupState::PreparingRebalance)
            && matches!(g.join_timer, Some(JoinTimer::Regular { .. }))
            && g.has_all_members_joined()
        {
            self.complete_join(g);
        }
    }

    /// The join timer expired.
    fn join_timer_expired(&mut self, g: &mut Group, leader_epoch: i32) {
        match g.join_timer {
            Some(JoinTimer::Initial {
                configured_delay,
                delay,
                remaining,
                ..
            }) if g.new_member_added && remaining != 0 => {
                g.new_member_added = false;
                let next_delay = configured_delay.min(remaining);
                g.join_timer = Some(JoinTimer::Initial {
                    deadline: self.now + next_delay,
                    configured_delay,
                    delay: next_delay,
                    remaining: remaining.saturating_sub(delay),
                });
            }
            Some(_) => self.complete_join_with_epoch(g, leader_epoch),
            None => {}
        }
    }

    fn complete_join(&mut self, g: &mut Group) {
        // The epoch is needed only to store an Empty group; it is looked up by the caller of
        // complete_join_with_epoch. Here (from try_complete_join) it comes from the group's
        // last known epoch.
        let epoch = g.leader_epoch;
        self.complete_join_with_epoch(g, epoch);
    }

    /// Kafka's `onCompleteJoin`.
    fn complete_join_with_epoch(&mut self, g: &mut Group, leader_epoch: i32) {
        g.join_timer = None;
        let not_rejoined: Vec<String> = g
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in not_rejoined {
            if let Some(mut m) = g.remove(&id) {
                if let Some(r) = m.awaiting_sync.take() {
                    self.sync_error(r, ErrorCode::UnknownMemberId);
                }
            }
        }
        if !g.maybe_elect_new_joined_leader() && !g.members.is_empty() {
            // No member rejoined (only static members that did not): wait another round.
            g.join_timer = Some(JoinTimer::Regular {
                deadline: self.now + g.rebalance_timeout_ms(),
            });
            return;
        }
        g.generation += 1;
        let now = self.now_i64();
        if g.members.is_empty() {
            g.protocol_name = None;
            g.transition(GroupState::Empty, now);
            self.store_group(g, leader_epoch, &BTreeMap::new(), PendingAppend::Unanswered);
            return;
        }
        g.protocol_name = g.select_protocol();
        g.transition(GroupState::CompletingRebalance, now);
        let leader_view = g.current_member_metadata();
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in ids {
            let is_leader = g.is_leader(&id);
            let response = JoinGroupResponse {
                error: ErrorCode::None,
                generation_id: g.generation,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol_name.clone(),
                leader: g.leader.clone().unwrap_or_default(),
                skip_assignment: false,
                member_id: id.clone(),
                members: if is_leader {
                    leader_view.clone()
                } else {
                    Vec::new()
                },
            };
            let Some(m) = g.members.get_mut(&id) else {
                continue;
            };
            if let Some(r) = m.awaiting_join.take() {
                self.respond(r, Response::JoinGroup(response));
            }
            self.heartbeat(m);
            m.is_new = false;
        }
    }

    fn reset_and_propagate_assignment_error(&mut self, g: &mut Group, error: ErrorCode) {
        for m in g.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(r) = m.awaiting_sync.take() {
                self.sync_error(r, error);
            }
        }
    }

    fn set_and_propagate_assignment(
        &mut self,
        g: &mut Group,
        assignment: &BTreeMap<String, Bytes>,
    ) {
        for m in g.members.values_mut() {
            m.assignment = assignment.get(&m.id).cloned().unwrap_or_default();
            if let Some(r) = m.awaiting_sync.take() {
                let response = SyncGroupResponse {
                    error: ErrorCode::None,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                };
                self.respond(r, Response::SyncGroup(response));
                m.heartbeat_deadline = Some(self.now + m.session_timeout_ms.max(0) as u64);
            }
        }
    }

    /// Kafka's `removeMemberAndUpdateGroup`.
    fn remove_member_and_update_group(&mut self, g: &mut Group, member_id: &str) {
        if let Some(m) = g.members.get_mut(member_id) {
            if let Some(r) = m.awaiting_join.take() {
                self.join_error(r, "", ErrorCode::UnknownMemberId);
            }
            if let Some(r) = m.awaiting_sync.take() {
                self.sync_error(r, ErrorCode::UnknownMemberId);
            }
        }
        g.remove(member_id);
        match g.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => self.maybe_prepare_rebalance(g),
            GroupState::PreparingRebalance => self.try_complete_join(g),
        }
    }

    fn remove_pending_member_and_update_group(&mut self, g: &mut Group, member_id: &str) {
        g.pending_members.remove(member_id);
        if g.is(GroupState::PreparingRebalance) {
            self.try_complete_join(g);
        }
    }
}

/// Kafka's classic group coordinator over the `__consumer_offsets` partitions this broker
/// leads. See the [crate] docs.
#[derive(Debug)]
pub struct GroupCoordinator {
    core: Core,
    partitions: BTreeMap<i32, PartitionStatus>,
    groups: BTreeMap<String, Group>,
    next_cleanup: Option<u64>,
}

impl GroupCoordinator {
    /// A coordinator that leads no partition yet.
    pub fn new(config: GroupCoordinatorConfig) -> Self {
        GroupCoordinator {
            core: Core {
                config,
                now: 0,
                actions: VecDeque::new(),
                appends: BTreeMap::new(),
                failed_appends: VecDeque::new(),
                next_append_id: 1,
                next_incarnation: 0,
                member_counter: 0,
                planted: PlantedBugs::default(),
            },
            partitions: BTreeMap::new(),
            groups: BTreeMap::new(),
            next_cleanup: None,
        }
    }

    /// Turns on deliberately wrong behaviours (test builds with the `never-in-production`
    /// feature only).
    #[cfg(any(test, feature = "never-in-production"))]
    pub fn set_planted_bugs(&mut self, planted: PlantedBugs) {
        self.core.planted = planted;
    }

    /// The configuration.
    pub fn config(&self) -> &GroupCoordinatorConfig {
        &self.core.config
    }

    /// The `__consumer_offsets` partition of a group.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.core.config.offsets_topic_num_partitions)
    }

    /// Whether the partition is loaded (this coordinator answers for its groups).
    pub fn is_loaded(&self, partition: i32) -> bool {
        matches!(
            self.partitions.get(&partition),
            Some(PartitionStatus::Loaded { .. })
        )
    }

    /// The leader epoch a loaded (or loading) partition is held at.
    pub fn leader_epoch(&self, partition: i32) -> Option<i32> {
        self.partitions.get(&partition).map(|s| s.epoch())
    }

    /// The state of a group, if this coordinator holds it.
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|g| g.state)
    }

    /// The generation of a group, if this coordinator holds it.
    pub fn group_generation(&self, group_id: &str) -> Option<i32> {
        self.groups.get(group_id).map(|g| g.generation)
    }

    /// Appends not yet reported complete.
    pub fn pending_appends(&self) -> usize {
        self.core.appends.len()
    }

    /// The next action, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.core.actions.pop_front()
    }

    /// When `handle(now, Input::Tick)` must next be called, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        let mut best = self.next_cleanup.filter(|_| !self.partitions.is_empty());
        let mut consider = |d: u64| {
            best = Some(best.map_or(d, |b| b.min(d)));
        };
        for g in self.groups.values() {
            if let Some(t) = &g.join_timer {
                consider(t.deadline());
            }
            for d in g.pending_members.values() {
                consider(*d);
            }
            for m in g.members.values() {
                if let Some(d) = m.heartbeat_deadline {
                    consider(d);
                }
            }
        }
        best
    }

    /// Handles one input at `now_ms` (milliseconds on any monotonic clock; it must not go
    /// backwards). Timers due at `now_ms` fire first, and again after the input.
    pub fn handle(&mut self, now_ms: u64, input: Input) {
        self.core.now = self.core.now.max(now_ms);
        self.fire_timers();
        match input {
            Input::Request {
                request_id,
                request,
            } => self.request(request_id, request),
            Input::BeginLoad {
                partition,
                leader_epoch,
            } => self.begin_load(partition, leader_epoch),
            Input::Load {
                partition,
                leader_epoch,
                records,
            } => self.load(partition, leader_epoch, records),
            Input::Reelected {
                partition,
                leader_epoch,
            } => self.reelected(partition, leader_epoch),
            Input::Unload { partition } => {
                self.unload_groups(partition);
                self.partitions.remove(&partition);
            }
            Input::AppendCompleted { append_id, result } => {
                self.append_completed(append_id, result)
            }
            Input::Tick => {}
        }
        // Timers the input set to fire at once (a zero initial rebalance delay).
        self.fire_timers();
        while let Some(append_id) = self.core.failed_appends.pop_front() {
            self.append_completed(append_id, Err(ErrorCode::UnknownServerError));
        }
    }

    fn epoch_of(&self, partition: i32) -> i32 {
        self.partitions.get(&partition).map_or(-1, |s| s.epoch())
    }

    // ---- timers ----

    fn fire_timers(&mut self) {
        let now = self.core.now;
        // A bound on rounds: each round fires at least one timer, and firing schedules new
        // timers only in the future (or, for a zero initial delay, once).
        for _ in 0..10_000 {
            let due: Vec<String> = self
                .groups
                .values()
                .filter(|g| {
                    g.join_timer.is_some_and(|t| t.deadline() <= now)
                        || g.pending_members.values().any(|d| *d <= now)
                        || g.members
                            .values()
                            .any(|m| m.heartbeat_deadline.is_some_and(|d| d <= now))
                })
                .map(|g| g.id.clone())
                .collect();
            if due.is_empty() {
                break;
            }
            for id in due {
                self.fire_group_timers(&id);
            }
        }
        if let Some(at) = self.next_cleanup {
            if at <= now {
                self.cleanup_expired_offsets();
                self.next_cleanup =
                    Some(now + self.core.config.offsets_retention_check_interval_ms as u64);
            }
        }
    }

    fn fire_group_timers(&mut self, id: &str) {
        let now = self.core.now;
        let Some(g) = self.groups.get_mut(id) else {
            return;
        };
        let epoch = self.partitions.get(&g.partition).map_or(-1, |s| s.epoch());
        g.leader_epoch = epoch;
        let core = &mut self.core;
        let expired_pending: Vec<String> = g
            .pending_members
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(m, _)| m.clone())
            .collect();
        for m in expired_pending {
            core.remove_pending_member_and_update_group(g, &m);
        }
        let expired: Vec<String> = g
            .members
            .values()
            .filter(|m| m.heartbeat_deadline.is_some_and(|d| d <= now))
            .map(|m| m.id.clone())
            .collect();
        for mid in expired {
            let Some(m) = g.members.get_mut(&mid) else {
                continue;
            };
            if m.survives_expiry() {
                m.heartbeat_deadline = None;
            } else {
                core.remove_member_and_update_group(g, &mid);
            }
        }
        if g.join_timer.is_some_and(|t| t.deadline() <= now) {
            core.join_timer_expired(g, epoch);
        }
    }

    /// Kafka's `cleanupGroupMetadata`: expired offsets and Empty groups without offsets go.
    fn cleanup_expired_offsets(&mut self) {
        let now = self.core.now_i64();
        let retention = self.core.config.offsets_retention_ms;
        let mut tombstones: BTreeMap<i32, Vec<AppendRecord>> = BTreeMap::new();
        let mut dead = Vec::new();
        for g in self.groups.values_mut() {
            let expired = g.remove_expired_offsets(now, retention);
            let out = tombstones.entry(g.partition).or_default();
            for (topic, partition) in expired {
                // Keys of offsets that were written once always encode again.
                if let Ok(key) = (RecordKey::OffsetCommit {
                    group: g.id.clone(),
                    topic,
                    partition,
                })
                .encode()
                {
                    out.push(AppendRecord { key, value: None });
                }
            }
            if g.is(GroupState::Empty)
                && g.offsets.is_empty()
                && g.pending_offset_commits.is_empty()
            {
                g.transition(GroupState::Dead, now);
                dead.push(g.id.clone());
                if let Ok(key) = (RecordKey::GroupMetadata {
                    group: g.id.clone(),
                })
                .encode()
                {
                    out.push(AppendRecord { key, value: None });
                }
            }
        }
        for id in dead {
            self.groups.remove(&id);
        }
        for (partition, records) in tombstones {
            if records.is_empty() {
                continue;
            }
            let epoch = self.epoch_of(partition);
            self.core
                .append(partition, epoch, records, PendingAppend::Unanswered);
        }
    }

    // ---- load / unload ----

    fn unload_groups(&mut self, partition: i32) {
        let ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.partition == partition)
            .map(|g| g.id.clone())
            .collect();
        for id in ids {
            if let Some(mut g) = self.groups.remove(&id) {
                g.transition(GroupState::Dead, self.core.now_i64());
                for m in g.members.values_mut() {
                    if let Some(r) = m.awaiting_join.take() {
                        self.core.join_error(r, &m.id, ErrorCode::NotCoordinator);
                    }
                    if let Some(r) = m.awaiting_sync.take() {
                        self.core.sync_error(r, ErrorCode::NotCoordinator);
                    }
                }
            }
        }
    }

    fn reelected(&mut self, partition: i32, leader_epoch: i32) {
        match self.partitions.get(&partition) {
            Some(PartitionStatus::Loaded { leader_epoch: old }) if *old < leader_epoch => {
                self.partitions
                    .insert(partition, PartitionStatus::Loaded { leader_epoch });
                for g in self
                    .groups
                    .values_mut()
                    .filter(|g| g.partition == partition)
                {
                    g.leader_epoch = leader_epoch;
                }
            }
            _ => {}
        }
    }

    fn begin_load(&mut self, partition: i32, leader_epoch: i32) {
        if self
            .partitions
            .get(&partition)
            .is_some_and(|s| s.epoch() > leader_epoch)
        {
            return;
        }
        self.unload_groups(partition);
        self.partitions
            .insert(partition, PartitionStatus::Loading { leader_epoch });
    }

    /// Kafka's `GroupMetadataManager.doLoadGroupsAndOffsets`.
    fn load(&mut self, partition: i32, leader_epoch: i32, records: Vec<LogRecord>) {
        if self
            .partitions
            .get(&partition)
            .is_some_and(|s| s.epoch() > leader_epoch)
        {
            return;
        }
        self.unload_groups(partition);
        let mut offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>> =
            BTreeMap::new();
        let mut metadata: BTreeMap<String, GroupMetadataValue> = BTreeMap::new();
        let mut skipped = 0usize;
        for record in records {
            let key = match RecordKey::decode(&record.key) {
                Ok(Some(k)) => k,
                Ok(None) => continue,
                Err(_) => {
                    skipped += 1;
                    continue;
                }
            };
            match key {
                RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition: p,
                } => match record.value.as_ref().map(OffsetCommitValue::decode) {
                    None => {
                        if let Some(o) = offsets.get_mut(&group) {
                            o.remove(&(topic, p));
                        }
                    }
                    Some(Ok(v)) => {
                        offsets.entry(group).or_default().insert(
                            (topic, p),
                            CommittedOffset {
                                offset: v.offset,
                                leader_epoch: v.leader_epoch,
                                metadata: v.metadata,
                                commit_timestamp: v.commit_timestamp,
                                expire_timestamp: (v.expire_timestamp >= 0)
                                    .then_some(v.expire_timestamp),
                                log_offset: record.offset,
                            },
                        );
                    }
                    Some(Err(_)) => skipped += 1,
                },
                RecordKey::GroupMetadata { group } => {
                    match record.value.as_ref().map(GroupMetadataValue::decode) {
                        None => {
                            metadata.remove(&group);
                        }
                        Some(Ok(v)) => {
                            metadata.insert(group, v);
                        }
                        Some(Err(_)) => skipped += 1,
                    }
                }
            }
        }
        // A group whose offsets were all removed by tombstones is not a group.
        offsets.retain(|_, o| !o.is_empty());
        let now = self.core.now_i64();
        let ids: BTreeSet<String> = metadata.keys().chain(offsets.keys()).cloned().collect();
        let mut n_offsets = 0;
        let mut n_groups = 0;
        for id in ids {
            let incarnation = self.core.incarnation();
            let mut g = Group::new(id.clone(), partition, incarnation, now);
            g.leader_epoch = leader_epoch;
            if let Some(v) = metadata.remove(&id) {
                g.generation = v.generation;
                g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
                g.protocol_name = v.protocol;
                g.leader = v.leader;
                g.state_timestamp =
                    (v.current_state_timestamp >= 0).then_some(v.current_state_timestamp);
                let protocol = g.protocol_name.clone().unwrap_or_default();
                for mv in v.members {
                    let member = Member {
                        id: mv.member_id.clone(),
                        group_instance_id: mv.group_instance_id.clone(),
                        client_id: mv.client_id,
                        client_host: mv.client_host,
                        rebalance_timeout_ms: if mv.rebalance_timeout < 0 {
                            mv.session_timeout
                        } else {
                            mv.rebalance_timeout
                        },
                        session_timeout_ms: mv.session_timeout,
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocols: vec![(protocol.clone(), mv.subscription)],
                        assignment: mv.assignment,
                        awaiting_join: None,
                        awaiting_sync: None,
                        is_new: false,
                        heartbeat_deadline: Some(self.core.now + mv.session_timeout.max(0) as u64),
                    };
                    if let Some(instance) = &mv.group_instance_id {
                        g.static_members
                            .insert(instance.clone(), mv.member_id.clone());
                    }
                    g.members.insert(mv.member_id, member);
                }
                if g.leader
                    .as_ref()
                    .is_some_and(|l| !g.members.contains_key(l))
                {
                    g.leader = g.members.keys().next().cloned();
                }
                g.state = if g.members.is_empty() {
                    GroupState::Empty
                } else {
                    GroupState::Stable
                };
            }
            if let Some(o) = offsets.remove(&id) {
                n_offsets += o.len();
                g.offsets = o;
            }
            n_groups += 1;
            self.groups.insert(id, g);
        }
        self.partitions
            .insert(partition, PartitionStatus::Loaded { leader_epoch });
        if self.next_cleanup.is_none() {
            self.next_cleanup =
                Some(self.core.now + self.core.config.offsets_retention_check_interval_ms as u64);
        }
        self.core.actions.push_back(Action::Loaded {
            partition,
            leader_epoch,
            groups: n_groups,
            offsets: n_offsets,
            skipped,
        });
    }

    // ---- appends ----

    fn append_completed(&mut self, append_id: u64, result: Result<i64, ErrorCode>) {
        let Some(pending) = self.core.appends.remove(&append_id) else {
            return;
        };
        match pending {
            PendingAppend::Unanswered => {}
            PendingAppend::Offsets {
                request_id,
                group_id,
                incarnation,
                mut response,
                slots,
                commits,
                answered,
            } => {
                let result = match result {
                    Err(ErrorCode::NotLeaderOrFollower | ErrorCode::FencedLeaderEpoch)
                        if self.core.planted.accept_fenced_appends =>
                    {
                        let last = self
                            .groups
                            .get(&group_id)
                            .and_then(|g| g.offsets.values().map(|o| o.log_offset).max())
                            .unwrap_or(-1);
                        Ok(last + 1)
                    }
                    other => other,
                };
                let error = match result {
                    Ok(_) => ErrorCode::None,
                    Err(e) => map_commit_error(e),
                };
                for (t, p) in slots {
                    response.topics[t].partitions[p].error = error;
                }
                if let Some(g) = self
                    .groups
                    .get_mut(&group_id)
                    .filter(|g| g.incarnation == incarnation)
                {
                    for (i, (tp, mut commit)) in commits.into_iter().enumerate() {
                        if let Some(n) = g.pending_offset_commits.get_mut(&tp) {
                            *n -= 1;
                            if *n == 0 {
                                g.pending_offset_commits.remove(&tp);
                            }
                        }
                        if let Ok(base) = result {
                            commit.log_offset = base + i as i64;
                            let newer = g
                                .offsets
                                .get(&tp)
                                .is_none_or(|o| o.log_offset < commit.log_offset);
                            if newer {
                                g.offsets.insert(tp, commit);
                            }
                        }
                    }
                }
                if !answered {
                    self.core
                        .respond(request_id, Response::OffsetCommit(response));
                }
            }
            PendingAppend::Sync {
                group_id,
                incarnation,
                generation,
                assignment,
            } => {
                let Some(g) = self
                    .groups
                    .get_mut(&group_id)
                    .filter(|g| g.incarnation == incarnation)
                else {
                    return;
                };
                if !(g.is(GroupState::CompletingRebalance) && g.generation == generation) {
                    return;
                }
                match result {
                    Err(e) => {
                        self.core
                            .reset_and_propagate_assignment_error(g, map_store_error(e));
                        self.core.maybe_prepare_rebalance(g);
                    }
                    Ok(_) => {
                        self.core.set_and_propagate_assignment(g, &assignment);
                        g.transition(GroupState::Stable, self.core.now_i64());
                    }
                }
            }
            PendingAppend::StaticRejoin {
                request_id,
                group_id,
                incarnation,
                instance_id,
                old_member_id,
                new_member_id,
                old_protocols,
                old_rebalance_timeout_ms,
                old_session_timeout_ms,
                current_leader,
            } => {
                let Some(g) = self
                    .groups
                    .get_mut(&group_id)
                    .filter(|g| g.incarnation == incarnation)
                else {
                    return;
                };
                let waiting = g
                    .members
                    .get(&new_member_id)
                    .is_some_and(|m| m.awaiting_join == Some(request_id));
                if !waiting {
                    return;
                }
                match result {
                    Ok(_) => {
                        let is_leader = g.is_leader(&new_member_id);
                        let response = JoinGroupResponse {
                            error: ErrorCode::None,
                            generation_id: g.generation,
                            protocol_type: g.protocol_type.clone(),
                            protocol_name: g.protocol_name.clone(),
                            leader: current_leader.unwrap_or_default(),
                            skip_assignment: is_leader,
                            member_id: new_member_id.clone(),
                            members: if is_leader {
                                g.current_member_metadata()
                            } else {
                                Vec::new()
                            },
                        };
                        if let Some(m) = g.members.get_mut(&new_member_id) {
                            m.awaiting_join = None;
                            self.core.heartbeat(m);
                        }
                        self.core.respond(request_id, Response::JoinGroup(response));
                    }
                    Err(e) => {
                        // Revert: the old member id comes back with its old metadata.
                        if let Some(mut m) = g.members.remove(&new_member_id) {
                            m.awaiting_join = None;
                            m.protocols = old_protocols;
                            m.rebalance_timeout_ms = old_rebalance_timeout_ms;
                            m.session_timeout_ms = old_session_timeout_ms;
                            m.id = old_member_id.clone();
                            self.core.heartbeat(&mut m);
                            g.members.insert(old_member_id.clone(), m);
                        }
                        if g.is_leader(&new_member_id) {
                            g.leader = Some(old_member_id.clone());
                        }
                        g.static_members.insert(instance_id, old_member_id);
                        let response = JoinGroupResponse {
                            error: map_store_error(e),
                            generation_id: g.generation,
                            protocol_type: g.protocol_type.clone(),
                            protocol_name: g.protocol_name.clone(),
                            leader: current_leader.unwrap_or_default(),
                            skip_assignment: false,
                            member_id: String::new(),
                            members: Vec::new(),
                        };
                        self.core.respond(request_id, Response::JoinGroup(response));
                    }
                }
            }
        }
    }

    // ---- requests ----

    /// Kafka's `validateGroupStatus`: the group's partition must be loaded here.
    fn validate(&self, group_id: &str, allow_empty_id: bool) -> Result<(i32, i32), ErrorCode> {
        if group_id.is_empty() && !allow_empty_id {
            return Err(ErrorCode::InvalidGroupId);
        }
        let partition = self.partition_for(group_id);
        match self.partitions.get(&partition) {
            None => Err(ErrorCode::NotCoordinator),
            Some(PartitionStatus::Loading { .. }) => Err(ErrorCode::CoordinatorLoadInProgress),
            Some(PartitionStatus::Loaded { leader_epoch }) => Ok((partition, *leader_epoch)),
        }
    }

    fn request(&mut self, request_id: RequestId, request: Request) {
        match request {
            Request::JoinGroup(r) => self.join_group(request_id, r),
            Request::SyncGroup(r) => self.sync_group(request_id, r),
            Request::Heartbeat(r) => self.heartbeat(request_id, r),
            Request::LeaveGroup(r) => self.leave_group(request_id, r),
            Request::OffsetCommit(r) => self.offset_commit(request_id, r),
            Request::OffsetFetch(r) => self.offset_fetch(request_id, r),
            Request::DescribeGroups(r) => self.describe_groups(request_id, r),
            Request::ListGroups(r) => self.list_groups(request_id, r),
        }
    }

    fn create_group(&mut self, group_id: &str, partition: i32, leader_epoch: i32) {
        let incarnation = self.core.incarnation();
        let mut g = Group::new(
            group_id.to_owned(),
            partition,
            incarnation,
            self.core.now_i64(),
        );
        g.leader_epoch = leader_epoch;
        self.groups.insert(group_id.to_owned(), g);
    }

    /// Kafka's `handleJoinGroup`.
    fn join_group(&mut self, rid: RequestId, req: JoinGroupRequest) {
        let (partition, epoch) = match self.validate(&req.group_id, false) {
            Ok(v) => v,
            Err(e) => return self.core.join_error(rid, &req.member_id, e),
        };
        let cfg = &self.core.config;
        if req.session_timeout_ms < cfg.group_min_session_timeout_ms
            || req.session_timeout_ms > cfg.group_max_session_timeout_ms
        {
            return self
                .core
                .join_error(rid, &req.member_id, ErrorCode::InvalidSessionTimeout);
        }
        let unknown = req.member_id.is_empty();
        if !self.groups.contains_key(&req.group_id) {
            if !unknown {
                return self
                    .core
                    .join_error(rid, &req.member_id, ErrorCode::UnknownMemberId);
            }
            self.create_group(&req.group_id, partition, epoch);
        }
        let max = self.core.config.group_max_size.max(1) as usize;
        let core = &mut self.core;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return;
        };
        g.leader_epoch = epoch;
        let accept = match g.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                g.members
                    .get(&req.member_id)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || g.num_awaiting_join() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                g.members.contains_key(&req.member_id) || g.members.len() < max
            }
        };
        if !accept {
            if g.members.contains_key(&req.member_id) {
                core.remove_member_and_update_group(g, &req.member_id);
            }
            core.join_error(rid, "", ErrorCode::GroupMaxSizeReached);
        } else if unknown {
            join_new_member(core, g, rid, req, epoch);
        } else {
            join_known_member(core, g, rid, req);
        }
        if g.is(GroupState::PreparingRebalance) {
            core.try_complete_join(g);
        }
    }

    /// Kafka's `handleSyncGroup`.
    fn sync_group(&mut self, rid: RequestId, req: SyncGroupRequest) {
        let epoch = match self.validate(&req.group_id, false) {
            Ok((_, epoch)) => epoch,
            // The rebalance state was lost with the load: rejoin without rediscovering.
            Err(ErrorCode::CoordinatorLoadInProgress) => {
                return self.core.sync_error(rid, ErrorCode::RebalanceInProgress)
            }
            Err(e) => return self.core.sync_error(rid, e),
        };
        let core = &mut self.core;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return core.sync_error(rid, ErrorCode::UnknownMemberId);
        };
        let error = if g.is_static_member_fenced(&req.member_id, req.group_instance_id.as_deref()) {
            Some(ErrorCode::FencedInstanceId)
        } else if !g.members.contains_key(&req.member_id) {
            Some(ErrorCode::UnknownMemberId)
        } else if req.generation_id != g.generation {
            Some(ErrorCode::IllegalGeneration)
        } else if req
            .protocol_type
            .as_ref()
            .is_some_and(|t| g.protocol_type.as_ref() != Some(t))
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|n| g.protocol_name.as_ref() != Some(n))
        {
            Some(ErrorCode::InconsistentGroupProtocol)
        } else {
            None
        };
        if let Some(e) = error {
            return core.sync_error(rid, e);
        }
        match g.state {
            GroupState::Empty | GroupState::Dead => {
                core.sync_error(rid, ErrorCode::UnknownMemberId)
            }
            GroupState::PreparingRebalance => core.sync_error(rid, ErrorCode::RebalanceInProgress),
            GroupState::CompletingRebalance => {
                if let Some(m) = g.members.get_mut(&req.member_id) {
                    if let Some(old) = m.awaiting_sync.replace(rid) {
                        core.sync_error(old, ErrorCode::RebalanceInProgress);
                    }
                }
                if g.is_leader(&req.member_id) {
                    let mut assignment: BTreeMap<String, Bytes> = req
                        .assignments
                        .into_iter()
                        .filter(|a| g.members.contains_key(&a.member_id))
                        .map(|a| (a.member_id, a.assignment))
                        .collect();
                    for id in g.members.keys() {
                        assignment.entry(id.clone()).or_default();
                    }
                    let pending = PendingAppend::Sync {
                        group_id: g.id.clone(),
                        incarnation: g.incarnation,
                        generation: g.generation,
                        assignment: assignment.clone(),
                    };
                    core.store_group(g, epoch, &assignment, pending);
                }
            }
            GroupState::Stable => {
                if let Some(m) = g.members.get_mut(&req.member_id) {
                    let response = SyncGroupResponse {
                        error: ErrorCode::None,
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol_name.clone(),
                        assignment: m.assignment.clone(),
                    };
                    core.heartbeat(m);
                    core.respond(rid, Response::SyncGroup(response));
                }
            }
        }
    }

    /// Kafka's `handleHeartbeat`.
    fn heartbeat(&mut self, rid: RequestId, req: HeartbeatRequest) {
        let answer = |core: &mut Core, error| {
            core.respond(rid, Response::Heartbeat(HeartbeatResponse { error }))
        };
        match self.validate(&req.group_id, false) {
            Ok(_) => {}
            // While loading, answer blindly.
            Err(ErrorCode::CoordinatorLoadInProgress) => {
                return answer(&mut self.core, ErrorCode::None)
            }
            Err(e) => return answer(&mut self.core, e),
        }
        let core = &mut self.core;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return answer(core, ErrorCode::UnknownMemberId);
        };
        let error = if g.is_static_member_fenced(&req.member_id, req.group_instance_id.as_deref()) {
            ErrorCode::FencedInstanceId
        } else if !g.members.contains_key(&req.member_id) {
            ErrorCode::UnknownMemberId
        } else if req.generation_id != g.generation {
            ErrorCode::IllegalGeneration
        } else {
            match g.state {
                GroupState::Empty | GroupState::Dead => ErrorCode::UnknownMemberId,
                state => {
                    if let Some(m) = g.members.get_mut(&req.member_id) {
                        core.heartbeat(m);
                    }
                    if state == GroupState::PreparingRebalance {
                        ErrorCode::RebalanceInProgress
                    } else {
                        ErrorCode::None
                    }
                }
            }
        };
        answer(core, error)
    }

    /// Kafka's `handleLeaveGroup`.
    fn leave_group(&mut self, rid: RequestId, req: LeaveGroupRequest) {
        if let Err(e) = self.validate(&req.group_id, false) {
            return self.core.respond(
                rid,
                Response::LeaveGroup(LeaveGroupResponse {
                    error: e,
                    members: Vec::new(),
                }),
            );
        }
        let core = &mut self.core;
        let left = |m: &LeavingMember, error| LeftMember {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            error,
        };
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            let members = req
                .members
                .iter()
                .map(|m| left(m, ErrorCode::UnknownMemberId))
                .collect();
            return core.respond(
                rid,
                Response::LeaveGroup(LeaveGroupResponse {
                    error: ErrorCode::None,
                    members,
                }),
            );
        };
        let mut results = Vec::with_capacity(req.members.len());
        for lm in &req.members {
            let error = if lm.member_id.is_empty() {
                match lm
                    .group_instance_id
                    .as_ref()
                    .and_then(|i| g.static_members.get(i).cloned())
                {
                    Some(current) => {
                        core.remove_member_and_update_group(g, &current);
                        ErrorCode::None
                    }
                    None => ErrorCode::UnknownMemberId,
                }
            } else if g.pending_members.contains_key(&lm.member_id) {
                core.remove_pending_member_and_update_group(g, &lm.member_id);
                ErrorCode::None
            } else if g.is_static_member_fenced(&lm.member_id, lm.group_instance_id.as_deref()) {
                ErrorCode::FencedInstanceId
            } else if g.members.contains_key(&lm.member_id) {
                core.remove_member_and_update_group(g, &lm.member_id);
                ErrorCode::None
            } else {
                ErrorCode::UnknownMemberId
            };
            results.push(left(lm, error));
        }
        core.respond(
            rid,
            Response::LeaveGroup(LeaveGroupResponse {
                error: ErrorCode::None,
                members: results,
            }),
        );
    }

    /// Kafka's `handleCommitOffsets`.
    fn offset_commit(&mut self, rid: RequestId, req: OffsetCommitRequest) {
        let all = |req: &OffsetCommitRequest, error: ErrorCode| OffsetCommitResponse {
            topics: req
                .topics
                .iter()
                .map(|t| OffsetCommitTopicResult {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| OffsetCommitPartitionResult {
                            partition_index: p.partition_index,
                            error,
                        })
                        .collect(),
                })
                .collect(),
        };
        let (partition, epoch) = match self.validate(&req.group_id, true) {
            Ok(v) => v,
            Err(e) => {
                let response = all(&req, e);
                return self.core.respond(rid, Response::OffsetCommit(response));
            }
        };
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id < 0 {
                self.create_group(&req.group_id, partition, epoch);
            } else {
                let response = all(&req, ErrorCode::IllegalGeneration);
                return self.core.respond(rid, Response::OffsetCommit(response));
            }
        }
        let core = &mut self.core;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return;
        };
        let error = if g.is_static_member_fenced(&req.member_id, req.group_instance_id.as_deref()) {
            Some(ErrorCode::FencedInstanceId)
        } else if req.generation_id < 0 && g.is(GroupState::Empty) {
            None
        } else if !g.members.contains_key(&req.member_id) {
            Some(ErrorCode::UnknownMemberId)
        } else if req.generation_id != g.generation {
            Some(ErrorCode::IllegalGeneration)
        } else {
            match g.state {
                GroupState::Stable | GroupState::PreparingRebalance => {
                    if let Some(m) = g.members.get_mut(&req.member_id) {
                        core.heartbeat(m);
                    }
                    None
                }
                GroupState::CompletingRebalance => Some(ErrorCode::RebalanceInProgress),
                GroupState::Empty | GroupState::Dead => Some(ErrorCode::UnknownMemberId),
            }
        };
        if let Some(e) = error {
            return core.respond(rid, Response::OffsetCommit(all(&req, e)));
        }
        // Kafka's storeOffsets.
        let now = core.now_i64();
        let expire = req.retention_time_ms.map(|r| now.saturating_add(r));
        let mut response = all(&req, ErrorCode::None);
        let mut slots = Vec::new();
        let mut commits = Vec::new();
        let mut records = Vec::new();
        for (ti, t) in req.topics.iter().enumerate() {
            for (pi, p) in t.partitions.iter().enumerate() {
                let metadata = p.committed_metadata.clone().unwrap_or_default();
                if metadata.len() > core.config.offset_metadata_max_bytes {
                    response.topics[ti].partitions[pi].error = ErrorCode::OffsetMetadataTooLarge;
                    continue;
                }
                let commit = CommittedOffset {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata,
                    commit_timestamp: now,
                    expire_timestamp: expire,
                    log_offset: -1,
                };
                let key = RecordKey::OffsetCommit {
                    group: g.id.clone(),
                    topic: t.name.clone(),
                    partition: p.partition_index,
                }
                .encode();
                let value = OffsetCommitValue {
                    offset: commit.offset,
                    leader_epoch: commit.leader_epoch,
                    metadata: commit.metadata.clone(),
                    commit_timestamp: commit.commit_timestamp,
                    expire_timestamp: commit.expire_timestamp.unwrap_or(-1),
                }
                .encode();
                let (key, value) = match (key, value) {
                    (Ok(k), Ok(v)) => (k, v),
                    (Err(e), _) | (_, Err(e)) => {
                        tracing::warn!(group = %g.id, topic = %t.name, partition = p.partition_index, error = %e, "offset commit cannot be written");
                        response.topics[ti].partitions[pi].error = ErrorCode::UnknownServerError;
                        continue;
                    }
                };
                records.push(AppendRecord {
                    key,
                    value: Some(value),
                });
                slots.push((ti, pi));
                commits.push(((t.name.clone(), p.partition_index), commit));
            }
        }
        if records.is_empty() {
            return core.respond(rid, Response::OffsetCommit(response));
        }
        for (tp, _) in &commits {
            *g.pending_offset_commits.entry(tp.clone()).or_default() += 1;
        }
        let answered = core.planted.answer_commit_before_append;
        if answered {
            core.respond(rid, Response::OffsetCommit(response.clone()));
        }
        let pending = PendingAppend::Offsets {
            request_id: rid,
            group_id: g.id.clone(),
            incarnation: g.incarnation,
            response,
            slots,
            commits,
            answered,
        };
        core.append(g.partition, epoch, records, pending);
    }

    /// Kafka's `handleFetchOffsets`: committed offsets only (commits in flight are not
    /// visible).
    fn offset_fetch(&mut self, rid: RequestId, req: OffsetFetchRequest) {
        let fill = |topics: &[OffsetFetchTopic], error: ErrorCode, g: Option<&Group>| {
            topics
                .iter()
                .map(|t| OffsetFetchTopicResult {
                    name: t.name.clone(),
                    partitions: t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            let found = g.and_then(|g| g.offsets.get(&(t.name.clone(), *p)));
                            OffsetFetchPartition {
                                partition_index: *p,
                                committed_offset: found.map_or(-1, |o| o.offset),
                                committed_leader_epoch: found.map_or(-1, |o| o.leader_epoch),
                                metadata: Some(
                                    found.map(|o| o.metadata.clone()).unwrap_or_default(),
                                ),
                                error,
                            }
                        })
                        .collect(),
                })
                .collect::<Vec<_>>()
        };
        let response = match self.validate(&req.group_id, true) {
            Err(e) => OffsetFetchResponse {
                group_id: req.group_id.clone(),
                error: e,
                topics: req
                    .topics
                    .as_deref()
                    .map(|t| fill(t, e, None))
                    .unwrap_or_default(),
            },
            Ok(_) => {
                let g = self.groups.get(&req.group_id);
                let topics = match &req.topics {
                    Some(t) => fill(t, ErrorCode::None, g),
                    None => {
                        let mut by_topic: BTreeMap<String, Vec<OffsetFetchPartition>> =
                            BTreeMap::new();
                        if let Some(g) = g {
                            for ((topic, p), o) in &g.offsets {
                                by_topic.entry(topic.clone()).or_default().push(
                                    OffsetFetchPartition {
                                        partition_index: *p,
                                        committed_offset: o.offset,
                                        committed_leader_epoch: o.leader_epoch,
                                        metadata: Some(o.metadata.clone()),
                                        error: ErrorCode::None,
                                    },
                                );
                            }
                        }
                        by_topic
                            .into_iter()
                            .map(|(name, partitions)| OffsetFetchTopicResult { name, partitions })
                            .collect()
                    }
                };
                OffsetFetchResponse {
                    group_id: req.group_id.clone(),
                    error: ErrorCode::None,
                    topics,
                }
            }
        };
        self.core.respond(rid, Response::OffsetFetch(response));
    }

    /// Kafka's `handleDescribeGroup` for each group.
    fn describe_groups(&mut self, rid: RequestId, req: DescribeGroupsRequest) {
        let mut groups = Vec::with_capacity(req.groups.len());
        for id in &req.groups {
            let described = match self.validate(id, true) {
                Err(e) => DescribedGroup {
                    error: e,
                    group_id: id.clone(),
                    ..Default::default()
                },
                Ok(_) => match self.groups.get(id) {
                    None => DescribedGroup {
                        error: ErrorCode::None,
                        group_id: id.clone(),
                        group_state: GroupState::Dead.name().to_owned(),
                        ..Default::default()
                    },
                    Some(g) => {
                        let stable = g.is(GroupState::Stable);
                        let protocol = g.protocol_name.clone().unwrap_or_default();
                        DescribedGroup {
                            error: ErrorCode::None,
                            group_id: id.clone(),
                            group_state: g.state.name().to_owned(),
                            protocol_type: g.protocol_type.clone().unwrap_or_default(),
                            protocol_data: if stable {
                                protocol.clone()
                            } else {
                                String::new()
                            },
                            members: g
                                .members
                                .values()
                                .map(|m| DescribedMember {
                                    member_id: m.id.clone(),
                                    group_instance_id: m.group_instance_id.clone(),
                                    client_id: m.client_id.clone(),
                                    client_host: m.client_host.clone(),
                                    member_metadata: if stable {
                                        m.metadata(&protocol)
                                    } else {
                                        Bytes::new()
                                    },
                                    member_assignment: if stable {
                                        m.assignment.clone()
                                    } else {
                                        Bytes::new()
                                    },
                                })
                                .collect(),
                        }
                    }
                },
            };
            groups.push(described);
        }
        self.core.respond(
            rid,
            Response::DescribeGroups(DescribeGroupsResponse { groups }),
        );
    }

    /// Kafka's `handleListGroups`.
    fn list_groups(&mut self, rid: RequestId, req: ListGroupsRequest) {
        let loading = self
            .partitions
            .values()
            .any(|s| matches!(s, PartitionStatus::Loading { .. }));
        let groups = self
            .groups
            .values()
            .filter(|g| {
                req.states_filter.is_empty()
                    || req
                        .states_filter
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state.name()))
            })
            .filter(|_| {
                req.types_filter.is_empty()
                    || req
                        .types_filter
                        .iter()
                        .any(|t| t.eq_ignore_ascii_case("classic"))
            })
            .map(|g| ListedGroup {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                group_state: g.state.name().to_owned(),
                group_type: "classic".to_owned(),
            })
            .collect();
        let error = if loading {
            ErrorCode::CoordinatorLoadInProgress
        } else {
            ErrorCode::None
        };
        self.core.respond(
            rid,
            Response::ListGroups(ListGroupsResponse { error, groups }),
        );
    }
}

fn protocols_of(req: &JoinGroupRequest) -> Vec<(String, Bytes)> {
    req.protocols
        .iter()
        .map(|p| (p.name.clone(), p.metadata.clone()))
        .collect()
}

fn protocol_names(req: &JoinGroupRequest) -> Vec<String> {
    req.protocols.iter().map(|p| p.name.clone()).collect()
}

/// Kafka's `addMemberAndRebalance`.
fn add_member_and_rebalance(
    core: &mut Core,
    g: &mut Group,
    rid: RequestId,
    member_id: String,
    req: &JoinGroupRequest,
    group_instance_id: Option<String>,
) {
    let member = Member {
        id: member_id,
        group_instance_id,
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type.clone(),
        protocols: protocols_of(req),
        assignment: Bytes::new(),
        awaiting_join: Some(rid),
        awaiting_sync: None,
        is_new: true,
        heartbeat_deadline: Some(core.now + NEW_MEMBER_JOIN_TIMEOUT_MS),
    };
    if g.is(GroupState::PreparingRebalance) && g.generation == 0 {
        g.new_member_added = true;
    }
    g.add(member);
    core.maybe_prepare_rebalance(g);
}

/// Kafka's `updateMemberAndRebalance`.
fn update_member_and_rebalance(
    core: &mut Core,
    g: &mut Group,
    rid: RequestId,
    req: &JoinGroupRequest,
) {
    if let Some(m) = g.members.get_mut(&req.member_id) {
        m.protocols = protocols_of(req);
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_timeout_ms = req.session_timeout_ms;
        if let Some(old) = m.awaiting_join.replace(rid) {
            // A newer JoinGroup of the same member replaces the waiting one.
            core.join_error(old, &req.member_id, ErrorCode::RebalanceInProgress);
        }
    }
    core.maybe_prepare_rebalance(g);
}

/// Kafka's `doNewMemberJoinGroup` (`doUnknownJoinGroup`).
fn join_new_member(
    core: &mut Core,
    g: &mut Group,
    rid: RequestId,
    req: JoinGroupRequest,
    epoch: i32,
) {
    if !g.supports_protocols(&req.protocol_type, &protocol_names(&req)) {
        return core.join_error(rid, "", ErrorCode::InconsistentGroupProtocol);
    }
    let prefix = req
        .group_instance_id
        .as_deref()
        .unwrap_or(&req.client_id)
        .to_owned();
    let new_id = core.new_member_id(&prefix, g.partition, epoch);
    if let Some(instance) = req.group_instance_id.clone() {
        match g.static_members.get(&instance).cloned() {
            None => add_member_and_rebalance(core, g, rid, new_id, &req, Some(instance)),
            Some(old_id) => update_static_member_and_rebalance(
                core, g, rid, &req, instance, old_id, new_id, epoch,
            ),
        }
    } else if req.require_known_member_id {
        g.pending_members.insert(
            new_id.clone(),
            core.now + req.session_timeout_ms.max(0) as u64,
        );
        core.join_error(rid, &new_id, ErrorCode::MemberIdRequired);
    } else {
        add_member_and_rebalance(core, g, rid, new_id, &req, None);
    }
}

/// Kafka's `updateStaticMemberAndRebalance`: the instance's old member id is fenced and
/// replaced by the new one.
#[allow(clippy::too_many_arguments)]
fn update_static_member_and_rebalance(
    core: &mut Core,
    g: &mut Group,
    rid: RequestId,
    req: &JoinGroupRequest,
    instance: String,
    old_id: String,
    new_id: String,
    epoch: i32,
) {
    let current_leader = g.leader.clone();
    let Some(mut m) = g.members.remove(&old_id) else {
        g.static_members.remove(&instance);
        return add_member_and_rebalance(core, g, rid, new_id, req, Some(instance));
    };
    if let Some(r) = m.awaiting_join.take() {
        core.join_error(r, &old_id, ErrorCode::FencedInstanceId);
    }
    if let Some(r) = m.awaiting_sync.take() {
        core.sync_error(r, ErrorCode::FencedInstanceId);
    }
    m.id = new_id.clone();
    core.heartbeat(&mut m);
    let old_protocols = std::mem::replace(&mut m.protocols, protocols_of(req));
    let old_rebalance = std::mem::replace(&mut m.rebalance_timeout_ms, req.rebalance_timeout_ms);
    let old_session = std::mem::replace(&mut m.session_timeout_ms, req.session_timeout_ms);
    m.awaiting_join = Some(rid);
    g.members.insert(new_id.clone(), m);
    if g.is_leader(&old_id) {
        g.leader = Some(new_id.clone());
    }
    g.static_members.insert(instance.clone(), new_id.clone());
    match g.state {
        GroupState::Stable => {
            let next = g.select_protocol();
            if next.is_some() && g.protocol_name == next {
                let pending = PendingAppend::StaticRejoin {
                    request_id: rid,
                    group_id: g.id.clone(),
                    incarnation: g.incarnation,
                    instance_id: instance,
                    old_member_id: old_id,
                    new_member_id: new_id,
                    old_protocols,
                    old_rebalance_timeout_ms: old_rebalance,
                    old_session_timeout_ms: old_session,
                    current_leader,
                };
                let assignment = g.current_assignment();
                core.store_group(g, epoch, &assignment, pending);
            } else {
                core.maybe_prepare_rebalance(g);
            }
        }
        GroupState::CompletingRebalance => core.prepare_rebalance(g),
        GroupState::PreparingRebalance => {}
        GroupState::Empty | GroupState::Dead => {
            if let Some(m) = g.members.get_mut(&new_id) {
                m.awaiting_join = None;
            }
            core.join_error(rid, &new_id, ErrorCode::UnknownMemberId);
        }
    }
}

/// Kafka's `doCurrentMemberJoinGroup`.
fn join_known_member(core: &mut Core, g: &mut Group, rid: RequestId, req: JoinGroupRequest) {
    if !g.supports_protocols(&req.protocol_type, &protocol_names(&req)) {
        return core.join_error(rid, &req.member_id, ErrorCode::InconsistentGroupProtocol);
    }
    if g.pending_members.contains_key(&req.member_id) {
        // A KIP-394 member rejoining with the id it was given. Pending members are never
        // static.
        if req.group_instance_id.is_some() {
            return core.join_error(rid, &req.member_id, ErrorCode::UnknownMemberId);
        }
        let id = req.member_id.clone();
        return add_member_and_rebalance(core, g, rid, id, &req, None);
    }
    let instance_not_found = req
        .group_instance_id
        .as_ref()
        .is_some_and(|i| !g.static_members.contains_key(i));
    if g.is_static_member_fenced(&req.member_id, req.group_instance_id.as_deref()) {
        return core.join_error(rid, &req.member_id, ErrorCode::FencedInstanceId);
    }
    if !g.members.contains_key(&req.member_id) || instance_not_found {
        return core.join_error(rid, &req.member_id, ErrorCode::UnknownMemberId);
    }
    let protocols = protocols_of(&req);
    let matches = g
        .members
        .get(&req.member_id)
        .is_some_and(|m| m.matches(&protocols));
    let current = |g: &Group, with_members: bool| JoinGroupResponse {
        error: ErrorCode::None,
        generation_id: g.generation,
        protocol_type: g.protocol_type.clone(),
        protocol_name: g.protocol_name.clone(),
        leader: g.leader.clone().unwrap_or_default(),
        skip_assignment: false,
        member_id: req.member_id.clone(),
        members: if with_members {
            g.current_member_metadata()
        } else {
            Vec::new()
        },
    };
    match g.state {
        GroupState::PreparingRebalance => update_member_and_rebalance(core, g, rid, &req),
        GroupState::CompletingRebalance => {
            if matches {
                let response = current(g, g.is_leader(&req.member_id));
                core.respond(rid, Response::JoinGroup(response));
            } else {
                update_member_and_rebalance(core, g, rid, &req);
            }
        }
        GroupState::Stable => {
            if g.is_leader(&req.member_id) || !matches {
                update_member_and_rebalance(core, g, rid, &req);
            } else {
                let response = current(g, false);
                core.respond(rid, Response::JoinGroup(response));
            }
        }
        GroupState::Empty | GroupState::Dead => {
            core.join_error(rid, &req.member_id, ErrorCode::UnknownMemberId)
        }
    }
}
