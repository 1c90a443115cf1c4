//! Unit tests of the coordinator, driven through `handle` / `poll_action` with a log that
//! stands in for `__consumer_offsets`.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;
use proptest::prelude::*;

use crate::*;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

/// A coordinator, a clock, a log per offsets partition, and what came out.
struct Harness {
    c: GroupCoordinator,
    now: u64,
    next_rid: u64,
    /// Each partition's log: records with offsets.
    log: BTreeMap<i32, Vec<LogRecord>>,
    /// Appends held back (when `auto_complete` is off).
    held: Vec<(u64, i32, Vec<AppendRecord>)>,
    /// The leader epoch of every append, in order.
    append_epochs: Vec<i32>,
    auto_complete: bool,
    responses: BTreeMap<u64, Response>,
}

impl Harness {
    fn new(config: GroupCoordinatorConfig) -> Harness {
        Harness {
            c: GroupCoordinator::new(config),
            now: 1_000,
            next_rid: 1,
            log: BTreeMap::new(),
            held: Vec::new(),
            append_epochs: Vec::new(),
            auto_complete: true,
            responses: BTreeMap::new(),
        }
    }

    /// Kafka's defaults (a 3 s initial rebalance delay), the partition of "g" loaded.
    fn loaded() -> Harness {
        let mut h = Harness::new(GroupCoordinatorConfig::new());
        h.load("g");
        h
    }

    fn partition(&self, group: &str) -> i32 {
        self.c.partition_for(group)
    }

    fn load(&mut self, group: &str) {
        let p = self.partition(group);
        let records = self.log.get(&p).cloned().unwrap_or_default();
        self.input(Input::Load {
            partition: p,
            leader_epoch: 1,
            records,
        });
    }

    fn unload(&mut self, group: &str) {
        let p = self.partition(group);
        self.input(Input::Unload { partition: p });
    }

    fn input(&mut self, input: Input) {
        self.c.handle(self.now, input);
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(a) = self.c.poll_action() {
            match a {
                Action::Respond {
                    request_id,
                    response,
                } => {
                    assert!(
                        self.responses.insert(request_id, response).is_none(),
                        "request {request_id} answered twice"
                    );
                }
                Action::Append {
                    append_id,
                    partition,
                    records,
                    leader_epoch,
                } => {
                    self.append_epochs.push(leader_epoch);
                    if self.auto_complete {
                        let base = self.write(partition, records);
                        self.c.handle(
                            self.now,
                            Input::AppendCompleted {
                                append_id,
                                result: Ok(base),
                            },
                        );
                    } else {
                        self.held.push((append_id, partition, records));
                    }
                }
                Action::Loaded { .. } => {}
            }
        }
    }

    fn write(&mut self, partition: i32, records: Vec<AppendRecord>) -> i64 {
        let log = self.log.entry(partition).or_default();
        let base = log.len() as i64;
        for (i, r) in records.into_iter().enumerate() {
            log.push(LogRecord {
                offset: base + i as i64,
                key: r.key,
                value: r.value,
            });
        }
        base
    }

    /// Completes the oldest held append: written and committed, or failed.
    fn complete_held(&mut self, result: Result<(), ErrorCode>) {
        let (append_id, partition, records) = self.held.remove(0);
        let result = match result {
            Ok(()) => Ok(self.write(partition, records)),
            Err(e) => Err(e),
        };
        self.input(Input::AppendCompleted { append_id, result });
    }

    /// Lets the initial rebalance delay run out.
    fn settle(&mut self) {
        let start = self.now;
        loop {
            self.advance(1_000);
            if self.c.group_state("g") != Some(GroupState::PreparingRebalance) {
                break;
            }
            assert!(
                self.now - start <= REBALANCE as u64,
                "the rebalance did not complete"
            );
        }
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.input(Input::Tick);
    }

    fn send(&mut self, request: Request) -> u64 {
        let rid = self.next_rid;
        self.next_rid += 1;
        self.input(Input::Request {
            request_id: rid,
            request,
        });
        rid
    }

    fn take(&mut self, rid: u64) -> Option<Response> {
        self.responses.remove(&rid)
    }

    fn join_response(&mut self, rid: u64) -> JoinGroupResponse {
        match self.take(rid) {
            Some(Response::JoinGroup(r)) => r,
            other => panic!("JoinGroup {rid} not answered: {other:?}"),
        }
    }

    fn sync_response(&mut self, rid: u64) -> SyncGroupResponse {
        match self.take(rid) {
            Some(Response::SyncGroup(r)) => r,
            other => panic!("SyncGroup {rid} not answered: {other:?}"),
        }
    }

    fn join(&mut self, member_id: &str, instance: Option<&str>, protocols: &[(&str, &str)]) -> u64 {
        self.send(Request::JoinGroup(join_request(
            "g", member_id, instance, protocols,
        )))
    }

