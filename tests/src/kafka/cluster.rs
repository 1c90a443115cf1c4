//! One seeded run of the Kafka model: the step loop, fault injection, the producer and the
//! consumer, and the checks after every step, every delivered message and every store write.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_replication::isr::{BrokerId, TopicPartition};
use kafka_wire::records::RecordBatch;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::broker::{Broker, BrokerNote, CONTROLLER};
use super::check::{BrokerView, Checker, Violation};
use super::controller::Controller;
use super::msg::Msg;
use super::KafkaConfig;
use crate::net::{NetStats, Network, NodeId};
use crate::trace::Trace;

/// The producer's node.
pub const PRODUCER: NodeId = 100;
/// The consumer's node.
pub const CONSUMER: NodeId = 101;

const METADATA_REFRESH_MS: u64 = 100;
const CONSUME_INTERVAL_MS: u64 = 20;
const PRODUCE_GIVE_UP_MS: u64 = 1_500;
const MAX_OUTSTANDING: usize = 5;

/// Faults injected, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Broker crashes (each followed by a restart).
    pub crash: u64,
    /// Power losses (unflushed tail lost; each followed by a restart).
    pub power_loss: u64,
    /// Long pauses.
    pub pause: u64,
    /// Symmetric network partitions.
    pub partition: u64,
    /// One-way cuts.
    pub one_way: u64,
    /// Forced session expiries.
    pub session_expiry: u64,
    /// Controller failovers (each leaving a zombie).
    pub controller_failover: u64,
}

impl FaultCounts {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &FaultCounts) {
        self.crash += other.crash;
        self.power_loss += other.power_loss;
        self.pause += other.pause;
        self.partition += other.partition;
        self.one_way += other.one_way;
        self.session_expiry += other.session_expiry;
        self.controller_failover += other.controller_failover;
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Steps simulated.
    pub steps: u64,
    /// Faults injected.
    pub faults: FaultCounts,
    /// The network's doings (loss, duplication, long delays, cuts).
    pub net: NetStats,
    /// Records acknowledged with acks=all.
    pub acked: u64,
    /// Records consumed.
    pub consumed: u64,
    /// Unclean elections the controller made.
    pub unclean_elections: u64,
    /// LeaderAndIsr requests the brokers refused as stale.
    pub refused_stale: u64,
}

/// An event of the trace.
#[derive(Debug, Clone)]
pub enum Event {
    /// A message delivered.
    Deliver {
        /// Sender.
        from: NodeId,
        /// Receiver.
        to: NodeId,
        /// The message, summarised.
        msg: String,
    },
    /// A fault injected.
    Fault(String),
    /// A broker refused or failed something.
    Note(BrokerId, BrokerNote),
}

/// A failed run: the seed replays it.
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

/// A cluster being simulated.
#[derive(Debug)]
pub struct Cluster {
    cfg: KafkaConfig,
    rng: StdRng,
    now: u64,
    steps: u64,
    net: Network<Msg>,
    brokers: BTreeMap<BrokerId, Broker>,
    incarnation: BTreeMap<BrokerId, u64>,
    restart_at: BTreeMap<BrokerId, u64>,
    heal_at: Option<u64>,
    controller: Controller,
    checker: Checker,
    trace: Option<Trace<Event>>,
    faults: FaultCounts,
    refused_stale: u64,
    // producer
    next_seq: i64,
    outstanding: BTreeMap<i64, u64>,
    last_produce: u64,
    // clients' metadata
    metadata_leader: BrokerId,
    last_metadata: u64,
    // consumer
    consumer_offset: i64,
    last_consume: u64,
}

impl Cluster {
    /// A fresh cluster for `seed`; with `traced` it keeps the last events.
    pub fn new(seed: u64, cfg: KafkaConfig, traced: bool) -> Self {
        let tp = TopicPartition::new("sim", 0);
        let replicas: Vec<BrokerId> = (1..=cfg.brokers).collect();
        let controller = Controller::new(tp.clone(), replicas.clone());
        let brokers = replicas
            .iter()
            .map(|id| (*id, Broker::new(*id, tp.clone(), &cfg)))
            .collect();
        let mut c = Cluster {
            cfg,
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            steps: 0,
            net: Network::new(cfg.net),
            brokers,
            incarnation: replicas.iter().map(|r| (*r, 0)).collect(),
            restart_at: BTreeMap::new(),
            heal_at: None,
            controller,
            checker: Checker::default(),
            trace: traced.then(|| Trace::new(cfg.trace_capacity)),
            faults: FaultCounts::default(),
            refused_stale: 0,
            next_seq: 0,
            outstanding: BTreeMap::new(),
            last_produce: 0,
            metadata_leader: -1,
            last_metadata: 0,
            consumer_offset: 0,
            last_consume: 0,
        };
        let mut out = Vec::new();
        c.controller.fail_over(u64::MAX, &mut out);
        c.send_all(CONTROLLER, out);
        c
    }

