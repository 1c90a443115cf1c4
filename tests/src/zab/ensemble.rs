//! The ensemble simulator: servers ([`Server`]) over the simulated network, faults, client
//! writes, and the ZAB invariants.
//!
//! - Election notifications travel as wire bytes (encoded, decoded by the receiver) and suffer
//!   every network fault: delay, reordering, loss, duplication, long delays.
//! - Quorum packets travel over in-order connections (TCP): delayed, never reordered or lost
//!   on a live connection; a connection breaks when a partition cuts either direction, when
//!   either end crashes, or at random (a reset), and both ends then see it close.
//! - A crashed server keeps its durable state ([`Durable`]: `currentEpoch`, `acceptedEpoch`,
//!   the log) and restarts 200–1500 ms later with a fresh election core. A paused server
//!   processes nothing (its messages and timers wait) and wakes believing what it believed.
//!
//! Invariants, checked at every event that can break them:
//! - `TwoLeadersInOneEpoch` (Z1): no epoch is ever established by two servers, and a
//!   learner is established only in the epoch its leader established;
//! - `LeaderNotNewestOfQuorum` (Z5): a server elected by a quorum of LOOKING votes holds
//!   the largest `(currentEpoch, zxid, sid)` of every supporter's initial vote in that round;
//!   and a leader's `(currentEpoch, last zxid)` is at least that of every voter whose
//!   ACKEPOCH, carrying its `currentEpoch`, made up the quorum that fixed the new epoch (a
//!   learner answering −1, or arriving after the epoch was fixed, is synced down instead, as
//!   in ZooKeeper);
//! - `CommittedTxnLost` (Z2, Z5): every transaction a leader committed is in the log of
//!   every leader established after it, and no two commits of one zxid differ;
//! - `NoLeaderWithinBound` (liveness): once faults stop and the network is reliable, one
//!   server leads an established epoch followed by a quorum within `settle_bound_ms`; a
//!   message storm fails the same way at any time.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zab_core::discovery::QuorumPacket;
use zab_core::notification::Notification;
use zab_core::txnlog::Txn;
use zab_core::{
    DecisionPath, QuorumHierarchical, QuorumMaj, QuorumVerifier, ServerEntry, ServerId,
    ServerState, Zxid,
};

use super::node::{Durable, Out, Outbox, Server};
use super::ZabConfig;
use crate::net::{NetConfig, NetStats, Network, NodeId};
use crate::trace::Trace;

/// `(currentEpoch, zxid, sid)`: a vote in ZooKeeper's order.
type Ranked = (i64, i64, i64);

/// A learner's `(currentEpoch, last zxid)` when it acknowledged an epoch, and whether the
/// acknowledgement carried its `currentEpoch`.
type Ack = ((i64, i64), bool);

/// More messages in flight than this is a storm: a liveness failure.
const MAX_IN_FLIGHT: usize = 20_000;
/// More events than this in one run is a storm too.
const MAX_STEPS: u64 = 1_000_000;

/// A message on the simulated network.
#[derive(Debug, Clone)]
pub enum Msg {
    /// Election wire bytes.
    Vote(Bytes),
    /// A quorum packet on connection generation `gen`.
    Quorum {
        /// The connection it was sent on; a packet of a closed connection is dropped.
        gen: u64,
        /// The packet.
        packet: QuorumPacket,
    },
}

/// Something a server learns without a message: its connections changing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Local {
    LinkUp(ServerId),
    LinkDown(ServerId),
    QuorumClosed(ServerId),
    Refused(ServerId),
}

/// An invariant broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZabViolation {
    /// Z1.
    TwoLeadersInOneEpoch(String),
    /// Z5.
    LeaderNotNewestOfQuorum(String),
    /// Z2 / Z5: a committed transaction is missing from a later leader, or differs.
    CommittedTxnLost(String),
    /// Liveness: no single established leader within the bound after faults stopped.
    NoLeaderWithinBound(String),
}

impl ZabViolation {
    /// The invariant's name.
    pub fn kind(&self) -> &'static str {
        match self {
            ZabViolation::TwoLeadersInOneEpoch(_) => "TwoLeadersInOneEpoch",
            ZabViolation::LeaderNotNewestOfQuorum(_) => "LeaderNotNewestOfQuorum",
            ZabViolation::CommittedTxnLost(_) => "CommittedTxnLost",
            ZabViolation::NoLeaderWithinBound(_) => "NoLeaderWithinBound",
        }
    }
}

impl std::fmt::Display for ZabViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (ZabViolation::TwoLeadersInOneEpoch(m)
        | ZabViolation::LeaderNotNewestOfQuorum(m)
        | ZabViolation::CommittedTxnLost(m)
        | ZabViolation::NoLeaderWithinBound(m)) = self;
        write!(f, "{}: {m}", self.kind())
    }
}