    fn sync(&mut self, member_id: &str, generation: i32, assignments: &[(&str, &str)]) -> u64 {
        self.send(Request::SyncGroup(SyncGroupRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: member_id.into(),
            assignments: assignments
                .iter()
                .map(|(m, a)| SyncGroupAssignment {
                    member_id: (*m).into(),
                    assignment: Bytes::copy_from_slice(a.as_bytes()),
                })
                .collect(),
            ..Default::default()
        }))
    }

    fn heartbeat(&mut self, member_id: &str, generation: i32, instance: Option<&str>) -> ErrorCode {
        let rid = self.send(Request::Heartbeat(HeartbeatRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: instance.map(Into::into),
        }));
        match self.take(rid) {
            Some(Response::Heartbeat(r)) => r.error,
            other => panic!("heartbeat not answered: {other:?}"),
        }
    }

    fn commit(
        &mut self,
        group: &str,
        member_id: &str,
        generation: i32,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> u64 {
        self.send(Request::OffsetCommit(OffsetCommitRequest {
            group_id: group.into(),
            generation_id: generation,
            member_id: member_id.into(),
            topics: vec![OffsetCommitTopic {
                name: topic.into(),
                partitions: vec![OffsetCommitPartition {
                    partition_index: partition,
                    committed_offset: offset,
                    committed_leader_epoch: -1,
                    committed_metadata: Some(String::new()),
                }],
            }],
            ..Default::default()
        }))
    }

    fn commit_error(&mut self, rid: u64) -> Option<ErrorCode> {
        match self.take(rid) {
            Some(Response::OffsetCommit(r)) => Some(r.topics[0].partitions[0].error),
            None => None,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn fetch(&mut self, group: &str, topic: &str, partition: i32) -> (ErrorCode, i64) {
        let rid = self.send(Request::OffsetFetch(OffsetFetchRequest {
            group_id: group.into(),
            topics: Some(vec![OffsetFetchTopic {
                name: topic.into(),
                partition_indexes: vec![partition],
            }]),
            require_stable: false,
        }));
        match self.take(rid) {
            Some(Response::OffsetFetch(r)) => (r.error, r.topics[0].partitions[0].committed_offset),
            other => panic!("fetch not answered: {other:?}"),
        }
    }

    /// Joins `n` dynamic members through KIP-394 and syncs them: returns the member ids
    /// (leader first) and the generation.
    fn stable_group(&mut self, n: usize) -> (Vec<String>, i32) {
        let mut ids = Vec::new();
        for _ in 0..n {
            let rid = self.join("", None, &[("range", "sub")]);
            let r = self.join_response(rid);
            assert_eq!(r.error, ErrorCode::MemberIdRequired);
            ids.push(r.member_id);
        }
        let rids: Vec<u64> = ids
            .iter()
            .map(|id| self.join(id, None, &[("range", "sub")]))
            .collect();
        self.settle();
        let mut generation = -1;
        let mut leader = String::new();
        for rid in rids {
            let r = self.join_response(rid);
            assert_eq!(r.error, ErrorCode::None);
            generation = r.generation_id;
            leader = r.leader.clone();
        }
        assert_eq!(leader, ids[0], "the first joiner leads");
        let assignments: Vec<(String, String)> = ids
            .iter()
            .map(|id| (id.clone(), format!("asg-{id}")))
            .collect();
        let refs: Vec<(&str, &str)> = assignments
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let srids: Vec<u64> = ids
            .iter()
            .map(|id| {
                if *id == ids[0] {
                    self.sync(id, generation, &refs)
                } else {
                    self.sync(id, generation, &[])
                }
            })
            .collect();
        for (id, rid) in ids.iter().zip(srids) {
            let r = self.sync_response(rid);
            assert_eq!(r.error, ErrorCode::None);
            assert_eq!(r.assignment, Bytes::from(format!("asg-{id}")));
        }
        assert_eq!(self.c.group_state("g"), Some(GroupState::Stable));
        (ids, generation)
    }
}

fn join_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    protocols: &[(&str, &str)],
) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        member_id: member_id.into(),
        group_instance_id: instance.map(Into::into),
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(n, m)| JoinGroupProtocol {
                name: (*n).into(),
                metadata: Bytes::copy_from_slice(m.as_bytes()),
            })
            .collect(),
        require_known_member_id: true,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
    }
}

#[test]
fn kip_394_join_without_member_id_gets_member_id_required() {
    let mut h = Harness::loaded();
    let rid = h.join("", None, &[("range", "sub")]);
    let r = h.join_response(rid);
    assert_eq!(r.error, ErrorCode::MemberIdRequired);
    assert!(r.member_id.starts_with("client-"), "{}", r.member_id);
    assert_eq!(r.generation_id, -1);
    // Not a member yet: the group did not start a rebalance.
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));
    // Rejoining with the id makes it a member; after the initial delay, generation 1.
    let rid = h.join(&r.member_id, None, &[("range", "sub")]);
    assert!(
        h.take(rid).is_none(),
        "the initial rebalance delay holds the join"
    );
    h.settle();
    let j = h.join_response(rid);
    assert_eq!((j.error, j.generation_id), (ErrorCode::None, 1));
    assert_eq!(j.leader, r.member_id);
    assert_eq!(j.members.len(), 1);
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
}

#[test]
fn kip_394_pending_member_that_does_not_rejoin_within_the_session_timeout_is_forgotten() {
    let mut h = Harness::loaded();
    let rid = h.join("", None, &[("range", "sub")]);
    let id = h.join_response(rid).member_id;
    h.advance(SESSION as u64 + 1);
    let rid = h.join(&id, None, &[("range", "sub")]);
    assert_eq!(h.join_response(rid).error, ErrorCode::UnknownMemberId);
}

#[test]
fn join_before_kip_394_joins_without_member_id_required() {
    let mut h = Harness::loaded();
    let mut req = join_request("g", "", None, &[("range", "sub")]);
    req.require_known_member_id = false;
    let rid = h.send(Request::JoinGroup(req));
    h.settle();
    let r = h.join_response(rid);
    assert_eq!((r.error, r.generation_id), (ErrorCode::None, 1));
}

