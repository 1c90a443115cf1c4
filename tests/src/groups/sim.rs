//! One seeded run of the group simulation, its checks and the sum over many seeds.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use kafka_group_coordinator::*;
use kafka_wire::error_code::ErrorCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::consumer::{split_assignment, Consumer};
use super::log::{Controller, Entry, PartitionState, Remote, Replica};
use super::{GroupSimConfig, Msg, TOPIC};
use crate::net::{NetConfig, NetStats, Network, NodeId};
use crate::runner::SeedSummary;
use crate::trace::Trace;

/// The node id of the first consumer (brokers are 1..=n).
pub const FIRST_CONSUMER: NodeId = 100;

/// The invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invariant {
    /// An OffsetFetch answered by a coordinator loaded at the epoch of an acknowledged commit
    /// or later returned less than that commit.
    CommittedOffsetLost,
    /// An acknowledged commit was lower than the one its member acknowledged before in the
    /// same generation.
    OffsetMovedBackwards,
    /// An append acknowledged as committed is missing from the current leader's log (a
    /// deposed coordinator committed, or a committed record was lost).
    AckedAppendNotInLeaderLog,
    /// Two members of one generation got parts of different assignment sets, or a part not
    /// theirs.
    AssignmentMismatch,
    /// A group was not Stable with all its members in time after the faults stopped.
    NotStable,
}

/// What broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant.
    pub invariant: Invariant,
    /// The details.
    pub detail: String,
}

/// A failed run.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The step at which the check failed.
    pub step: u64,
    /// Simulated time.
    pub now: u64,
    /// What broke.
    pub violation: Violation,
    /// The last events before it.
    pub trace: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "seed {} violated {:?} at step {} (t={}ms): {}",
            self.seed, self.violation.invariant, self.step, self.now, self.violation.detail
        )?;
        writeln!(f, "last events:")?;
        write!(f, "{}", self.trace)
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Steps simulated.
    pub steps: u64,
    /// Commits acknowledged (partitions).
    pub commits_acked: u64,
    /// OffsetFetch answers checked (partitions).
    pub fetches_checked: u64,
    /// SyncGroup answers with an assignment.
    pub syncs: u64,
    /// Broker crashes.
    pub crashes: u64,
    /// Leadership moves by the controller.
    pub leader_moves: u64,
    /// Deposed leaders whose LeaderAndIsr was held back.
    pub zombie_leaders: u64,
    /// Deposed coordinators whose unload was held back.
    pub zombie_coordinators: u64,
    /// Appends refused by the leader-epoch fence.
    pub fenced_appends: u64,
    /// Consumers that left and came back.
    pub leaves: u64,
    /// How long after the faults stopped every group was Stable.
    pub settle_ms: u64,
    /// The network.
    pub net: NetStats,
}

struct Ev(String);

impl std::fmt::Debug for Ev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy)]
enum CoordEvent {
    BeginLoad(i32, i32),
    Load(i32, i32),
    Unload(i32),
}

#[derive(Debug, Clone, Copy)]
struct PendingWrite {
    partition: i32,
    epoch: i32,
    base: i64,
    last: i64,
    deadline: u64,
}

struct Broker {
    id: NodeId,
    alive: bool,
    restart_at: Option<u64>,
    incarnation: u64,
    coord: GroupCoordinator,
    replicas: BTreeMap<i32, Replica>,
    leader_since: BTreeMap<i32, u64>,
    pending: BTreeMap<u64, PendingWrite>,
    queue: VecDeque<(u64, CoordEvent)>,
    loaded: BTreeMap<i32, i32>,
    seen: BTreeMap<NodeId, u64>,
    requests: BTreeMap<RequestId, (NodeId, u64, Request)>,
    next_rid: u64,
}

fn coordinator(cfg: &GroupSimConfig, id: NodeId, incarnation: u64) -> GroupCoordinator {
    let config = GroupCoordinatorConfig::new()
        .with_offsets_topic_num_partitions(cfg.offsets_partitions)
        .with_session_timeout_bounds(100, 600_000)
        .with_initial_rebalance_delay_ms(cfg.initial_rebalance_delay_ms)
        .with_member_id_salt(((id as u64) << 32) | incarnation);
    let mut c = GroupCoordinator::new(config);
    if let Some(hook) = cfg.coordinator_hook {
        hook(&mut c);
    }
    c
}

#[derive(Debug, Clone, Copy)]
struct Ack {
    epoch: i32,
    offset: i64,
}

#[derive(Default)]
struct Checker {
    /// Acknowledged commits per (group, partition), in the order acknowledged.
    acks: BTreeMap<(String, i32), Vec<Ack>>,
    /// The last acknowledged offset per (group, partition, generation, member).
    last_in_generation: BTreeMap<(String, i32, i32, String), i64>,
    /// The assignment set per (group, generation).
    sets: BTreeMap<(String, i32), String>,
    /// Entries acknowledged as committed: (partition, offset, epoch).
    committed: Vec<(i32, i64, i32)>,
}

