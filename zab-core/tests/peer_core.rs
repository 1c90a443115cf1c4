//! `PeerCore` driven by hand: the composition the tokio driver used to do is the core's now,
//! so each of its rules is visible from its actions alone (fabricated messages, a clock we
//! move ourselves).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zab_core::discovery::Timing;
use zab_core::packet::{packet_type, QuorumPacket};
use zab_core::peer::{PeerAction, PeerConfig, PeerCore, PeerInput};
use zab_core::store::PersistedEpochs;
use zab_core::txnlog::Txn;
use zab_core::{LearnerType, Notification, QuorumMaj, ServerId, ServerState, Zxid};

const VOTERS: [i64; 3] = [1, 2, 3];

fn config(sid: i64) -> PeerConfig {
    let quorum = Arc::new(QuorumMaj::with_ids(VOTERS, []));
    PeerConfig::new(ServerId(sid), LearnerType::Participant, quorum).with_timing(Timing::new(
        Duration::from_millis(100),
        10,
        5,
    ))
}

fn actions(core: &mut PeerCore) -> Vec<PeerAction> {
    std::iter::from_fn(|| core.poll_action()).collect()
}

fn vote(state: ServerState, leader: i64, zxid: Zxid, round: i64, epoch: i64) -> Notification {
    Notification {
        state,
        leader: ServerId(leader),
        zxid,
        election_epoch: round,
        peer_epoch: epoch,
        version: 2,
        config: None,
    }
}

fn sends_notifications(a: &[PeerAction]) -> bool {
    a.iter()
        .any(|a| matches!(a, PeerAction::SendNotification { .. }))
}

/// An ensemble whose messages we carry in order; appends become durable only when we say.
struct Ensemble {
    t0: Instant,
    ms: u64,
    cores: BTreeMap<i64, PeerCore>,
    logs: BTreeMap<i64, Vec<Txn>>,
    /// Appends not yet reported durable, by server.
    unsynced: BTreeMap<i64, Zxid>,
    /// Servers whose appends we report durable at once.
    auto_durable: bool,
    wire: VecDeque<(i64, i64, Msg)>,
    /// Every quorum packet sent, as (from, to, kind), in order.
    sent: Vec<(i64, i64, i32)>,
}

enum Msg {
    Vote(Notification),
    Packet(QuorumPacket),
}

impl Ensemble {
    fn new() -> Self {
        let mut e = Ensemble {
            t0: Instant::now(),
            ms: 0,
            cores: BTreeMap::new(),
            logs: BTreeMap::new(),
            unsynced: BTreeMap::new(),
            auto_durable: true,
            wire: VecDeque::new(),
            sent: Vec::new(),
        };
        for sid in VOTERS {
            let core = PeerCore::new(config(sid), PersistedEpochs::default())
                .with_log(Zxid::ZERO, Zxid::ZERO);
            e.cores.insert(sid, core);
            e.logs.insert(sid, Vec::new());
        }
        let now = e.now();
        for sid in VOTERS {
            e.input(sid, now, PeerInput::Start);
            for p in VOTERS.iter().filter(|p| **p != sid) {
                e.input(sid, now, PeerInput::ElectionConnected(ServerId(*p)));
            }
        }
        e.deliver();
        e
    }

    fn now(&self) -> Instant {
        self.t0 + Duration::from_millis(self.ms)
    }

    fn input(&mut self, sid: i64, now: Instant, input: PeerInput) {
        let Some(core) = self.cores.get_mut(&sid) else {
            return;
        };
        core.handle(now, input);
        self.carry_out(sid, now);
    }

    fn carry_out(&mut self, sid: i64, now: Instant) {
        loop {
            let Some(a) = self.cores.get_mut(&sid).and_then(PeerCore::poll_action) else {
                return;
            };
            let log = self.logs.get_mut(&sid).expect("log");
            match a {
                PeerAction::SendNotification { to, notification } => {
                    self.wire.push_back((sid, to.0, Msg::Vote(notification)))
                }
                PeerAction::Send { to, packet } => {
                    self.sent.push((sid, to.0, packet.kind));
                    self.wire.push_back((sid, to.0, Msg::Packet(packet)));
                }
                PeerAction::Append(txns) => {
                    let last = txns.last().expect("a non-empty append").zxid;
                    log.extend(txns);
                    self.unsynced.insert(sid, last);
                    if self.auto_durable {
                        self.sync(sid, now);
                    }
                }
                PeerAction::SyncLog => {
                    self.unsynced.remove(&sid);
                }
                PeerAction::LoadHistory { .. } => {
                    // (the core keeps the newest `max` of them)
                    let committed = log.clone();
                    let history = PeerInput::History {
                        base: Zxid::ZERO,
                        committed,
                    };
                    self.cores.get_mut(&sid).expect("core").handle(now, history);
                }
                _ => {}
            }
        }
    }