#[test]
fn kip_345_static_member_rejoin_fences_the_old_member_id() {
    let mut h = Harness::loaded();
    let rid = h.join("", Some("instance-a"), &[("range", "sub")]);
    h.settle();
    let first = h.join_response(rid);
    assert_eq!(
        first.error,
        ErrorCode::None,
        "static members skip MEMBER_ID_REQUIRED"
    );
    assert!(first.member_id.starts_with("instance-a-"));
    let gen = first.generation_id;
    let srid = h.sync(&first.member_id, gen, &[(&first.member_id, "a")]);
    assert_eq!(h.sync_response(srid).error, ErrorCode::None);

    // The same instance restarts: a new member id, same generation (no rebalance), and the
    // old id is fenced.
    let rid = h.join("", Some("instance-a"), &[("range", "sub")]);
    let second = h.join_response(rid);
    assert_eq!(second.error, ErrorCode::None);
    assert_ne!(second.member_id, first.member_id);
    assert_eq!(second.generation_id, gen);
    assert!(
        second.skip_assignment,
        "the static leader keeps the current assignment"
    );
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
    assert_eq!(
        h.heartbeat(&first.member_id, gen, Some("instance-a")),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(
        h.heartbeat(&second.member_id, gen, Some("instance-a")),
        ErrorCode::None
    );
    // Its assignment carried over.
    let srid = h.sync(&second.member_id, gen, &[]);
    assert_eq!(h.sync_response(srid).assignment, Bytes::from_static(b"a"));
    let rid = h.commit("g", &first.member_id, gen, "t", 0, 5);
    let rid_ok = {
        let mut req = OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: gen,
            member_id: first.member_id.clone(),
            group_instance_id: Some("instance-a".into()),
            ..Default::default()
        };
        req.topics.push(OffsetCommitTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitPartition {
                partition_index: 0,
                committed_offset: 1,
                committed_leader_epoch: -1,
                committed_metadata: None,
            }],
        });
        h.send(Request::OffsetCommit(req))
    };
    assert_eq!(h.commit_error(rid), Some(ErrorCode::UnknownMemberId));
    assert_eq!(h.commit_error(rid_ok), Some(ErrorCode::FencedInstanceId));
}

#[test]
fn kip_345_static_rejoin_whose_store_fails_restores_the_old_member_id() {
    let mut h = Harness::loaded();
    let rid = h.join("", Some("i"), &[("range", "sub")]);
    h.settle();
    let first = h.join_response(rid);
    let srid = h.sync(&first.member_id, first.generation_id, &[]);
    h.sync_response(srid);
    h.auto_complete = false;
    let rid = h.join("", Some("i"), &[("range", "sub")]);
    assert!(h.take(rid).is_none(), "answered only after the store");
    h.complete_held(Err(ErrorCode::NotLeaderOrFollower));
    let r = h.join_response(rid);
    assert_eq!(r.error, ErrorCode::NotCoordinator);
    assert_eq!(
        h.heartbeat(&first.member_id, first.generation_id, Some("i")),
        ErrorCode::None
    );
}

#[test]
fn illegal_generation_on_stale_sync() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(2);
    // The follower forces a new generation by changing its metadata.
    let rid = h.join(&ids[1], None, &[("range", "changed")]);
    assert_eq!(
        h.heartbeat(&ids[0], gen, None),
        ErrorCode::RebalanceInProgress
    );
    let rid0 = h.join(&ids[0], None, &[("range", "sub")]);
    let r = h.join_response(rid);
    h.join_response(rid0);
    assert_eq!(r.generation_id, gen + 1);
    let srid = h.sync(&ids[1], gen, &[]);
    assert_eq!(h.sync_response(srid).error, ErrorCode::IllegalGeneration);
    assert_eq!(
        h.heartbeat(&ids[1], gen, None),
        ErrorCode::IllegalGeneration
    );
    let crid = h.commit("g", &ids[1], gen, "t", 0, 1);
    assert_eq!(h.commit_error(crid), Some(ErrorCode::IllegalGeneration));
}

#[test]
fn sync_from_an_unknown_member_or_during_a_rebalance_is_refused() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(1);
    let srid = h.sync("nobody", gen, &[]);
    assert_eq!(h.sync_response(srid).error, ErrorCode::UnknownMemberId);
    // A second member joins: PreparingRebalance.
    let rid = h.join("", None, &[("range", "sub")]);
    let id2 = h.join_response(rid).member_id;
    let _j2 = h.join(&id2, None, &[("range", "sub")]);
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let srid = h.sync(&ids[0], gen, &[]);
    assert_eq!(h.sync_response(srid).error, ErrorCode::RebalanceInProgress);
    // v5 protocol checks.
    let srid = h.send(Request::SyncGroup(SyncGroupRequest {
        group_id: "g".into(),
        generation_id: gen,
        member_id: ids[0].clone(),
        protocol_type: Some("connect".into()),
        ..Default::default()
    }));
    assert_eq!(
        h.sync_response(srid).error,
        ErrorCode::InconsistentGroupProtocol
    );
}

#[test]
fn followers_wait_for_the_leaders_assignment_which_is_answered_after_the_store() {
    let mut h = Harness::loaded();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let rid = h.join("", None, &[("range", "sub")]);
        ids.push(h.join_response(rid).member_id);
    }
    let r: Vec<u64> = ids
        .iter()
        .map(|id| h.join(id, None, &[("range", "sub")]))
        .collect();
    h.settle();
    let gen = h.join_response(r[0]).generation_id;
    let follower_view = h.join_response(r[1]);
    assert!(
        follower_view.members.is_empty(),
        "only the leader sees the members"
    );
    h.auto_complete = false;
    let follower = h.sync(&ids[1], gen, &[]);
    assert!(h.take(follower).is_none());
    let leader = h.sync(&ids[0], gen, &[(&ids[0], "p0"), (&ids[1], "p1")]);
    assert!(
        h.take(leader).is_none() && h.take(follower).is_none(),
        "not before the store commits"
    );
    assert_eq!(h.c.group_state("g"), Some(GroupState::CompletingRebalance));
    h.complete_held(Ok(()));
    assert_eq!(
        h.sync_response(leader).assignment,
        Bytes::from_static(b"p0")
    );
    assert_eq!(
        h.sync_response(follower).assignment,
        Bytes::from_static(b"p1")
    );
    assert_eq!(h.c.group_state("g"), Some(GroupState::Stable));
}

