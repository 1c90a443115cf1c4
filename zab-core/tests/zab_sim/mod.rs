//! The whole-ensemble Zab simulator used by `zab_simulation.rs`: every server is a
//! `PeerCore` (the production composition of election, discovery, sync and broadcast) run
//! through zab-core's shared harness (`simulation::SimServer`: a `MemoryTxnLog` that survives
//! crashes but for its unsynced tail, a `RecordingStateMachine` that does not), over the
//! simulated network of `sim/net.rs`. The Zab.tla properties are checked after every step
//! (see `zab_simulation.rs`).

#![allow(dead_code)]

mod driver;
mod invariants;
#[path = "../sim/net.rs"]
pub mod net;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use net::{ms, Network};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zab_core::broadcast::LearnerOptions;
use zab_core::discovery::Timing;
use zab_core::packet::{packet_type, QuorumPacket};
use zab_core::peer::{PeerAction, PeerConfig, PeerInput};
use zab_core::simulation::SimServer;
use zab_core::txnlog::{SnapshotPolicy, Txn, TxnLog};
use zab_core::{
    ElectionConfig, LearnerType, Notification, QuorumMaj, QuorumVerifier, ServerId, ServerState,
    Zxid,
};

/// Faults stop after this much simulated time.
pub const CHAOS: Duration = Duration::from_millis(6000);
/// Once faults stop, every live server must serve one leader and agree within this bound.
pub const SETTLE_BOUND: Duration = Duration::from_secs(30);
const MAX_STEPS: u64 = 400_000;
const TRACE_LEN: usize = 40;
const MAX_INFLIGHT: usize = 20_000;
/// A crash point: right after acknowledging NEWLEADER or UPTODATE (an ACK with counter 0).
const EPOCH_ACK: i32 = -3;

/// A message on the simulated network.
#[derive(Debug, Clone)]
pub enum Msg {
    /// An election notification (datagram).
    Vote(Notification),
    /// A quorum packet (on a stream).
    Packet(QuorumPacket),
    /// The sender reset the stream (closed it, or crashed).
    Reset(u64),
    /// The sender does not lead: it refused the stream.
    Refused(u64),
}

/// Where the simulator crashes a server next.
#[derive(Debug, Clone, Copy)]
enum CrashPlan {
    /// After this many more steps of its driver (a log append and its fsync are two steps).
    AfterSteps(u32),
    /// Right after it sends a packet of this type.
    AfterSending(i32),
}

struct Node {
    alive: bool,
    restart_at: Option<Instant>,
    /// The server: its core, durable log and epochs, volatile state machine.
    srv: SimServer,
    /// The quorum stream this node uses with each peer (the transport's connection table).
    conns: BTreeMap<ServerId, u64>,
    /// Streams this node closed: what still arrives on them is dropped.
    closed: BTreeSet<u64>,
    crash_plan: Option<CrashPlan>,
    // ghost: every transaction this server delivered (applied while serving), across crashes
    delivered: Vec<Txn>,
}

impl Node {
    /// Whether the server serves an established epoch.
    fn serving(&self) -> bool {
        self.alive && self.srv.status().epoch.is_some()
    }

    fn state(&self) -> ServerState {
        self.srv.status().state
    }
}

/// Whether `id` is a voter: the simulated ensembles number voters from 1 and observers from
/// 100.
fn is_voter(id: ServerId) -> bool {
    id.0 < 100
}

/// Counts of what a run did.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub steps: u64,
    pub elections: usize,
    pub epochs: usize,
    pub proposed: usize,
    pub delivered: usize,
    pub crashes: usize,
    pub mid_action_crashes: usize,
    pub partitions: usize,
    pub heals: usize,
    pub stream_resets: usize,
    pub writes: usize,
    pub snapshots: usize,
    pub snap_syncs: usize,
    /// Leader probes of its log for a learner older than its in-memory window.
    pub log_probes: usize,
    /// Chunks of a DIFF or TRUNC the leader read from its log.
    pub log_chunks: usize,
    /// Servers left out of the settled ensemble because they accepted a newer epoch than the
    /// one its leader established (see `ZabSim::above_accepted_epoch`).
    pub stuck_above_accepted_epoch: usize,
    pub sim_time: Duration,
}

/// Knobs of one run.
#[derive(Debug, Clone)]
pub struct Setup {
    pub seed: u64,
    pub voters: usize,
    pub observers: usize,
    pub options: LearnerOptions,
    /// The leaders' in-memory window of committed transactions (`commitLogCount`).
    pub commit_log_count: usize,
    /// Leaders' log reads for a learner's sync are answered at random later steps.
    pub defer_reads: bool,
}

