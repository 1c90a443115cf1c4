//! [`FastLeaderElection`]: ZooKeeper 3.8's fast leader election (Z7, Z8) as a pure,
//! deterministic state machine. Inputs are received notifications, ticks and connection
//! events, each with the current time; outputs are [`Action`]s and
//! [`next_deadline`](FastLeaderElection::next_deadline).

mod action;
mod config;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use action::{Action, Decision, DecisionPath};
pub use config::{ElectionConfig, VoteData};

use crate::notification::Notification;
use crate::quorum::{matching_voters, QuorumVerifier};
use crate::types::{LearnerType, ServerId, ServerState};
use crate::vote::{Candidate, Vote};
use crate::zxid::Zxid;

/// Notifications buffered while LOOKING before [`FastLeaderElection::start`] (ZooKeeper's
/// receive queue holds 100).
const PENDING_CAP: usize = 100;

/// Own looped-back notifications processed per input call at most.
const LOOPBACK_BUDGET: usize = 16;

/// The state of one `lookForLeader()` instance.
#[derive(Debug, Clone)]
struct Instance {
    /// LOOKING votes of the current round, plus FOLLOWING/LEADING votes of the current round.
    recvset: BTreeMap<ServerId, Vote>,
    /// FOLLOWING/LEADING votes of any round.
    outofelection: BTreeMap<ServerId, Vote>,
    /// Current notification timeout (doubles on every timeout).
    not_timeout: Duration,
    /// When the notification timeout fires.
    poll_deadline: Instant,
    /// Set while waiting `finalize_wait` after a quorum agreed.
    finalize: Option<Finalize>,
}

/// Election rules ZooKeeper had before a bug fix, kept so that tests can show the fixed rule
/// matters. All off unless a test turns one on through a setter of the test-only feature
/// `never-in-production`; without the feature nothing can turn them on.
#[derive(Debug, Clone, Copy, Default)]
struct OldRules {
    /// Before ZOOKEEPER-975: a LOOKING vote that completed `recvset` (a vote of this round
    /// from every voter, whatever they voted for) ended the election at once with our own
    /// proposal, without a quorum agreeing on it and without `finalizeWait`.
    pre_975_full_recvset_decides: bool,
    /// Before ZOOKEEPER-1514: `checkLeader` held whenever the leader is us, whatever the round
    /// of the votes.
    pre_1514_check_leader_ignores_round: bool,
}

#[derive(Debug, Clone)]
struct Finalize {
    deadline: Instant,
    supporters: BTreeSet<ServerId>,
}

/// ZooKeeper's fast leader election for one server, without IO.
///
/// Time is a [`std::time::Instant`] passed into every call; the core never reads a clock, so a
/// test can start from any `Instant` and add durations to it. The core loops messages to
/// itself back internally.
#[derive(Debug)]
pub struct FastLeaderElection {
    config: ElectionConfig,
    my_id: ServerId,
    learner_type: LearnerType,
    qv: Arc<dyn QuorumVerifier>,
    config_string: String,
    data: VoteData,
    state: ServerState,
    logical_clock: i64,
    proposal: Candidate,
    current_vote: Vote,
    instance: Option<Instance>,
    connected: BTreeSet<ServerId>,
    actions: VecDeque<Action>,
    loopback: VecDeque<Notification>,
    pending: VecDeque<(ServerId, Notification)>,
    old_rules: OldRules,
}

impl FastLeaderElection {
    /// A server `my_id` that is `learner_type`, under quorum rule `qv`, with durable `data`.
    /// It starts LOOKING with no election running; call [`start`](Self::start).
    pub fn new(
        config: ElectionConfig,
        my_id: ServerId,
        learner_type: LearnerType,
        qv: Arc<dyn QuorumVerifier>,
        data: VoteData,
    ) -> Self {
        let config_string = qv.config_string();
        FastLeaderElection {
            config,
            my_id,
            learner_type,
            qv,
            config_string,
            data,
            state: ServerState::Looking,
            logical_clock: 0,
            proposal: Candidate::new(ServerId(-1), Zxid::INVALID, 0),
            current_vote: Vote::new(my_id, data.last_zxid, -1, data.current_epoch),
            instance: None,
            connected: BTreeSet::new(),
            actions: VecDeque::new(),
            loopback: VecDeque::new(),
            pending: VecDeque::new(),
            old_rules: OldRules::default(),
        }
    }

