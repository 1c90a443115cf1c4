//! A simulated consumer as Kafka's `AbstractCoordinator` / `ConsumerCoordinator` drive it:
//! find the coordinator (the leader of the group's `__consumer_offsets` partition, asked of any
//! broker), join (KIP-394's two-step join), sync (the leader assigns), fetch the committed
//! offsets of its assignment, then heartbeat and commit increasing offsets; it follows
//! `NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`, `COORDINATOR_LOAD_IN_PROGRESS`,
//! `REBALANCE_IN_PROGRESS`, `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID` and
//! `FENCED_INSTANCE_ID` like a real client. One request is in flight at a time.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_group_coordinator::*;
use kafka_wire::error_code::ErrorCode;
use rand::rngs::StdRng;
use rand::Rng;

use super::{GroupSimConfig, Msg, TOPIC};
use crate::net::NodeId;

/// Where a consumer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Stopped (left, or a static member restarting) until the given time.
    Away {
        /// When it comes back.
        until: u64,
    },
    /// Joining.
    Join,
    /// Syncing.
    Sync,
    /// Fetching the committed offsets of its new assignment.
    Fetch,
    /// Consuming: heartbeats and commits.
    Stable,
}

#[derive(Debug, Clone)]
enum Pending {
    Find,
    Join,
    Sync,
    Fetch,
    Heartbeat,
    Commit(BTreeMap<i32, i64>),
    Leave,
}

/// One consumer.
#[derive(Debug, Clone)]
pub struct Consumer {
    /// Its node id.
    pub id: NodeId,
    /// Its group.
    pub group: String,
    /// Its `group.instance.id` if static.
    pub instance: Option<String>,
    /// Its member id (empty before the first join).
    pub member_id: String,
    /// Its generation.
    pub generation: i32,
    /// Where it is.
    pub phase: Phase,
    /// The coordinator it talks to.
    pub coordinator: Option<NodeId>,
    /// Its partitions of the topic.
    pub assignment: Vec<i32>,
    /// Its positions (the next offset to commit from).
    pub positions: BTreeMap<i32, i64>,
    join: Option<JoinGroupResponse>,
    inflight: Option<(u64, Pending, u64)>,
    next_req: u64,
    wake_at: u64,
    next_heartbeat: u64,
    next_commit: u64,
}

impl Consumer {
    /// A consumer that starts joining at once.
    pub fn new(id: NodeId, group: String, instance: Option<String>) -> Self {
        Consumer {
            id,
            group,
            instance,
            member_id: String::new(),
            generation: NO_GENERATION,
            phase: Phase::Join,
            coordinator: None,
            assignment: Vec::new(),
            positions: BTreeMap::new(),
            join: None,
            inflight: None,
            next_req: 0,
            wake_at: 0,
            next_heartbeat: 0,
            next_commit: 0,
        }
    }

    fn send(
        &mut self,
        now: u64,
        to: NodeId,
        kind: Pending,
        timeout: u64,
        msg: impl FnOnce(u64) -> Msg,
    ) -> Option<(NodeId, Msg)> {
        self.next_req += 1;
        let req = self.next_req;
        self.inflight = Some((req, kind, now + timeout));
        Some((to, msg(req)))
    }

    fn request(
        &mut self,
        now: u64,
        to: NodeId,
        kind: Pending,
        timeout: u64,
        request: Request,
    ) -> Option<(NodeId, Msg)> {
        self.send(now, to, kind, timeout, |req| Msg::Request { req, request })
    }

    /// Stops the consumer for a while: a dynamic member sends LeaveGroup first, a static member
    /// just goes (as a restarting process does, KIP-345).
    pub fn leave(&mut self, now: u64, away_ms: u64) -> Option<(NodeId, Msg)> {
        let out = match (self.coordinator, &self.instance, self.member_id.is_empty()) {
            (Some(c), None, false) => {
                let request = Request::LeaveGroup(LeaveGroupRequest {
                    group_id: self.group.clone(),
                    members: vec![LeavingMember {
                        member_id: self.member_id.clone(),
                        group_instance_id: None,
                    }],
                });
                self.send(now, c, Pending::Leave, 0, |req| Msg::Request {
                    req,
                    request,
                })
            }
            _ => None,
        };
        self.inflight = None;
        self.member_id.clear();
        self.generation = NO_GENERATION;
        self.assignment.clear();
        self.phase = Phase::Away {
            until: now + away_ms,
        };
        out
    }

    /// Whether it is consuming at `generation`.
    pub fn is_stable_at(&self, generation: i32) -> bool {
        self.phase == Phase::Stable && self.generation == generation && self.inflight_is_idle()
    }

    fn inflight_is_idle(&self) -> bool {
        !matches!(
            self.inflight,
            Some((_, Pending::Join | Pending::Sync | Pending::Fetch, _))
        )
    }

    /// Its state in one line, for failure reports.
    pub fn describe(&self) -> String {
        format!(
            "{} {:?} gen {} member {:?} coordinator {:?} in flight {:?}",
            self.id, self.phase, self.generation, self.member_id, self.coordinator, self.inflight
        )
    }

