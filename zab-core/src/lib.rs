//! # zab-core
//!
//! Apache ZooKeeper's fast leader election (Z1–Z8), exact to ZooKeeper 3.8, as a sans-IO
//! state machine: no sockets, no clock reads, no randomness. Time and messages go in,
//! [`Action`]s come out. An async driver sits on top; this crate's core is also the tool to
//! unit-test election logic by hand.
//!
//! - [`types`], [`zxid`]: server ids, states, learner types, zxids (epoch high 32 bits, counter
//!   low 32).
//! - [`vote`]: votes, the total order `(peer_epoch, zxid, sid)` and ZooKeeper's vote equality.
//! - [`quorum`]: majority and hierarchical quorum rules behind [`QuorumVerifier`].
//! - [`notification`]: the election message and its wire codec (the 28-byte, 40-byte and
//!   version-2 layouts).
//! - [`election`]: [`FastLeaderElection`], the state machine.
//! - [`broadcast`]: recovery (DIFF / TRUNC / SNAP sync) and atomic broadcast, sans-IO.
//! - [`txnlog`]: the transaction log trait ([`txnlog::TxnLog`]) with in-memory and file
//!   implementations (CRC per record, torn-tail recovery, atomic snapshots).
//! - [`state_machine`]: the [`state_machine::StateMachine`] embedders implement to apply committed
//!   transactions and take / restore snapshots.
//!
//! Cargo features: `tokio` (default) adds the async driver (`peer`) and the transports
//! (`transport`). `testing` adds the conformance suites (`testing`) of the storage and network
//! traits — a builder trait, `test_all` and the single cases each — to run against any
//! implementation; purely additive, it changes no behaviour. `never-in-production` must **never be enabled in production**: test-only
//! and purely additive, it adds the constructors of two known-broken behaviours for tests that
//! show the simulators catch them (`ElectionConfig::with_broken_pre_1419_order`,
//! `vote::pre_1419_predicate`, `LearnerOptions::with_broken_ack_newleader_before_persist`).
//!
//! ## Drive an election by hand
//!
//! Three voters, all with the same history: the largest id wins (Z7). We play server 1
//! and fabricate what servers 2 and 3 say. Time is any [`std::time::Instant`] we choose and
//! advance ourselves.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//! use zab_core::{
//!     Action, ElectionConfig, FastLeaderElection, LearnerType, Notification, QuorumMaj,
//!     ServerId, ServerState, VoteData, Zxid,
//! };
//!
//! let qv = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
//! let mut fle = FastLeaderElection::new(
//!     ElectionConfig::zookeeper(),          // exactly ZooKeeper 3.8
//!     ServerId(1),
//!     LearnerType::Participant,
//!     qv,
//!     VoteData::new(Zxid::new(1, 7), 1),    // last zxid 0x100000007, currentEpoch 1
//! );
//!
//! let t0 = Instant::now();                  // the only "clock": we move it by hand
//! fle.start(t0);                            // round 1, vote for ourselves, tell every voter
//! let mut sent = Vec::new();
//! while let Some(action) = fle.poll_action() {
//!     if let Action::Send { to, notification } = action {
//!         assert_eq!(notification.leader, ServerId(1));
//!         sent.push(to.0);
//!     }
//! }
//! assert_eq!(sent, [2, 3]);                 // our own copy is looped back inside the core
//!
//! // Server 3 votes for itself with the same history: it beats us on the id.
//! let vote_3 = Notification {
//!     state: ServerState::Looking,
//!     leader: ServerId(3),
//!     zxid: Zxid::new(1, 7),
//!     election_epoch: 1,
//!     peer_epoch: 1,
//!     version: 2,
//!     config: None,
//! };
//! fle.handle_notification(t0, ServerId(3), vote_3);
//! assert_eq!(fle.proposal().leader, ServerId(3));
//! // {1, 3} agree on 3: a quorum. ZooKeeper now waits 200 ms for a better vote.
//! while fle.poll_action().is_some() {}
//! assert_eq!(fle.next_deadline(), Some(t0 + Duration::from_millis(200)));
//!
//! fle.handle_tick(t0 + Duration::from_millis(200));
//! let Some(Action::Decided(decision)) = fle.poll_action() else { panic!("no decision") };
//! assert_eq!(decision.state, ServerState::Following);
//! assert_eq!(decision.vote.leader, ServerId(3));
//! assert_eq!(fle.state(), ServerState::Following);
//! ```
//!
//! ## After the election
//!
//! Once FOLLOWING, LEADING or OBSERVING, the core still answers LOOKING voters with its current
//! vote (that is how a restarted server finds the ensemble). After sync, call
//! [`FastLeaderElection::update_election_vote`] with the new epoch (ZOOKEEPER-1732), and
//! [`FastLeaderElection::set_vote_data`] whenever the last zxid or `currentEpoch` change. When
//! the leader is lost (Z6, Z8), call [`FastLeaderElection::start`] again.
//!
//! ```
//! # use std::sync::Arc;
//! # use std::time::Instant;
//! # use zab_core::*;
//! let qv = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
//! let mut fle = FastLeaderElection::new(
//!     ElectionConfig::zookeeper(), ServerId(3), LearnerType::Participant, qv,
//!     VoteData::new(Zxid::new(1, 7), 1),
//! );
//! let t0 = Instant::now();
//! fle.start(t0);
//! // 1 and 2 already follow us in our round: that decides at once (checkLeader holds).
//! for from in [1, 2] {
//!     let following = Notification {
//!         state: ServerState::Following, leader: ServerId(3), zxid: Zxid::new(1, 7),
//!         election_epoch: 1, peer_epoch: 1, version: 2, config: None,
//!     };
//!     fle.handle_notification(t0, ServerId(from), following);
//! }
//! assert_eq!(fle.state(), ServerState::Leading);
//! fle.update_election_vote(2);              // epoch 2 established
//! while fle.poll_action().is_some() {}
//!
//! // A restarted server 1 asks: we answer with our current vote, as LEADING.
//! let asking = Notification {
//!     state: ServerState::Looking, leader: ServerId(1), zxid: Zxid::new(1, 7),
//!     election_epoch: 1, peer_epoch: 1, version: 2, config: None,
//! };
//! fle.handle_notification(t0, ServerId(1), asking);
//! let Some(Action::Send { to, notification }) = fle.poll_action() else { panic!() };
//! assert_eq!((to, notification.state, notification.peer_epoch), (ServerId(1), ServerState::Leading, 2));
//! ```
//!
//! ## On the wire
//!
//! ```
//! use zab_core::{Notification, DecodeError, ServerId, ServerState, Zxid};
//!
//! let n = Notification {
//!     state: ServerState::Looking, leader: ServerId(2), zxid: Zxid::new(1, 0),
//!     election_epoch: 1, peer_epoch: 1, version: 2,
//!     config: Some("server.2=127.0.0.1:2888:3888:participant\nversion=0".into()),
//! };
//! let frame = n.encode();                   // the payload of one length-prefixed frame
//! assert_eq!(Notification::decode(&frame), Ok(n));
//! assert_eq!(Notification::decode(&frame[..20]), Err(DecodeError::TooShort { len: 20 }));
//! ```
//!
//! ## Deciding without the 200 ms pause, and why it is safe
//!
//! ZooKeeper always waits `finalizeWait` (200 ms of quiet) after a quorum agrees with its
//! proposal. With [`ElectionConfig::fast_decide`] (on by default; [`ElectionConfig::zookeeper`]
//! turns it off) the core decides at once when **every voter it is currently connected to, and
//! itself, has sent the vote equal to its proposal in the current round, and those connected
//! voters alone form a quorum**. Why this is safe:
//!
//! 1. *The pause is not what makes ZooKeeper safe.* At most one leader per epoch (Z1) comes
//!    from the step after the election: a leader proposes epoch `max(acceptedEpoch) + 1` and
//!    leads only once a quorum accepted it; two quorums always share a server, which accepts
//!    each epoch once. A decision that turns out premature costs one more election
//!    (the would-be leader finds no quorum within `initLimit`), never safety. The pause only
//!    gives a better vote a chance to arrive before deciding.
//! 2. *No connected voter can bring a better vote of this round.* Within a round a server's
//!    proposal only grows and starts at its own initial vote. A voter that sent us our
//!    proposal therefore has an initial vote no greater than it, so it cannot originate a better
//!    one; and every connected voter did send it.
//! 3. *A better vote can only come from a voter we are not connected to*, relayed later. That
//!    case exists in ZooKeeper too: a vote that arrives after the 200 ms, or over a connection
//!    that comes up later, is missed in the same way. Such a voter joins afterwards through the
//!    FOLLOWING/LEADING replies (`outofelection`).
//! 4. *The leader still holds the newest history of its quorum (Z5).* Each supporter's vote
//!    is at least its own initial vote, so the leader's `(epoch, zxid)` is the largest of the
//!    quorum that elected it; any committed transaction lives on a quorum, which intersects
//!    this one, so the leader has it. This is exactly ZooKeeper's argument.
//!
//! Connections come from the driver ([`FastLeaderElection::connection_up`] /
//! [`FastLeaderElection::connection_down`]). A driver that reports none gets ZooKeeper's
//! behaviour exactly, because a server alone is no quorum. The simulation in
//! `tests/election_simulation.rs` runs half its seeds each way under loss, delay, duplication,
//! partitions and crashes and checks Z1, Z5 and liveness.
//!
//! ## Deviations from ZooKeeper 3.8
//!
//! Besides the fast decision above, which [`ElectionConfig::zookeeper`] turns off:
//! - an undecodable or empty config in a notification is "no config" (ZooKeeper 3.8.0's
//!   receiver thread dies on a config of length 0);
//! - a LOOKING observer does not answer a lagging LOOKING voter: ZooKeeper's answer is never
//!   queued by the voter, only answered, so the two bounced messages while the voter lagged;
//! - the notification timeout re-sends when any peer is connected (ZooKeeper: when any
//!   per-peer send queue is empty), else asks the driver to connect to all.
//!
//! ## Not modelled
//!
//! Dynamic reconfiguration (a higher config version in a notification restarting the
//! election), the two-server oracle (`QuorumOracleMaj`), and the leader's `reportLookingSid`
//! hook (ZOOKEEPER-3109, off by default in ZooKeeper) are not implemented: received configs are
//! decoded and exposed ([`Notification::config_version`]) but not acted on.

pub mod broadcast;
pub mod discovery;
pub mod election;
pub mod notification;
#[cfg(feature = "tokio")]
pub mod peer;
pub mod quorum;
pub mod state_machine;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tokio")]
pub mod transport;
pub mod txnlog;
pub mod types;
pub mod vote;
pub mod zxid;

pub use election::{Action, Decision, DecisionPath, ElectionConfig, FastLeaderElection, VoteData};
pub use notification::{DecodeError, Notification};
pub use quorum::{QuorumHierarchical, QuorumMaj, QuorumVerifier, ServerEntry};
pub use types::{LearnerType, ServerId, ServerState};
pub use vote::{total_order_predicate, Candidate, Vote};
pub use zxid::Zxid;

/// The guide `docs/testing-election-logic.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/testing-election-logic.md")]
pub struct TestingElectionLogicGuide;

/// The workspace README's code example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadme;
