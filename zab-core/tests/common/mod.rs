//! A small lock-step harness for tests: several election cores, a FIFO network without delay
//! (unless a test holds messages back), and a fake clock.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zab_core::{
    Action, Decision, ElectionConfig, FastLeaderElection, LearnerType, Notification, QuorumMaj,
    QuorumVerifier, ServerId, ServerState, VoteData, Zxid,
};

/// Shorthand for a server id.
pub fn sid(i: i64) -> ServerId {
    ServerId(i)
}

/// A message in flight.
#[derive(Debug, Clone)]
pub struct Msg {
    pub from: ServerId,
    pub to: ServerId,
    pub n: Notification,
}

/// An ensemble of cores over an in-memory FIFO network.
pub struct Net {
    pub origin: Instant,
    pub now: Instant,
    pub qv: Arc<dyn QuorumVerifier>,
    pub nodes: BTreeMap<ServerId, FastLeaderElection>,
    pub queue: VecDeque<Msg>,
    pub decisions: BTreeMap<ServerId, Vec<Decision>>,
    pub connect_all_requests: usize,
    pub down: BTreeSet<ServerId>,
    pub delivered: usize,
}

impl Net {
    /// Voters and observers, each voter with the data `data(sid)`.
    pub fn new(
        voters: &[i64],
        observers: &[i64],
        config: ElectionConfig,
        data: impl Fn(i64) -> VoteData,
    ) -> Net {
        let qv: Arc<dyn QuorumVerifier> = Arc::new(QuorumMaj::with_ids(
            voters.iter().copied(),
            observers.iter().copied(),
        ));
        Net::with_verifier(qv, voters, observers, config, data)
    }

    /// Like [`Net::new`] with any quorum rule.
    pub fn with_verifier(
        qv: Arc<dyn QuorumVerifier>,
        voters: &[i64],
        observers: &[i64],
        config: ElectionConfig,
        data: impl Fn(i64) -> VoteData,
    ) -> Net {
        let origin = Instant::now();
        let mut nodes = BTreeMap::new();
        for v in voters {
            nodes.insert(
                sid(*v),
                FastLeaderElection::new(
                    config.clone(),
                    sid(*v),
                    LearnerType::Participant,
                    qv.clone(),
                    data(*v),
                ),
            );
        }
        for o in observers {
            nodes.insert(
                sid(*o),
                FastLeaderElection::new(
                    config.clone(),
                    sid(*o),
                    LearnerType::Observer,
                    qv.clone(),
                    VoteData::new(Zxid::ZERO, 0),
                ),
            );
        }
        Net {
            origin,
            now: origin,
            qv,
            nodes,
            queue: VecDeque::new(),
            decisions: BTreeMap::new(),
            connect_all_requests: 0,
            down: BTreeSet::new(),
            delivered: 0,
        }
    }

    /// Milliseconds since the start.
    pub fn ms(&self) -> u128 {
        (self.now - self.origin).as_millis()
    }

    /// Tells every live node that every other live node is connected.
    pub fn connect_all(&mut self) {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let now = self.now;
        for a in &ids {
            for b in &ids {
                if a != b && !self.down.contains(a) && !self.down.contains(b) {
                    if let Some(n) = self.nodes.get_mut(a) {
                        n.connection_up(now, *b);
                    }
                }
            }
        }
    }

    /// Starts an election on the given nodes.
    pub fn start(&mut self, ids: &[i64]) {
        let now = self.now;
        for i in ids {
            if let Some(n) = self.nodes.get_mut(&sid(*i)) {
                n.start(now);
            }
        }
        self.pump();
    }

    /// Moves every node's actions to the network / decision log.
    pub fn pump(&mut self) {
        for (id, node) in self.nodes.iter_mut() {
            while let Some(a) = node.poll_action() {
                match a {
                    Action::Send { to, notification } => self.queue.push_back(Msg {
                        from: *id,
                        to,
                        n: notification,
                    }),
                    Action::ConnectAll => self.connect_all_requests += 1,
                    Action::Decided(d) => self.decisions.entry(*id).or_default().push(d),
                }
            }
        }
    }