    /// Test-only: brings back the termination rule ZooKeeper had before ZOOKEEPER-975. Once a
    /// LOOKING vote of the current round has arrived from every voter, the election ends with
    /// our own proposal, even when those votes are for someone else (a server joining a
    /// running ensemble that still gets the LOOKING votes its peers queued for it while it was
    /// down goes LEADING). Reached decisions carry
    /// [`DecisionPath::Pre975AllVotersHeard`]. Never use it in production.
    #[cfg(feature = "never-in-production")]
    pub fn use_pre_975_termination_for_tests(&mut self) {
        self.old_rules.pre_975_full_recvset_decides = true;
    }

    /// Test-only: brings back `checkLeader` as it was before ZOOKEEPER-1514. When the
    /// proposed leader is us, the round of the FOLLOWING/LEADING votes is not compared with
    /// ours, so FOLLOWING votes for us from an old round make us lead (and set our round back
    /// to theirs). Never use it in production.
    #[cfg(feature = "never-in-production")]
    pub fn use_pre_1514_check_leader_for_tests(&mut self) {
        self.old_rules.pre_1514_check_leader_ignores_round = true;
    }

    /// This server's id.
    pub fn my_id(&self) -> ServerId {
        self.my_id
    }

    /// The server's state.
    pub fn state(&self) -> ServerState {
        self.state
    }

    /// The round (`logicalclock`).
    pub fn logical_clock(&self) -> i64 {
        self.logical_clock
    }

    /// Whether an election instance is running.
    pub fn is_electing(&self) -> bool {
        self.instance.is_some()
    }

    /// The current proposal as a LOOKING vote of the current round (ZooKeeper's `getVote()`
    /// with the round filled in).
    pub fn proposal(&self) -> Vote {
        Vote::new(
            self.proposal.leader,
            self.proposal.zxid,
            self.logical_clock,
            self.proposal.peer_epoch,
        )
    }

    /// The server's current vote: the last decided vote (or the startup vote before any
    /// decision). Non-LOOKING servers answer LOOKING ones with it.
    pub fn current_vote(&self) -> Vote {
        self.current_vote
    }

    /// The durable data the next [`start`](Self::start) votes with.
    pub fn vote_data(&self) -> VoteData {
        self.data
    }

    /// The quorum rule.
    pub fn quorum_verifier(&self) -> &Arc<dyn QuorumVerifier> {
        &self.qv
    }

    /// The configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Updates the durable data (after sync or new transactions); used by the next
    /// [`start`](Self::start).
    pub fn set_vote_data(&mut self, data: VoteData) {
        self.data = data;
    }

    /// ZOOKEEPER-1732: after a learner finished sync, or a leader started serving, its current
    /// vote carries the new epoch (zxid and round are kept), so that a restarted server that
    /// counts FOLLOWING/LEADING votes sees one epoch.
    pub fn update_election_vote(&mut self, peer_epoch: i64) {
        self.current_vote.peer_epoch = peer_epoch;
    }

