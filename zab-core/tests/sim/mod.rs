//! The election simulator used by `election_simulation.rs`: servers running real
//! `FastLeaderElection` cores, a seeded network, a minimal peer around the cores, and the
//! invariant checks. See that file for what is checked. The network itself (`net.rs`) is
//! shared with the whole-ensemble Zab simulation.

pub mod net;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zab_core::{
    Action, Candidate, DecisionPath, ElectionConfig, FastLeaderElection, LearnerType, Notification,
    QuorumHierarchical, QuorumMaj, QuorumVerifier, ServerEntry, ServerId, ServerState, VoteData,
    Zxid,
};

pub const PEER_TICK: Duration = Duration::from_millis(50);
pub const INIT_LIMIT: Duration = Duration::from_millis(1000);
pub const SYNC_LIMIT: Duration = Duration::from_millis(400);
pub const CHAOS: Duration = Duration::from_millis(6000);
pub const MAX_STEPS: u64 = 200_000;
pub const MAX_INFLIGHT: usize = 20_000;
pub const SETTLE_BOUND: Duration = Duration::from_secs(20);

pub use net::ms;
use net::Network;

struct Node {
    voter: bool,
    core: FastLeaderElection,
    alive: bool,
    data: VoteData,
    accepted_epoch: i64,
    decided_at: Instant,
    synced_epoch: Option<i64>,
    last_contact: Instant,
    restart_at: Option<Instant>,
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub elections: usize,
    pub fast: usize,
    pub established: usize,
    pub same_round_leaders: usize,
    pub settle: Duration,
    pub first_leader: Option<Duration>,
}

pub struct Sim {
    seed: u64,
    rng: StdRng,
    pub origin: Instant,
    now: Instant,
    config: ElectionConfig,
    qv: Arc<dyn QuorumVerifier>,
    nodes: BTreeMap<ServerId, Node>,
    pub net: Network<Notification>,
    conns: BTreeSet<(ServerId, ServerId)>,
    next_peer_tick: Instant,
    next_fault: Instant,
    pub chaos_until: Instant,
    established: BTreeMap<i64, ServerId>,
    inits: BTreeMap<(ServerId, i64), BTreeSet<Candidate>>,
    round_leaders: BTreeMap<i64, BTreeSet<ServerId>>,
    report: Report,
    steps: u64,
    pub max_steps: u64,
}