    /// Whether it is away.
    pub fn is_away(&self) -> bool {
        matches!(self.phase, Phase::Away { .. })
    }

    /// What it sends at `now`, if anything.
    pub fn step(
        &mut self,
        now: u64,
        rng: &mut StdRng,
        cfg: &GroupSimConfig,
    ) -> Option<(NodeId, Msg)> {
        if let Some((_, _, deadline)) = self.inflight {
            if now < deadline {
                return None;
            }
            // A request timed out: the client marks the coordinator unknown.
            self.inflight = None;
            self.coordinator = None;
        }
        if now < self.wake_at {
            return None;
        }
        if let Phase::Away { until } = self.phase {
            if now < until {
                return None;
            }
            self.phase = Phase::Join;
        }
        let Some(c) = self.coordinator else {
            let to = rng.random_range(1..=cfg.brokers);
            let partition = partition_for(&self.group, cfg.offsets_partitions);
            return self.send(now, to, Pending::Find, 300, |req| Msg::FindCoordinator {
                req,
                partition,
            });
        };
        let timeout = 1_500;
        match self.phase {
            Phase::Away { .. } => None,
            Phase::Join => {
                let request = Request::JoinGroup(JoinGroupRequest {
                    group_id: self.group.clone(),
                    session_timeout_ms: cfg.session_timeout_ms,
                    rebalance_timeout_ms: cfg.rebalance_timeout_ms,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance.clone(),
                    protocol_type: "consumer".into(),
                    protocols: vec![JoinGroupProtocol {
                        name: "range".into(),
                        metadata: Bytes::from_static(TOPIC.as_bytes()),
                    }],
                    require_known_member_id: true,
                    client_id: format!("consumer-{}", self.id),
                    client_host: "/127.0.0.1".into(),
                });
                let t =
                    cfg.rebalance_timeout_ms as u64 + cfg.initial_rebalance_delay_ms as u64 + 1_000;
                self.request(now, c, Pending::Join, t, request)
            }
            Phase::Sync => {
                let assignments = match &self.join {
                    Some(j) if j.leader == self.member_id && !j.skip_assignment => {
                        assign(&j.members, cfg.topic_partitions)
                    }
                    _ => Vec::new(),
                };
                let request = Request::SyncGroup(SyncGroupRequest {
                    group_id: self.group.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance.clone(),
                    protocol_type: Some("consumer".into()),
                    protocol_name: Some("range".into()),
                    assignments,
                });
                self.request(now, c, Pending::Sync, timeout, request)
            }
            Phase::Fetch => {
                let request = Request::OffsetFetch(OffsetFetchRequest {
                    group_id: self.group.clone(),
                    topics: Some(vec![OffsetFetchTopic {
                        name: TOPIC.into(),
                        partition_indexes: self.assignment.clone(),
                    }]),
                    require_stable: true,
                });
                self.request(now, c, Pending::Fetch, timeout, request)
            }
            Phase::Stable => {
                if now >= self.next_heartbeat {
                    let request = Request::Heartbeat(HeartbeatRequest {
                        group_id: self.group.clone(),
                        generation_id: self.generation,
                        member_id: self.member_id.clone(),
                        group_instance_id: self.instance.clone(),
                    });
                    self.request(now, c, Pending::Heartbeat, timeout, request)
                } else if now >= self.next_commit && !self.assignment.is_empty() {
                    let target: BTreeMap<i32, i64> = self
                        .assignment
                        .iter()
                        .map(|p| {
                            (
                                *p,
                                self.positions.get(p).copied().unwrap_or(0)
                                    + rng.random_range(1..5),
                            )
                        })
                        .collect();
                    // The consumer has consumed up to there: a retry commits at least as much.
                    self.positions.extend(target.clone());
                    let request = Request::OffsetCommit(OffsetCommitRequest {
                        group_id: self.group.clone(),
                        generation_id: self.generation,
                        member_id: self.member_id.clone(),
                        group_instance_id: self.instance.clone(),
                        retention_time_ms: None,
                        topics: vec![OffsetCommitTopic {
                            name: TOPIC.into(),
                            partitions: target
                                .iter()
                                .map(|(p, o)| OffsetCommitPartition {
                                    partition_index: *p,
                                    committed_offset: *o,
                                    committed_leader_epoch: -1,
                                    committed_metadata: None,
                                })
                                .collect(),
                        }],
                    });
                    self.request(now, c, Pending::Commit(target), timeout, request)
                } else {
                    None
                }
            }
        }
    }

