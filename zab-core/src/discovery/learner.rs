//! `LearnerDiscovery`: a follower's (or observer's) side of Zab discovery and heartbeats, as a
//! sans-IO state machine (Zab's phase 1, ZooKeeper's `Learner.registerWithLeader`; Z1, Z6).
//!
//! FOLLOWERINFO(acceptedEpoch) → LEADERINFO(e): refuse `e < acceptedEpoch` (Z1), persist
//! `acceptedEpoch = e` if larger, answer ACKEPOCH(currentEpoch, lastZxid) → DIFF / TRUNC / SNAP,
//! transactions, NEWLEADER: persist them, then `currentEpoch = e`, then ACK (ZOOKEEPER-3911) →
//! UPTODATE: ACK, established. Synchronisation and broadcast packets are handed to a
//! [`LearnerBroadcast`]. PINGs are echoed. A leader silent for `initLimit` ticks (before
//! UPTODATE) or `syncLimit` ticks (after) is abandoned.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::{debug, info, warn};

use super::action::{DiscoveryAction, Timing};
use crate::broadcast::{BroadcastAction, LearnerBroadcast, LearnerOptions};
use crate::packet::QuorumPacket;
use crate::packet::{epoch_zxid, zxid_epoch};
use crate::packet::{i32_payload, packet_type, LearnerInfo, LEARNER_PROTOCOL_VERSION};
use crate::store::PersistedEpochs;
use crate::types::ServerId;
use crate::zxid::Zxid;

/// Connection attempts before giving up on a leader that does not answer (ZooKeeper tries 5
/// times, 100 ms apart).
const CONNECT_TRIES: u32 = 5;
const CONNECT_RETRY: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    WaitingLeaderInfo,
    WaitingNewLeader,
    WaitingUpToDate,
    Established,
    Abandoned,
}

/// A learner's discovery and heartbeat state machine.
#[derive(Debug)]
pub struct LearnerDiscovery {
    me: ServerId,
    leader: ServerId,
    observer: bool,
    config_version: i64,
    own: PersistedEpochs,
    timing: Timing,
    phase: Phase,
    new_epoch: i64,
    heard_anything: bool,
    tries: u32,
    retry_at: Option<Instant>,
    init_deadline: Instant,
    last_heard: Instant,
    actions: VecDeque<DiscoveryAction>,
    zab: Option<LearnerBroadcast>,
    zab_options: LearnerOptions,
}

impl LearnerDiscovery {
    /// Starts following (or observing) `leader` at `now`: sends FOLLOWERINFO / OBSERVERINFO.
    pub fn new(
        now: Instant,
        me: ServerId,
        leader: ServerId,
        observer: bool,
        config_version: i64,
        own: PersistedEpochs,
        timing: Timing,
    ) -> Self {
        let mut d = Self {
            me,
            leader,
            observer,
            config_version,
            own,
            timing,
            phase: Phase::WaitingLeaderInfo,
            new_epoch: -1,
            heard_anything: false,
            tries: 1,
            retry_at: None,
            init_deadline: now + timing.init_timeout(),
            last_heard: now,
            actions: VecDeque::new(),
            zab: None,
            zab_options: LearnerOptions::default(),
        };
        d.send_info();
        d
    }

    /// The leader followed.
    pub fn leader(&self) -> ServerId {
        self.leader
    }