    /// The server left FOLLOWING/LEADING/OBSERVING (leader lost, Z6, Z8) or starts up:
    /// begin a new election instance (`lookForLeader`): round + 1, propose our own initial vote
    /// and send it to every voter (Z7).
    pub fn start(&mut self, now: Instant) {
        self.state = ServerState::Looking;
        self.logical_clock = self.logical_clock.saturating_add(1);
        self.proposal = self.initial_candidate();
        self.instance = Some(Instance {
            recvset: BTreeMap::new(),
            outofelection: BTreeMap::new(),
            not_timeout: self.config.min_notification_interval,
            poll_deadline: now + self.config.min_notification_interval,
            finalize: None,
        });
        tracing::debug!(
            sid = self.my_id.0,
            round = self.logical_clock,
            zxid = %self.proposal.zxid,
            "new election"
        );
        self.send_notifications();
        let pending = std::mem::take(&mut self.pending);
        for (from, n) in pending {
            if self.instance.is_some() {
                self.enqueue(now, from, n);
            }
        }
        self.drain_loopback(now);
    }

    /// A notification `n` arrived from server `from` (ZooKeeper's `WorkerReceiver`, then the
    /// `lookForLeader` loop when LOOKING). Notifications claiming to come from ourselves are
    /// dropped (ours are looped back internally).
    pub fn handle_notification(&mut self, now: Instant, from: ServerId, n: Notification) {
        if from == self.my_id {
            tracing::debug!(
                sid = from.0,
                "dropping a notification that claims our own id"
            );
            return;
        }
        self.receive(now, from, n);
        self.drain_loopback(now);
    }

    /// Time passed: fire the `finalize_wait` decision or the notification timeout if due.
    pub fn handle_tick(&mut self, now: Instant) {
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        if let Some(f) = &inst.finalize {
            if now >= f.deadline {
                let supporters = f.supporters.clone();
                self.decide_proposal(supporters, DecisionPath::FinalizeWait);
            }
        } else if now >= inst.poll_deadline {
            inst.not_timeout = (inst.not_timeout * 2).min(self.config.max_notification_interval);
            inst.poll_deadline = now + inst.not_timeout;
            tracing::debug!(
                sid = self.my_id.0,
                timeout_ms = inst.not_timeout.as_millis() as u64,
                "notification timeout"
            );
            // ZooKeeper's `haveDelivered()` is true when any peer's send queue is empty; the
            // closest sans-IO equivalent is "some peer is connected".
            if self.connected.is_empty() {
                self.actions.push_back(Action::ConnectAll);
            } else {
                self.send_notifications();
            }
        }
        self.drain_loopback(now);
    }

    /// The transport has a connection to `peer`.
    ///
    /// Drivers must report connections: on a notification timeout the core re-sends its vote
    /// only if some peer is connected, and otherwise asks for [`Action::ConnectAll`], as
    /// ZooKeeper does. Connections also enable the fast decision
    /// ([`ElectionConfig::fast_decide`]).
    pub fn connection_up(&mut self, _now: Instant, peer: ServerId) {
        if peer != self.my_id {
            self.connected.insert(peer);
        }
    }

    /// The transport lost its connection to `peer`. With `fast_decide`, this may complete a
    /// decision (the voters still connected all agree).
    pub fn connection_down(&mut self, now: Instant, peer: ServerId) {
        self.connected.remove(&peer);
        let _ = now;
        if self.config.fast_decide {
            let target = self.proposal();
            if let Some(inst) = self.instance.as_ref().filter(|i| i.finalize.is_some()) {
                let supporters = matching_voters(self.qv.as_ref(), &inst.recvset, &target);
                if self.all_connected_agree(&supporters) {
                    self.decide_proposal(supporters, DecisionPath::AllConnectedAgreed);
                }
            }
        }
    }

    /// Peers currently connected.
    pub fn connected_peers(&self) -> &BTreeSet<ServerId> {
        &self.connected
    }

    /// The next action to carry out, if any.
    #[must_use = "an action not carried out is a lost send, persist or apply"]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`handle_tick`](Self::handle_tick) must next be called; `None` when no election is
    /// running.
    pub fn next_deadline(&self) -> Option<Instant> {
        let inst = self.instance.as_ref()?;
        Some(match &inst.finalize {
            Some(f) => f.deadline,
            None => inst.poll_deadline,
        })
    }