    /// The controller (for scripted scenarios).
    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }

    /// Simulated time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The brokers.
    pub fn brokers(&self) -> &BTreeMap<BrokerId, Broker> {
        &self.brokers
    }

    /// What the run did so far.
    pub fn stats(&self) -> RunStats {
        RunStats {
            steps: self.steps,
            faults: self.faults,
            net: self.net.stats(),
            acked: self.checker.acked_count() as u64,
            consumed: self.checker.consumed_count() as u64,
            unclean_elections: self.controller.unclean_elections(),
            refused_stale: self.refused_stale,
        }
    }

    fn send_all(&mut self, from: NodeId, out: Vec<(NodeId, Msg)>) {
        for (to, msg) in out {
            self.net.send(&mut self.rng, self.now, from, to, msg);
        }
    }

    fn fault(&mut self, what: String) {
        if let Some(t) = &mut self.trace {
            t.push(self.now, Event::Fault(what));
        }
    }

    fn pick_up_broker(&mut self) -> Option<BrokerId> {
        let now = self.now;
        let ups: Vec<BrokerId> = self
            .brokers
            .values()
            .filter(|b| b.is_up() && b.paused_at(now).is_none())
            .map(|b| b.id())
            .collect();
        if ups.is_empty() {
            return None;
        }
        Some(ups[self.rng.random_range(0..ups.len())])
    }

    /// Crashes broker `id` now; it restarts at `restart_at`.
    pub fn crash(&mut self, id: BrokerId, restart_at: u64) {
        if let Some(b) = self.brokers.get_mut(&id) {
            b.crash();
            self.restart_at.insert(id, restart_at);
            self.faults.crash += 1;
            self.fault(format!("crash broker {id} until {restart_at}"));
        }
    }

    /// Broker `id` loses power now (its unflushed tail is lost); it restarts at `restart_at`.
    pub fn power_loss(&mut self, id: BrokerId, restart_at: u64) {
        if let Some(b) = self.brokers.get_mut(&id) {
            b.power_loss();
            self.restart_at.insert(id, restart_at);
            self.faults.power_loss += 1;
            self.fault(format!("power loss on broker {id} until {restart_at}"));
        }
    }

    /// Cuts both directions between the nodes of `a` and those of `b` until [`Cluster::heal`].
    pub fn split(&mut self, a: &[NodeId], b: &[NodeId]) {
        self.net.split(a, b);
        self.faults.partition += 1;
        self.fault(format!("partition {a:?} | {b:?}"));
    }

    /// Heals every network partition.
    pub fn heal(&mut self) {
        self.net.heal();
        self.heal_at = None;
        self.fault("network healed".into());
    }

    /// Pauses broker `id` until `until`.
    pub fn pause(&mut self, id: BrokerId, until: u64) {
        if let Some(b) = self.brokers.get_mut(&id) {
            b.pause(until);
            self.faults.pause += 1;
            self.fault(format!("pause broker {id} until {until}"));
        }
    }

    /// Controller failover; the zombie acts at `zombie_at`.
    pub fn fail_over_controller(&mut self, zombie_at: u64) {
        let mut out = Vec::new();
        self.controller.fail_over(zombie_at, &mut out);
        self.send_all(CONTROLLER, out);
        self.faults.controller_failover += 1;
        self.fault(format!(
            "controller failover to epoch {}, zombie acts at {zombie_at}",
            self.controller.epoch()
        ));
    }

    fn inject_faults(&mut self) {
        let rates = self.cfg.faults;
        let n = self.cfg.brokers;
        let now = self.now;
        if self.rng.random_bool(rates.crash) {
            if let Some(id) = self.pick_up_broker() {
                let at = now + self.rng.random_range(50..800);
                self.crash(id, at);
            }
        }
        if self.rng.random_bool(rates.power_loss) {
            if let Some(id) = self.pick_up_broker() {
                let at = now + self.rng.random_range(50..800);
                self.power_loss(id, at);
            }
        }
        if self.rng.random_bool(rates.pause) {
            if let Some(id) = self.pick_up_broker() {
                let s = self.cfg.session_timeout_ms;
                let until = now + self.rng.random_range(s / 2..s * 3);
                self.pause(id, until);
            }
        }
        if self.rng.random_bool(rates.partition) && !self.net.is_partitioned() {
            let mut a = Vec::new();
            let mut b = Vec::new();
            for node in 0..=n {
                if self.rng.random_bool(0.5) {
                    a.push(node);
                } else {
                    b.push(node);
                }
            }
            if !a.is_empty() && !b.is_empty() {
                self.net.split(&a, &b);
                self.heal_at = Some(now + self.rng.random_range(100..800));
                self.faults.partition += 1;
                self.fault(format!("partition {a:?} | {b:?}"));
            }
        }
        if self.rng.random_bool(rates.one_way) {
            let x = self.rng.random_range(0..=n);
            let y = self.rng.random_range(0..=n);
            if x != y {
                self.net.block(x, y);
                self.heal_at = Some(
                    self.heal_at
                        .unwrap_or(0)
                        .max(now + self.rng.random_range(100..800)),
                );
                self.faults.one_way += 1;
                self.fault(format!("cut {x} -> {y}"));
            }
        }
        if self.rng.random_bool(rates.session_expiry) {
            let id = self.rng.random_range(1..=n);
            let mut out = Vec::new();
            self.controller.expire(id, &self.cfg, &mut out);
            self.send_all(CONTROLLER, out);
            self.faults.session_expiry += 1;
            self.fault(format!("session of broker {id} expired"));
        }
        if self.rng.random_bool(rates.controller_failover) {
            let at = now + self.rng.random_range(1..400);
            self.fail_over_controller(at);
        }
    }

    /// One step: faults, due restarts and heals, message deliveries, ticks, then the checks.
    pub fn step(&mut self) -> Result<(), Violation> {
        self.now += self.cfg.tick_ms;
        self.steps += 1;
        let now = self.now;
        self.inject_faults();
        // A controller failover writes the store.
        self.check()?;
        if self.heal_at.is_some_and(|t| now >= t) {
            self.heal_at = None;
            self.net.heal();
            self.fault("network healed".into());
        }
        let due: Vec<BrokerId> = self
            .restart_at
            .iter()
            .filter(|(_, t)| now >= **t)
            .map(|(b, _)| *b)
            .collect();
        for id in due {
            self.restart_at.remove(&id);
            if let Some(b) = self.brokers.get_mut(&id) {
                b.restart(&self.cfg);
                *self.incarnation.entry(id).or_insert(0) += 1;
                self.fault(format!("restart broker {id}"));
            }
        }
        let mut out = Vec::new();
        let mut notes = Vec::new();
        while let Some((from, to, msg)) = self.net.pop_due(now) {
            if let Some(paused) = self.brokers.get(&to).and_then(|b| b.paused_at(now)) {
                self.net.defer(paused, from, to, msg);
                continue;
            }
            if let Some(t) = &mut self.trace {
                t.push(
                    now,
                    Event::Deliver {
                        from,
                        to,
                        msg: summary(&msg),
                    },
                );
            }
            match to {
                CONTROLLER => self.controller.handle(now, from, msg, &self.cfg, &mut out),
                PRODUCER => self.on_produce_response(msg),
                CONSUMER => self.on_consumer_response(msg),
                id => {
                    if let Some(b) = self.brokers.get_mut(&id) {
                        b.handle(now, from, msg, &self.cfg, &mut out, &mut notes);
                    }
                }
            }
            self.record_notes(to, &mut notes);
            let sent = std::mem::take(&mut out);
            self.send_all(to, sent);
            // After every delivered message (and every store write it caused).
            self.check()?;
        }
        self.controller.tick(now, &self.cfg, &mut out);
        let sent = std::mem::take(&mut out);
        self.send_all(CONTROLLER, sent);
        self.check()?;
        let ids: Vec<BrokerId> = self.brokers.keys().copied().collect();
        for id in ids {
            if let Some(b) = self.brokers.get_mut(&id) {
                if b.paused_at(now).is_none() {
                    b.tick(now, &self.cfg, &mut out);
                }
            }
            let sent = std::mem::take(&mut out);
            self.send_all(id, sent);
            self.check()?;
        }
        self.client_tick();
        self.check()
    }

    fn record_notes(&mut self, id: NodeId, notes: &mut Vec<BrokerNote>) {
        for n in notes.drain(..) {
            if matches!(n, BrokerNote::Refused(_)) {
                self.refused_stale += 1;
            }
            if let Some(t) = &mut self.trace {
                t.push(self.now, Event::Note(id, n));
            }
        }
    }

    fn client_tick(&mut self) {
        let now = self.now;
        if now >= self.last_metadata + METADATA_REFRESH_MS {
            self.last_metadata = now;
            self.metadata_leader = self.controller.state().leader;
        }
        self.outstanding
            .retain(|_, sent| now < *sent + PRODUCE_GIVE_UP_MS);
        let leader = self.metadata_leader;
        if leader > 0 {
            if now >= self.last_produce + self.cfg.produce_interval_ms
                && self.outstanding.len() < MAX_OUTSTANDING
            {
                self.last_produce = now;
                self.next_seq += 1;
                let seq = self.next_seq;
                self.outstanding.insert(seq, now);
                self.net
                    .send(&mut self.rng, now, PRODUCER, leader, Msg::Produce { seq });
            }
            if now >= self.last_consume + CONSUME_INTERVAL_MS {
                self.last_consume = now;
                let offset = self.consumer_offset;
                self.net.send(
                    &mut self.rng,
                    now,
                    CONSUMER,
                    leader,
                    Msg::ConsumerFetch { offset },
                );
            }
        }
    }

    fn on_produce_response(&mut self, msg: Msg) {
        if let Msg::ProduceResp { seq, result } = msg {
            if self.outstanding.remove(&seq).is_some() {
                if let Ok(offset) = result {
                    self.checker.acked(offset, seq);
                }
            }
        }
    }

    fn on_consumer_response(&mut self, msg: Msg) {
        let Msg::ConsumerResp { offset, records } = msg else {
            return;
        };
        if offset != self.consumer_offset {
            return;
        }
        for b in split_batches(records) {
            if b.base_offset() == self.consumer_offset {
                self.checker.consumed(b.base_offset(), b.base_timestamp());
                self.consumer_offset = b.next_offset();
            }
        }
    }

    fn check(&mut self) -> Result<(), Violation> {
        let writes = self.controller.take_writes();
        let views: Vec<BrokerView<'_>> = self
            .brokers
            .values()
            .map(|b| BrokerView {
                id: b.id(),
                incarnation: self.incarnation.get(&b.id()).copied().unwrap_or(0),
                partition: b.partition(),
                log: b.log(),
            })
            .collect();
        // Each write with the state it left (the brokers do not change while the controller
        // writes), then the store as it is now.
        for w in &writes {
            self.checker
                .check(&views, &w.state, std::slice::from_ref(w))?;
        }
        let store = self.controller.state();
        self.checker.check(&views, &store, &[])
    }

    /// Runs until the configured duration or the first violation.
    pub fn run(&mut self) -> Result<(), Violation> {
        while self.now < self.cfg.duration_ms {
            self.step()?;
        }
        Ok(())
    }

    /// The trace, if kept.
    pub fn trace(&self) -> String {
        self.trace.as_ref().map(|t| t.render()).unwrap_or_default()
    }
}