    /// Whether UPTODATE was received.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established
    }

    fn send_info(&mut self) {
        let kind = if self.observer {
            packet_type::OBSERVERINFO
        } else {
            packet_type::FOLLOWERINFO
        };
        let info = LearnerInfo {
            sid: self.me.0,
            protocol_version: LEARNER_PROTOCOL_VERSION,
            config_version: self.config_version,
        };
        self.send(QuorumPacket::with_data(
            kind,
            epoch_zxid(self.own.accepted_epoch),
            info.encode(),
        ));
    }

    fn send(&mut self, packet: QuorumPacket) {
        self.actions.push_back(DiscoveryAction::Send {
            to: self.leader,
            packet,
        });
    }

    fn abandon(&mut self, reason: &'static str) {
        if self.phase == Phase::Abandoned {
            return;
        }
        warn!(
            sid = self.me.0,
            leader = self.leader.0,
            reason,
            "leaving the leader, going LOOKING"
        );
        self.phase = Phase::Abandoned;
        self.actions.push_back(DiscoveryAction::Close(self.leader));
        self.actions.push_back(DiscoveryAction::Abandon { reason });
    }

    /// A quorum packet from the leader arrived.
    pub fn handle_packet(&mut self, now: Instant, from: ServerId, p: QuorumPacket) {
        if from != self.leader || self.phase == Phase::Abandoned {
            return;
        }
        self.heard_anything = true;
        self.retry_at = None;
        self.last_heard = now;
        if self.phase == Phase::WaitingNewLeader {
            // While the sync data streams in, initLimit bounds the wait for each packet, as
            // ZooKeeper's learner reads its sync with a socket timeout of initLimit ticks: a
            // long DIFF paced by the leader's connection is not cut short.
            self.init_deadline = self.init_deadline.max(now + self.timing.init_timeout());
        }
        match (self.phase, p.kind) {
            (Phase::WaitingLeaderInfo, packet_type::LEADERINFO) => {
                let e = zxid_epoch(p.zxid);
                if e < self.own.accepted_epoch {
                    // Z1: never accept an epoch below the one we accepted.
                    self.abandon("leader proposed an epoch below our acceptedEpoch");
                    return;
                }
                let cur = if e > self.own.accepted_epoch {
                    self.own.accepted_epoch = e;
                    self.actions
                        .push_back(DiscoveryAction::PersistAcceptedEpoch(e));
                    self.own.current_epoch
                } else {
                    -1
                };
                self.new_epoch = e;
                debug!(sid = self.me.0, epoch = e, "acknowledging new epoch");
                let cur = i32::try_from(cur).unwrap_or(i32::MAX);
                self.send(QuorumPacket::with_data(
                    packet_type::ACKEPOCH,
                    self.own.last_zxid,
                    i32_payload(cur),
                ));
                self.phase = Phase::WaitingNewLeader;
                self.zab = Some(LearnerBroadcast::new(
                    self.leader,
                    self.observer,
                    e,
                    Zxid(self.own.last_zxid),
                    self.zab_options,
                ));
            }
            (
                Phase::WaitingNewLeader | Phase::WaitingUpToDate | Phase::Established,
                packet_type::DIFF
                | packet_type::TRUNC
                | packet_type::SNAP
                | packet_type::PROPOSAL
                | packet_type::COMMIT
                | packet_type::NEWLEADER
                | packet_type::UPTODATE
                | packet_type::INFORM
                | packet_type::SYNC,
            ) => {
                let broadcast = matches!(
                    p.kind,
                    packet_type::PROPOSAL
                        | packet_type::COMMIT
                        | packet_type::INFORM
                        | packet_type::SYNC
                ) && self.phase != Phase::WaitingNewLeader;
                if broadcast && !self.zab_options.follow_broadcast {
                    debug!(sid = self.me.0, kind = p.kind, "broadcast packet ignored");
                    return;
                }
                if let Some(z) = self.zab.as_mut() {
                    z.handle_packet(p);
                }
                self.pump();
            }
            (_, packet_type::PING) => {
                // Echo with an empty session-touch table, as a ZooKeeper learner does.
                self.send(QuorumPacket::with_data(
                    packet_type::PING,
                    p.zxid,
                    Bytes::new(),
                ));
            }
            (phase, kind) => debug!(sid = self.me.0, ?phase, kind, "quorum packet ignored"),
        }
    }

    /// The quorum connection to the leader closed (or could not be opened).
    pub fn connection_lost(&mut self, now: Instant) {
        if self.phase == Phase::Abandoned {
            return;
        }
        if !self.heard_anything && self.tries < CONNECT_TRIES {
            self.tries += 1;
            self.retry_at = Some(now + CONNECT_RETRY);
            return;
        }
        self.abandon("quorum connection to the leader lost");
    }

    /// The server we follow accepted our quorum connection and closed it without a word: it
    /// does not lead (it follows someone else). Give up at once instead of retrying.
    pub fn refused(&mut self) {
        self.abandon("the chosen leader refused us: it does not lead");
    }

    /// Time passed: retry the connection, or give up on a silent leader (Z6).
    pub fn handle_tick(&mut self, now: Instant) {
        if self.phase == Phase::Abandoned {
            return;
        }
        if let Some(at) = self.retry_at {
            if now >= at {
                self.retry_at = None;
                self.send_info();
            }
        }
        if self.phase == Phase::Established {
            if now.saturating_duration_since(self.last_heard) >= self.timing.sync_timeout() {
                self.abandon("leader silent for syncLimit ticks");
            }
        } else if now >= self.init_deadline {
            self.abandon("no UPTODATE within initLimit ticks");
        }
    }

    /// When [`handle_tick`](Self::handle_tick) must next be called.
    pub fn next_deadline(&self) -> Option<Instant> {
        let limit = match self.phase {
            Phase::Abandoned => return None,
            Phase::Established => self.last_heard + self.timing.sync_timeout(),
            _ => self.init_deadline,
        };
        Some(self.retry_at.map_or(limit, |r| r.min(limit)))
    }

    /// Options for the synchronisation and broadcast that follow discovery.
    pub fn set_broadcast_options(&mut self, options: LearnerOptions) {
        self.zab_options = options;
    }

    /// Forwards a client write to the leader (REQUEST), once established.
    pub fn submit(&mut self, data: Bytes) {
        if let Some(z) = self.zab.as_mut() {
            z.submit(data);
        }
        self.pump();
    }

    /// Asks the leader for a `sync` barrier, once established.
    pub fn sync(&mut self) {
        if let Some(z) = self.zab.as_mut() {
            z.sync();
        }
        self.pump();
    }

    /// Moves the synchronisation / broadcast actions into our queue, in order.
    fn pump(&mut self) {
        while let Some(a) = self.zab.as_mut().and_then(LearnerBroadcast::poll_action) {
            match a {
                BroadcastAction::Send { packet, .. } => self.send(packet),
                BroadcastAction::PersistCurrentEpoch(e) => {
                    self.own.current_epoch = e;
                    self.actions
                        .push_back(DiscoveryAction::PersistCurrentEpoch(e));
                    self.phase = Phase::WaitingUpToDate;
                }
                BroadcastAction::Established { epoch } => {
                    self.phase = Phase::Established;
                    info!(
                        sid = self.me.0,
                        leader = self.leader.0,
                        epoch,
                        "following: epoch established"
                    );
                    self.actions
                        .push_back(DiscoveryAction::Established { epoch });
                }
                BroadcastAction::Abandon { reason } => {
                    self.zab = None;
                    self.abandon(reason);
                }
                other => self.actions.push_back(DiscoveryAction::Zab(other)),
            }
        }
    }

    /// The next action, if any.
    #[must_use = "an action not carried out is a lost send, persist or apply"]
    pub fn poll_action(&mut self) -> Option<DiscoveryAction> {
        self.actions.pop_front()
    }
}
