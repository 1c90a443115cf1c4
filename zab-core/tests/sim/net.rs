//! The simulated network shared by the simulations: a seeded, deterministic message queue on a
//! simulated clock, with partitions (each server on a side), and two kinds of traffic:
//!
//! - **datagrams** (election notifications): each may be lost, duplicated and delayed by up to
//!   `max_delay` ms, so they also arrive reordered;
//! - **streams** (quorum connections, TCP in a real ensemble): numbered connections that deliver
//!   in order, never duplicate, and fail as a whole. A reset stream drops what it still
//!   carries; a partition breaks it silently (both ends find out by their timeouts).

// Each simulation uses the part it needs (the election one has no streams).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;
use zab_core::ServerId;

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// One message in flight.
#[derive(Debug, Clone)]
pub struct Envelope<M> {
    pub from: ServerId,
    pub to: ServerId,
    /// The stream it travels on (`None` for a datagram).
    pub stream: Option<u64>,
    pub msg: M,
}

/// A stream between two servers.
#[derive(Debug, Clone)]
pub struct Stream {
    pub a: ServerId,
    pub b: ServerId,
    /// Broken streams deliver nothing more.
    pub open: bool,
    /// Latest delivery time scheduled in each direction (FIFO).
    last_at: [Option<Instant>; 2],
}

impl Stream {
    /// The other end.
    pub fn peer(&self, of: ServerId) -> ServerId {
        if self.a == of {
            self.b
        } else {
            self.a
        }
    }
}

pub struct Network<M> {
    inflight: BTreeMap<(Instant, u64), Envelope<M>>,
    seq: u64,
    /// Partition side of each server: servers on different sides cannot talk.
    pub side: BTreeMap<ServerId, u8>,
    /// Probability that a datagram is lost while faults are on.
    pub loss: f64,
    /// Probability that a datagram is duplicated while faults are on.
    pub dup: f64,
    /// Largest delay of a message, in ms.
    pub max_delay: u64,
    streams: BTreeMap<u64, Stream>,
    next_stream: u64,
}

impl<M: Clone> Network<M> {
    pub fn new(
        ids: impl IntoIterator<Item = ServerId>,
        loss: f64,
        dup: f64,
        max_delay: u64,
    ) -> Self {
        Self {
            inflight: BTreeMap::new(),
            seq: 0,
            side: ids.into_iter().map(|id| (id, 0)).collect(),
            loss,
            dup,
            max_delay,
            streams: BTreeMap::new(),
            next_stream: 1,
        }
    }

    /// Whether `a` and `b` are on the same side of the partition.
    pub fn same_side(&self, a: ServerId, b: ServerId) -> bool {
        self.side.get(&a) == self.side.get(&b)
    }

    /// Messages in flight.
    pub fn len(&self) -> usize {
        self.inflight.len()
    }

    /// Every message in flight (for diagnostics).
    pub fn envelopes(&self) -> impl Iterator<Item = &Envelope<M>> {
        self.inflight.values()
    }

    /// When the next message is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.inflight.first_key_value().map(|((at, _), _)| *at)
    }

    /// Sends a datagram: lost with probability `loss` and duplicated with probability `dup`
    /// when `faulty`, each copy delayed by 0..=`max_delay` ms.
    pub fn send_datagram(
        &mut self,
        rng: &mut StdRng,
        now: Instant,
        faulty: bool,
        from: ServerId,
        to: ServerId,
        msg: M,
    ) {
        if faulty && rng.random_bool(self.loss) {
            return;
        }
        let copies = if faulty && rng.random_bool(self.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = ms(rng.random_range(0..=self.max_delay));
            self.seq += 1;
            self.inflight.insert(
                (now + delay, self.seq),
                Envelope {
                    from,
                    to,
                    stream: None,
                    msg: msg.clone(),
                },
            );
        }
    }

    /// As [`send_datagram`](Self::send_datagram), replacing any datagram from `from` to `to`
    /// still in flight: ZooKeeper's per-peer election send queue holds one message and drops
    /// the older one, so only the newest vote travels. `replaces` says which messages count.
    #[allow(clippy::too_many_arguments)]
    pub fn send_datagram_newest(
        &mut self,
        rng: &mut StdRng,
        now: Instant,
        faulty: bool,
        from: ServerId,
        to: ServerId,
        msg: M,
        replaces: impl Fn(&M) -> bool,
    ) {
        self.inflight.retain(|_, e| {
            !(e.stream.is_none() && e.from == from && e.to == to && replaces(&e.msg))
        });
        self.send_datagram(rng, now, faulty, from, to, msg);
    }

    /// Opens a stream from `a` to `b`; returns its number.
    pub fn open_stream(&mut self, a: ServerId, b: ServerId) -> u64 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.insert(
            id,
            Stream {
                a,
                b,
                open: true,
                last_at: [None, None],
            },
        );
        id
    }

    /// The stream, if it was ever opened.
    pub fn stream(&self, id: u64) -> Option<&Stream> {
        self.streams.get(&id)
    }

    /// Whether the stream still delivers.
    pub fn is_open(&self, id: u64) -> bool {
        self.streams.get(&id).is_some_and(|s| s.open)
    }

    /// Sends on a stream, in order after everything sent before in the same direction.
    /// Nothing happens on a broken stream.
    pub fn send_stream(&mut self, rng: &mut StdRng, now: Instant, id: u64, from: ServerId, msg: M) {
        let delay = ms(rng.random_range(0..=self.max_delay));
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if !s.open {
            return;
        }
        let dir = usize::from(s.a != from);
        let to = s.peer(from);
        let at = s.last_at[dir].map_or(now + delay, |l| l.max(now + delay));
        s.last_at[dir] = Some(at);
        self.seq += 1;
        self.inflight.insert(
            (at, self.seq),
            Envelope {
                from,
                to,
                stream: Some(id),
                msg,
            },
        );
    }

    /// Breaks a stream: what it still carries is dropped.
    pub fn break_stream(&mut self, id: u64) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.open = false;
        }
        self.inflight.retain(|_, e| e.stream != Some(id));
    }

    /// Open streams with `id` as one end.
    pub fn streams_of(&self, id: ServerId) -> Vec<u64> {
        self.streams
            .iter()
            .filter(|(_, s)| s.open && (s.a == id || s.b == id))
            .map(|(n, _)| *n)
            .collect()
    }

    /// Breaks every open stream whose ends are on different sides of the partition.
    pub fn break_partitioned_streams(&mut self) {
        let cut: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| s.open && !self.same_side(s.a, s.b))
            .map(|(n, _)| *n)
            .collect();
        for id in cut {
            self.break_stream(id);
        }
    }

    /// Takes every message due at `now`, oldest first. Messages of broken streams are gone.
    pub fn take_due(&mut self, now: Instant) -> Vec<Envelope<M>> {
        let mut due = Vec::new();
        while let Some(entry) = self.inflight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        due
    }

    /// Forgets closed streams with nothing in flight (keeps the table small).
    pub fn gc_streams(&mut self) {
        let live: std::collections::BTreeSet<u64> =
            self.inflight.values().filter_map(|e| e.stream).collect();
        self.streams.retain(|id, s| s.open || live.contains(id));
    }
}