#[test]
fn a_failed_assignment_store_answers_the_error_and_rebalances() {
    let mut h = Harness::loaded();
    let rid = h.join("", None, &[("range", "sub")]);
    let id = h.join_response(rid).member_id;
    let rid = h.join(&id, None, &[("range", "sub")]);
    h.settle();
    let gen = h.join_response(rid).generation_id;
    h.auto_complete = false;
    let srid = h.sync(&id, gen, &[(&id, "x")]);
    h.complete_held(Err(ErrorCode::NotEnoughReplicas));
    assert_eq!(
        h.sync_response(srid).error,
        ErrorCode::CoordinatorNotAvailable
    );
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn session_timeout_removes_member_and_rebalances() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(2);
    // Only the leader heartbeats.
    for _ in 0..3 {
        h.advance(SESSION as u64 / 2);
        let e = h.heartbeat(&ids[0], gen, None);
        if e == ErrorCode::RebalanceInProgress {
            break;
        }
        assert_eq!(e, ErrorCode::None);
    }
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    // The leader rejoins; the expired member is gone so the rebalance completes at once.
    let rid = h.join(&ids[0], None, &[("range", "sub")]);
    let r = h.join_response(rid);
    assert_eq!(
        (r.error, r.generation_id, r.members.len()),
        (ErrorCode::None, gen + 1, 1)
    );
    assert_eq!(
        h.heartbeat(&ids[1], gen + 1, None),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn rebalance_timeout_removes_members_that_did_not_rejoin() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(2);
    // The follower rejoins (metadata change); the leader only heartbeats, never rejoins.
    let rid = h.join(&ids[1], None, &[("range", "other")]);
    let start = h.now;
    while !h.responses.contains_key(&rid) {
        assert_eq!(
            h.heartbeat(&ids[0], gen, None),
            ErrorCode::RebalanceInProgress
        );
        h.advance(5_000);
        assert!(
            h.now - start <= REBALANCE as u64,
            "no answer by the rebalance timeout"
        );
    }
    let r = h.join_response(rid);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(r.generation_id, gen + 1);
    assert_eq!(
        r.leader, ids[1],
        "the leader that did not rejoin lost its place"
    );
    assert_eq!(r.members.len(), 1);
}

#[test]
fn rebalance_completes_as_soon_as_every_member_rejoined() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(3);
    let r1 = h.join(&ids[1], None, &[("range", "new")]);
    let r0 = h.join(&ids[0], None, &[("range", "sub")]);
    assert!(h.take(r1).is_none());
    let r2 = h.join(&ids[2], None, &[("range", "sub")]);
    for rid in [r0, r1, r2] {
        assert_eq!(h.join_response(rid).generation_id, gen + 1);
    }
}

#[test]
fn initial_rebalance_delay_extends_while_members_join() {
    let mut h = Harness::new(GroupCoordinatorConfig::new());
    h.load("g");
    let mut req = join_request("g", "", None, &[("range", "sub")]);
    req.require_known_member_id = false;
    let first = h.send(Request::JoinGroup(req.clone()));
    // Members keep arriving every 2 s: each 3 s period that saw a new member adds another,
    // up to the rebalance timeout.
    let mut others = Vec::new();
    for _ in 0..4 {
        h.advance(2_000);
        others.push(h.send(Request::JoinGroup(req.clone())));
        assert!(h.take(first).is_none(), "still delayed at {}", h.now);
    }
    // 8 s after the first join; the members stop. The delay runs out by 3 s after the last
    // extension began.
    let start = h.now;
    while !h.responses.contains_key(&first) {
        h.advance(500);
        assert!(h.now - start <= 6_000, "delay did not end");
    }
    let r = h.join_response(first);
    assert_eq!(r.members.len(), 5);
    assert_eq!(r.generation_id, 1);
    assert!(
        h.now >= 1_000 + 9_000,
        "the delay was extended beyond 3 s (ended at {})",
        h.now - 1_000
    );
}

#[test]
fn initial_rebalance_delay_is_bounded_by_the_rebalance_timeout() {
    let mut h = Harness::new(GroupCoordinatorConfig::new());
    h.load("g");
    let mut req = join_request("g", "", None, &[("range", "sub")]);
    req.require_known_member_id = false;
    req.rebalance_timeout_ms = 7_000;
    let first = h.send(Request::JoinGroup(req.clone()));
    let start = h.now;
    for _ in 0..20 {
        h.advance(1_000);
        if h.responses.contains_key(&first) {
            break;
        }
        h.send(Request::JoinGroup(req.clone()));
    }
    assert!(h.responses.contains_key(&first));
    assert!(h.now - start <= 7_000, "waited {} ms", h.now - start);
}

#[test]
fn protocol_is_chosen_by_votes_among_the_protocols_every_member_supports() {
    let mut h = Harness::loaded();
    let mut ids = Vec::new();
    let prefs: [&[(&str, &str)]; 3] = [
        &[("roundrobin", "a"), ("range", "a")],
        &[("range", "b"), ("roundrobin", "b"), ("sticky", "b")],
        &[("range", "c"), ("roundrobin", "c")],
    ];
    for p in prefs {
        let rid = h.join("", None, p);
        ids.push(h.join_response(rid).member_id);
    }
    let rids: Vec<u64> = ids
        .iter()
        .zip(prefs)
        .map(|(id, p)| h.join(id, None, p))
        .collect();
    h.settle();
    let r = h.join_response(rids[0]);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members[0].metadata, Bytes::from_static(b"a"));
    // A member supporting none of the group's protocols, or another protocol type, is refused.
    let rid = h.join("", None, &[("sticky", "d")]);
    assert_eq!(
        h.join_response(rid).error,
        ErrorCode::InconsistentGroupProtocol
    );
    let mut req = join_request("g", "", None, &[("range", "e")]);
    req.protocol_type = "connect".into();
    let rid = h.send(Request::JoinGroup(req));
    assert_eq!(
        h.join_response(rid).error,
        ErrorCode::InconsistentGroupProtocol
    );
}