    /// Server `sid`'s appends are durable.
    fn sync(&mut self, sid: i64, now: Instant) {
        if let Some(z) = self.unsynced.remove(&sid) {
            self.cores
                .get_mut(&sid)
                .expect("core")
                .handle(now, PeerInput::LogDurable(z));
        }
    }

    fn deliver(&mut self) {
        let now = self.now();
        while let Some((from, to, msg)) = self.wire.pop_front() {
            if !self.cores.contains_key(&from) {
                continue;
            }
            let from_id = ServerId(from);
            let input = match msg {
                Msg::Vote(notification) => PeerInput::Notification {
                    from: from_id,
                    notification,
                },
                Msg::Packet(packet) => PeerInput::Packet {
                    from: from_id,
                    packet,
                },
            };
            self.input(to, now, input);
        }
    }

    /// Moves the clock `ms` forward in 10 ms steps, ticking and delivering.
    fn run(&mut self, ms: u64) {
        let until = self.ms + ms;
        while self.ms < until {
            self.ms += 10;
            let now = self.now();
            let sids: Vec<i64> = self.cores.keys().copied().collect();
            for sid in sids {
                let due = self.cores[&sid].next_deadline().is_some_and(|d| d <= now);
                if due {
                    self.input(sid, now, PeerInput::Tick);
                }
            }
            self.deliver();
        }
    }

    fn status(&self, sid: i64) -> zab_core::peer::PeerStatus {
        self.cores[&sid].status()
    }
}

#[test]
fn z2_a_follower_acks_a_proposal_only_once_its_append_is_reported_durable() {
    let mut e = Ensemble::new();
    e.run(100);
    assert!(e.status(3).is_established_leader());
    e.auto_durable = false;
    e.sent.clear();
    let now = e.now();
    e.input(3, now, PeerInput::Write(Bytes::from_static(b"x")));
    // The leader's own append is pending too: nothing commits.
    e.deliver();
    let acks = |e: &Ensemble, from: i64| {
        e.sent
            .iter()
            .filter(|(f, _, k)| *f == from && *k == packet_type::ACK)
            .count()
    };
    assert!(e.sent.contains(&(3, 1, packet_type::PROPOSAL)));
    assert_eq!(
        (acks(&e, 1), acks(&e, 2)),
        (0, 0),
        "ACK before the append was durable"
    );
    // Follower 1's append becomes durable: its ACK goes; with the leader's own (once durable)
    // that is a quorum, and the write commits.
    e.sync(1, now);
    e.carry_out(1, now);
    e.deliver();
    assert_eq!(acks(&e, 1), 1);
    assert!(!e.sent.contains(&(3, 1, packet_type::COMMIT)));
    e.sync(3, now);
    e.carry_out(3, now);
    e.deliver();
    assert!(e.sent.contains(&(3, 1, packet_type::COMMIT)));
    assert_eq!(acks(&e, 2), 0, "server 2 never reported its append durable");
}

#[test]
fn z7_the_first_round_waits_for_every_voter_or_the_connect_grace() {
    let t0 = Instant::now();
    let mut core = PeerCore::new(config(1), PersistedEpochs::default());
    core.handle(t0, PeerInput::Start);
    let a = actions(&mut core);
    assert_eq!(a, [PeerAction::ConnectAll]);
    core.handle(t0, PeerInput::ElectionConnected(ServerId(2)));
    assert!(!sends_notifications(&actions(&mut core)));
    // The last voter connects: the round starts at once.
    core.handle(t0, PeerInput::ElectionConnected(ServerId(3)));
    assert!(sends_notifications(&actions(&mut core)));

    // Without server 3, the grace (100 ms by default) runs out first.
    let mut core = PeerCore::new(config(1), PersistedEpochs::default());
    core.handle(t0, PeerInput::Start);
    core.handle(t0, PeerInput::ElectionConnected(ServerId(2)));
    assert_eq!(core.next_deadline(), Some(t0 + Duration::from_millis(100)));
    let _ = actions(&mut core);
    core.handle(t0 + Duration::from_millis(100), PeerInput::Tick);
    assert!(sends_notifications(&actions(&mut core)));
}

