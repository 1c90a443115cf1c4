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
//! - [`packet`]: the quorum port's `QuorumPacket` and its codec, spoken by [`discovery`] and
//!   [`broadcast`] (discovery drives broadcast; broadcast imports only the packets).
//! - [`discovery`]: the leader and learner state machines that fix a new epoch (Z1, Z5).
//! - [`broadcast`]: recovery (DIFF / TRUNC / SNAP sync, ZooKeeper's `snapshotSizeFactor`
//!   choice, snapshots of any size in 1 MiB chunks) and atomic broadcast, sans-IO. A leader
//!   keeps only its newest `commitLogCount` committed transactions in memory (ZooKeeper's
//!   `committedLog`) and syncs a learner further behind from its log, read in bounded chunks
//!   by its embedder (`peer::PeerAction::ReadLog`), paced by the learner's connection.
//! - [`txnlog`]: the transaction log trait ([`txnlog::TxnLog`]) with in-memory and file
//!   implementations (the file log in segments named by their first zxid, CRC per record,
//!   torn-tail recovery, atomic snapshots, purge of whole segments below the retained
//!   snapshots).
//! - [`state_machine`]: the [`state_machine::StateMachine`] embedders implement to apply committed
//!   transactions and take / restore snapshots.
//! - [`peer`]: [`peer::PeerCore`], the whole server (all of the above composed, with session
//!   liveness) as one sans-IO state machine, and `QuorumPeer`, its tokio driver.
//!
//! Cargo features: `tokio` (default) adds the async driver (`peer::QuorumPeer`) and the transports
//! (`transport`). `testing` adds the conformance suites (`testing`) of the storage and network
//! traits — a builder trait, `test_all` and the single cases each — to run against any
//! implementation, and the simulation harness (`simulation`); purely additive, it changes no
//! behaviour. `never-in-production` must **never be enabled in production**: test-only
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
//! ## Tutorial: a whole ensemble by hand with [`PeerCore`](peer::PeerCore)
//!
//! [`peer::PeerCore`] is a whole server — election, discovery, synchronisation, broadcast,
//! the leader's and the learner's roles — as one state machine: inputs in
//! ([`peer::PeerInput`]), actions out ([`peer::PeerAction`]), time passed in. Here we are the
//! embedder of three of them: we carry their messages (in order, at once), keep their logs in
//! a `Vec`, and move a millisecond counter. They elect server 3, commit a write, lose server 3,
//! and elect server 2, which commits the next write in epoch 2.
//!
//! ```
//! use std::collections::VecDeque;
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//!
//! use bytes::Bytes;
//! use zab_core::discovery::Timing;
//! use zab_core::packet::QuorumPacket;
//! use zab_core::peer::{PeerAction, PeerConfig, PeerCore, PeerInput};
//! use zab_core::store::PersistedEpochs;
//! use zab_core::txnlog::Txn;
//! use zab_core::{LearnerType, Notification, QuorumMaj, ServerId, ServerState, Zxid};
//!
//! /// One server: its core, and the log and state machine we keep for it.
//! struct Server { core: PeerCore, log: Vec<Txn>, applied: Vec<Txn>, alive: bool }
//!
//! enum Msg { Vote(Notification), Packet(QuorumPacket) }
//! /// What is in flight: (from, to, message), delivered in order.
//! type Wire = VecDeque<(ServerId, ServerId, Msg)>;
//!
//! /// Carries out a server's actions in order, as `PeerAction`'s contract asks. Our `Vec`
//! /// log is "durable" at once, so we report each append durable right away.
//! fn carry_out(now: Instant, s: &mut Server, wire: &mut Wire) {
//!     let me = s.core.my_id();
//!     while let Some(action) = s.core.poll_action() {
//!         match action {
//!             PeerAction::SendNotification { to, notification } => {
//!                 wire.push_back((me, to, Msg::Vote(notification)))
//!             }
//!             PeerAction::Send { to, packet } => wire.push_back((me, to, Msg::Packet(packet))),
//!             PeerAction::Append(txns) => {
//!                 let last = txns.last().unwrap().zxid;
//!                 s.log.extend(txns);
//!                 s.core.handle(now, PeerInput::LogDurable(last)); // "fsynced"
//!             }
//!             PeerAction::Apply(t) => s.applied.push(t),
//!             PeerAction::CommitLogged(z) => {
//!                 let done = s.applied.last().map_or(Zxid::ZERO, |t| t.zxid);
//!                 let newly = s.log.iter().filter(|t| t.zxid > done && t.zxid <= z);
//!                 s.applied.extend(newly.cloned().collect::<Vec<_>>());
//!             }
//!             PeerAction::Truncate(z) => s.log.retain(|t| t.zxid <= z),
//!             PeerAction::LoadHistory { .. } => {
//!                 // The whole log (the core keeps the newest `max`); fewer than that are ever
//!                 // written here, so no learner is synced from the log (`ReadLog`).
//!                 let committed = s.log.clone();
//!                 let history = PeerInput::History { base: Zxid::ZERO, committed };
//!                 s.core.handle(now, history);
//!             }
//!             // The epochs live in the core's memory here (nobody restarts); connecting,
//!             // closing, syncing a log and status reports need nothing from us.
//!             _ => {}
//!         }
//!     }
//! }
//!
//! /// Delivers everything in flight (and what it causes) between live servers.
//! fn deliver(now: Instant, servers: &mut [Server], wire: &mut Wire) {
//!     while let Some((from, to, msg)) = wire.pop_front() {
//!         if !servers[from.0 as usize - 1].alive || !servers[to.0 as usize - 1].alive {
//!             continue;
//!         }
//!         let s = &mut servers[to.0 as usize - 1];
//!         let input = match msg {
//!             Msg::Vote(notification) => PeerInput::Notification { from, notification },
//!             Msg::Packet(packet) => PeerInput::Packet { from, packet },
//!         };
//!         s.core.handle(now, input);
//!         carry_out(now, s, wire);
//!     }
//! }
//!
//! /// Moves the clock to `until` ms in 10 ms steps, ticking every server whose deadline came.
//! fn run(ms: &mut u64, until: u64, t0: Instant, servers: &mut [Server], wire: &mut Wire) {
//!     while *ms < until {
//!         *ms += 10;
//!         let now = t0 + Duration::from_millis(*ms);
//!         for i in 0..servers.len() {
//!             let due = servers[i].core.next_deadline().is_some_and(|d| d <= now);
//!             if servers[i].alive && due {
//!                 servers[i].core.handle(now, PeerInput::Tick);
//!                 carry_out(now, &mut servers[i], wire);
//!             }
//!         }
//!         deliver(now, servers, wire);
//!     }
//! }
//!
//! let quorum = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
//! let timing = Timing::new(Duration::from_millis(100), 10, 5); // tickTime, initLimit, syncLimit
//! let mut servers: Vec<Server> = (1..=3)
//!     .map(|sid| {
//!         let cfg = PeerConfig::new(ServerId(sid), LearnerType::Participant, quorum.clone())
//!             .with_timing(timing);
//!         // A fresh server: epochs 0, empty log, nothing applied.
//!         let core = PeerCore::new(cfg, PersistedEpochs::default())
//!             .with_log(Zxid::ZERO, Zxid::ZERO);
//!         Server { core, log: Vec::new(), applied: Vec::new(), alive: true }
//!     })
//!     .collect();
//! let t0 = Instant::now(); // any instant: the cores never read a clock
//! let (mut ms, mut wire) = (0u64, Wire::new());
//!
//! // Start every server and tell it its election connections are up: a server starts its
//! // first round once every voter is connected (or its connect grace ran out).
//! for (i, s) in servers.iter_mut().enumerate() {
//!     s.core.handle(t0, PeerInput::Start);
//!     for peer in (1..=3).filter(|p| *p != i as i64 + 1) {
//!         s.core.handle(t0, PeerInput::ElectionConnected(ServerId(peer)));
//!     }
//!     carry_out(t0, s, &mut wire);
//! }
//! deliver(t0, &mut servers, &mut wire);
//! run(&mut ms, 100, t0, &mut servers, &mut wire);
//!
//! // Elected: equal (empty) histories, so the largest id leads; epoch 1 is established.
//! let leader = servers[2].core.status();
//! assert!(leader.is_established_leader());
//! assert_eq!((leader.leader, leader.epoch), (Some(ServerId(3)), Some(1)));
//! for s in &servers[..2] {
//!     assert_eq!(s.core.status().state, ServerState::Following);
//! }
//!
//! // Propose on the leader: it logs and sends PROPOSAL; the followers log and ACK (only
//! // after we reported their append durable); a quorum of ACKs commits it everywhere.
//! let now = t0 + Duration::from_millis(ms);
//! servers[2].core.handle(now, PeerInput::Write(Bytes::from_static(b"x=1")));
//! carry_out(now, &mut servers[2], &mut wire);
//! deliver(now, &mut servers, &mut wire);
//! for s in &servers {
//!     assert_eq!(s.applied, [Txn::new(Zxid::new(1, 1), "x=1")]);
//! }
//!
//! // Kill the leader. The followers hear nothing more; after syncLimit they go LOOKING and
//! // elect server 2 (the same history as server 1, a larger id), which leads epoch 2.
//! servers[2].alive = false;
//! let now = t0 + Duration::from_millis(ms);
//! for s in &mut servers[..2] {
//!     s.core.handle(now, PeerInput::ElectionDisconnected(ServerId(3)));
//!     carry_out(now, s, &mut wire);
//! }
//! let until = ms + 2_000;
//! run(&mut ms, until, t0, &mut servers, &mut wire);
//! let leader = servers[1].core.status();
//! assert!(leader.is_established_leader());
//! assert_eq!((leader.leader, leader.epoch), (Some(ServerId(2)), Some(2)));
//! assert_eq!(servers[0].core.status().leader, Some(ServerId(2)));
//!
//! // The committed write survived; the next one commits in epoch 2 on both.
//! let now = t0 + Duration::from_millis(ms);
//! servers[1].core.handle(now, PeerInput::Write(Bytes::from_static(b"x=2")));
//! carry_out(now, &mut servers[1], &mut wire);
//! deliver(now, &mut servers, &mut wire);
//! for s in &servers[..2] {
//!     let zxids: Vec<Zxid> = s.applied.iter().map(|t| t.zxid).collect();
//!     assert_eq!(zxids, [Zxid::new(1, 1), Zxid::new(2, 1)]);
//! }
//! ```
//!
//! The contract the embedder follows (here trivially: everything is carried out in order and
//! the log is durable at once) is on [`peer::PeerAction`]: what must be durable before what
//! may be sent, and in what order. The tokio [`peer::QuorumPeer`] is the same loop over real
//! sockets, files and timers.
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
pub mod packet;
pub mod peer;
pub mod quorum;
#[cfg(feature = "testing")]
pub mod simulation;
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