#[test]
fn leader_leaving_hands_leadership_to_a_remaining_member() {
    let mut h = Harness::loaded();
    let (ids, _gen) = h.stable_group(2);
    let rid = h.send(Request::LeaveGroup(LeaveGroupRequest {
        group_id: "g".into(),
        members: vec![LeavingMember {
            member_id: ids[0].clone(),
            group_instance_id: None,
        }],
    }));
    match h.take(rid) {
        Some(Response::LeaveGroup(r)) => {
            assert_eq!(r.error, ErrorCode::None);
            assert_eq!(r.members[0].error, ErrorCode::None);
        }
        other => panic!("{other:?}"),
    }
    let rid = h.join(&ids[1], None, &[("range", "sub")]);
    let r = h.join_response(rid);
    assert_eq!(r.leader, ids[1]);
    assert_eq!(r.members.len(), 1);
}

#[test]
fn leave_group_batch_answers_each_member() {
    let mut h = Harness::loaded();
    let rid = h.join("", Some("s"), &[("range", "x")]);
    h.settle();
    let stat = h.join_response(rid).member_id;
    let rid = h.send(Request::LeaveGroup(LeaveGroupRequest {
        group_id: "g".into(),
        members: vec![
            LeavingMember {
                member_id: "ghost".into(),
                group_instance_id: None,
            },
            LeavingMember {
                member_id: "old-id".into(),
                group_instance_id: Some("s".into()),
            },
            LeavingMember {
                member_id: String::new(),
                group_instance_id: Some("s".into()),
            },
        ],
    }));
    match h.take(rid) {
        Some(Response::LeaveGroup(r)) => {
            let errors: Vec<ErrorCode> = r.members.iter().map(|m| m.error).collect();
            assert_eq!(
                errors,
                vec![
                    ErrorCode::UnknownMemberId,
                    ErrorCode::FencedInstanceId,
                    ErrorCode::None
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.heartbeat(&stat, 1, None), ErrorCode::UnknownMemberId);
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));
}

#[test]
fn group_max_size_reached_refuses_the_extra_member() {
    let mut h = Harness::new(GroupCoordinatorConfig::new().with_group_max_size(1));
    h.load("g");
    h.stable_group(1);
    let rid = h.join("", None, &[("range", "sub")]);
    let id = h.join_response(rid).member_id;
    let rid = h.join(&id, None, &[("range", "sub")]);
    assert_eq!(h.join_response(rid).error, ErrorCode::GroupMaxSizeReached);
}

#[test]
fn session_timeout_outside_the_bounds_is_invalid() {
    let mut h = Harness::loaded();
    for t in [5_999, 1_800_001] {
        let mut req = join_request("g", "", None, &[("range", "sub")]);
        req.session_timeout_ms = t;
        let rid = h.send(Request::JoinGroup(req));
        assert_eq!(h.join_response(rid).error, ErrorCode::InvalidSessionTimeout);
    }
    let req = join_request("", "", None, &[("range", "sub")]);
    let rid = h.send(Request::JoinGroup(req));
    assert_eq!(h.join_response(rid).error, ErrorCode::InvalidGroupId);
}

#[test]
fn not_coordinator_until_loaded_and_load_in_progress_while_loading() {
    let mut h = Harness::new(GroupCoordinatorConfig::new());
    let rid = h.join("", None, &[("range", "sub")]);
    assert_eq!(h.join_response(rid).error, ErrorCode::NotCoordinator);
    let p = h.partition("g");
    h.input(Input::BeginLoad {
        partition: p,
        leader_epoch: 3,
    });
    let rid = h.join("", None, &[("range", "sub")]);
    assert_eq!(
        h.join_response(rid).error,
        ErrorCode::CoordinatorLoadInProgress
    );
    assert_eq!(h.fetch("g", "t", 0).0, ErrorCode::CoordinatorLoadInProgress);
    assert_eq!(
        h.heartbeat("m", 1, None),
        ErrorCode::None,
        "answered blindly while loading"
    );
    let srid = h.sync("m", 1, &[]);
    assert_eq!(h.sync_response(srid).error, ErrorCode::RebalanceInProgress);
    h.input(Input::Load {
        partition: p,
        leader_epoch: 3,
        records: vec![],
    });
    assert_eq!(h.fetch("g", "t", 0), (ErrorCode::None, -1));
    // A stale load of an older epoch changes nothing.
    h.input(Input::BeginLoad {
        partition: p,
        leader_epoch: 2,
    });
    assert!(h.c.is_loaded(p));
}

#[test]
fn commit_is_answered_only_after_append_completes() {
    let mut h = Harness::loaded();
    h.auto_complete = false;
    let rid = h.commit("g", "", -1, "t", 0, 42);
    assert_eq!(
        h.commit_error(rid),
        None,
        "not answered before the append commits"
    );
    assert_eq!(
        h.fetch("g", "t", 0),
        (ErrorCode::None, -1),
        "in-flight commits are not visible"
    );
    h.complete_held(Ok(()));
    assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    assert_eq!(h.fetch("g", "t", 0), (ErrorCode::None, 42));
}

#[test]
fn a_fenced_append_fails_the_commit_with_not_coordinator() {
    let mut h = Harness::loaded();
    h.auto_complete = false;
    let rid = h.commit("g", "", -1, "t", 0, 42);
    h.complete_held(Err(ErrorCode::FencedLeaderEpoch));
    assert_eq!(h.commit_error(rid), Some(ErrorCode::NotCoordinator));
    let rid = h.commit("g", "", -1, "t", 0, 43);
    h.complete_held(Err(ErrorCode::NotLeaderOrFollower));
    assert_eq!(h.commit_error(rid), Some(ErrorCode::NotCoordinator));
    let rid = h.commit("g", "", -1, "t", 0, 44);
    h.complete_held(Err(ErrorCode::RecordListTooLarge));
    assert_eq!(
        h.commit_error(rid),
        Some(ErrorCode::InvalidCommitOffsetSize)
    );
    assert_eq!(h.fetch("g", "t", 0), (ErrorCode::None, -1));
}

#[test]
fn appends_carry_the_leader_epoch_the_partition_was_loaded_at() {
    let mut c = GroupCoordinator::new(GroupCoordinatorConfig::new());
    let p = c.partition_for("g");
    c.handle(
        0,
        Input::Load {
            partition: p,
            leader_epoch: 9,
            records: vec![],
        },
    );
    let mut h = Harness {
        c,
        ..Harness::new(GroupCoordinatorConfig::new())
    };
    h.drain();
    h.c.handle(
        1,
        Input::Request {
            request_id: 1,
            request: Request::OffsetCommit(OffsetCommitRequest {
                group_id: "g".into(),
                generation_id: -1,
                topics: vec![OffsetCommitTopic {
                    name: "t".into(),
                    partitions: vec![OffsetCommitPartition {
                        partition_index: 0,
                        committed_offset: 1,
                        committed_leader_epoch: -1,
                        committed_metadata: None,
                    }],
                }],
                ..Default::default()
            }),
        },
    );
    let epochs: Vec<i32> = std::iter::from_fn(|| h.c.poll_action())
        .filter_map(|a| match a {
            Action::Append {
                leader_epoch,
                partition,
                ..
            } => Some(if partition == p { leader_epoch } else { -2 }),
            _ => None,
        })
        .collect();
    assert_eq!(epochs, vec![9]);
}

#[test]
fn commit_from_members_is_generation_checked_and_free_for_simple_consumers() {
    let mut h = Harness::loaded();
    let rid = h.commit("g", "", 5, "t", 0, 1);
    assert_eq!(
        h.commit_error(rid),
        Some(ErrorCode::IllegalGeneration),
        "unknown group, generation given"
    );
    let (ids, gen) = h.stable_group(1);
    let rid = h.commit("g", "", -1, "t", 0, 1);
    assert_eq!(
        h.commit_error(rid),
        Some(ErrorCode::UnknownMemberId),
        "not Empty: no free commit"
    );
    let rid = h.commit("g", &ids[0], gen, "t", 0, 7);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    let rid = h.commit("g", &ids[0], gen + 1, "t", 0, 8);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::IllegalGeneration));
    assert_eq!(h.fetch("g", "t", 0).1, 7);
    // Metadata over offset.metadata.max.bytes.
    let rid = h.send(Request::OffsetCommit(OffsetCommitRequest {
        group_id: "g".into(),
        generation_id: gen,
        member_id: ids[0].clone(),
        topics: vec![OffsetCommitTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitPartition {
                partition_index: 1,
                committed_offset: 1,
                committed_leader_epoch: -1,
                committed_metadata: Some("x".repeat(4097)),
            }],
        }],
        ..Default::default()
    }));
    assert_eq!(h.commit_error(rid), Some(ErrorCode::OffsetMetadataTooLarge));
}