    // ----- internals -----

    fn is_participant(&self) -> bool {
        self.learner_type == LearnerType::Participant
    }

    /// `(getInitId(), getInitLastLoggedZxid(), getPeerEpoch())`.
    fn initial_candidate(&self) -> Candidate {
        let leader = if self.qv.is_voter(self.my_id) {
            self.my_id
        } else {
            ServerId::NONE
        };
        if self.is_participant() {
            Candidate::new(leader, self.data.last_zxid, self.data.current_epoch)
        } else {
            Candidate::new(leader, Zxid::OBSERVER, i64::MIN)
        }
    }

    fn supersedes(&self, new: Candidate, cur: Candidate) -> bool {
        self.config
            .vote_order
            .supersedes(new, cur, self.qv.weight(new.leader))
    }

    fn reply(&mut self, to: ServerId, vote: Vote, state: ServerState) {
        let notification = Notification::from_vote(&vote, state, Some(self.config_string.clone()));
        self.actions.push_back(Action::Send { to, notification });
    }

    /// `sendNotifications()`: our proposal, state LOOKING, to every voter (self via loopback).
    fn send_notifications(&mut self) {
        let vote = self.proposal();
        let n = Notification::from_vote(
            &vote,
            ServerState::Looking,
            Some(self.config_string.clone()),
        );
        let voters: Vec<ServerId> = self.qv.voting_members().iter().copied().collect();
        for sid in voters {
            if sid == self.my_id {
                self.loopback.push_back(n.clone());
            } else {
                self.actions.push_back(Action::Send {
                    to: sid,
                    notification: n.clone(),
                });
            }
        }
    }

    /// Processes our own looped-back notifications. With a proper (transitive) vote order this
    /// ends quickly, since proposals only grow within a round; the bound keeps every call
    /// finite whatever the order (the rest waits for the next input).
    fn drain_loopback(&mut self, now: Instant) {
        let mut budget = LOOPBACK_BUDGET;
        while budget > 0 {
            budget -= 1;
            let Some(n) = self.loopback.pop_front() else {
                break;
            };
            let me = self.my_id;
            self.receive(now, me, n);
        }
    }

    /// The `WorkerReceiver` table (ZooKeeper's `FastLeaderElection.Messenger.WorkerReceiver`).
    fn receive(&mut self, now: Instant, from: ServerId, n: Notification) {
        if !self.qv.is_voter(from) {
            // Non-voters (observers, unknown ids) get our current vote at once, never queued.
            let vote = Vote {
                election_epoch: self.logical_clock,
                ..self.current_vote
            };
            self.reply(from, vote, self.state);
            return;
        }
        if self.state == ServerState::Looking {
            if n.state == ServerState::Looking
                && n.election_epoch < self.logical_clock
                && self.qv.is_voter(self.my_id)
            {
                // A lagging LOOKING voter: tell it our proposal of the current round.
                // Deviation: ZooKeeper 3.8 sends this from observers too, but a voter only
                // answers a non-voter's message and never queues it, so the two would bounce
                // messages for as long as the voter's round lags. Only voters reply here.
                self.reply(from, self.proposal(), ServerState::Looking);
            }
            if self.instance.is_some() {
                self.enqueue(now, from, n);
            } else if self.pending.len() < PENDING_CAP {
                // the election never reads configs: do not hold a peer's bytes
                self.pending
                    .push_back((from, Notification { config: None, ..n }));
            }
        } else if n.state == ServerState::Looking {
            // FOLLOWING/LEADING/OBSERVING answer a LOOKING voter with the current vote.
            self.reply(from, self.current_vote, self.state);
        }
    }

