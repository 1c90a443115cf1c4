//! A group's in-memory state: Kafka's `GroupMetadata` and `MemberMetadata`.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;

use crate::records::{GroupMetadataValue, MemberMetadataValue};
use crate::types::{JoinGroupMember, RequestId};

/// A group's state, with Kafka's transitions:
///
/// ```text
/// Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
///   ▲                 ▲         │                                   │ leader's SyncGroup
///   │ last member     │         └──no member left──▶ Empty          ▼ stored
///   └── leaves ───────┴─────────── join / leave / timeout ◀──── Stable
/// any state ──unload / offsets expired──▶ Dead
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; offsets may remain.
    Empty,
    /// Waiting for the members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assignment stored and handed out.
    Stable,
    /// Removed (expired, or its partition unloaded).
    Dead,
}

impl GroupState {
    /// The name Kafka uses in DescribeGroups and ListGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A member (Kafka's `MemberMetadata`).
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    pub(crate) protocol_type: String,
    pub(crate) protocols: Vec<(String, Bytes)>,
    pub(crate) assignment: Bytes,
    /// The JoinGroup waiting for the rebalance to complete.
    pub(crate) awaiting_join: Option<RequestId>,
    /// The SyncGroup waiting for the leader's assignment.
    pub(crate) awaiting_sync: Option<RequestId>,
    /// Joined in the current rebalance and not yet through it.
    pub(crate) is_new: bool,
    /// When the session expires unless a heartbeat (or join / sync) arrives.
    pub(crate) heartbeat_deadline: Option<u64>,
}

impl Member {
    pub(crate) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub(crate) fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }

    /// Kafka's `MemberMetadata.matches`: the same protocols with the same metadata, in order.
    pub(crate) fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// The member's first choice among `candidates` (Kafka's `MemberMetadata.vote`).
    pub(crate) fn vote(&self, candidates: &[String]) -> Option<String> {
        self.protocols
            .iter()
            .map(|(n, _)| n)
            .find(|n| candidates.contains(n))
            .cloned()
    }

    /// Kafka's `hasSatisfiedHeartbeat` at expiry: a member waiting in a rebalance is not
    /// expired (unless it is new), any other is.
    pub(crate) fn survives_expiry(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }
}

/// How the current rebalance's join phase ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinTimer {
    /// Kafka's `InitialDelayedJoin`: never completes early; on expiry extends by
    /// `min(configured, remaining)` while new members keep arriving.
    Initial {
        deadline: u64,
        configured_delay: u64,
        delay: u64,
        remaining: u64,
    },
    /// Kafka's `DelayedJoin`: completes once every member rejoined, or at the deadline.
    Regular { deadline: u64 },
}

impl JoinTimer {
    pub(crate) fn deadline(&self) -> u64 {
        match *self {
            JoinTimer::Initial { deadline, .. } | JoinTimer::Regular { deadline } => deadline,
        }
    }
}

/// A committed offset (Kafka's `CommitRecordMetadataAndOffset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommittedOffset {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_timestamp: i64,
    pub(crate) expire_timestamp: Option<i64>,
    /// Where the commit record sits in `__consumer_offsets`: the later record wins.
    pub(crate) log_offset: i64,
}

/// A group (Kafka's `GroupMetadata`).
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) id: String,
    pub(crate) partition: i32,
    /// Tells this group apart from a later one of the same id (after unload and load).
    pub(crate) incarnation: u64,
    /// The leader epoch its partition was loaded at (its writes carry it).
    pub(crate) leader_epoch: i32,
    pub(crate) state: GroupState,
    pub(crate) state_timestamp: Option<i64>,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol_name: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// KIP-394 members that got MEMBER_ID_REQUIRED, with their expiry.
    pub(crate) pending_members: BTreeMap<String, u64>,
    /// `group.instance.id` → member id.
    pub(crate) static_members: BTreeMap<String, String>,
    pub(crate) new_member_added: bool,
    pub(crate) join_timer: Option<JoinTimer>,
    pub(crate) offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Commits appended and not yet completed, per partition (Kafka's `pendingOffsetCommits`).
    pub(crate) pending_offset_commits: BTreeMap<(String, i32), usize>,
}

impl Group {
    pub(crate) fn new(id: String, partition: i32, incarnation: u64, now: i64) -> Group {
        Group {
            id,
            partition,
            incarnation,
            leader_epoch: -1,
            state: GroupState::Empty,
            state_timestamp: Some(now),
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            new_member_added: false,
            join_timer: None,
            offsets: BTreeMap::new(),
            pending_offset_commits: BTreeMap::new(),
        }
    }