#[test]
fn offset_fetch_without_topics_returns_every_committed_partition() {
    let mut h = Harness::loaded();
    for (t, p, o) in [("a", 0, 5), ("a", 1, 6), ("b", 0, 7)] {
        let rid = h.commit("g", "", -1, t, p, o);
        assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    }
    let rid = h.send(Request::OffsetFetch(OffsetFetchRequest {
        group_id: "g".into(),
        topics: None,
        require_stable: false,
    }));
    match h.take(rid) {
        Some(Response::OffsetFetch(r)) => {
            let all: Vec<(String, i32, i64)> = r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(move |p| (t.name.clone(), p.partition_index, p.committed_offset))
                })
                .collect();
            assert_eq!(
                all,
                vec![("a".into(), 0, 5), ("a".into(), 1, 6), ("b".into(), 0, 7)]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn offsets_survive_unload_and_load() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(2);
    let rid = h.commit("g", &ids[0], gen, "t", 0, 100);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    let rid = h.commit("g", &ids[1], gen, "t", 1, 200);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    h.unload("g");
    assert_eq!(h.fetch("g", "t", 0).0, ErrorCode::NotCoordinator);
    assert_eq!(h.heartbeat(&ids[0], gen, None), ErrorCode::NotCoordinator);
    // Another coordinator (a fresh instance) loads the partition's log.
    let log = h.log.clone();
    let mut h2 = Harness::loaded_from(log);
    assert_eq!(h2.fetch("g", "t", 0), (ErrorCode::None, 100));
    assert_eq!(h2.fetch("g", "t", 1), (ErrorCode::None, 200));
    // The group's generation and members came back: the members heartbeat on.
    assert_eq!(h2.c.group_state("g"), Some(GroupState::Stable));
    assert_eq!(h2.heartbeat(&ids[1], gen, None), ErrorCode::None);
    let srid = h2.sync(&ids[1], gen, &[]);
    assert_eq!(
        h2.sync_response(srid).assignment,
        Bytes::from(format!("asg-{}", ids[1]))
    );
}

impl Harness {
    fn loaded_from(log: BTreeMap<i32, Vec<LogRecord>>) -> Harness {
        let mut h = Harness::new(GroupCoordinatorConfig::new());
        h.log = log;
        h.load("g");
        h
    }
}

#[test]
fn unload_answers_waiting_requests_not_coordinator() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(2);
    let rid = h.join(&ids[1], None, &[("range", "changed")]);
    assert!(h.take(rid).is_none());
    h.unload("g");
    assert_eq!(h.join_response(rid).error, ErrorCode::NotCoordinator);
    assert_eq!(h.heartbeat(&ids[0], gen, None), ErrorCode::NotCoordinator);
}

#[test]
fn tombstones_remove_groups_and_offsets_on_load() {
    let mut h = Harness::loaded();
    let rid = h.commit("g", "", -1, "t", 0, 5);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    let p = h.partition("g");
    h.write(
        p,
        vec![AppendRecord {
            key: records::RecordKey::OffsetCommit {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
            }
            .encode()
            .unwrap(),
            value: None,
        }],
    );
    let mut h2 = Harness::loaded_from(h.log.clone());
    assert_eq!(h2.fetch("g", "t", 0), (ErrorCode::None, -1));
}