/// Server 3 decides LEADING from two FOLLOWING notifications of its round.
fn elect_3(core: &mut PeerCore, t0: Instant) {
    for from in [1, 2] {
        let n = vote(ServerState::Following, 3, Zxid::ZERO, 1, 0);
        core.handle(
            t0,
            PeerInput::Notification {
                from: ServerId(from),
                notification: n,
            },
        );
    }
}

#[test]
fn z7_a_followerinfo_received_while_looking_is_replayed_once_leading() {
    let t0 = Instant::now();
    let mut core = PeerCore::new(config(3), PersistedEpochs::default());
    core.handle(t0, PeerInput::Start);
    for p in [1, 2] {
        core.handle(t0, PeerInput::ElectionConnected(ServerId(p)));
    }
    // Follower 1 decided first and already sent its FOLLOWERINFO.
    let mut follower = PeerCore::new(config(1), PersistedEpochs::default());
    follower.handle(t0, PeerInput::Start);
    for p in [2, 3] {
        follower.handle(t0, PeerInput::ElectionConnected(ServerId(p)));
    }
    for from in [2, 3] {
        let n = vote(ServerState::Following, 3, Zxid::ZERO, 1, 0);
        let notification = if from == 3 {
            vote(ServerState::Leading, 3, Zxid::ZERO, 1, 0)
        } else {
            n
        };
        follower.handle(
            t0,
            PeerInput::Notification {
                from: ServerId(from),
                notification,
            },
        );
    }
    let info = actions(&mut follower)
        .into_iter()
        .find_map(|a| match a {
            PeerAction::Send { to, packet }
                if to == ServerId(3) && packet.kind == packet_type::FOLLOWERINFO =>
            {
                Some(packet)
            }
            _ => None,
        })
        .expect("the follower sends FOLLOWERINFO");
    core.handle(
        t0,
        PeerInput::Packet {
            from: ServerId(1),
            packet: info,
        },
    );
    assert_eq!(core.status().state, ServerState::Looking);
    elect_3(&mut core, t0);
    assert_eq!(core.status().state, ServerState::Leading);
    // The stashed FOLLOWERINFO with ours is a quorum of accepted epochs: LEADERINFO goes to 1
    // without 1 sending anything again.
    let leaderinfo = actions(&mut core).into_iter().any(|a| {
        matches!(a, PeerAction::Send { to, packet }
            if to == ServerId(1) && packet.kind == packet_type::LEADERINFO)
    });
    assert!(leaderinfo);
}

#[test]
fn z7_a_server_that_does_not_lead_refuses_a_would_be_learner() {
    let t0 = Instant::now();
    let mut core = PeerCore::new(config(1), PersistedEpochs::default());
    core.handle(t0, PeerInput::Start);
    for p in [2, 3] {
        core.handle(t0, PeerInput::ElectionConnected(ServerId(p)));
    }
    for from in [2, 3] {
        let state = if from == 3 {
            ServerState::Leading
        } else {
            ServerState::Following
        };
        let notification = vote(state, 3, Zxid::ZERO, 1, 0);
        core.handle(
            t0,
            PeerInput::Notification {
                from: ServerId(from),
                notification,
            },
        );
    }
    assert_eq!(core.status().state, ServerState::Following);
    let _ = actions(&mut core);
    let info = QuorumPacket::new(packet_type::FOLLOWERINFO, 0);
    core.handle(
        t0,
        PeerInput::Packet {
            from: ServerId(2),
            packet: info,
        },
    );
    assert_eq!(actions(&mut core), [PeerAction::Refuse(ServerId(2))]);
}

#[test]
fn z8_a_looking_vote_received_while_following_is_kept_for_the_next_round() {
    let mut e = Ensemble::new();
    e.run(100);
    assert_eq!(e.status(1).leader, Some(ServerId(3)));
    // Server 2 went LOOKING a moment before 1 (a fabricated vote for itself, round 5): 1
    // only answers it with its FOLLOWING vote, and keeps it.
    let now = e.now();
    let looking = vote(ServerState::Looking, 2, Zxid::ZERO, 5, 1);
    e.input(
        1,
        now,
        PeerInput::Notification {
            from: ServerId(2),
            notification: looking,
        },
    );
    e.wire.clear();
    // The leader dies; 1 leaves its epoch after syncLimit and starts its next round. The
    // kept vote is handed to it at once: 1 adopts round 5 without hearing from 2 again.
    e.cores.remove(&3);
    e.cores.remove(&2);
    let now = e.now();
    e.input(1, now, PeerInput::QuorumDown(ServerId(3)));
    e.wire.clear();
    assert_eq!(e.status(1).state, ServerState::Looking);
    assert_eq!(e.cores[&1].election().logical_clock(), 5);
}
