//! The simulated network: messages between nodes with random delay (hence reordering), loss,
//! duplication, occasional long delays, and partitions — symmetric or one-way — all decided
//! by the run's seeded random generator.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::Rng;

/// A node of the simulation (a broker id, the controller, a client).
pub type NodeId = i32;

/// How the network misbehaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetConfig {
    /// Smallest one-way delay, in simulated milliseconds.
    pub min_delay_ms: u64,
    /// Largest ordinary one-way delay; delays are uniform in between, so messages reorder.
    pub max_delay_ms: u64,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message is held back for up to `long_delay_ms` (a slow path).
    pub long_delay: f64,
    /// The longest of those delays.
    pub long_delay_ms: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            min_delay_ms: 1,
            max_delay_ms: 20,
            loss: 0.02,
            duplicate: 0.02,
            long_delay: 0.005,
            long_delay_ms: 400,
        }
    }
}

/// What the network did, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Messages sent.
    pub sent: u64,
    /// Messages delivered (duplicates count twice).
    pub delivered: u64,
    /// Messages lost at random.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Messages held back by a long delay.
    pub long_delayed: u64,
    /// Messages dropped by a partition (at send or at delivery).
    pub cut: u64,
}

/// Messages in flight, ordered by delivery time and then by send order, so one seed gives one
/// order of delivery.
#[derive(Debug)]
pub struct Network<M> {
    config: NetConfig,
    queue: BTreeMap<(u64, u64), (NodeId, NodeId, M)>,
    seq: u64,
    blocked: BTreeSet<(NodeId, NodeId)>,
    stats: NetStats,
    /// Latest delivery time per directed path of the in-order channels ([`Network::send_fifo`]).
    fifo_last: BTreeMap<(NodeId, NodeId), u64>,
}

impl<M: Clone> Network<M> {
    /// An empty, fully connected network.
    pub fn new(config: NetConfig) -> Self {
        Network {
            config,
            queue: BTreeMap::new(),
            seq: 0,
            blocked: BTreeSet::new(),
            stats: NetStats::default(),
            fifo_last: BTreeMap::new(),
        }
    }

    /// What happened so far.
    pub fn stats(&self) -> NetStats {
        self.stats
    }

    /// Messages in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Sends `msg` from `from` to `to` at `now`.
    pub fn send(&mut self, rng: &mut StdRng, now: u64, from: NodeId, to: NodeId, msg: M) {
        self.stats.sent += 1;
        if self.blocked.contains(&(from, to)) {
            self.stats.cut += 1;
            return;
        }
        if rng.random_bool(self.config.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if rng.random_bool(self.config.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if rng.random_bool(self.config.long_delay) {
                self.stats.long_delayed += 1;
                rng.random_range(
                    self.config.max_delay_ms
                        ..=self.config.long_delay_ms.max(self.config.max_delay_ms),
                )
            } else {
                rng.random_range(self.config.min_delay_ms..=self.config.max_delay_ms)
            };
            self.push(now + delay, from, to, msg.clone());
        }
    }

    /// Sends `msg` over an in-order, lossless channel (a TCP connection): a random delay, but
    /// never before an earlier message of the same path, never lost or duplicated here (a
    /// broken connection is the caller's business). A cut path still drops it.
    pub fn send_fifo(&mut self, rng: &mut StdRng, now: u64, from: NodeId, to: NodeId, msg: M) {
        self.stats.sent += 1;
        if self.blocked.contains(&(from, to)) {
            self.stats.cut += 1;
            return;
        }
        let delay = rng.random_range(self.config.min_delay_ms..=self.config.max_delay_ms);
        let last = self.fifo_last.entry((from, to)).or_insert(0);
        let at = (now + delay).max(*last);
        *last = at;
        self.push(at, from, to, msg);
    }

    /// Puts a message back to be delivered at `at` (a paused receiver).
    pub fn defer(&mut self, at: u64, from: NodeId, to: NodeId, msg: M) {
        self.push(at, from, to, msg);
    }

    fn push(&mut self, at: u64, from: NodeId, to: NodeId, msg: M) {
        self.seq += 1;
        self.queue.insert((at, self.seq), (from, to, msg));
    }

    /// The next message due at or before `now`, if any. A message whose path is cut when it
    /// arrives is dropped.
    pub fn pop_due(&mut self, now: u64) -> Option<(NodeId, NodeId, M)> {
        loop {
            let key = *self.queue.keys().next()?;
            if key.0 > now {
                return None;
            }
            let (from, to, msg) = self.queue.remove(&key)?;
            if self.blocked.contains(&(from, to)) {
                self.stats.cut += 1;
                continue;
            }
            self.stats.delivered += 1;
            return Some((from, to, msg));
        }
    }

    /// Cuts the path from `from` to `to` (one way).
    pub fn block(&mut self, from: NodeId, to: NodeId) {
        self.blocked.insert((from, to));
    }

    /// Cuts both directions between every node of `a` and every node of `b`.
    pub fn split(&mut self, a: &[NodeId], b: &[NodeId]) {
        for &x in a {
            for &y in b {
                self.block(x, y);
                self.block(y, x);
            }
        }
    }

    /// Whether the path from `from` to `to` is cut.
    pub fn is_blocked(&self, from: NodeId, to: NodeId) -> bool {
        self.blocked.contains(&(from, to))
    }

    /// The earliest delivery time of a message in flight.
    pub fn next_due(&self) -> Option<u64> {
        self.queue.keys().next().map(|k| k.0)
    }

    /// Changes how the network misbehaves from now on (messages in flight keep their times).
    pub fn set_config(&mut self, config: NetConfig) {
        self.config = config;
    }

    /// Heals every partition.
    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    /// Whether any path is cut.
    pub fn is_partitioned(&self) -> bool {
        !self.blocked.is_empty()
    }
}