#[test]
fn offsets_of_an_empty_group_expire_after_the_retention_time() {
    let retention = 60_000;
    let mut h = Harness::new(
        GroupCoordinatorConfig::new()
            .with_offsets_retention_ms(retention)
            .with_offsets_retention_check_interval_ms(10_000),
    );
    h.load("g");
    let (ids, gen) = h.stable_group(1);
    let rid = h.commit("g", &ids[0], gen, "t", 0, 9);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::None));
    // While the member is there the offset stays, however long.
    for _ in 0..10 {
        h.advance(SESSION as u64 / 2);
        h.heartbeat(&ids[0], gen, None);
    }
    assert_eq!(h.fetch("g", "t", 0).1, 9);
    let rid = h.send(Request::LeaveGroup(LeaveGroupRequest {
        group_id: "g".into(),
        members: vec![LeavingMember {
            member_id: ids[0].clone(),
            group_instance_id: None,
        }],
    }));
    h.take(rid);
    assert_eq!(h.c.group_state("g"), Some(GroupState::Empty));
    h.advance(retention as u64 - 20_000);
    assert_eq!(h.fetch("g", "t", 0).1, 9, "not yet expired");
    h.advance(30_000);
    assert_eq!(h.fetch("g", "t", 0).1, -1);
    assert_eq!(
        h.c.group_state("g"),
        None,
        "an Empty group without offsets is removed"
    );
    // Tombstones for the offset and the group were appended: a reload finds nothing.
    let mut h2 = Harness::loaded_from(h.log.clone());
    assert_eq!(h2.fetch("g", "t", 0).1, -1);
    assert_eq!(h2.c.group_state("g"), None);
}

#[test]
fn describe_and_list_groups_show_state_members_and_protocol() {
    let mut h = Harness::loaded();
    let (ids, _) = h.stable_group(2);
    let rid = h.send(Request::DescribeGroups(DescribeGroupsRequest {
        groups: vec!["g".into(), "missing".into()],
    }));
    match h.take(rid) {
        Some(Response::DescribeGroups(r)) => {
            let g = &r.groups[0];
            assert_eq!(
                (
                    g.group_state.as_str(),
                    g.protocol_type.as_str(),
                    g.protocol_data.as_str()
                ),
                ("Stable", "consumer", "range")
            );
            assert_eq!(g.members.len(), 2);
            let m = g.members.iter().find(|m| m.member_id == ids[1]).unwrap();
            assert_eq!(m.member_assignment, Bytes::from(format!("asg-{}", ids[1])));
            assert_eq!(m.member_metadata, Bytes::from_static(b"sub"));
            // "missing" maps to another partition unless it happens to share "g"'s.
            let other = &r.groups[1];
            if h.partition("missing") == h.partition("g") {
                assert_eq!(other.group_state, "Dead");
            } else {
                assert_eq!(other.error, ErrorCode::NotCoordinator);
            }
        }
        other => panic!("{other:?}"),
    }
    let rid = h.send(Request::ListGroups(ListGroupsRequest {
        states_filter: vec!["stable".into()],
        types_filter: vec![],
    }));
    match h.take(rid) {
        Some(Response::ListGroups(r)) => {
            assert_eq!(r.error, ErrorCode::None);
            assert_eq!(r.groups.len(), 1);
            assert_eq!(r.groups[0].group_id, "g");
        }
        other => panic!("{other:?}"),
    }
    let rid = h.send(Request::ListGroups(ListGroupsRequest {
        states_filter: vec!["Empty".into()],
        types_filter: vec![],
    }));
    assert!(matches!(h.take(rid), Some(Response::ListGroups(r)) if r.groups.is_empty()));
}

#[test]
fn undecodable_records_are_skipped_on_load() {
    let mut c = GroupCoordinator::new(GroupCoordinatorConfig::new());
    c.handle(
        0,
        Input::Load {
            partition: 0,
            leader_epoch: 1,
            records: vec![LogRecord {
                offset: 0,
                key: Bytes::from_static(b"\x00\x01\xff"),
                value: None,
            }],
        },
    );
    assert!(matches!(
        c.poll_action(),
        Some(Action::Loaded { skipped: 1, .. })
    ));
}

#[derive(Debug, Clone)]
enum Op {
    /// A simple consumer commits the next offset of a partition.
    Commit(i32),
    /// The oldest in-flight append completes (success), or fails.
    Complete(bool),
    /// Failover: unload, and load again from the log (this instance or a fresh one).
    Failover(bool),
    /// A group member commits (generation-checked).
    MemberCommit(i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3i32).prop_map(Op::Commit),
        any::<bool>().prop_map(Op::Complete),
        any::<bool>().prop_map(Op::Failover),
        (0..3i32).prop_map(Op::MemberCommit),
    ]
}