pub struct ZabSim {
    seed: u64,
    rng: StdRng,
    origin: Instant,
    now: Instant,
    nodes: BTreeMap<ServerId, Node>,
    net: Network<Msg>,
    econns: BTreeSet<(ServerId, ServerId)>,
    conns_dirty: bool,
    stream_reset: f64,
    chaos_until: Instant,
    next_fault: Instant,
    next_write: Instant,
    write_seq: u64,
    // ghosts
    proposed: BTreeMap<Zxid, (Bytes, ServerId)>,
    leaders: BTreeMap<i64, ServerId>,
    global: Vec<Txn>,
    primary_prefix: BTreeMap<i64, Zxid>,
    trace: VecDeque<String>,
    pub stats: Stats,
}

impl ZabSim {
    pub fn new(setup: Setup) -> ZabSim {
        let mut rng = StdRng::seed_from_u64(setup.seed);
        let voter_ids: Vec<i64> = (1..=setup.voters as i64).collect();
        let observer_ids: Vec<i64> = (0..setup.observers as i64).map(|i| 100 + i).collect();
        let qv: Arc<dyn QuorumVerifier> = Arc::new(QuorumMaj::with_ids(
            voter_ids.iter().copied(),
            observer_ids.iter().copied(),
        ));
        let config = ElectionConfig::default()
            .with_max_notification_interval(ms(1600))
            .with_fast_decide(setup.seed.is_multiple_of(2));
        let timing = Timing::new(ms(100), 10, 4);
        let origin = Instant::now();
        let mut snap_count = rng.random_range(3..40u64);
        if std::env::var("ZAB_SIM_NO_SNAP").is_ok() {
            snap_count = u64::MAX;
        }
        let mut nodes = BTreeMap::new();
        for id in voter_ids.iter().chain(observer_ids.iter()) {
            let lt = if voter_ids.contains(id) {
                LearnerType::Participant
            } else {
                LearnerType::Observer
            };
            let cfg = PeerConfig::new(ServerId(*id), lt, qv.clone())
                .with_election(config.clone())
                .with_timing(timing)
                .with_learner_options(setup.options)
                .with_commit_log_count(setup.commit_log_count);
            let mut srv = SimServer::new(cfg, SnapshotPolicy::every(snap_count));
            srv.set_deferred_reads(setup.defer_reads);
            nodes.insert(
                ServerId(*id),
                Node {
                    alive: true,
                    restart_at: None,
                    srv,
                    conns: BTreeMap::new(),
                    closed: BTreeSet::new(),
                    crash_plan: None,
                    delivered: Vec::new(),
                },
            );
        }
        let loss = rng.random_range(0.0..0.2);
        let dup = rng.random_range(0.0..0.1);
        let max_delay = rng.random_range(1..60u64);
        let stream_reset = rng.random_range(0.0..0.01);
        let net = Network::new(nodes.keys().copied(), loss, dup, max_delay);
        ZabSim {
            seed: setup.seed,
            rng,
            origin,
            now: origin,
            nodes,
            net,
            econns: BTreeSet::new(),
            conns_dirty: false,
            stream_reset,
            chaos_until: origin + CHAOS,
            next_fault: origin + ms(300),
            next_write: origin + ms(50),
            write_seq: 0,
            proposed: BTreeMap::new(),
            leaders: BTreeMap::new(),
            global: Vec::new(),
            primary_prefix: BTreeMap::new(),
            trace: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    fn at(&self) -> u128 {
        (self.now - self.origin).as_millis()
    }

    fn note(&mut self, line: String) {
        let line = format!("{:>6} ms {line}", self.at());
        if std::env::var("ZAB_SIM_TRACE").is_ok() {
            eprintln!("{line}");
        }
        if self.trace.len() == TRACE_LEN {
            self.trace.pop_front();
        }
        self.trace.push_back(line);
    }

    /// A failure: the seed, what broke, and the tail of the trace.
    fn fail(&self, what: String) -> String {
        let mut s = format!(
            "seed {} at {} ms: {what}\n(replay with ZAB_SIM_SEED={})\ntrace tail:\n",
            self.seed,
            self.at(),
            self.seed
        );
        for l in &self.trace {
            s.push_str("  ");
            s.push_str(l);
            s.push('\n');
        }
        for (id, n) in &self.nodes {
            let epochs = n.srv.epochs();
            s.push_str(&format!(
                "  server {}: alive {} state {} serving {} epochs (acc {}, cur {}) log {} delivered {}\n",
                id.0,
                n.alive,
                n.state(),
                n.serving(),
                epochs.accepted_epoch,
                epochs.current_epoch,
                n.srv.log().last_zxid(),
                n.delivered.len()
            ));
        }
        s
    }

    fn faulty(&self) -> bool {
        self.now < self.chaos_until
    }

    fn reachable(&self, a: ServerId, b: ServerId) -> bool {
        let alive = |s: ServerId| self.nodes.get(&s).is_some_and(|n| n.alive);
        alive(a) && alive(b) && self.net.same_side(a, b)
    }

    /// Election connections follow reachability.
    fn refresh_connections(&mut self) -> Result<(), String> {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let now = self.now;
        for a in &ids {
            for b in &ids {
                if a == b {
                    continue;
                }
                let up = self.reachable(*a, *b);
                let was = self.econns.contains(&(*a, *b));
                if up && !was {
                    self.econns.insert((*a, *b));
                    if let Some(n) = self.nodes.get_mut(a).filter(|n| n.alive) {
                        n.srv.handle(now, PeerInput::ElectionConnected(*b));
                    }
                } else if !up && was {
                    self.econns.remove(&(*a, *b));
                    if let Some(n) = self.nodes.get_mut(a).filter(|n| n.alive) {
                        n.srv.handle(now, PeerInput::ElectionDisconnected(*b));
                    }
                }
            }
        }
        for id in &ids {
            self.drain(*id)?;
        }
        Ok(())
    }

    /// Resets a stream from `closer`'s side: what it carries is lost and the peer is told.
    fn reset_stream(&mut self, stream: u64, closer: ServerId, refused: bool) {
        let Some(peer) = self.net.stream(stream).map(|s| s.peer(closer)) else {
            return;
        };
        if !self.net.is_open(stream) {
            return;
        }
        self.net.break_stream(stream);
        self.note(format!(
            "{} resets stream {stream} to {} (refused {refused})",
            closer.0, peer.0
        ));
        let msg = if refused {
            Msg::Refused(stream)
        } else {
            Msg::Reset(stream)
        };
        let (rng, now) = (&mut self.rng, self.now);
        self.net.send_datagram(rng, now, false, closer, peer, msg);
    }

    /// Closes a stream from `closer`'s side (a close, a refusal, or the process exiting):
    /// what `closer` already sent still arrives, then the close.
    fn close_stream(&mut self, stream: u64, closer: ServerId, refused: bool) {
        if !self.net.is_open(stream) {
            return;
        }
        let msg = if refused {
            Msg::Refused(stream)
        } else {
            Msg::Reset(stream)
        };
        let (rng, now) = (&mut self.rng, self.now);
        self.net.send_stream(rng, now, stream, closer, msg);
    }

    // ---------------------------------------------------------------- faults

    fn crash_node(&mut self, id: ServerId, node: &mut Node, how: &str) {
        self.stats.crashes += 1;
        self.note(format!("{} crashes ({how})", id.0));
        node.alive = false;
        node.crash_plan = None;
        node.srv.crash();
        let streams: Vec<u64> = std::mem::take(&mut node.conns).into_values().collect();
        for s in streams {
            node.closed.insert(s);
            self.close_stream(s, id, false);
        }
        node.restart_at = Some(self.now + ms(self.rng.random_range(100..1200)));
        self.conns_dirty = true;
    }

    fn restart(&mut self, id: ServerId) -> Result<(), String> {
        let Some(node) = self.nodes.get_mut(&id) else {
            return Ok(());
        };
        node.srv.restart();
        node.alive = true;
        node.restart_at = None;
        let last = node.srv.log().last_zxid();
        // The new process has no election connections yet.
        self.econns.retain(|(a, _)| *a != id);
        self.note(format!("{} restarts with log up to {last}", id.0));
        let now = self.now;
        if let Some(n) = self.nodes.get_mut(&id) {
            n.srv.handle(now, PeerInput::Start);
        }
        self.refresh_connections()
    }

    fn random_fault(&mut self) -> Result<(), String> {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let pick = ids[self.rng.random_range(0..ids.len())];
        let alive = self.nodes[&pick].alive;
        match self.rng.random_range(0..12) {
            0..=1 if alive => {
                if let Some(mut node) = self.nodes.remove(&pick) {
                    self.crash_node(pick, &mut node, "now");
                    self.nodes.insert(pick, node);
                }
                self.refresh_connections()?;
            }
            2..=3 if alive => {
                let k = self.rng.random_range(0..12);
                self.nodes.get_mut(&pick).expect("node").crash_plan =
                    Some(CrashPlan::AfterSteps(k));
            }
            4..=5 if alive => {
                let kinds = [
                    packet_type::ACK,
                    EPOCH_ACK,
                    packet_type::ACKEPOCH,
                    packet_type::NEWLEADER,
                    packet_type::COMMIT,
                    packet_type::PROPOSAL,
                    packet_type::UPTODATE,
                ];
                let kind = kinds[self.rng.random_range(0..kinds.len())];
                self.nodes.get_mut(&pick).expect("node").crash_plan =
                    Some(CrashPlan::AfterSending(kind));
            }
            6..=8 => {
                self.stats.partitions += 1;
                for id in &ids {
                    let s = u8::from(self.rng.random_bool(0.4));
                    self.net.side.insert(*id, s);
                }
                let sides: Vec<u8> = ids.iter().map(|i| self.net.side[i]).collect();
                self.note(format!("partition {sides:?}"));
                self.net.break_partitioned_streams();
                self.refresh_connections()?;
            }
            9..=10 => {
                self.stats.heals += 1;
                self.note("heal".to_string());
                for id in &ids {
                    self.net.side.insert(*id, 0);
                }
                self.refresh_connections()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// A client write submitted to a random server.
    fn client_write(&mut self) -> Result<(), String> {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let pick = ids[self.rng.random_range(0..ids.len())];
        self.write_to(pick)
    }

    fn write_to(&mut self, pick: ServerId) -> Result<(), String> {
        self.write_seq += 1;
        let data = Bytes::from(format!("w{}", self.write_seq));
        let Some(node) = self.nodes.get_mut(&pick) else {
            return Ok(());
        };
        if !node.serving() {
            return Ok(());
        }
        self.stats.writes += 1;
        node.srv.handle(self.now, PeerInput::Write(data));
        self.drain(pick)
    }

    // ---------------------------------------------------------------- the loop

    fn next_event(&self) -> Instant {
        let mut t = self.now + ms(1000);
        if let Some(at) = self.net.next_at() {
            t = t.min(at);
        }
        for n in self.nodes.values() {
            if let Some(d) = n.srv.core().next_deadline().filter(|_| n.alive) {
                t = t.min(d);
            }
            if let Some(r) = n.restart_at {
                t = t.min(r);
            }
        }
        if self.faulty() {
            t = t.min(self.next_fault).min(self.next_write);
        }
        t.max(self.now)
    }

    fn step(&mut self) -> Result<(), String> {
        self.stats.steps += 1;
        if self.stats.steps > MAX_STEPS {
            return Err(self.fail(format!("liveness: more than {MAX_STEPS} steps")));
        }
        if self.net.len() > MAX_INFLIGHT {
            let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
            for e in self.net.envelopes() {
                let k = match &e.msg {
                    Msg::Vote(n) => format!("vote {}->{} {}", e.from.0, e.to.0, n.state),
                    Msg::Packet(p) => format!("packet {}->{} {}", e.from.0, e.to.0, p.kind),
                    other => format!("{other:?}"),
                };
                *kinds.entry(k).or_default() += 1;
            }
            let mut top: Vec<_> = kinds.into_iter().collect();
            top.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
            top.truncate(6);
            return Err(self.fail(format!("liveness: message storm: {top:?}")));
        }
        self.now = self.next_event();
        let now = self.now;
        for env in self.net.take_due(now) {
            self.receive(env)?;
        }
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        for id in &ids {
            let node = self.nodes.get_mut(id).expect("node");
            if node.restart_at.is_some_and(|r| r <= now) {
                self.restart(*id)?;
                continue;
            }
            if !node.alive {
                continue;
            }
            if node.srv.core().next_deadline().is_some_and(|d| d <= now) {
                node.srv.handle(now, PeerInput::Tick);
            }
            if node.srv.has_deferred_reads() && self.rng.random_bool(0.5) {
                if let Err(e) = node.srv.answer_deferred_reads(now) {
                    return Err(self.fail(format!("server {}: {e}", id.0)));
                }
            }
            self.drain(*id)?;
        }
        if self.faulty() {
            if self.next_fault <= now {
                self.random_fault()?;
                self.next_fault = now + ms(self.rng.random_range(100..500));
            }
            if self.next_write <= now {
                self.client_write()?;
                self.next_write = now + ms(self.rng.random_range(5..40));
            }
        }
        if std::mem::take(&mut self.conns_dirty) {
            self.refresh_connections()?;
        }
        if self.stats.steps.is_multiple_of(1024) {
            self.net.gc_streams();
        }
        Ok(())
    }

    /// The one established leader every live server serves, if there is one.
    /// The leader every live server serves, with the servers that cannot join it (see
    /// [`Self::above_accepted_epoch`]) left out as long as it keeps a quorum of voters
    /// without them.
    fn settled_leader(&self) -> Option<(ServerId, BTreeSet<ServerId>)> {
        let leaders: Vec<ServerId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.serving() && n.state() == ServerState::Leading)
            .map(|(id, _)| *id)
            .collect();
        let [l] = leaders.as_slice() else {
            return None;
        };
        let stuck = self.above_accepted_epoch(*l);
        let follows = |id: &ServerId, n: &Node| {
            id == l
                || (n.serving()
                    && n.state() != ServerState::Leading
                    && n.srv.status().leader == Some(*l))
        };
        let all = self
            .nodes
            .iter()
            .all(|(id, n)| follows(id, n) || stuck.contains(id));
        let voters = self.nodes.keys().filter(|id| is_voter(**id)).count();
        let serving_voters = self
            .nodes
            .iter()
            .filter(|(id, n)| is_voter(**id) && follows(id, n))
            .count();
        (all && serving_voters > voters / 2).then_some((*l, stuck))
    }

    /// Live servers that can never join leader `l`: each accepted an epoch newer than the one
    /// `l` established (it answered a LEADERINFO of a would-be leader that then lost its
    /// quorum before establishing). ZooKeeper's `Learner.registerWithLeader` refuses a
    /// LEADERINFO below the acceptedEpoch (Z1), and a leader that keeps its quorum proposes no
    /// new epoch, so such a server goes LOOKING, finds `l` again and is refused again until
    /// `l` loses its quorum: a liveness gap of ZooKeeper's protocol, reproduced exactly here,
    /// and counted in [`Stats::stuck_above_accepted_epoch`] instead of failing the run.
    fn above_accepted_epoch(&self, l: ServerId) -> BTreeSet<ServerId> {
        let Some(epoch) = self.nodes.get(&l).and_then(|n| n.srv.status().epoch) else {
            return BTreeSet::new();
        };
        self.nodes
            .iter()
            .filter(|(id, n)| {
                **id != l && n.alive && !n.serving() && n.srv.epochs().accepted_epoch > epoch
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn all_agree(&self, except: &BTreeSet<ServerId>) -> bool {
        let mut lens = self
            .nodes
            .iter()
            .filter(|(id, _)| !except.contains(id))
            .map(|(_, n)| n.delivered.len());
        let first = lens.next().unwrap_or(0);
        first == self.global.len() && lens.all(|l| l == first)
    }

    pub fn run(mut self) -> Result<Stats, String> {
        self.refresh_connections()?;
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let now = self.now;
        for id in &ids {
            if let Some(n) = self.nodes.get_mut(id) {
                n.srv.handle(now, PeerInput::Start);
            }
            self.drain(*id)?;
        }
        while self.faulty() {
            self.step()?;
        }
        // Faults stop: heal, restart the crashed, disarm crash plans.
        for id in &ids {
            self.net.side.insert(*id, 0);
            if let Some(n) = self.nodes.get_mut(id) {
                n.crash_plan = None;
            }
        }
        self.refresh_connections()?;
        for id in &ids {
            if !self.nodes[id].alive {
                self.restart(*id)?;
            }
        }
        let healed = self.now;
        // Liveness: one leader served by all, then a last write through it reaches everyone.
        let mut final_write = false;
        loop {
            if self.now - healed > SETTLE_BOUND {
                return Err(self.fail(format!(
                    "liveness: no agreement {} s after faults stopped",
                    SETTLE_BOUND.as_secs()
                )));
            }
            if let Some((l, stuck)) = self.settled_leader() {
                if !final_write {
                    final_write = true;
                    self.write_to(l)?;
                    let learner = ids.iter().copied().find(|i| *i != l && !stuck.contains(i));
                    if let Some(f) = learner {
                        self.write_to(f)?;
                    }
                } else if self.all_agree(&stuck)
                    && self.nodes[&l]
                        .srv
                        .core()
                        .leader_broadcast()
                        .is_some_and(|b| b.outstanding().is_empty())
                {
                    self.stats.stuck_above_accepted_epoch += stuck.len();
                    break;
                }
            }
            self.step()?;
        }
        self.stats.sim_time = self.now - self.origin;
        Ok(self.stats)
    }
}