    /// Follows the errors every request shares; true if handled.
    fn coordinator_error(&mut self, now: u64, e: ErrorCode) -> bool {
        match e {
            ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                self.coordinator = None;
                self.wake_at = now + 20;
                true
            }
            ErrorCode::CoordinatorLoadInProgress => {
                self.wake_at = now + 50;
                true
            }
            _ => false,
        }
    }

    /// Back to joining after a generation error: the member id and generation are reset.
    fn reset(&mut self) {
        self.member_id.clear();
        self.generation = NO_GENERATION;
        self.phase = Phase::Join;
    }

    fn group_error(&mut self, now: u64, e: ErrorCode, cfg: &GroupSimConfig) {
        match e {
            ErrorCode::RebalanceInProgress => self.phase = Phase::Join,
            ErrorCode::FencedInstanceId => {
                // A fenced static member stops; here it comes back later as a new process.
                self.reset();
                self.phase = Phase::Away {
                    until: now + cfg.session_timeout_ms as u64,
                };
            }
            e if self.coordinator_error(now, e) => {}
            _ => {
                self.reset();
                self.wake_at = now + 20;
            }
        }
    }

    /// Takes a message from a broker.
    pub fn on_message(&mut self, now: u64, msg: Msg, cfg: &GroupSimConfig) {
        let req = match &msg {
            Msg::FindCoordinatorResponse { req, .. } | Msg::Response { req, .. } => *req,
            _ => return,
        };
        let kind = match &self.inflight {
            Some((r, k, _)) if *r == req => k.clone(),
            _ => return, // late, duplicated, or abandoned
        };
        self.inflight = None;
        match (kind, msg) {
            (Pending::Find, Msg::FindCoordinatorResponse { coordinator, .. }) => {
                self.coordinator = coordinator;
                if coordinator.is_none() {
                    self.wake_at = now + 50;
                }
            }
            (
                Pending::Join,
                Msg::Response {
                    response: Response::JoinGroup(r),
                    ..
                },
            ) => match r.error {
                ErrorCode::None => {
                    self.member_id = r.member_id.clone();
                    self.generation = r.generation_id;
                    self.join = Some(r);
                    self.phase = Phase::Sync;
                }
                ErrorCode::MemberIdRequired => self.member_id = r.member_id,
                ErrorCode::UnknownMemberId => self.reset(),
                e => self.group_error(now, e, cfg),
            },
            (
                Pending::Sync,
                Msg::Response {
                    response: Response::SyncGroup(r),
                    ..
                },
            ) => match r.error {
                ErrorCode::None => {
                    self.assignment = own_partitions(&r.assignment);
                    self.phase = Phase::Fetch;
                }
                e => {
                    self.group_error(now, e, cfg);
                    if self.phase == Phase::Sync {
                        self.phase = Phase::Join;
                    }
                }
            },
            (
                Pending::Fetch,
                Msg::Response {
                    response: Response::OffsetFetch(r),
                    ..
                },
            ) => {
                if r.error != ErrorCode::None {
                    self.group_error(now, r.error, cfg);
                    return;
                }
                self.positions.clear();
                for t in &r.topics {
                    for p in &t.partitions {
                        self.positions
                            .insert(p.partition_index, p.committed_offset.max(0));
                    }
                }
                self.phase = Phase::Stable;
                self.next_heartbeat = now + cfg.heartbeat_interval_ms;
                self.next_commit = now + cfg.commit_interval_ms;
            }
            (
                Pending::Heartbeat,
                Msg::Response {
                    response: Response::Heartbeat(r),
                    ..
                },
            ) => match r.error {
                ErrorCode::None => self.next_heartbeat = now + cfg.heartbeat_interval_ms,
                e => self.group_error(now, e, cfg),
            },
            (
                Pending::Commit(target),
                Msg::Response {
                    response: Response::OffsetCommit(r),
                    ..
                },
            ) => {
                let error = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| p.error)
                    .find(|e| *e != ErrorCode::None);
                match error {
                    None => {
                        let _ = target;
                        // Heartbeats run on their own interval (the heartbeat thread).
                        self.next_commit = now + cfg.commit_interval_ms;
                    }
                    Some(e) => self.group_error(now, e, cfg),
                }
            }
            _ => {}
        }
    }
}

/// The leader's assignment: partitions round-robin over the members sorted by id. Each
/// member's bytes carry the whole set (`member=p,p;...`), a `|`, and its own partitions, so a
/// check can compare the sets every member of a generation got.
pub fn assign(members: &[JoinGroupMember], partitions: i32) -> Vec<SyncGroupAssignment> {
    let mut ids: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return Vec::new();
    }
    let own = |i: usize| -> String {
        (0..partitions)
            .filter(|p| *p as usize % ids.len() == i)
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let set: String = ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!("{id}={}", own(i)))
        .collect::<Vec<_>>()
        .join(";");
    ids.iter()
        .enumerate()
        .map(|(i, id)| SyncGroupAssignment {
            member_id: (*id).to_owned(),
            assignment: Bytes::from(format!("{set}|{}", own(i))),
        })
        .collect()
}

/// The set part and the own part of an assignment.
pub fn split_assignment(bytes: &[u8]) -> (String, String) {
    let s = String::from_utf8_lossy(bytes);
    match s.split_once('|') {
        Some((set, own)) => (set.to_owned(), own.to_owned()),
        None => (String::new(), s.into_owned()),
    }
}

fn own_partitions(bytes: &[u8]) -> Vec<i32> {
    split_assignment(bytes)
        .1
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect()
}