proptest! {
    /// A committed (acknowledged) offset is never lost and never moves backwards across
    /// unload / load while the group's generation is unchanged.
    #[test]
    fn committed_offsets_are_never_lost_nor_move_backwards_across_failover(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::loaded();
        let (ids, gen) = h.stable_group(1);
        h.auto_complete = false;
        let mut next = [0i64; 3];
        let mut acked = [-1i64; 3];
        let mut inflight: BTreeMap<u64, (i32, i64)> = BTreeMap::new();
        let mut seen = [-1i64; 3];
        for op in ops {
            match op {
                Op::Commit(p) | Op::MemberCommit(p) => {
                    next[p as usize] += 1;
                    let (member, g) = match op {
                        Op::MemberCommit(_) => (ids[0].clone(), gen),
                        _ => (String::new(), -1),
                    };
                    let rid = h.commit("g", &member, g, "t", p, next[p as usize]);
                    inflight.insert(rid, (p, next[p as usize]));
                }
                Op::Complete(ok) => {
                    if !h.held.is_empty() {
                        h.complete_held(if ok { Ok(()) } else { Err(ErrorCode::NotLeaderOrFollower) });
                    }
                }
                Op::Failover(fresh) => {
                    // In-flight appends of the old leader are fenced.
                    while !h.held.is_empty() {
                        h.complete_held(Err(ErrorCode::FencedLeaderEpoch));
                    }
                    h.unload("g");
                    if fresh {
                        let log = h.log.clone();
                        let ar = h.responses.clone();
                        h = Harness { responses: ar, next_rid: h.next_rid, ..Harness::loaded_from(log) };
                        h.auto_complete = false;
                    } else {
                        h.load("g");
                    }
                    prop_assert_eq!(h.c.group_generation("g"), Some(gen));
                }
            }
            // Collect the answers.
            let answered: Vec<u64> = inflight.keys().copied().filter(|r| h.responses.contains_key(r)).collect();
            for rid in answered {
                let (p, o) = inflight.remove(&rid).unwrap();
                if h.commit_error(rid) == Some(ErrorCode::None) {
                    acked[p as usize] = acked[p as usize].max(o);
                }
            }
            // Unless a later commit is in flight or was written, fetch sees the newest ack.
            for p in 0..3 {
                let (e, fetched) = h.fetch("g", "t", p);
                prop_assert_eq!(e, ErrorCode::None);
                prop_assert!(fetched >= acked[p as usize], "partition {} fetched {} below acked {}", p, fetched, acked[p as usize]);
                prop_assert!(fetched >= seen[p as usize], "partition {} moved back from {} to {}", p, seen[p as usize], fetched);
                seen[p as usize] = fetched;
            }
        }
        // After a final failover, every acked offset is still there.
        while !h.held.is_empty() { h.complete_held(Err(ErrorCode::FencedLeaderEpoch)); }
        h.unload("g");
        let mut h2 = Harness::loaded_from(h.log.clone());
        for p in 0..3 {
            prop_assert!(h2.fetch("g", "t", p).1 >= acked[p as usize]);
        }
    }
}

#[test]
fn a_new_leader_epoch_of_a_loaded_partition_keeps_its_groups_and_later_appends_carry_it() {
    let mut h = Harness::loaded();
    let (ids, gen) = h.stable_group(2);
    let p = h.partition("g");
    // A rebalance is under way when the epoch moves on.
    let rid = h.join(&ids[1], None, &[("range", "changed")]);
    h.input(Input::Reelected {
        partition: p,
        leader_epoch: 5,
    });
    assert_eq!(h.c.leader_epoch(p), Some(5));
    assert!(h.take(rid).is_none(), "the waiting join is kept");
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let rid0 = h.join(&ids[0], None, &[("range", "sub")]);
    let joined = h.join_response(rid0);
    assert_eq!(joined.generation_id, gen + 1);
    h.join_response(rid);
    // The next append (the leader's assignment) carries epoch 5.
    let before = h.append_epochs.len();
    let _ = h.sync(&joined.leader, gen + 1, &[(&ids[1], "x")]);
    assert_eq!(h.append_epochs.len(), before + 1);
    assert_eq!(h.append_epochs.last(), Some(&5));
    // An older epoch (a late message) changes nothing.
    h.input(Input::Reelected {
        partition: p,
        leader_epoch: 3,
    });
    assert_eq!(h.c.leader_epoch(p), Some(5));
}

#[test]
fn leader_leaving_before_its_sync_sends_waiting_followers_back_to_rejoin() {
    let mut h = Harness::loaded();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let rid = h.join("", None, &[("range", "sub")]);
        ids.push(h.join_response(rid).member_id);
    }
    let rids: Vec<u64> = ids
        .iter()
        .map(|id| h.join(id, None, &[("range", "sub")]))
        .collect();
    h.settle();
    let gen = h.join_response(rids[0]).generation_id;
    h.join_response(rids[1]);
    // CompletingRebalance: a heartbeat is fine, the follower waits for the assignment.
    assert_eq!(h.heartbeat(&ids[1], gen, None), ErrorCode::None);
    let follower = h.sync(&ids[1], gen, &[]);
    assert!(h.take(follower).is_none());
    let rid = h.send(Request::LeaveGroup(LeaveGroupRequest {
        group_id: "g".into(),
        members: vec![LeavingMember {
            member_id: ids[0].clone(),
            group_instance_id: None,
        }],
    }));
    h.take(rid);
    assert_eq!(
        h.sync_response(follower).error,
        ErrorCode::RebalanceInProgress
    );
    assert_eq!(h.c.group_state("g"), Some(GroupState::PreparingRebalance));
    let rid = h.join(&ids[1], None, &[("range", "sub")]);
    let r = h.join_response(rid);
    assert_eq!(
        (r.generation_id, r.leader.as_str()),
        (gen + 1, ids[1].as_str())
    );
}

/// A group id longer than the `int16` string of `OffsetCommitKey` (possible through the
/// compact strings of flexible OffsetCommit versions) cannot be written: the commit is refused
/// with UNKNOWN_SERVER_ERROR, as Kafka's failed serialization is, and nothing — in particular
/// no record with a wrapped length — reaches `__consumer_offsets`.
#[test]
fn a_commit_whose_key_cannot_be_written_is_refused_and_nothing_is_appended() {
    let long = "g".repeat(40_000);
    let mut h = Harness::new(GroupCoordinatorConfig::new());
    h.load(&long);
    let rid = h.commit(&long, "", -1, "t", 0, 5);
    assert_eq!(h.commit_error(rid), Some(ErrorCode::UnknownServerError));
    let p = h.partition(&long);
    assert_eq!(h.log.get(&p).map_or(0, Vec::len), 0, "nothing appended");
    assert_eq!(h.fetch(&long, "t", 0), (ErrorCode::None, -1));
}