/// A failed run: the seed that replays it, when, what broke, the last events.
#[derive(Debug, Clone)]
pub struct ZabFailure {
    /// The seed.
    pub seed: u64,
    /// Simulated time, ms.
    pub now: u64,
    /// What broke.
    pub violation: ZabViolation,
    /// The last events before it.
    pub trace: String,
}

impl std::fmt::Display for ZabFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} at {} ms: {}\nlast events:\n{}",
            self.seed, self.now, self.violation, self.trace
        )
    }
}

/// Faults injected, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZabFaultCounts {
    /// Crashes (each followed by a restart).
    pub crash: u64,
    /// Pauses.
    pub pause: u64,
    /// Symmetric partitions.
    pub partition: u64,
    /// One-way cuts.
    pub one_way: u64,
    /// Quorum connection resets.
    pub conn_reset: u64,
}

impl ZabFaultCounts {
    /// Adds `o`.
    pub fn add(&mut self, o: &ZabFaultCounts) {
        self.crash += o.crash;
        self.pause += o.pause;
        self.partition += o.partition;
        self.one_way += o.one_way;
        self.conn_reset += o.conn_reset;
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZabStats {
    /// Events processed.
    pub steps: u64,
    /// Faults injected.
    pub faults: ZabFaultCounts,
    /// The network.
    pub net: NetStats,
    /// Election decisions.
    pub decisions: u64,
    /// Epochs established by a leader.
    pub epochs: u64,
    /// Transactions committed.
    pub committed: u64,
    /// Undecodable notifications dropped by receivers.
    pub undecodable: u64,
    /// Time from the end of faults until every server followed one established leader, ms.
    pub settle_ms: u64,
}

struct Slot {
    server: Option<Server>,
    durable: Durable,
    restart_at: Option<u64>,
    paused_until: Option<u64>,
    /// What arrived while paused, in arrival order, processed on waking.
    held: Vec<Held>,
}

/// Something a paused server will process when it wakes.
#[derive(Debug, Clone)]
enum Held {
    Local(Local),
    Msg(ServerId, Msg),
}

/// One ensemble run.
pub struct Ensemble {
    seed: u64,
    cfg: ZabConfig,
    rng: StdRng,
    origin: Instant,
    now: u64,
    qv: Arc<dyn QuorumVerifier>,
    slots: BTreeMap<ServerId, Slot>,
    net: Network<Msg>,
    links: BTreeSet<(ServerId, ServerId)>,
    gens: BTreeMap<(ServerId, ServerId), u64>,
    locals: VecDeque<(ServerId, Local)>,
    next_tick: u64,
    writes: u64,
    stats: ZabStats,
    trace: Trace<String>,
    // checker state
    inits: BTreeMap<(ServerId, i64), BTreeSet<Ranked>>,
    acks: BTreeMap<(ServerId, i64, ServerId), Ack>,
    epoch_leader: BTreeMap<i64, ServerId>,
    committed: BTreeMap<Zxid, Bytes>,
}

fn nid(s: ServerId) -> NodeId {
    i32::try_from(s.0).unwrap_or(i32::MAX)
}

fn pair(a: ServerId, b: ServerId) -> (ServerId, ServerId) {
    (a.min(b), a.max(b))
}

/// Random durable histories consistent with one past: epochs 1..=E each wrote 0–2
/// transactions; a server whose `currentEpoch` is `c` holds everything before epoch `c` and a
/// prefix of epoch `c`, and every server accepted epoch E. Histories often tie on the zxid with different epochs (a server that
/// synced with a new leader which then wrote nothing): the ZOOKEEPER-1419 trap.
fn random_durables(rng: &mut StdRng, ids: &[i64]) -> BTreeMap<i64, Durable> {
    let last_epoch = rng.random_range(1..=3i64);
    let truth: Vec<Vec<Txn>> = (1..=last_epoch)
        .map(|e| {
            let n = rng.random_range(0..=2u32);
            (1..=n)
                .map(|c| Txn::new(Zxid::new(e, c), Bytes::from(format!("past/{e}/{c}"))))
                .collect()
        })
        .collect();
    let mut out = BTreeMap::new();
    for id in ids {
        let c = rng.random_range(1..=last_epoch);
        let mut log: Vec<Txn> = Vec::new();
        for (i, txns) in truth.iter().enumerate() {
            let e = i as i64 + 1;
            if e < c {
                log.extend(txns.iter().cloned());
            } else if e == c {
                let k = rng.random_range(0..=txns.len());
                log.extend(txns.iter().take(k).cloned());
            }
        }
        out.insert(
            *id,
            Durable {
                current_epoch: c,
                // Epoch E was accepted by a quorum: here by everyone, so no later leader can
                // propose an epoch that the past already used.
                accepted_epoch: last_epoch,
                log,
            },
        );
    }
    out
}

/// A majority, or (with [`ZabConfig::hierarchical`] and at least 5 voters) three groups with
/// voter 1 of weight 0.
fn quorum_rule(cfg: &ZabConfig, voters: &[i64], observers: &[i64]) -> Arc<dyn QuorumVerifier> {
    let majority = || -> Arc<dyn QuorumVerifier> {
        Arc::new(QuorumMaj::with_ids(
            voters.iter().copied(),
            observers.iter().copied(),
        ))
    };
    if !cfg.hierarchical || voters.len() < 5 {
        return majority();
    }
    let mut members = BTreeMap::new();
    let mut groups: BTreeMap<i64, Vec<ServerId>> = BTreeMap::new();
    for v in voters {
        members.insert(ServerId(*v), ServerEntry::participant(""));
        groups.entry(*v % 3).or_default().push(ServerId(*v));
    }
    for o in observers {
        members.insert(ServerId(*o), ServerEntry::observer(""));
    }
    let weights = BTreeMap::from([(ServerId(1), 0)]);
    match QuorumHierarchical::new(members, groups, weights, 0) {
        Ok(q) => Arc::new(q),
        // Not reachable with the layout above; a majority keeps the run meaningful.
        Err(_) => majority(),
    }
}

impl Ensemble {
    /// An ensemble for `seed`; `trace` keeps that many last events for the failure report.
    pub fn new(seed: u64, cfg: ZabConfig, trace: usize) -> Ensemble {
        let mut rng = StdRng::seed_from_u64(seed);
        let voters: Vec<i64> = (1..=cfg.voters as i64).collect();
        let observers: Vec<i64> = (0..cfg.observers as i64).map(|i| 101 + i).collect();
        let qv = quorum_rule(&cfg, &voters, &observers);
        let mut slots = BTreeMap::new();
        let ids: Vec<i64> = voters.iter().chain(observers.iter()).copied().collect();
        let mut random = random_durables(&mut rng, &ids);
        for id in &ids {
            let durable = match cfg.initial {
                Some(f) => f(*id),
                None => random.remove(id).unwrap_or_default(),
            };
            slots.insert(
                ServerId(*id),
                Slot {
                    server: None,
                    durable,
                    restart_at: None,
                    paused_until: None,
                    held: Vec::new(),
                },
            );
        }
        let net = Network::new(cfg.net);
        Ensemble {
            seed,
            rng,
            origin: Instant::now(),
            now: 0,
            qv,
            slots,
            net,
            links: BTreeSet::new(),
            gens: BTreeMap::new(),
            locals: VecDeque::new(),
            next_tick: 0,
            writes: 0,
            stats: ZabStats::default(),
            trace: Trace::new(trace),
            inits: BTreeMap::new(),
            acks: BTreeMap::new(),
            epoch_leader: BTreeMap::new(),
            committed: BTreeMap::new(),
            cfg,
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.origin + Duration::from_millis(ms)
    }

    fn ms_of(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// What the run did so far.
    pub fn stats(&self) -> ZabStats {
        let mut s = self.stats;
        s.net = self.net.stats();
        s
    }

    /// Simulated time, ms.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The server `sid`, if running.
    pub fn server(&self, sid: i64) -> Option<&Server> {
        self.slots
            .get(&ServerId(sid))
            .and_then(|s| s.server.as_ref())
    }

    /// The durable state of `sid`.
    pub fn durable(&self, sid: i64) -> Option<&Durable> {
        self.slots.get(&ServerId(sid)).map(|s| &s.durable)
    }

    fn fail(&self, v: ZabViolation) -> ZabFailure {
        ZabFailure {
            seed: self.seed,
            now: self.now,
            violation: v,
            trace: self.trace.render(),
        }
    }

    fn note(&mut self, f: impl FnOnce() -> String) {
        if self.trace.is_on() {
            let e = f();
            self.trace.push(self.now, e);
        }
    }

    fn running(&self, s: ServerId) -> bool {
        self.slots.get(&s).is_some_and(|x| x.server.is_some())
    }

    fn reachable(&self, a: ServerId, b: ServerId) -> bool {
        self.running(a)
            && self.running(b)
            && !self.net.is_blocked(nid(a), nid(b))
            && !self.net.is_blocked(nid(b), nid(a))
    }

    fn bump(&mut self, a: ServerId, b: ServerId) {
        *self.gens.entry(pair(a, b)).or_insert(0) += 1;
    }

    fn gen(&self, a: ServerId, b: ServerId) -> u64 {
        self.gens.get(&pair(a, b)).copied().unwrap_or(0)
    }

    /// Recomputes which connections are up; both ends learn of every change.
    fn refresh_links(&mut self) {
        let ids: Vec<ServerId> = self.slots.keys().copied().collect();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                let up = self.reachable(*a, *b);
                let was = self.links.contains(&(*a, *b));
                if up && !was {
                    self.links.insert((*a, *b));
                    self.locals.push_back((*a, Local::LinkUp(*b)));
                    self.locals.push_back((*b, Local::LinkUp(*a)));
                } else if !up && was {
                    self.links.remove(&(*a, *b));
                    self.bump(*a, *b);
                    self.locals.push_back((*a, Local::LinkDown(*b)));
                    self.locals.push_back((*b, Local::LinkDown(*a)));
                }
            }
        }
    }

    fn link_up(&self, a: ServerId, b: ServerId) -> bool {
        self.links.contains(&pair(a, b))
    }

    // ----- feeding the servers -----

    fn with_server(
        &mut self,
        sid: ServerId,
        f: impl FnOnce(&mut Server, Instant, &mut Durable, &mut Outbox),
    ) -> Result<(), ZabViolation> {
        let now = self.at(self.now);
        let mut out = Outbox::new();
        let Some(slot) = self.slots.get_mut(&sid) else {
            return Ok(());
        };
        let Some(server) = slot.server.as_mut() else {
            return Ok(());
        };
        f(server, now, &mut slot.durable, &mut out);
        self.record_init(sid);
        self.handle_outs(sid, out)
    }

    /// Remembers the initial vote of a LOOKING voter for its current round (Z5 check).
    fn record_init(&mut self, sid: ServerId) {
        let Some(slot) = self.slots.get(&sid) else {
            return;
        };
        let Some(s) = slot.server.as_ref() else {
            return;
        };
        if s.is_voter() && s.core().is_electing() {
            let (e, z) = slot.durable.recency();
            self.inits
                .entry((sid, s.core().logical_clock()))
                .or_default()
                .insert((e, z, sid.0));
        }
    }

    /// Remembers the initial vote of a voter for the round of a LOOKING notification it sends
    /// (Z5 check). One step may take a server through several rounds (going LOOKING, then a
    /// kept vote of a later round replayed at once), so the rounds it sends in are recorded
    /// too, not only the round it ends the step in. A LOOKING server's history does not
    /// change, so its own `(currentEpoch, zxid, sid)` now is its initial vote of that round.
    fn record_init_of_vote(&mut self, from: ServerId, bytes: &[u8]) {
        if !self.qv.is_voter(from) {
            return;
        }
        let Ok(n) = Notification::decode(bytes) else {
            return;
        };
        if n.state != ServerState::Looking {
            return;
        }
        let Some(slot) = self.slots.get(&from) else {
            return;
        };
        let (e, z) = slot.durable.recency();
        self.inits
            .entry((from, n.election_epoch))
            .or_default()
            .insert((e, z, from.0));
    }

    fn handle_outs(&mut self, from: ServerId, outs: Outbox) -> Result<(), ZabViolation> {
        for o in outs {
            match o {
                Out::Vote { to, bytes } => {
                    self.record_init_of_vote(from, &bytes);
                    if self.slots.contains_key(&to) {
                        let (a, b) = (nid(from), nid(to));
                        self.net
                            .send(&mut self.rng, self.now, a, b, Msg::Vote(bytes));
                    }
                }
                Out::Quorum { to, packet } => {
                    if self.link_up(from, to) {
                        if self.rng.random_bool(self.quorum_reset_rate()) {
                            self.stats.faults.conn_reset += 1;
                            self.note(|| format!("reset {}-{}", from.0, to.0));
                            self.close(from, to, true);
                        } else {
                            let gen = self.gen(from, to);
                            let (a, b) = (nid(from), nid(to));
                            self.net.send_fifo(
                                &mut self.rng,
                                self.now,
                                a,
                                b,
                                Msg::Quorum { gen, packet },
                            );
                        }
                    } else {
                        // No connection: the sender sees it fail.
                        self.locals.push_back((from, Local::QuorumClosed(to)));
                    }
                }
                Out::Close(to) => {
                    self.note(|| format!("{} closes {}", from.0, to.0));
                    self.close(from, to, false);
                }
                Out::Refuse(to) => {
                    self.bump(from, to);
                    self.locals.push_back((to, Local::Refused(from)));
                }
                Out::Decided { decision, recency } => {
                    self.stats.decisions += 1;
                    if self.qv.is_voter(from) {
                        // A LOOKING server's history does not change: this was its initial
                        // vote in the round it decided in.
                        self.inits
                            .entry((from, decision.vote.election_epoch))
                            .or_default()
                            .insert((recency.0, recency.1, from.0));
                    }
                    self.note(|| {
                        format!(
                            "{} decided {} leader {} round {} {:?} (own {:?})",
                            from.0,
                            decision.state,
                            decision.vote.leader.0,
                            decision.vote.election_epoch,
                            decision.path,
                            recency
                        )
                    });
                    self.check_decision(from, &decision)?;
                }
                Out::AckedEpoch {
                    leader,
                    epoch,
                    recency,
                    with_epoch,
                } => {
                    self.note(|| {
                        format!(
                            "{} acks epoch {epoch} of {} with {recency:?}{}",
                            from.0,
                            leader.0,
                            if with_epoch { "" } else { " (-1)" }
                        )
                    });
                    self.acks
                        .insert((leader, epoch, from), (recency, with_epoch));
                }
                Out::EpochAcked { epoch, ackers } => {
                    self.check_epoch_quorum(from, epoch, &ackers)?
                }
                Out::Established { leader, epoch } => {
                    self.note(|| {
                        format!("{} established epoch {epoch} (leader {})", from.0, leader.0)
                    });
                    self.check_established(from, leader, epoch)?;
                }
                Out::Committed(t) => {
                    self.stats.committed += 1;
                    if let Some(prev) = self.committed.get(&t.zxid) {
                        if *prev != t.data {
                            return Err(ZabViolation::CommittedTxnLost(format!(
                                "zxid {} committed twice with different data ({prev:?} by an \
                                 earlier leader, {:?} by {})",
                                t.zxid, t.data, from.0
                            )));
                        }
                    }
                    self.committed.insert(t.zxid, t.data);
                }
                Out::Abandoned(reason) => self.note(|| format!("{} LOOKING: {reason}", from.0)),
            }
        }
        Ok(())
    }

    fn quorum_reset_rate(&self) -> f64 {
        if self.now < self.cfg.chaos_ms {
            self.cfg.faults.conn_reset / 20.0
        } else {
            0.0
        }
    }

    /// Closes the quorum connection `a`–`b`: `b` learns of it (and `a` too on a reset).
    fn close(&mut self, a: ServerId, b: ServerId, both: bool) {
        self.bump(a, b);
        self.locals.push_back((b, Local::QuorumClosed(a)));
        if both {
            self.locals.push_back((a, Local::QuorumClosed(b)));
        }
    }

    fn process_locals(&mut self) -> Result<(), ZabViolation> {
        while let Some((sid, l)) = self.locals.pop_front() {
            let Some(slot) = self.slots.get_mut(&sid) else {
                continue;
            };
            if slot.server.is_none() {
                continue;
            }
            if slot.paused_until.is_some() {
                slot.held.push(Held::Local(l));
                continue;
            }
            self.stats.steps += 1;
            self.with_server(sid, |s, now, d, out| match l {
                Local::LinkUp(p) => s.link_up(now, p, d, out),
                Local::LinkDown(p) => s.link_down(now, p, d, out),
                Local::QuorumClosed(p) => s.quorum_closed(now, p, d, out),
                Local::Refused(p) => s.refused(now, p, d, out),
            })?;
        }
        Ok(())
    }

    // ----- checks -----

    fn check_decision(&self, sid: ServerId, d: &zab_core::Decision) -> Result<(), ZabViolation> {
        let in_round = matches!(
            d.path,
            DecisionPath::FinalizeWait
                | DecisionPath::AllConnectedAgreed
                | DecisionPath::Pre975AllVotersHeard
        );
        if !in_round || d.state != ServerState::Leading {
            return Ok(());
        }
        let round = d.vote.election_epoch;
        let elected = (d.vote.peer_epoch, d.vote.zxid.0, d.vote.leader.0);
        for s in &d.supporters {
            let ok = self
                .inits
                .get(&(*s, round))
                .is_some_and(|i| i.iter().any(|c| *c <= elected));
            if !ok {
                return Err(ZabViolation::LeaderNotNewestOfQuorum(format!(
                    "{} elected in round {round} with (epoch, zxid, sid) {elected:?}, but \
                     supporter {} voted initially {:?}",
                    sid.0,
                    s.0,
                    self.inits.get(&(*s, round))
                )));
            }
        }
        Ok(())
    }

    fn check_established(
        &mut self,
        sid: ServerId,
        leader: ServerId,
        epoch: i64,
    ) -> Result<(), ZabViolation> {
        if sid != leader {
            return match self.epoch_leader.get(&epoch) {
                Some(l) if *l == leader => Ok(()),
                other => Err(ZabViolation::TwoLeadersInOneEpoch(format!(
                    "{} established epoch {epoch} with leader {}, but the epoch's leader is \
                     {other:?}",
                    sid.0, leader.0
                ))),
            };
        }
        if let Some(other) = self.epoch_leader.get(&epoch) {
            return Err(ZabViolation::TwoLeadersInOneEpoch(format!(
                "epoch {epoch} established by {} and by {}",
                other.0, sid.0
            )));
        }
        self.epoch_leader.insert(epoch, sid);
        self.stats.epochs += 1;
        let Some(slot) = self.slots.get(&sid) else {
            return Ok(());
        };
        let log: BTreeMap<Zxid, &Bytes> =
            slot.durable.log.iter().map(|t| (t.zxid, &t.data)).collect();
        for (z, data) in &self.committed {
            if z.epoch() >= epoch {
                continue;
            }
            if log.get(z) != Some(&data) {
                return Err(ZabViolation::CommittedTxnLost(format!(
                    "{} established epoch {epoch} without committed zxid {z} ({data:?}); its log \
                     ends at {}",
                    sid.0,
                    slot.durable.last_zxid()
                )));
            }
        }
        Ok(())
    }

    /// Z5: the leader's `(currentEpoch, last zxid)` is at least that of every voter whose
    /// ACKEPOCH (carrying its `currentEpoch`) made up the quorum that fixed the epoch.
    fn check_epoch_quorum(
        &self,
        sid: ServerId,
        epoch: i64,
        ackers: &[ServerId],
    ) -> Result<(), ZabViolation> {
        let own = self
            .slots
            .get(&sid)
            .and_then(|s| s.server.as_ref())
            .and_then(Server::leader_recency)
            .unwrap_or((i64::MIN, i64::MIN));
        for l in ackers {
            if !self.qv.is_voter(*l) {
                continue;
            }
            if let Some((r, true)) = self.acks.get(&(sid, epoch, *l)) {
                if *r > own {
                    return Err(ZabViolation::LeaderNotNewestOfQuorum(format!(
                        "{} fixed epoch {epoch} with (currentEpoch, last zxid) {own:?}, but voter \
                         {} of its quorum acknowledged with the newer {r:?}",
                        sid.0, l.0
                    )));
                }
            }
        }
        Ok(())
    }

    /// Every running server follows (or is) one established leader, in one epoch.
    pub fn settled(&self) -> bool {
        let mut leader = None;
        for (sid, slot) in &self.slots {
            let Some(s) = slot.server.as_ref() else {
                return false;
            };
            if s.is_established_leader() {
                if leader.is_some() {
                    return false;
                }
                leader = Some((*sid, s.established()));
            }
        }
        let Some((l, epoch)) = leader else {
            return false;
        };
        self.slots.values().all(|slot| {
            slot.server
                .as_ref()
                .is_some_and(|s| s.leader() == Some(l) && s.established() == epoch)
        })
    }

    // ----- faults -----

    /// Exactly one running server leads an established epoch, and it and the voters that
    /// follow it in that epoch form a quorum (Z7, Z8: a connected quorum elects).
    pub fn quorum_settled(&self) -> bool {
        let mut leader = None;
        for (sid, slot) in &self.slots {
            if let Some(s) = slot.server.as_ref().filter(|s| s.is_established_leader()) {
                if leader.is_some() {
                    return false;
                }
                leader = Some((*sid, s.established()));
            }
        }
        let Some((l, epoch)) = leader else {
            return false;
        };
        let with: BTreeSet<ServerId> = self
            .slots
            .iter()
            .filter(|(_, slot)| {
                slot.server
                    .as_ref()
                    .is_some_and(|s| s.leader() == Some(l) && s.established() == epoch)
            })
            .map(|(id, _)| *id)
            .collect();
        self.qv.contains_quorum(&with)
    }

    /// Crashes `sid` (its durable state survives); it restarts after `down_ms`.
    pub fn crash(&mut self, sid: i64, down_ms: u64) {
        let now = self.now;
        if let Some(slot) = self.slots.get_mut(&ServerId(sid)) {
            if slot.server.is_none() {
                return;
            }
            slot.server = None;
            slot.paused_until = None;
            slot.held.clear();
            slot.restart_at = Some(now + down_ms);
            self.stats.faults.crash += 1;
            self.note(|| format!("crash {sid}"));
            self.refresh_links();
        }
    }

    /// Pauses `sid` for `ms`.
    pub fn pause(&mut self, sid: i64, ms: u64) {
        let now = self.now;
        if let Some(slot) = self.slots.get_mut(&ServerId(sid)) {
            if slot.server.is_some() && slot.paused_until.is_none() {
                slot.paused_until = Some(now + ms);
                self.stats.faults.pause += 1;
                self.note(|| format!("pause {sid} for {ms} ms"));
            }
        }
    }

    /// Cuts both directions between `a` and `b`.
    pub fn split(&mut self, a: &[i64], b: &[i64]) {
        let a: Vec<NodeId> = a.iter().map(|x| nid(ServerId(*x))).collect();
        let b: Vec<NodeId> = b.iter().map(|x| nid(ServerId(*x))).collect();
        self.net.split(&a, &b);
        self.stats.faults.partition += 1;
        self.note(|| format!("partition {a:?} | {b:?}"));
        self.refresh_links();
    }

    /// Heals every cut.
    pub fn heal(&mut self) {
        if self.net.is_partitioned() {
            self.net.heal();
            self.note(|| "heal".to_string());
            self.refresh_links();
        }
    }

    /// Puts election wire bytes on the network as if `from` had sent them to `to` (a scripted
    /// message: a stale vote, a malformed frame).
    pub fn inject_vote(&mut self, from: i64, to: i64, bytes: Bytes) {
        let (a, b) = (nid(ServerId(from)), nid(ServerId(to)));
        self.net.defer(self.now, a, b, Msg::Vote(bytes));
    }

    fn random_fault(&mut self) {
        let ids: Vec<i64> = self.slots.keys().map(|s| s.0).collect();
        let f = self.cfg.faults;
        let pick = ids[self.rng.random_range(0..ids.len())];
        if self.rng.random_bool(f.crash) {
            let down = self.rng.random_range(200..1500);
            self.crash(pick, down);
        }
        if self.rng.random_bool(f.pause) {
            let ms = self.rng.random_range(100..1500);
            self.pause(pick, ms);
        }
        if self.rng.random_bool(f.partition) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for id in &ids {
                if self.rng.random_bool(0.5) {
                    a.push(*id);
                } else {
                    b.push(*id);
                }
            }
            self.split(&a, &b);
        }
        if self.rng.random_bool(f.one_way) {
            let other = ids[self.rng.random_range(0..ids.len())];
            if other != pick {
                self.net.block(nid(ServerId(pick)), nid(ServerId(other)));
                self.stats.faults.one_way += 1;
                self.note(|| format!("one-way cut {pick} -> {other}"));
                self.refresh_links();
            }
        }
        if self.rng.random_bool(f.heal) {
            self.heal();
        }
    }

    // ----- the loop -----

    fn next_event(&self) -> u64 {
        let mut t = self.next_tick;
        if let Some(d) = self.net.next_due() {
            t = t.min(d);
        }
        for slot in self.slots.values() {
            if let Some(r) = slot.restart_at {
                t = t.min(r);
            }
            if let Some(p) = slot.paused_until {
                t = t.min(p);
                continue;
            }
            if let Some(d) = slot.server.as_ref().and_then(Server::next_deadline) {
                t = t.min(self.ms_of(d));
            }
        }
        t.max(self.now)
    }

    /// Starts every server.
    pub fn start(&mut self) -> Result<(), ZabFailure> {
        let ids: Vec<ServerId> = self.slots.keys().copied().collect();
        for id in ids {
            self.restart(id).map_err(|v| self.fail(v))?;
        }
        self.refresh_links();
        self.process_locals().map_err(|v| self.fail(v))
    }

    fn restart(&mut self, sid: ServerId) -> Result<(), ZabViolation> {
        let now = self.at(self.now);
        let qv = self.qv.clone();
        let mut out = Outbox::new();
        if let Some(slot) = self.slots.get_mut(&sid) {
            slot.restart_at = None;
            let s = Server::start(now, sid, qv, &self.cfg, &mut slot.durable, &mut out);
            slot.server = Some(s);
        }
        self.note(|| format!("start {}", sid.0));
        self.record_init(sid);
        self.refresh_links();
        self.handle_outs(sid, out)
    }

    /// Advances to the next event and processes everything due then.
    pub fn step(&mut self) -> Result<(), ZabFailure> {
        self.step_inner().map_err(|v| self.fail(v))
    }

    fn step_inner(&mut self) -> Result<(), ZabViolation> {
        if self.net.in_flight() > MAX_IN_FLIGHT || self.stats.steps > MAX_STEPS {
            return Err(ZabViolation::NoLeaderWithinBound(format!(
                "message storm: {} messages in flight after {} events",
                self.net.in_flight(),
                self.stats.steps
            )));
        }
        self.now = self.next_event();
        let now = self.now;
        // restarts and wake-ups
        let ids: Vec<ServerId> = self.slots.keys().copied().collect();
        for id in &ids {
            let slot = &self.slots[id];
            if slot.restart_at.is_some_and(|r| r <= now) {
                self.restart(*id)?;
            }
            let slot = self.slots.get_mut(id).expect("known id");
            if slot.paused_until.is_some_and(|p| p <= now) {
                slot.paused_until = None;
                let held = std::mem::take(&mut slot.held);
                self.note(|| format!("{} wakes", id.0));
                for h in held {
                    match h {
                        Held::Local(l) => {
                            self.locals.push_back((*id, l));
                            self.process_locals()?;
                        }
                        Held::Msg(from, msg) => self.deliver(from, *id, msg)?,
                    }
                }
            }
        }
        self.process_locals()?;
        // messages due
        while let Some((from, to, msg)) = self.net.pop_due(now) {
            let (from, to) = (ServerId(i64::from(from)), ServerId(i64::from(to)));
            let Some(slot) = self.slots.get_mut(&to) else {
                continue;
            };
            if slot.server.is_none() {
                continue;
            }
            if slot.paused_until.is_some() {
                slot.held.push(Held::Msg(from, msg));
                continue;
            }
            self.deliver(from, to, msg)?;
        }
        // timers
        let at = self.at(now);
        for id in &ids {
            let slot = &self.slots[id];
            if slot.paused_until.is_some() {
                continue;
            }
            let due = slot
                .server
                .as_ref()
                .and_then(Server::next_deadline)
                .is_some_and(|d| d <= at);
            if due {
                self.stats.steps += 1;
                self.with_server(*id, |s, t, d, out| s.tick(t, d, out))?;
                self.process_locals()?;
            }
        }
        // faults and writes
        if self.next_tick <= now {
            self.next_tick = now + self.cfg.tick_ms;
            if now < self.cfg.chaos_ms {
                self.random_fault();
                self.process_locals()?;
            }
            if self.rng.random_bool(self.cfg.write) {
                self.client_write()?;
            }
        }
        Ok(())
    }

    fn deliver(&mut self, from: ServerId, to: ServerId, msg: Msg) -> Result<(), ZabViolation> {
        self.stats.steps += 1;
        match msg {
            Msg::Vote(bytes) => {
                let mut ok = true;
                self.with_server(to, |s, t, d, out| ok = s.on_vote(t, from, &bytes, d, out))?;
                if !ok {
                    self.stats.undecodable += 1;
                }
            }
            Msg::Quorum { gen, packet } => {
                if gen != self.gen(from, to) || !self.link_up(from, to) {
                    return Ok(());
                }
                self.with_server(to, |s, t, d, out| s.on_quorum(t, from, packet, d, out))?;
            }
        }
        self.process_locals()
    }

    fn client_write(&mut self) -> Result<(), ZabViolation> {
        let leaders: Vec<ServerId> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                s.paused_until.is_none()
                    && s.server.as_ref().is_some_and(Server::is_established_leader)
            })
            .map(|(id, _)| *id)
            .collect();
        for l in leaders {
            self.writes += 1;
            let data = Bytes::from(format!("w{}@{}", self.writes, l.0));
            self.with_server(l, |s, t, d, out| s.write(t, data, d, out))?;
            self.process_locals()?;
        }
        Ok(())
    }

    /// Ends the faults: heals every cut, restarts the crashed, wakes the paused, and makes the
    /// network reliable.
    pub fn calm(&mut self) -> Result<(), ZabFailure> {
        self.net.set_config(NetConfig {
            min_delay_ms: 1,
            max_delay_ms: 20,
            loss: 0.0,
            duplicate: 0.0,
            long_delay: 0.0,
            long_delay_ms: 20,
        });
        self.net.heal();
        let ids: Vec<ServerId> = self.slots.keys().copied().collect();
        for id in ids {
            let slot = self.slots.get_mut(&id).expect("known id");
            if slot.paused_until.is_some() {
                slot.paused_until = Some(self.now);
            }
            if slot.server.is_none() {
                slot.restart_at = Some(self.now);
            }
        }
        self.refresh_links();
        self.process_locals().map_err(|v| self.fail(v))
    }

    /// Runs until simulated time `until`.
    pub fn run_until(&mut self, until: u64) -> Result<(), ZabFailure> {
        while self.now < until {
            self.step()?;
        }
        Ok(())
    }

    /// The whole run: faults for `chaos_ms`, then calm until settled within the bound.
    pub fn run(&mut self) -> Result<(), ZabFailure> {
        self.start()?;
        self.run_until(self.cfg.chaos_ms)?;
        self.calm()?;
        let calm_at = self.now;
        while !self.quorum_settled() {
            if self.now - calm_at > self.cfg.settle_bound_ms {
                let views: Vec<String> = self
                    .slots
                    .iter()
                    .map(|(id, s)| match &s.server {
                        None => format!("{}: down", id.0),
                        Some(x) => format!(
                            "{}: {} leader {:?} epoch {:?} round {}",
                            id.0,
                            x.core().state(),
                            x.leader().map(|l| l.0),
                            x.established(),
                            x.core().logical_clock()
                        ),
                    })
                    .collect();
                return Err(self.fail(ZabViolation::NoLeaderWithinBound(format!(
                    "not settled {} ms after faults stopped: {}",
                    self.cfg.settle_bound_ms,
                    views.join("; ")
                ))));
            }
            self.step()?;
        }
        self.stats.settle_ms = self.now - calm_at;
        Ok(())
    }
}

/// Runs `seed`; a failing run is replayed with the trace on, for the report.
pub fn run_seed(seed: u64, cfg: &ZabConfig) -> (ZabStats, Option<ZabFailure>) {
    let mut e = Ensemble::new(seed, cfg.clone(), 0);
    match e.run() {
        Ok(()) => (e.stats(), None),
        Err(f) => {
            let stats = e.stats();
            let mut t = Ensemble::new(seed, cfg.clone(), 200);
            let failure = match t.run() {
                Err(g) => g,
                Ok(()) => ZabFailure {
                    trace: "(the replay did not fail: the run is not deterministic)".into(),
                    ..f
                },
            };
            (stats, Some(failure))
        }
    }
}