struct Sim {
    cfg: GroupSimConfig,
    rng: StdRng,
    now: u64,
    step: u64,
    net: Network<Msg>,
    controller: Controller,
    brokers: Vec<Broker>,
    consumers: Vec<Consumer>,
    groups: Vec<String>,
    ctl_queue: BTreeMap<(u64, u64), (NodeId, i32, PartitionState)>,
    ctl_seq: u64,
    ctl_last: BTreeMap<NodeId, u64>,
    checker: Checker,
    trace: Trace<Ev>,
    stats: GroupStats,
    violation: Option<Violation>,
}

impl Sim {
    fn new(seed: u64, cfg: GroupSimConfig) -> Self {
        let ids: Vec<NodeId> = (1..=cfg.brokers).collect();
        let mut controller = Controller::default();
        for p in 0..cfg.offsets_partitions {
            controller.partitions.insert(
                p,
                PartitionState {
                    leader: Some(ids[p as usize % ids.len()]),
                    epoch: 0,
                    isr: ids.clone(),
                },
            );
        }
        let brokers = ids
            .iter()
            .map(|&id| Broker {
                id,
                alive: true,
                restart_at: None,
                incarnation: 0,
                coord: coordinator(&cfg, id, 0),
                replicas: (0..cfg.offsets_partitions)
                    .map(|p| {
                        (
                            p,
                            Replica {
                                epoch: -1,
                                ..Replica::default()
                            },
                        )
                    })
                    .collect(),
                leader_since: BTreeMap::new(),
                pending: BTreeMap::new(),
                queue: VecDeque::new(),
                loaded: BTreeMap::new(),
                seen: BTreeMap::new(),
                requests: BTreeMap::new(),
                next_rid: 0,
            })
            .collect();
        let groups: Vec<String> = (0..cfg.groups).map(|g| format!("group-{g}")).collect();
        let mut consumers = Vec::new();
        for g in &groups {
            for m in 0..cfg.members_per_group {
                let id = FIRST_CONSUMER + consumers.len() as NodeId;
                let instance =
                    (m < cfg.static_members_per_group).then(|| format!("{g}-instance-{m}"));
                consumers.push(Consumer::new(id, g.clone(), instance));
            }
        }
        let mut sim = Sim {
            cfg,
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            step: 0,
            net: Network::new(cfg.net),
            controller,
            brokers,
            consumers,
            groups,
            ctl_queue: BTreeMap::new(),
            ctl_seq: 0,
            ctl_last: BTreeMap::new(),
            checker: Checker::default(),
            trace: Trace::new(cfg.trace_capacity),
            stats: GroupStats::default(),
            violation: None,
        };
        for p in 0..cfg.offsets_partitions {
            sim.send_state(p, None);
        }
        sim
    }

    fn ev(&mut self, f: impl FnOnce() -> String) {
        if self.trace.is_on() {
            self.trace.push(self.now, Ev(f()));
        }
    }