    /// Delivers one message (dropping it if either end is down).
    pub fn deliver(&mut self, m: Msg) {
        if self.down.contains(&m.from) || self.down.contains(&m.to) {
            return;
        }
        let now = self.now;
        if let Some(node) = self.nodes.get_mut(&m.to) {
            node.handle_notification(now, m.from, m.n);
            self.delivered += 1;
        }
        self.pump();
    }

    /// Delivers messages until the network is empty (at most `cap` of them).
    pub fn deliver_all(&mut self, cap: usize) {
        let mut left = cap;
        while let Some(m) = self.queue.pop_front() {
            self.deliver(m);
            left -= 1;
            if left == 0 {
                break;
            }
        }
    }

    /// Advances the clock by `d` and ticks every live node.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        let now = self.now;
        for (id, node) in self.nodes.iter_mut() {
            if !self.down.contains(id) {
                node.handle_tick(now);
            }
        }
        self.pump();
    }

    /// Delivers everything, then advances time in 10 ms steps until every live node decided
    /// or `limit` passed. Returns whether all decided.
    pub fn run_until_decided(&mut self, limit: Duration) -> bool {
        let end = self.now + limit;
        loop {
            self.deliver_all(100_000);
            if self.all_decided() {
                return true;
            }
            if self.now >= end {
                return false;
            }
            self.advance(Duration::from_millis(10));
        }
    }

    /// Every live node is out of LOOKING.
    pub fn all_decided(&self) -> bool {
        self.nodes
            .iter()
            .filter(|(id, _)| !self.down.contains(id))
            .all(|(_, n)| n.state() != ServerState::Looking)
    }

    /// The state and leader of a node.
    pub fn view(&self, i: i64) -> (ServerState, ServerId) {
        let n = &self.nodes[&sid(i)];
        (n.state(), n.current_vote().leader)
    }

    /// The last decision of a node.
    pub fn last_decision(&self, i: i64) -> Option<&Decision> {
        self.decisions.get(&sid(i)).and_then(|d| d.last())
    }
}

/// One participant core over a majority rule, for tests that drive a single core by hand.
pub fn core(
    me: i64,
    voters: &[i64],
    observers: &[i64],
    config: ElectionConfig,
    data: VoteData,
) -> FastLeaderElection {
    let qv: Arc<dyn QuorumVerifier> = Arc::new(QuorumMaj::with_ids(
        voters.iter().copied(),
        observers.iter().copied(),
    ));
    let lt = if voters.contains(&me) {
        LearnerType::Participant
    } else {
        LearnerType::Observer
    };
    FastLeaderElection::new(config, sid(me), lt, qv, data)
}

/// Every pending action of a core.
pub fn actions(core: &mut FastLeaderElection) -> Vec<Action> {
    std::iter::from_fn(|| core.poll_action()).collect()
}

/// The `Send` actions among `actions`, as (to, notification).
pub fn sends(actions: &[Action]) -> Vec<(ServerId, Notification)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { to, notification } => Some((*to, notification.clone())),
            _ => None,
        })
        .collect()
}

/// The decision among `actions`, if any.
pub fn decision(actions: &[Action]) -> Option<Decision> {
    actions.iter().find_map(|a| match a {
        Action::Decided(d) => Some(d.clone()),
        _ => None,
    })
}

/// A LOOKING notification (version 2, no config) for `leader` with that leader's data.
pub fn looking(leader: i64, zxid: Zxid, round: i64, peer_epoch: i64) -> Notification {
    Notification {
        state: ServerState::Looking,
        leader: sid(leader),
        zxid,
        election_epoch: round,
        peer_epoch,
        version: 2,
        config: None,
    }
}

/// A notification from a server in `state` (version 2, no config).
pub fn in_state(
    state: ServerState,
    leader: i64,
    zxid: Zxid,
    round: i64,
    peer_epoch: i64,
) -> Notification {
    Notification {
        state,
        ..looking(leader, zxid, round, peer_epoch)
    }
}