    pub(crate) fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub(crate) fn transition(&mut self, state: GroupState, now: i64) {
        self.state = state;
        self.state_timestamp = Some(now);
    }

    pub(crate) fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        )
    }

    pub(crate) fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    pub(crate) fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    pub(crate) fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join() && self.pending_members.is_empty()
    }

    pub(crate) fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as u64)
            .max()
            .unwrap_or(0)
    }

    /// Kafka's `isStaticMemberFenced`: the request names an instance id that now belongs to
    /// another member id.
    pub(crate) fn is_static_member_fenced(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> bool {
        match group_instance_id {
            Some(instance) => self
                .static_members
                .get(instance)
                .is_some_and(|id| id != member_id),
            None => false,
        }
    }

    /// Kafka's `supportsProtocols`.
    pub(crate) fn supports_protocols(&self, protocol_type: &str, protocols: &[String]) -> bool {
        if self.is(GroupState::Empty) {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols.iter().any(|p| {
                    self.members.values().filter(|m| m.supports(p)).count() == self.members.len()
                })
        }
    }

    /// The protocols every member supports, in the first member's order.
    fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.values().next() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|p| self.members.values().all(|m| m.supports(p)))
            .collect()
    }

    /// Kafka's `selectProtocol`: each member votes for its first choice among the protocols
    /// all support; most votes wins (ties go to the candidate listed first).
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                if let Some(entry) = votes.iter_mut().find(|(c, _)| *c == v) {
                    entry.1 += 1;
                }
            }
        }
        let mut best: Option<(String, usize)> = None;
        for (c, n) in votes {
            if best.as_ref().is_none_or(|(_, b)| n > *b) {
                best = Some((c, n));
            }
        }
        best.map(|(c, _)| c)
    }

    /// Adds a member (Kafka's `GroupMetadata.add`): the first member sets the protocol type,
    /// and becomes leader if there is none.
    pub(crate) fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        self.pending_members.remove(&member.id);
        self.members.insert(member.id.clone(), member);
    }

    /// Removes a member (Kafka's `GroupMetadata.remove`); a leaving leader's place goes to
    /// the first remaining member. Returns the member.
    pub(crate) fn remove(&mut self, member_id: &str) -> Option<Member> {
        let removed = self.members.remove(member_id);
        if let Some(m) = &removed {
            if let Some(instance) = &m.group_instance_id {
                if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                    self.static_members.remove(instance);
                }
            }
        }
        if self.is_leader(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        self.pending_members.remove(member_id);
        removed
    }

    /// Kafka's `maybeElectNewJoinedLeader`.
    pub(crate) fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .map(|m| m.id.clone())
        {
            Some(id) => {
                self.leader = Some(id);
                true
            }
            None => false,
        }
    }

    /// The members with their metadata for the selected protocol (the leader's JoinGroup).
    pub(crate) fn current_member_metadata(&self) -> Vec<JoinGroupMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinGroupMember {
                member_id: m.id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    /// The `GroupMetadataValue` of the group with the given assignment.
    pub(crate) fn metadata_value(
        &self,
        assignment: &BTreeMap<String, Bytes>,
    ) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp.unwrap_or(-1),
            members: self
                .members
                .values()
                .map(|m| MemberMetadataValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: assignment.get(&m.id).cloned().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// The members' current assignments.
    pub(crate) fn current_assignment(&self) -> BTreeMap<String, Bytes> {
        self.members
            .values()
            .map(|m| (m.id.clone(), m.assignment.clone()))
            .collect()
    }

    /// Kafka's `removeExpiredOffsets` for the cases of an Empty group and a group without a
    /// protocol type (a simple consumer): returns the removed partitions.
    pub(crate) fn remove_expired_offsets(
        &mut self,
        now: i64,
        retention_ms: i64,
    ) -> Vec<(String, i32)> {
        let empty_with_protocol = self.protocol_type.is_some() && self.is(GroupState::Empty);
        let no_protocol = self.protocol_type.is_none();
        if !empty_with_protocol && !no_protocol {
            return Vec::new();
        }
        let state_ts = self.state_timestamp;
        let expired: Vec<(String, i32)> = self
            .offsets
            .iter()
            .filter(|(tp, o)| {
                !self.pending_offset_commits.contains_key(*tp)
                    && match o.expire_timestamp {
                        Some(expire) => now >= expire,
                        None => {
                            let base = if empty_with_protocol {
                                state_ts.unwrap_or(o.commit_timestamp)
                            } else {
                                o.commit_timestamp
                            };
                            now - base >= retention_ms
                        }
                    }
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &expired {
            self.offsets.remove(tp);
        }
        expired
    }
}