    /// A notification taken from the receive queue by `lookForLeader`.
    fn enqueue(&mut self, now: Instant, from: ServerId, n: Notification) {
        let finalize_wait = self.config.finalize_wait;
        let proposal = self.proposal;
        let better = self.supersedes(n.candidate(), proposal);
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        if let Some(f) = inst.finalize.as_mut() {
            if better {
                inst.finalize = None;
            } else {
                // Discarded; the quiet window starts again.
                f.deadline = now + finalize_wait;
                if self.config.fast_decide {
                    self.note_agreement_while_waiting(from, &n);
                }
                return;
            }
        }
        self.process(now, from, n);
    }

    /// Fast decide only: ZooKeeper discards a notification that arrives during
    /// `finalize_wait` without beating the proposal. If it is a LOOKING vote of this round
    /// that equals the proposal, record it, and decide if every connected voter now agrees.
    /// This never changes what ZooKeeper would decide: a recorded vote equals the proposal,
    /// and proposals only grow within a round, so it can never count for another proposal.
    fn note_agreement_while_waiting(&mut self, from: ServerId, n: &Notification) {
        let target = self.proposal();
        if n.state != ServerState::Looking || !n.vote().matches(&target) {
            return;
        }
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        inst.recvset.insert(
            from,
            Vote::new(n.leader, n.zxid, n.election_epoch, n.peer_epoch),
        );
        let supporters = matching_voters(self.qv.as_ref(), &inst.recvset, &target);
        if let Some(f) = inst.finalize.as_mut() {
            f.supporters.clone_from(&supporters);
        }
        if self.all_connected_agree(&supporters) {
            self.decide_proposal(supporters, DecisionPath::AllConnectedAgreed);
        }
    }

    /// One iteration of the `lookForLeader` loop for a dequeued notification.
    fn process(&mut self, now: Instant, from: ServerId, n: Notification) {
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        inst.poll_deadline = now + inst.not_timeout;
        if !self.qv.is_voter(n.leader) {
            tracing::debug!(
                sid = from.0,
                leader = n.leader.0,
                "vote for a non-voter ignored"
            );
            return;
        }
        match n.state {
            ServerState::Looking => self.process_looking(now, from, n),
            ServerState::Observing => {}
            ServerState::Following | ServerState::Leading => self.process_following(from, n),
        }
    }

    fn process_looking(&mut self, now: Instant, from: ServerId, n: Notification) {
        let init = self.initial_candidate();
        if init.zxid == Zxid::INVALID || n.zxid == Zxid::INVALID {
            return;
        }
        if n.election_epoch > self.logical_clock {
            self.logical_clock = n.election_epoch;
            if let Some(inst) = self.instance.as_mut() {
                inst.recvset.clear();
            }
            // Compared with our *initial* vote, not the current proposal.
            self.proposal = if self.supersedes(n.candidate(), init) {
                n.candidate()
            } else {
                init
            };
            self.send_notifications();
        } else if n.election_epoch < self.logical_clock {
            return;
        } else if self.supersedes(n.candidate(), self.proposal) {
            self.proposal = n.candidate();
            self.send_notifications();
        }
        let target = self.proposal();
        let fast = self.config.fast_decide;
        let finalize_wait = self.config.finalize_wait;
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        inst.recvset.insert(
            from,
            Vote::new(n.leader, n.zxid, n.election_epoch, n.peer_epoch),
        );
        if self.old_rules.pre_975_full_recvset_decides
            && self.qv.weight(target.leader) != 0
            && self
                .qv
                .voting_members()
                .iter()
                .all(|v| inst.recvset.contains_key(v))
        {
            // Old rule: every voter was heard, so stop, whatever they voted for.
            let heard: BTreeSet<ServerId> = inst.recvset.keys().copied().collect();
            self.decide_proposal(heard, DecisionPath::Pre975AllVotersHeard);
            return;
        }
        let supporters = matching_voters(self.qv.as_ref(), &inst.recvset, &target);
        if self.qv.contains_quorum(&supporters) {
            if fast && self.all_connected_agree(&supporters) {
                self.decide_proposal(supporters, DecisionPath::AllConnectedAgreed);
            } else if let Some(inst) = self.instance.as_mut() {
                inst.finalize = Some(Finalize {
                    deadline: now + finalize_wait,
                    supporters,
                });
            }
        }
    }