    fn fail(&mut self, invariant: Invariant, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(Violation { invariant, detail });
        }
    }

    fn b(&self, id: NodeId) -> usize {
        (id - 1) as usize
    }

    // ---- the controller ----

    /// Sends the partition's state to every live broker; the one in `hold` gets it late.
    fn send_state(&mut self, p: i32, hold: Option<NodeId>) {
        let state = self.controller.partitions[&p].clone();
        for id in 1..=self.cfg.brokers {
            if !self.brokers[self.b(id)].alive {
                continue;
            }
            let mut delay = self.rng.random_range(1..=20);
            if hold == Some(id) {
                delay += self.rng.random_range(200..1_500);
            }
            let last = self.ctl_last.entry(id).or_insert(0);
            let at = (self.now + delay).max(*last);
            *last = at;
            self.ctl_seq += 1;
            self.ctl_queue
                .insert((at, self.ctl_seq), (id, p, state.clone()));
        }
    }

    fn crash(&mut self, id: NodeId) {
        let i = self.b(id);
        let restart = self.now + self.rng.random_range(300..1_500);
        let br = &mut self.brokers[i];
        br.alive = false;
        br.restart_at = Some(restart);
        br.pending.clear();
        br.queue.clear();
        br.loaded.clear();
        br.seen.clear();
        br.requests.clear();
        for r in br.replicas.values_mut() {
            r.leader = None;
            r.isr.clear();
            r.remotes.clear();
        }
        self.ctl_last.remove(&id);
        self.stats.crashes += 1;
        self.ev(|| format!("broker {id} crashes"));
        for p in 0..self.cfg.offsets_partitions {
            let alive: Vec<NodeId> = (1..=self.cfg.brokers)
                .filter(|b| self.brokers[self.b(*b)].alive)
                .collect();
            let s = self.controller.partitions.get_mut(&p).expect("partition");
            let in_isr = s.isr.contains(&id);
            if s.leader == Some(id) {
                let candidates: Vec<NodeId> = s
                    .isr
                    .iter()
                    .copied()
                    .filter(|b| alive.contains(b))
                    .collect();
                s.epoch += 1;
                if candidates.is_empty() {
                    s.leader = None;
                    s.isr = vec![id];
                } else {
                    s.leader = Some(candidates[self.rng.random_range(0..candidates.len())]);
                    s.isr.retain(|b| *b != id);
                }
            } else if in_isr {
                s.epoch += 1;
                s.isr.retain(|b| *b != id);
            } else {
                continue;
            }
            let s = s.clone();
            self.ev(|| format!("controller: p{p} -> {s:?}"));
            self.send_state(p, None);
        }
    }

    fn restart(&mut self, id: NodeId) {
        let i = self.b(id);
        let br = &mut self.brokers[i];
        br.alive = true;
        br.restart_at = None;
        br.incarnation += 1;
        br.coord = coordinator(&self.cfg, id, br.incarnation);
        br.next_rid = 0;
        self.ev(|| format!("broker {id} restarts"));
        for p in 0..self.cfg.offsets_partitions {
            let s = self.controller.partitions.get_mut(&p).expect("partition");
            if s.leader.is_none() && s.isr == [id] {
                s.leader = Some(id);
                s.epoch += 1;
                let s = s.clone();
                self.ev(|| format!("controller: p{p} -> {s:?}"));
            }
            self.send_state(p, None);
        }
    }

    fn move_leader(&mut self, p: i32) {
        let alive: Vec<NodeId> = (1..=self.cfg.brokers)
            .filter(|b| self.brokers[self.b(*b)].alive)
            .collect();
        let s = self.controller.partitions.get_mut(&p).expect("partition");
        let Some(old) = s.leader else { return };
        let candidates: Vec<NodeId> = s
            .isr
            .iter()
            .copied()
            .filter(|b| *b != old && alive.contains(b))
            .collect();
        if candidates.is_empty() {
            return;
        }
        s.leader = Some(candidates[self.rng.random_range(0..candidates.len())]);
        s.epoch += 1;
        let s = s.clone();
        self.stats.leader_moves += 1;
        let hold = self.rng.random_bool(self.cfg.faults.zombie_leader);
        if hold {
            self.stats.zombie_leaders += 1;
        }
        self.ev(|| format!("controller moves p{p} -> {s:?} (old leader {old} held back: {hold})"));
        self.send_state(p, hold.then_some(old));
    }

    // ---- brokers ----

    fn apply_state(&mut self, id: NodeId, p: i32, state: PartitionState) {
        let i = self.b(id);
        if !self.brokers[i].alive {
            return;
        }
        let now = self.now;
        let r = self.brokers[i].replicas.get_mut(&p).expect("replica");
        if state.epoch < r.epoch || (state.epoch == r.epoch && r.leader.is_some()) {
            return;
        }
        let was_leader = r.is_leader(id);
        r.epoch = state.epoch;
        r.leader = state.leader;
        r.remotes.clear();
        if state.leader == Some(id) {
            r.isr = state.isr.clone();
            r.update_hw(id);
            self.brokers[i].leader_since.insert(p, now);
            let load_at = now + self.rng.random_range(0..50);
            self.enqueue(i, now, CoordEvent::BeginLoad(p, state.epoch));
            self.enqueue(i, load_at, CoordEvent::Load(p, state.epoch));
        } else {
            r.isr.clear();
            if was_leader {
                let zombie = self.rng.random_bool(self.cfg.faults.zombie_coordinator);
                let delay = if zombie {
                    self.stats.zombie_coordinators += 1;
                    self.rng.random_range(200..1_500)
                } else {
                    self.rng.random_range(0..20)
                };
                self.enqueue(i, now + delay, CoordEvent::Unload(p));
            }
        }
        self.ev(|| format!("broker {id} applies p{p} {state:?}"));
    }

    fn enqueue(&mut self, i: usize, at: u64, e: CoordEvent) {
        let q = &mut self.brokers[i].queue;
        let at = q.back().map_or(at, |(last, _)| at.max(*last));
        q.push_back((at, e));
    }

    fn coord_input(&mut self, i: usize, input: Input) {
        let now = self.now;
        self.brokers[i].coord.handle(now, input);
        self.drain(i);
    }

    fn drain(&mut self, i: usize) {
        let mut completions = VecDeque::new();
        loop {
            while let Some(a) = self.brokers[i].coord.poll_action() {
                match a {
                    Action::Respond {
                        request_id,
                        response,
                    } => self.respond(i, request_id, response),
                    Action::Append {
                        append_id,
                        partition,
                        leader_epoch,
                        records,
                    } => {
                        if let Some(r) = self.append(i, append_id, partition, leader_epoch, records)
                        {
                            completions.push_back((append_id, r));
                        }
                    }
                    Action::Loaded {
                        partition,
                        leader_epoch,
                        groups,
                        offsets,
                        ..
                    } => {
                        let id = self.brokers[i].id;
                        self.ev(|| {
                            format!("broker {id} loaded p{partition} at epoch {leader_epoch}: {groups} groups, {offsets} offsets")
                        });
                    }
                }
            }
            let Some((append_id, result)) = completions.pop_front() else {
                break;
            };
            let now = self.now;
            self.brokers[i]
                .coord
                .handle(now, Input::AppendCompleted { append_id, result });
        }
    }

    /// The shell's append: the leader-epoch fence, `min.insync.replicas`, then the local log;
    /// the answer comes once the high watermark passes the records.
    fn append(
        &mut self,
        i: usize,
        append_id: u64,
        p: i32,
        epoch: i32,
        records: Vec<AppendRecord>,
    ) -> Option<Result<i64, ErrorCode>> {
        let id = self.brokers[i].id;
        let min_isr = self.cfg.min_insync_replicas;
        let deadline = self.now + self.cfg.commit_timeout_ms;
        let br = &mut self.brokers[i];
        let r = br.replicas.get_mut(&p).expect("replica");
        let refused = if !r.is_leader(id) {
            Some(ErrorCode::NotLeaderOrFollower)
        } else if r.epoch != epoch {
            Some(ErrorCode::FencedLeaderEpoch)
        } else if r.isr.len() < min_isr {
            Some(ErrorCode::NotEnoughReplicas)
        } else {
            None
        };
        if let Some(e) = refused {
            if e != ErrorCode::NotEnoughReplicas {
                self.stats.fenced_appends += 1;
            }
            self.ev(|| {
                format!("broker {id} refuses append {append_id} to p{p} at epoch {epoch}: {e:?}")
            });
            return Some(Err(e));
        }
        let base = r.leo();
        for rec in records {
            r.log.push(Entry {
                epoch,
                key: rec.key,
                value: rec.value,
            });
        }
        let last = r.leo() - 1;
        r.update_hw(id);
        br.pending.insert(
            append_id,
            PendingWrite {
                partition: p,
                epoch,
                base,
                last,
                deadline,
            },
        );
        None
    }

    fn complete_appends(&mut self, i: usize) {
        let id = self.brokers[i].id;
        let now = self.now;
        let mut done = Vec::new();
        for (append_id, w) in &self.brokers[i].pending {
            let r = &self.brokers[i].replicas[&w.partition];
            let result = if !r.is_leader(id) || r.epoch != w.epoch {
                Err(ErrorCode::NotLeaderOrFollower)
            } else if r.hw > w.last {
                Ok(w.base)
            } else if now >= w.deadline {
                Err(ErrorCode::RequestTimedOut)
            } else {
                continue;
            };
            done.push((*append_id, *w, result));
        }
        for (append_id, w, result) in done {
            self.brokers[i].pending.remove(&append_id);
            if result.is_ok() {
                for o in w.base..=w.last {
                    self.checker.committed.push((w.partition, o, w.epoch));
                }
            }
            self.ev(|| {
                format!(
                    "broker {id} append {append_id} p{} [{}..={}] epoch {}: {result:?}",
                    w.partition, w.base, w.last, w.epoch
                )
            });
            self.coord_input(i, Input::AppendCompleted { append_id, result });
        }
    }

    fn run_queue(&mut self, i: usize) {
        let id = self.brokers[i].id;
        while let Some((at, e)) = self.brokers[i].queue.front().copied() {
            if at > self.now {
                break;
            }
            self.brokers[i].queue.pop_front();
            match e {
                CoordEvent::BeginLoad(p, epoch) => {
                    self.brokers[i].loaded.remove(&p);
                    self.coord_input(
                        i,
                        Input::BeginLoad {
                            partition: p,
                            leader_epoch: epoch,
                        },
                    );
                }
                CoordEvent::Load(p, epoch) => {
                    let r = &self.brokers[i].replicas[&p];
                    if !(r.is_leader(id) && r.epoch == epoch) {
                        continue;
                    }
                    let records = r
                        .log
                        .iter()
                        .enumerate()
                        .map(|(o, e)| LogRecord {
                            offset: o as i64,
                            key: e.key.clone(),
                            value: e.value.clone(),
                        })
                        .collect();
                    self.brokers[i].loaded.insert(p, epoch);
                    self.coord_input(
                        i,
                        Input::Load {
                            partition: p,
                            leader_epoch: epoch,
                            records,
                        },
                    );
                }
                CoordEvent::Unload(p) => {
                    self.ev(|| format!("broker {id} unloads p{p}"));
                    self.brokers[i].loaded.remove(&p);
                    self.coord_input(i, Input::Unload { partition: p });
                }
            }
        }
    }

    /// Followers fetch from the leader they believe in, at their epoch.
    fn replicate(&mut self, i: usize) {
        let id = self.brokers[i].id;
        let now = self.now;
        for p in 0..self.cfg.offsets_partitions {
            let (leader, epoch) = {
                let r = &self.brokers[i].replicas[&p];
                match r.leader {
                    Some(l) if l != id => (l, r.epoch),
                    _ => continue,
                }
            };
            if !self.rng.random_bool(0.8) {
                continue;
            }
            let li = self.b(leader);
            if !self.brokers[li].alive {
                continue;
            }
            let (keep, entries, leader_hw, leader_leo) = {
                let lr = &self.brokers[li].replicas[&p];
                if !lr.is_leader(leader) || lr.epoch != epoch {
                    continue;
                }
                let f = &self.brokers[i].replicas[&p];
                let keep = f.common_prefix(lr);
                let end = lr.log.len().min(keep + 64);
                (keep, lr.log[keep..end].to_vec(), lr.hw, lr.leo())
            };
            let f = self.brokers[i].replicas.get_mut(&p).expect("replica");
            f.log.truncate(keep);
            f.log.extend(entries);
            f.hw = leader_hw.min(f.leo());
            let leo = f.leo();
            let since = self.brokers[li].leader_since.get(&p).copied().unwrap_or(0);
            let lr = self.brokers[li].replicas.get_mut(&p).expect("replica");
            let caught_up_at = if leo >= leader_leo {
                now
            } else {
                lr.remotes.get(&id).map_or(since, |r| r.caught_up_at)
            };
            lr.remotes.insert(id, Remote { leo, caught_up_at });
            lr.update_hw(leader);
        }
    }

    /// The leader shrinks and expands its ISR through the controller's compare-and-set.
    fn maintain_isr(&mut self, i: usize) {
        let id = self.brokers[i].id;
        let now = self.now;
        let lag = self.cfg.replica_lag_time_max_ms;
        for p in 0..self.cfg.offsets_partitions {
            let since = self.brokers[i].leader_since.get(&p).copied().unwrap_or(0);
            let r = &self.brokers[i].replicas[&p];
            if !r.is_leader(id) {
                continue;
            }
            let mut isr: Vec<NodeId> = r
                .isr
                .iter()
                .copied()
                .filter(|b| {
                    *b == id
                        || r.remotes
                            .get(b)
                            .map_or(since, |x| x.caught_up_at)
                            .saturating_add(lag)
                            >= now
                })
                .collect();
            for (b, x) in &r.remotes {
                if !isr.contains(b) && x.leo >= r.leo() {
                    isr.push(*b);
                }
            }
            isr.sort_unstable();
            let mut current = r.isr.clone();
            current.sort_unstable();
            if isr == current {
                continue;
            }
            let epoch = r.epoch;
            if self.controller.alter_isr(p, id, epoch, &isr) {
                self.ev(|| format!("broker {id} alters ISR of p{p} to {isr:?}"));
                let r = self.brokers[i].replicas.get_mut(&p).expect("replica");
                r.isr = isr;
                r.update_hw(id);
            }
        }
    }

    // ---- requests ----

    fn deliver_to_broker(&mut self, i: usize, from: NodeId, msg: Msg) {
        if !self.brokers[i].alive {
            return;
        }
        let req = match &msg {
            Msg::FindCoordinator { req, .. } | Msg::Request { req, .. } => *req,
            _ => return,
        };
        // One TCP connection: nothing older than what was already taken.
        let seen = self.brokers[i].seen.entry(from).or_insert(0);
        if req <= *seen {
            return;
        }
        *seen = req;
        let id = self.brokers[i].id;
        match msg {
            Msg::FindCoordinator { req, partition } => {
                let coordinator = self.brokers[i].replicas[&partition].leader;
                let m = Msg::FindCoordinatorResponse { req, coordinator };
                self.net.send(&mut self.rng, self.now, id, from, m);
            }
            Msg::Request { req, request } => {
                let br = &mut self.brokers[i];
                br.next_rid += 1;
                let rid = br.next_rid;
                br.requests.insert(rid, (from, req, request.clone()));
                self.coord_input(
                    i,
                    Input::Request {
                        request_id: rid,
                        request,
                    },
                );
            }
            _ => {}
        }
    }

    fn respond(&mut self, i: usize, rid: RequestId, response: Response) {
        let Some((client, req, request)) = self.brokers[i].requests.remove(&rid) else {
            return;
        };
        self.check_response(i, &request, &response);
        let id = self.brokers[i].id;
        self.net.send(
            &mut self.rng,
            self.now,
            id,
            client,
            Msg::Response { req, response },
        );
    }

    fn check_response(&mut self, i: usize, request: &Request, response: &Response) {
        let id = self.brokers[i].id;
        match (request, response) {
            (Request::OffsetCommit(q), Response::OffsetCommit(r)) => {
                let p = partition_for(&q.group_id, self.cfg.offsets_partitions);
                let epoch = self.brokers[i].loaded.get(&p).copied().unwrap_or(-1);
                for (qt, rt) in q.topics.iter().zip(&r.topics) {
                    for (qp, rp) in qt.partitions.iter().zip(&rt.partitions) {
                        if rp.error != ErrorCode::None {
                            continue;
                        }
                        self.stats.commits_acked += 1;
                        let tp = qp.partition_index;
                        let offset = qp.committed_offset;
                        let key = (q.group_id.clone(), tp, q.generation_id, q.member_id.clone());
                        if let Some(prev) = self.checker.last_in_generation.get(&key) {
                            if *prev > offset {
                                self.fail(
                                    Invariant::OffsetMovedBackwards,
                                    format!("{} {TOPIC}-{tp} generation {} member {}: acknowledged {offset} after {prev} (broker {id})", q.group_id, q.generation_id, q.member_id),
                                );
                            }
                        }
                        self.checker.last_in_generation.insert(key, offset);
                        self.checker
                            .acks
                            .entry((q.group_id.clone(), tp))
                            .or_default()
                            .push(Ack { epoch, offset });
                        let g = q.group_id.clone();
                        self.ev(|| {
                            format!(
                                "broker {id} (p{p} epoch {epoch}) acks {g} {TOPIC}-{tp} = {offset}"
                            )
                        });
                    }
                }
            }
            (Request::OffsetFetch(q), Response::OffsetFetch(r)) if r.error == ErrorCode::None => {
                let p = partition_for(&q.group_id, self.cfg.offsets_partitions);
                let Some(epoch) = self.brokers[i].loaded.get(&p).copied() else {
                    return;
                };
                for t in &r.topics {
                    for fp in &t.partitions {
                        if fp.error != ErrorCode::None {
                            continue;
                        }
                        self.stats.fetches_checked += 1;
                        let latest = self
                            .checker
                            .acks
                            .get(&(q.group_id.clone(), fp.partition_index))
                            .and_then(|v| v.iter().rev().find(|a| a.epoch <= epoch).copied());
                        if let Some(a) = latest {
                            if fp.committed_offset < a.offset {
                                self.fail(
                                    Invariant::CommittedOffsetLost,
                                    format!("{} {TOPIC}-{}: broker {id} (p{p} loaded at epoch {epoch}) answered {} but {} was acknowledged at epoch {}", q.group_id, fp.partition_index, fp.committed_offset, a.offset, a.epoch),
                                );
                            }
                        }
                    }
                }
            }
            (Request::SyncGroup(q), Response::SyncGroup(r)) if r.error == ErrorCode::None => {
                self.stats.syncs += 1;
                let (set, own) = split_assignment(&r.assignment);
                let key = (q.group_id.clone(), q.generation_id);
                // A static member that rejoined a Stable group under a new member id keeps the
                // part its instance had (KIP-345): static member ids start with the instance id.
                let owner = |m: &str| {
                    m == q.member_id
                        || q.group_instance_id.as_ref().is_some_and(|i| {
                            m.strip_prefix(i.as_str())
                                .is_some_and(|r| r.starts_with('-'))
                        })
                };
                let expected = set
                    .split(';')
                    .find_map(|e| e.split_once('=').filter(|(m, _)| owner(m)))
                    .map(|(_, parts)| parts.to_owned());
                match self.checker.sets.get(&key) {
                    Some(s) if *s != set => self.fail(
                        Invariant::AssignmentMismatch,
                        format!(
                            "{} generation {}: member {} got set {set:?}, another member {s:?}",
                            q.group_id, q.generation_id, q.member_id
                        ),
                    ),
                    Some(_) => {}
                    None => {
                        self.checker.sets.insert(key, set.clone());
                    }
                }
                if expected.as_deref() != Some(own.as_str()) {
                    self.fail(
                        Invariant::AssignmentMismatch,
                        format!("{} generation {}: member {} got {own:?}, its part of {set:?} is {expected:?}", q.group_id, q.generation_id, q.member_id),
                    );
                }
            }
            _ => {}
        }
    }

    // ---- checks ----

    fn check_committed(&mut self) {
        for &(p, offset, epoch) in &self.checker.committed {
            let Some(l) = self.controller.partitions[&p].leader else {
                continue;
            };
            let log = &self.brokers[self.b(l)].replicas[&p].log;
            let found = log.get(offset as usize).map(|e| e.epoch);
            if found != Some(epoch) {
                let detail = format!(
                    "p{p} offset {offset} (epoch {epoch}) was acknowledged as committed; leader {l}'s log has {found:?}"
                );
                self.fail(Invariant::AckedAppendNotInLeaderLog, detail);
                return;
            }
        }
    }

    /// Whether every group is Stable on its coordinator with all its members in it.
    fn settled(&self) -> Result<(), String> {
        for g in &self.groups {
            let p = partition_for(g, self.cfg.offsets_partitions);
            let Some(l) = self.controller.partitions[&p].leader else {
                return Err(format!("{g}: p{p} offline"));
            };
            let br = &self.brokers[self.b(l)];
            let state = br.coord.group_state(g);
            let generation = br.coord.group_generation(g);
            if state != Some(GroupState::Stable) {
                let members: Vec<String> = self
                    .consumers
                    .iter()
                    .filter(|c| c.group == *g)
                    .map(|c| c.describe())
                    .collect();
                return Err(format!(
                    "{g}: {state:?} on broker {l}; consumers {members:?}"
                ));
            }
            let generation = generation.unwrap_or(-1);
            for c in self.consumers.iter().filter(|c| c.group == *g) {
                if !c.is_stable_at(generation) {
                    return Err(format!(
                        "{g}: consumer {} at {:?} generation {} (group at {generation} on broker {l})",
                        c.id, c.phase, c.generation
                    ));
                }
            }
        }
        Ok(())
    }

    // ---- the loop ----

    fn faults(&mut self) {
        let f = self.cfg.faults;
        if self.rng.random_bool(f.crash) {
            let alive: Vec<NodeId> = (1..=self.cfg.brokers)
                .filter(|b| self.brokers[self.b(*b)].alive)
                .collect();
            if alive.len() > 1 {
                let id = alive[self.rng.random_range(0..alive.len())];
                self.crash(id);
            }
        }
        if self.rng.random_bool(f.leader_move) {
            let p = self.rng.random_range(0..self.cfg.offsets_partitions);
            self.move_leader(p);
        }
        for c in 0..self.consumers.len() {
            if self.consumers[c].is_away() || !self.rng.random_bool(f.leave) {
                continue;
            }
            let away = if self.consumers[c].instance.is_some() {
                self.rng
                    .random_range(100..self.cfg.session_timeout_ms as u64 * 2)
            } else {
                self.rng.random_range(300..1_500)
            };
            self.stats.leaves += 1;
            let cid = self.consumers[c].id;
            self.ev(|| format!("consumer {cid} leaves for {away}ms"));
            if let Some((to, m)) = self.consumers[c].leave(self.now, away) {
                self.net.send(&mut self.rng, self.now, cid, to, m);
            }
        }
    }

    fn run(&mut self) {
        let end = self.cfg.fault_ms + self.cfg.settle_ms;
        let mut calm = false;
        while self.violation.is_none() {
            self.step += 1;
            self.now += self.cfg.tick_ms;
            if self.now < self.cfg.fault_ms {
                self.faults();
            } else if !calm {
                calm = true;
                self.net.set_config(NetConfig {
                    loss: 0.0,
                    duplicate: 0.0,
                    long_delay: 0.0,
                    ..self.cfg.net
                });
                self.ev(|| "faults stop".to_string());
            }
            for id in 1..=self.cfg.brokers {
                let i = self.b(id);
                if self.brokers[i].restart_at.is_some_and(|t| t <= self.now) {
                    self.restart(id);
                }
            }
            while let Some(k) = self.ctl_queue.keys().next().copied() {
                if k.0 > self.now {
                    break;
                }
                let (id, p, s) = self.ctl_queue.remove(&k).expect("queued");
                self.apply_state(id, p, s);
            }
            while let Some((from, to, msg)) = self.net.pop_due(self.now) {
                if to >= FIRST_CONSUMER {
                    let c = (to - FIRST_CONSUMER) as usize;
                    let cfg = self.cfg;
                    if self.trace.is_on() {
                        if let Msg::Response { response, .. } = &msg {
                            let r = short(response);
                            self.ev(|| format!("consumer {to} <- broker {from}: {r}"));
                        }
                    }
                    self.consumers[c].on_message(self.now, msg, &cfg);
                } else {
                    let i = self.b(to);
                    self.deliver_to_broker(i, from, msg);
                }
                if self.violation.is_some() {
                    break;
                }
            }
            for i in 0..self.brokers.len() {
                if !self.brokers[i].alive {
                    continue;
                }
                self.run_queue(i);
                self.replicate(i);
                self.maintain_isr(i);
                self.complete_appends(i);
                if self.brokers[i]
                    .coord
                    .next_deadline()
                    .is_some_and(|d| d <= self.now)
                {
                    self.coord_input(i, Input::Tick);
                }
            }
            let cfg = self.cfg;
            for c in 0..self.consumers.len() {
                if let Some((to, m)) = self.consumers[c].step(self.now, &mut self.rng, &cfg) {
                    let from = self.consumers[c].id;
                    self.net.send(&mut self.rng, self.now, from, to, m);
                }
            }
            self.check_committed();
            if calm {
                match self.settled() {
                    Ok(()) => {
                        self.stats.settle_ms = self.now - self.cfg.fault_ms;
                        break;
                    }
                    Err(why) if self.now >= end => {
                        self.fail(
                            Invariant::NotStable,
                            format!("{}ms after the faults stopped: {why}", self.cfg.settle_ms),
                        );
                    }
                    Err(_) => {}
                }
            }
        }
        self.stats.steps = self.step;
        self.stats.net = self.net.stats();
    }
}