impl Sim {
    pub fn new(seed: u64, voters: usize, observers: usize, config: ElectionConfig) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let voter_ids: Vec<i64> = (1..=voters as i64).collect();
        let observer_ids: Vec<i64> = (0..observers as i64).map(|i| 100 + i).collect();
        let qv = quorum_rule(seed, &voter_ids, &observer_ids);
        let origin = Instant::now();
        // Durable data: epochs and zxids that often tie on zxid with different epochs (the
        // ZOOKEEPER-1419 trap) and often differ.
        let base = rng.random_range(1..3i64);
        let mut nodes = BTreeMap::new();
        for id in voter_ids.iter().chain(observer_ids.iter()) {
            let voter = voter_ids.contains(id);
            let current_epoch = base + rng.random_range(0..2i64);
            let zxid_epoch = current_epoch - rng.random_range(0..2i64).min(current_epoch - base);
            let zxid = Zxid::new(zxid_epoch, rng.random_range(0..3u32));
            let data = VoteData::new(zxid, current_epoch);
            // acceptedEpoch as after a completed sync; a larger one (a LEADERINFO accepted
            // from a leader that never got a quorum) would keep the server out until a later
            // epoch, as in ZooKeeper, which is not what this test measures.
            let accepted_epoch = current_epoch;
            let lt = if voter {
                LearnerType::Participant
            } else {
                LearnerType::Observer
            };
            let core = FastLeaderElection::new(config.clone(), ServerId(*id), lt, qv.clone(), data);
            nodes.insert(
                ServerId(*id),
                Node {
                    voter,
                    core,
                    alive: true,
                    data,
                    accepted_epoch,
                    decided_at: origin,
                    synced_epoch: None,
                    last_contact: origin,
                    restart_at: None,
                },
            );
        }
        let loss = rng.random_range(0.0..0.2);
        let dup = rng.random_range(0.0..0.1);
        let max_delay = rng.random_range(1..300u64);
        let net = Network::new(nodes.keys().copied(), loss, dup, max_delay);
        Sim {
            seed,
            rng,
            origin,
            now: origin,
            config,
            qv,
            nodes,
            net,
            conns: BTreeSet::new(),
            next_peer_tick: origin + PEER_TICK,
            next_fault: origin + ms(100),
            chaos_until: origin + CHAOS,
            established: BTreeMap::new(),
            inits: BTreeMap::new(),
            round_leaders: BTreeMap::new(),
            report: Report::default(),
            steps: 0,
            max_steps: MAX_STEPS,
        }
    }

    fn fail(&self, what: String) -> String {
        format!(
            "seed {} at {} ms: {what}",
            self.seed,
            (self.now - self.origin).as_millis()
        )
    }

    fn reachable(&self, a: ServerId, b: ServerId) -> bool {
        self.nodes[&a].alive && self.nodes[&b].alive && self.net.same_side(a, b)
    }

    /// Tells the cores about connections that came up or went down.
    fn refresh_connections(&mut self) {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        for a in &ids {
            for b in &ids {
                if a == b {
                    continue;
                }
                let up = self.reachable(*a, *b);
                let was = self.conns.contains(&(*a, *b));
                let now = self.now;
                if up && !was {
                    self.conns.insert((*a, *b));
                    if let Some(n) = self.nodes.get_mut(a) {
                        n.core.connection_up(now, *b);
                    }
                } else if !up && was {
                    self.conns.remove(&(*a, *b));
                    if let Some(n) = self.nodes.get_mut(a) {
                        if n.alive {
                            n.core.connection_down(now, *b);
                        }
                    }
                }
            }
        }
        for id in &ids {
            self.pump(*id).ok();
        }
    }

    fn send(&mut self, from: ServerId, to: ServerId, n: Notification) {
        if !self.nodes.contains_key(&to) || !self.reachable(from, to) {
            return;
        }
        let faulty = self.now < self.chaos_until;
        self.net
            .send_datagram(&mut self.rng, self.now, faulty, from, to, n);
    }

    /// Records the node's initial vote for its current round (its data does not change while
    /// it is LOOKING), so decisions can be checked against it.
    fn record_init(&mut self, id: ServerId) {
        let n = &self.nodes[&id];
        if n.alive && n.core.is_electing() {
            let c = Candidate::new(id, n.data.last_zxid, n.data.current_epoch);
            self.inits
                .entry((id, n.core.logical_clock()))
                .or_default()
                .insert(c);
        }
    }

    /// Carries out a node's actions and checks every decision.
    fn pump(&mut self, id: ServerId) -> Result<(), String> {
        self.record_init(id);
        loop {
            let Some(node) = self.nodes.get_mut(&id) else {
                return Ok(());
            };
            let Some(action) = node.core.poll_action() else {
                break;
            };
            match action {
                Action::Send { to, notification } => self.send(id, to, notification),
                Action::ConnectAll => {}
                Action::Decided(d) => {
                    let node = self.nodes.get_mut(&id).expect("node exists");
                    node.decided_at = self.now;
                    node.synced_epoch = None;
                    let data = node.data;
                    self.report.elections += 1;
                    let in_round = matches!(
                        d.path,
                        DecisionPath::FinalizeWait | DecisionPath::AllConnectedAgreed
                    );
                    if d.path == DecisionPath::AllConnectedAgreed {
                        self.report.fast += 1;
                    }
                    if in_round {
                        let round = d.vote.election_epoch;
                        self.inits
                            .entry((id, round))
                            .or_default()
                            .insert(Candidate::new(id, data.last_zxid, data.current_epoch));
                    }
                    if d.state == ServerState::Leading && self.report.first_leader.is_none() {
                        self.report.first_leader = Some(self.now - self.origin);
                    }
                    if in_round && d.state == ServerState::Leading {
                        self.check_leader_is_max(
                            &d.vote.candidate(),
                            d.vote.election_epoch,
                            &d.supporters,
                        )?;
                        let leaders = self.round_leaders.entry(d.vote.election_epoch).or_default();
                        leaders.insert(id);
                        if leaders.len() > 1 {
                            self.report.same_round_leaders += 1;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Z5: every supporter's initial vote of that round is not greater than the leader's.
    fn check_leader_is_max(
        &self,
        elected: &Candidate,
        round: i64,
        supporters: &BTreeSet<ServerId>,
    ) -> Result<(), String> {
        if !self.qv.contains_quorum(supporters) {
            return Err(self.fail(format!("decided without a quorum: {supporters:?}")));
        }
        for s in supporters {
            let ok = self
                .inits
                .get(&(*s, round))
                .is_some_and(|inits| inits.iter().any(|c| c <= elected));
            if !ok {
                return Err(self.fail(format!(
                    "Z5: leader {elected:?} of round {round} is not the largest of its quorum: \
                     supporter {s} had {:?}",
                    self.inits.get(&(*s, round))
                )));
            }
        }
        Ok(())
    }

    fn start_election(&mut self, id: ServerId) -> Result<(), String> {
        let now = self.now;
        let node = self.nodes.get_mut(&id).expect("node exists");
        node.synced_epoch = None;
        node.core.set_vote_data(node.data);
        node.core.start(now);
        self.pump(id)
    }

    fn crash(&mut self, id: ServerId) {
        let restart = self.now + ms(self.rng.random_range(200..1500));
        let node = self.nodes.get_mut(&id).expect("node exists");
        node.alive = false;
        node.synced_epoch = None;
        node.restart_at = Some(restart);
        self.refresh_connections();
    }

    fn restart(&mut self, id: ServerId) -> Result<(), String> {
        let config = self.config.clone();
        let qv = self.qv.clone();
        let node = self.nodes.get_mut(&id).expect("node exists");
        let lt = if node.voter {
            LearnerType::Participant
        } else {
            LearnerType::Observer
        };
        node.core = FastLeaderElection::new(config, id, lt, qv, node.data);
        node.alive = true;
        node.restart_at = None;
        self.refresh_connections();
        self.start_election(id)
    }

    fn random_fault(&mut self) -> Result<(), String> {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let pick = ids[self.rng.random_range(0..ids.len())];
        match self.rng.random_range(0..10) {
            0..=2 if self.nodes[&pick].alive => self.crash(pick),
            3..=5 => {
                for id in &ids {
                    let s = u8::from(self.rng.random_bool(0.4));
                    self.net.side.insert(*id, s);
                }
                self.refresh_connections();
            }
            6..=7 => {
                for id in &ids {
                    self.net.side.insert(*id, 0);
                }
                self.refresh_connections();
            }
            _ => {}
        }
        Ok(())
    }

    /// The minimal peer around the cores: discovery, sync, heartbeats (Z6).
    fn peer_tick(&mut self) -> Result<(), String> {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        for id in &ids {
            let node = &self.nodes[id];
            if !node.alive {
                continue;
            }
            match node.core.state() {
                ServerState::Leading => self.leader_tick(*id)?,
                ServerState::Following | ServerState::Observing => self.learner_tick(*id)?,
                ServerState::Looking => {}
            }
        }
        Ok(())
    }

    fn followers_of(&self, leader: ServerId, epoch: Option<i64>) -> BTreeSet<ServerId> {
        self.nodes
            .iter()
            .filter(|(id, n)| {
                **id != leader
                    && self.reachable(leader, **id)
                    && n.core.state() != ServerState::Looking
                    && n.core.state() != ServerState::Leading
                    && n.core.current_vote().leader == leader
                    && (epoch.is_none() || n.synced_epoch == epoch)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn leader_tick(&mut self, l: ServerId) -> Result<(), String> {
        let synced = self.nodes[&l].synced_epoch;
        match synced {
            None => {
                let mut quorum = self.followers_of(l, None);
                quorum.insert(l);
                let voters: BTreeSet<ServerId> = quorum
                    .iter()
                    .filter(|s| self.nodes[s].voter)
                    .copied()
                    .collect();
                if self.qv.contains_quorum(&voters) {
                    let epoch = voters
                        .iter()
                        .map(|s| self.nodes[s].accepted_epoch)
                        .max()
                        .unwrap_or(0)
                        + 1;
                    if let Some(other) = self.established.get(&epoch) {
                        return Err(self.fail(format!(
                            "Z1: epoch {epoch} established by {l} and by {other}"
                        )));
                    }
                    self.established.insert(epoch, l);
                    self.report.established += 1;
                    for s in &voters {
                        self.nodes.get_mut(s).expect("node exists").accepted_epoch = epoch;
                    }
                    let history = self.nodes[&l].data.last_zxid;
                    for s in &quorum {
                        self.sync(*s, epoch, history);
                    }
                } else if self.now - self.nodes[&l].decided_at > INIT_LIMIT {
                    self.start_election(l)?;
                }
            }
            Some(epoch) => {
                let mut quorum = self.followers_of(l, Some(epoch));
                quorum.insert(l);
                if !self.qv.contains_quorum(&quorum) {
                    // lost its quorum (Z6)
                    return self.start_election(l);
                }
                if self.rng.random_bool(0.3) {
                    let cur = self.nodes[&l].data.last_zxid;
                    let next = if cur.epoch() < epoch {
                        Some(Zxid::new(epoch, 1))
                    } else {
                        cur.next()
                    };
                    if let Some(z) = next {
                        self.nodes.get_mut(&l).expect("node exists").data.last_zxid = z;
                        for f in quorum {
                            if f != l && self.rng.random_bool(0.7) {
                                self.nodes.get_mut(&f).expect("node exists").data.last_zxid = z;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A learner takes the leader's history and epoch (NEWLEADER / UPTODATE).
    fn sync(&mut self, id: ServerId, epoch: i64, history: Zxid) {
        let now = self.now;
        let node = self.nodes.get_mut(&id).expect("node exists");
        node.accepted_epoch = node.accepted_epoch.max(epoch);
        node.data = VoteData::new(history, epoch);
        node.core.set_vote_data(node.data);
        node.core.update_election_vote(epoch);
        node.synced_epoch = Some(epoch);
        node.last_contact = now;
    }

    fn learner_tick(&mut self, id: ServerId) -> Result<(), String> {
        let leader = self.nodes[&id].core.current_vote().leader;
        let leader_ok = self.nodes.contains_key(&leader)
            && self.reachable(id, leader)
            && self.nodes[&leader].core.state() == ServerState::Leading;
        if leader_ok {
            if let Some(epoch) = self.nodes[&leader].synced_epoch {
                if self.nodes[&id].synced_epoch != Some(epoch) {
                    if self.nodes[&id].accepted_epoch > epoch {
                        return self.start_election(id);
                    }
                    let history = self.nodes[&leader].data.last_zxid;
                    self.sync(id, epoch, history);
                }
                self.nodes.get_mut(&id).expect("node exists").last_contact = self.now;
            }
        }
        let node = &self.nodes[&id];
        let gave_up = match node.synced_epoch {
            None => self.now - node.decided_at > INIT_LIMIT,
            Some(_) => self.now - node.last_contact > SYNC_LIMIT,
        };
        if gave_up {
            self.start_election(id)?;
        }
        Ok(())
    }

    /// Every live server follows (or observes) one established leader.
    fn settled(&self) -> bool {
        let leaders: Vec<(&ServerId, &Node)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.alive && n.core.state() == ServerState::Leading)
            .collect();
        let [(lid, l)] = leaders.as_slice() else {
            return false;
        };
        let Some(epoch) = l.synced_epoch else {
            return false;
        };
        self.nodes.iter().all(|(id, n)| {
            !n.alive
                || id == *lid
                || (n.synced_epoch == Some(epoch) && n.core.current_vote().leader == **lid)
        })
    }

    fn next_event(&self) -> Instant {
        let mut t = self.next_peer_tick;
        if let Some(at) = self.net.next_at() {
            t = t.min(at);
        }
        for n in self.nodes.values() {
            if n.alive {
                if let Some(d) = n.core.next_deadline() {
                    t = t.min(d);
                }
            }
            if let Some(r) = n.restart_at {
                t = t.min(r);
            }
        }
        if self.now < self.chaos_until {
            t = t.min(self.next_fault);
        }
        t.max(self.now)
    }

    fn storm(&self) -> Result<(), String> {
        if self.net.len() > MAX_INFLIGHT {
            let mut pairs: BTreeMap<(i64, i64, i32), usize> = BTreeMap::new();
            for e in self.net.envelopes() {
                *pairs
                    .entry((e.from.0, e.to.0, e.msg.state.wire_value()))
                    .or_default() += 1;
            }
            let mut top: Vec<_> = pairs.into_iter().collect();
            top.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
            top.truncate(6);
            return Err(self.fail(format!(
                "liveness: message storm, {} messages in flight, most from/to/state: {top:?}",
                self.net.len()
            )));
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), String> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(self.fail(format!(
                "liveness: more than {} steps, {} messages in flight",
                self.max_steps,
                self.net.len()
            )));
        }
        self.storm()?;
        self.now = self.next_event();
        let now = self.now;
        // messages due (those sent while delivering wait for the next step)
        for e in self.net.take_due(now) {
            let (from, to, n) = (e.from, e.to, e.msg);
            if self.reachable(from, to) {
                self.nodes
                    .get_mut(&to)
                    .expect("node exists")
                    .core
                    .handle_notification(now, from, n);
                self.pump(to)?;
                self.storm()?;
            }
        }
        // timers due
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        for id in &ids {
            let node = self.nodes.get_mut(id).expect("node exists");
            if node.restart_at.is_some_and(|r| r <= now) {
                self.restart(*id)?;
                continue;
            }
            if node.alive && node.core.next_deadline().is_some_and(|d| d <= now) {
                node.core.handle_tick(now);
                self.pump(*id)?;
            }
        }
        if now < self.chaos_until && self.next_fault <= now {
            self.random_fault()?;
            self.next_fault = now + ms(self.rng.random_range(100..600));
        }
        if self.next_peer_tick <= now {
            self.next_peer_tick = now + PEER_TICK;
            self.peer_tick()?;
        }
        Ok(())
    }

    pub fn run(mut self) -> Result<Report, String> {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        self.refresh_connections();
        for id in ids {
            self.start_election(id)?;
        }
        while self.now < self.chaos_until {
            self.step()?;
        }
        // faults stop: heal, restart the crashed, reliable network from now on
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        for id in &ids {
            self.net.side.insert(*id, 0);
        }
        self.refresh_connections();
        for id in &ids {
            if !self.nodes[id].alive {
                self.restart(*id)?;
            }
        }
        let healed = self.now;
        let mut next_trace = healed;
        while !self.settled() {
            if std::env::var("SIM_TRACE").is_ok() && self.now >= next_trace {
                next_trace = self.now + ms(250);
                let states: Vec<_> = self
                    .nodes
                    .iter()
                    .map(|(id, n)| {
                        (
                            id.0,
                            n.core.state(),
                            n.core.current_vote().leader.0,
                            n.core.logical_clock(),
                            n.synced_epoch,
                            n.data.current_epoch,
                            n.data.last_zxid.0,
                            n.accepted_epoch,
                        )
                    })
                    .collect();
                eprintln!("{:?} {states:?}", self.now - healed);
            }
            if self.now - healed > SETTLE_BOUND {
                let states: Vec<_> = self
                    .nodes
                    .iter()
                    .map(|(id, n)| {
                        (
                            id.0,
                            n.core.state(),
                            n.core.current_vote().leader.0,
                            n.synced_epoch,
                        )
                    })
                    .collect();
                return Err(self.fail(format!(
                    "liveness: not settled {} s after faults stopped: {states:?}",
                    SETTLE_BOUND.as_secs()
                )));
            }
            self.step()?;
        }
        self.report.settle = self.now - healed;
        Ok(self.report)
    }
}

/// Majority for most seeds; every fifth seed with 5 or 7 voters uses hierarchical quorums: three
/// groups, and one voter of weight 0 (it can never be elected).
fn quorum_rule(seed: u64, voters: &[i64], observers: &[i64]) -> Arc<dyn QuorumVerifier> {
    if seed % 5 != 4 || voters.len() < 5 {
        return Arc::new(QuorumMaj::with_ids(
            voters.iter().copied(),
            observers.iter().copied(),
        ));
    }
    let mut members = BTreeMap::new();
    let mut groups: BTreeMap<i64, Vec<ServerId>> = BTreeMap::new();
    for (i, v) in voters.iter().enumerate() {
        members.insert(ServerId(*v), ServerEntry::participant(""));
        groups.entry(i as i64 % 3).or_default().push(ServerId(*v));
    }
    for o in observers {
        members.insert(ServerId(*o), ServerEntry::observer(""));
    }
    let weights = BTreeMap::from([(ServerId(voters[0]), 0)]);
    match QuorumHierarchical::new(members, groups, weights, 0) {
        Ok(q) => Arc::new(q),
        Err(e) => panic!("seed {seed}: bad hierarchical layout: {e}"),
    }
}