    /// `receivedFollowingNotification` (FOLLOWING and LEADING alike; no 2-node oracle).
    fn process_following(&mut self, from: ServerId, n: Notification) {
        let nvote = n.vote();
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        if n.election_epoch == self.logical_clock {
            inst.recvset.insert(
                from,
                Vote::new(n.leader, n.zxid, n.election_epoch, n.peer_epoch).with_state(n.state),
            );
            let supporters = matching_voters(self.qv.as_ref(), &inst.recvset, &nvote);
            if self.qv.contains_quorum(&supporters)
                && Self::check_leader(
                    self.my_id,
                    self.logical_clock,
                    self.old_rules,
                    &inst.recvset,
                    n.leader,
                    n.election_epoch,
                )
            {
                self.decide(nvote, supporters, DecisionPath::RoundFollowing);
                return;
            }
        }
        let Some(inst) = self.instance.as_mut() else {
            return;
        };
        inst.outofelection.insert(from, nvote);
        let supporters = matching_voters(self.qv.as_ref(), &inst.outofelection, &nvote);
        if self.qv.contains_quorum(&supporters)
            && Self::check_leader(
                self.my_id,
                self.logical_clock,
                self.old_rules,
                &inst.outofelection,
                n.leader,
                n.election_epoch,
            )
        {
            self.logical_clock = n.election_epoch;
            self.decide(nvote, supporters, DecisionPath::OutOfElection);
        }
    }

    /// `checkLeader`: a leader other than us must itself have said LEADING; if the leader is
    /// us, the votes must be of our current round (ZOOKEEPER-1514; not checked under the
    /// test-only old rule).
    fn check_leader(
        my_id: ServerId,
        logical_clock: i64,
        old_rules: OldRules,
        votes: &BTreeMap<ServerId, Vote>,
        leader: ServerId,
        round: i64,
    ) -> bool {
        if leader != my_id {
            votes
                .get(&leader)
                .is_some_and(|v| v.state == ServerState::Leading)
        } else {
            old_rules.pre_1514_check_leader_ignores_round || logical_clock == round
        }
    }

    /// Fast decide: every connected voter, and we ourselves if we vote, is among the
    /// supporters, and those connected supporters alone form a quorum.
    fn all_connected_agree(&self, supporters: &BTreeSet<ServerId>) -> bool {
        let mut connected_voters: BTreeSet<ServerId> = self
            .connected
            .iter()
            .filter(|s| self.qv.is_voter(**s))
            .copied()
            .collect();
        if self.qv.is_voter(self.my_id) {
            connected_voters.insert(self.my_id);
        }
        connected_voters.is_subset(supporters) && self.qv.contains_quorum(&connected_voters)
    }

    fn decide_proposal(&mut self, supporters: BTreeSet<ServerId>, path: DecisionPath) {
        let vote = self.proposal();
        self.decide(vote, supporters, path);
    }

    fn decide(&mut self, vote: Vote, supporters: BTreeSet<ServerId>, path: DecisionPath) {
        let state = if vote.leader == self.my_id {
            ServerState::Leading
        } else if self.is_participant() {
            ServerState::Following
        } else {
            ServerState::Observing
        };
        let end = Vote::new(vote.leader, vote.zxid, vote.election_epoch, vote.peer_epoch);
        tracing::debug!(
            sid = self.my_id.0,
            leader = end.leader.0,
            zxid = %end.zxid,
            round = end.election_epoch,
            state = %state,
            "election decided"
        );
        self.state = state;
        self.current_vote = end;
        self.instance = None;
        self.loopback.clear();
        self.pending.clear();
        self.actions.push_back(Action::Decided(Decision {
            vote: end,
            state,
            supporters,
            path,
        }));
    }
}