fn short(r: &Response) -> String {
    match r {
        Response::JoinGroup(r) => format!(
            "JoinGroup {:?} gen {} leader {}",
            r.error,
            r.generation_id,
            r.leader == r.member_id
        ),
        Response::SyncGroup(r) => format!("SyncGroup {:?}", r.error),
        Response::Heartbeat(r) => format!("Heartbeat {:?}", r.error),
        Response::OffsetCommit(r) => format!(
            "OffsetCommit {:?}",
            r.topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| p.error)
        ),
        Response::OffsetFetch(r) => format!("OffsetFetch {:?}", r.error),
        other => format!("{other:?}"),
    }
}

/// Runs one seed: what it did, and the failure if an invariant broke.
pub fn run_seed(seed: u64, cfg: GroupSimConfig) -> (GroupStats, Option<Failure>) {
    let mut sim = Sim::new(seed, cfg);
    sim.run();
    let failure = sim.violation.take().map(|violation| Failure {
        seed,
        step: sim.step,
        now: sim.now,
        violation,
        trace: sim.trace.render(),
    });
    (sim.stats, failure)
}

/// The sum over a range of seeds.
#[derive(Debug, Clone, Default)]
pub struct GroupSummary {
    /// The scenario.
    pub name: String,
    /// Seeds run.
    pub seeds: u64,
    /// The sum of the runs' counts (`settle_ms` is the largest).
    pub total: GroupStats,
    /// Seeds that violated an invariant.
    pub violations: u64,
    /// The first failure.
    pub first_failure: Option<Failure>,
}