/// A message for the trace: record data as offset ranges, not bytes.
fn summary(msg: &Msg) -> String {
    let ranges = |records: &Bytes| -> String {
        let b = split_batches(records.clone());
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => format!("offsets {}..{}", f.base_offset(), l.next_offset()),
            _ => "no records".into(),
        }
    };
    match msg {
        Msg::FetchResp { id, result: Ok(r) } => format!(
            "FetchResp {{ id: {id}, {}, hw: {}, diverging: {:?} }}",
            ranges(&r.records),
            r.high_watermark,
            r.diverging
        ),
        Msg::ConsumerResp { offset, records } => {
            format!("ConsumerResp {{ offset: {offset}, {} }}", ranges(records))
        }
        other => format!("{other:?}"),
    }
}

/// Splits a fetch response's records into batches (stops at anything malformed).
fn split_batches(mut records: Bytes) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while records.len() >= 12 {
        let len = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
        let Ok(len) = usize::try_from(len) else { break };
        let total = 12 + len;
        if total > records.len() {
            break;
        }
        match RecordBatch::parse(records.split_to(total)) {
            Ok(b) => out.push(b),
            Err(_) => break,
        }
    }
    out
}

/// Runs `seed` once; on a violation runs it again with the trace on, so the report carries
/// the last events (the seed replays the same run).
pub fn run_seed(seed: u64, cfg: KafkaConfig) -> (RunStats, Option<Failure>) {
    let mut c = Cluster::new(seed, cfg, false);
    match c.run() {
        Ok(()) => (c.stats(), None),
        Err(_) => {
            let stats = c.stats();
            let mut t = Cluster::new(seed, cfg, true);
            let violation = match t.run() {
                Err(v) => v,
                Ok(()) => {
                    return (
                        stats,
                        Some(Failure {
                            seed,
                            step: stats.steps,
                            now: 0,
                            violation: Violation {
                                invariant: super::check::Invariant::ReplayDiverged,
                                detail: "the replay did not fail: the run is not deterministic"
                                    .into(),
                            },
                            trace: String::new(),
                        }),
                    )
                }
            };
            let failure = Failure {
                seed,
                step: t.steps,
                now: t.now,
                violation,
                trace: t.trace(),
            };
            (stats, Some(failure))
        }
    }
}