impl std::fmt::Display for GroupSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.total;
        write!(
            f,
            "[{}] seeds {} steps {} | commits acked {} fetches checked {} syncs {} | crashes {} \
             leader moves {} zombie leaders {} zombie coordinators {} fenced appends {} \
             leaves {} | network: lost {} duplicated {} long-delayed {} | longest settle {} ms \
             | violations {}",
            self.name,
            self.seeds,
            t.steps,
            t.commits_acked,
            t.fetches_checked,
            t.syncs,
            t.crashes,
            t.leader_moves,
            t.zombie_leaders,
            t.zombie_coordinators,
            t.fenced_appends,
            t.leaves,
            t.net.lost,
            t.net.duplicated,
            t.net.long_delayed,
            t.settle_ms,
            self.violations
        )
    }
}

impl SeedSummary for GroupSummary {
    fn seeds(&self) -> u64 {
        self.seeds
    }
    fn violations(&self) -> u64 {
        self.violations
    }
    fn first_failure(&self) -> Option<String> {
        self.first_failure.as_ref().map(ToString::to_string)
    }
}

/// Runs `seeds` of `cfg`; with `stop_at_first` it stops at the first violation.
pub fn run_seeds(
    name: &str,
    cfg: GroupSimConfig,
    seeds: Range<u64>,
    stop_at_first: bool,
) -> GroupSummary {
    let mut s = GroupSummary {
        name: name.to_string(),
        ..GroupSummary::default()
    };
    for seed in seeds {
        let (st, failure) = run_seed(seed, cfg);
        s.seeds += 1;
        let t = &mut s.total;
        t.steps += st.steps;
        t.commits_acked += st.commits_acked;
        t.fetches_checked += st.fetches_checked;
        t.syncs += st.syncs;
        t.crashes += st.crashes;
        t.leader_moves += st.leader_moves;
        t.zombie_leaders += st.zombie_leaders;
        t.zombie_coordinators += st.zombie_coordinators;
        t.fenced_appends += st.fenced_appends;
        t.leaves += st.leaves;
        t.settle_ms = t.settle_ms.max(st.settle_ms);
        t.net.lost += st.net.lost;
        t.net.duplicated += st.net.duplicated;
        t.net.long_delayed += st.net.long_delayed;
        if let Some(f) = failure {
            s.violations += 1;
            if s.first_failure.is_none() {
                s.first_failure = Some(f);
            }
            if stop_at_first {
                break;
            }
        }
    }
    s
}
