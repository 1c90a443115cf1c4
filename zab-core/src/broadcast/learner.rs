//! [`LearnerBroadcast`]: a follower or observer through synchronisation and broadcast
//! (Zab's phases 2 and 3, ZooKeeper's `Learner.syncWithLeader` and `Follower.followLeader`).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::{BroadcastAction, SNAP_HEADER_LEN};
use crate::packet::{epoch_zxid, packet_type, zxid_epoch, QuorumPacket};
use crate::txnlog::{Snapshot, Txn};
use crate::types::ServerId;
use crate::zxid::Zxid;

/// Options of a [`LearnerBroadcast`]: [`LearnerOptions::default`] and the `with_*` setters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LearnerOptions {
    /// Whether the learner's discovery state machine (`discovery::LearnerDiscovery`) hands
    /// the leader's broadcast traffic after NEWLEADER (PROPOSAL, COMMIT, INFORM, SYNC) to its
    /// [`LearnerBroadcast`]. Off by default: a driver without a transaction log must not
    /// acknowledge writes it does not keep, so it ignores them. A [`LearnerBroadcast`] used
    /// directly always handles them.
    pub follow_broadcast: bool,
    /// A planted bug, off unless set by the `never-in-production` feature's
    /// `with_broken_ack_newleader_before_persist`.
    ack_newleader_before_persist: bool,
}

impl LearnerOptions {
    /// These options with [`follow_broadcast`](Self::follow_broadcast) set to `on`.
    #[must_use]
    pub fn with_follow_broadcast(mut self, on: bool) -> Self {
        self.follow_broadcast = on;
        self
    }

    /// **Never in production** (feature `never-in-production`), a planted bug: these options
    /// with the learner acknowledging NEWLEADER before persisting the synced transactions and
    /// `currentEpoch` (the order ZOOKEEPER-3911 fixed). A crash right after the
    /// acknowledgement then loses transactions the leader counts as committed. Exists so that
    /// tests can show the crash schedules catch it.
    #[cfg(feature = "never-in-production")]
    #[must_use]
    pub fn with_broken_ack_newleader_before_persist(mut self) -> Self {
        self.ack_newleader_before_persist = true;
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for DIFF / TRUNC / SNAP.
    AwaitingPlan,
    /// Receiving the chunks of a SNAP (see `snap_packets`); nothing is restored before the
    /// last one.
    ReceivingSnap,
    /// Receiving the sync PROPOSAL / COMMIT pairs until NEWLEADER.
    Syncing,
    /// NEWLEADER acknowledged; waiting for UPTODATE (proposals are already broadcast ones).
    Synced,
    /// UPTODATE received: serving.
    Broadcast,
    /// Gave up.
    Left,
}

/// A learner (follower or observer) after its ACKEPOCH: synchronisation, then broadcast.
#[derive(Debug)]
pub struct LearnerBroadcast {
    leader: ServerId,
    observer: bool,
    epoch: i64,
    options: LearnerOptions,
    phase: Phase,
    /// Last zxid logged or queued for logging.
    last_logged: Zxid,
    /// Sync proposals received, not yet logged (logged on NEWLEADER).
    sync_pending: Vec<Txn>,
    /// How many of `sync_pending` were committed during sync (a prefix).
    sync_committed: usize,
    /// Logged proposals waiting for their COMMIT, oldest first.
    uncommitted: VecDeque<Txn>,
    /// The SNAP being received: its zxid, its announced size and the bytes so far.
    snap: Option<SnapInProgress>,
    actions: VecDeque<BroadcastAction>,
}

/// A chunked SNAP being assembled. The chunks are kept as received (memory grows only with
/// what arrived, never with what the header claims) and copied once into the snapshot's
/// buffer when the last one arrived.
#[derive(Debug)]
struct SnapInProgress {
    zxid: Zxid,
    size: u64,
    received: u64,
    chunks: Vec<Bytes>,
}

impl SnapInProgress {
    fn assemble(self) -> Snapshot {
        let mut data = BytesMut::with_capacity(usize::try_from(self.received).unwrap_or(0));
        for c in self.chunks {
            data.extend_from_slice(&c);
        }
        Snapshot {
            zxid: self.zxid,
            data: data.freeze(),
        }
    }
}

impl LearnerBroadcast {
    /// A learner of `leader` in the new `epoch`, whose log ends at `last_logged`.
    pub fn new(
        leader: ServerId,
        observer: bool,
        epoch: i64,
        last_logged: Zxid,
        options: LearnerOptions,
    ) -> Self {
        Self {
            leader,
            observer,
            epoch,
            options,
            phase: Phase::AwaitingPlan,
            last_logged,
            sync_pending: Vec::new(),
            sync_committed: 0,
            uncommitted: VecDeque::new(),
            snap: None,
            actions: VecDeque::new(),
        }
    }

    /// The leader.
    pub fn leader(&self) -> ServerId {
        self.leader
    }

    /// Whether UPTODATE arrived.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Broadcast
    }

    /// The last zxid this learner logged (or asked to log).
    pub fn last_logged(&self) -> Zxid {
        self.last_logged
    }

    fn send(&mut self, packet: QuorumPacket) {
        let to = self.leader;
        self.actions.push_back(BroadcastAction::Send { to, packet });
    }

    fn abandon(&mut self, reason: &'static str) {
        if self.phase != Phase::Left {
            self.phase = Phase::Left;
            self.actions.push_back(BroadcastAction::Abandon { reason });
        }
    }

    /// Forwards a client write to the leader (REQUEST). Reads are served locally.
    pub fn submit(&mut self, data: Bytes) {
        if self.phase == Phase::Broadcast {
            self.send(QuorumPacket::with_data(packet_type::REQUEST, -1, data));
        }
    }

    /// Asks for a `sync` barrier: [`BroadcastAction::SyncDone`] follows once every write the
    /// leader committed before answering has been applied here.
    pub fn sync(&mut self) {
        if self.phase == Phase::Broadcast {
            self.send(QuorumPacket::new(packet_type::SYNC, -1));
        }
    }

    /// Restores the SNAP being received once all its bytes arrived.
    fn finish_snap_if_complete(&mut self) {
        if self.snap.as_ref().is_some_and(|s| s.received == s.size) {
            if let Some(s) = self.snap.take() {
                self.restore(s.assemble());
            }
        }
    }

    fn restore(&mut self, snapshot: Snapshot) {
        self.last_logged = snapshot.zxid;
        self.actions
            .push_back(BroadcastAction::RestoreSnapshot(snapshot));
        self.phase = Phase::Syncing;
    }

    /// A packet from the leader.
    pub fn handle_packet(&mut self, p: QuorumPacket) {
        let zxid = Zxid(p.zxid);
        match (self.phase, p.kind) {
            (Phase::Left, _) => {}
            (Phase::AwaitingPlan, packet_type::DIFF) => {
                // Our log up to the leader's DIFF point is part of its committed history, even
                // the proposals whose COMMIT we missed before this sync.
                self.commit_logged(zxid.min(self.last_logged));
                self.phase = Phase::Syncing;
            }
            (Phase::AwaitingPlan, packet_type::TRUNC) => {
                if zxid > self.last_logged {
                    return self.abandon("TRUNC beyond our log");
                }
                self.actions.push_back(BroadcastAction::Truncate(zxid));
                self.last_logged = zxid;
                self.commit_logged(zxid);
                self.phase = Phase::Syncing;
            }
            (Phase::AwaitingPlan, packet_type::SNAP) => {
                // Ours announces the snapshot's size, then its chunks follow; ZooKeeper's
                // (null data, raw body after it) cannot be restored here. A learner that keeps
                // a log would lose its history to an empty state: it refuses. One without
                // (following a real ZooKeeper leader for the election only) goes on, as it
                // ignores the data anyway.
                let header = match p.data {
                    Some(d) => d,
                    None if self.options.follow_broadcast => {
                        return self.abandon("SNAP without a snapshot in its data");
                    }
                    None => {
                        return self.restore(Snapshot {
                            zxid,
                            data: Bytes::new(),
                        })
                    }
                };
                let Ok(size) = <[u8; SNAP_HEADER_LEN]>::try_from(header.as_ref()) else {
                    return self.abandon("malformed SNAP header");
                };
                let Ok(size) = u64::try_from(i64::from_be_bytes(size)) else {
                    return self.abandon("negative SNAP size");
                };
                self.snap = Some(SnapInProgress {
                    zxid,
                    size,
                    received: 0,
                    chunks: Vec::new(),
                });
                self.phase = Phase::ReceivingSnap;
                self.finish_snap_if_complete();
            }
            (Phase::ReceivingSnap, packet_type::SNAP) => {
                let Some(s) = self.snap.as_mut() else {
                    return self.abandon("SNAP chunk without a header");
                };
                let chunk = p.data.unwrap_or_default();
                if zxid != s.zxid || chunk.is_empty() {
                    return self.abandon("SNAP chunk of another snapshot");
                }
                let received = s.received.saturating_add(chunk.len() as u64);
                if received > s.size {
                    return self.abandon("SNAP chunks beyond the announced size");
                }
                s.received = received;
                s.chunks.push(chunk);
                self.finish_snap_if_complete();
            }
            (Phase::ReceivingSnap, _) => {
                self.abandon("packet before the SNAP's last chunk");
            }
            (Phase::Syncing, packet_type::PROPOSAL) => {
                if zxid <= self.last_logged {
                    return self.abandon("sync proposal out of zxid order");
                }
                self.last_logged = zxid;
                self.sync_pending
                    .push(Txn::new(zxid, p.data.unwrap_or_default()));
            }
            (Phase::Syncing, packet_type::COMMIT) => {
                match self.sync_pending.get(self.sync_committed) {
                    Some(t) if t.zxid == zxid => self.sync_committed += 1,
                    _ => self.abandon("sync commit out of order"),
                }
            }
            (Phase::Syncing, packet_type::NEWLEADER) => {
                if zxid_epoch(p.zxid) != self.epoch {
                    return self.abandon("NEWLEADER for another epoch");
                }
                self.on_newleader();
            }
            (Phase::Synced, packet_type::UPTODATE) => {
                self.send(QuorumPacket::new(packet_type::ACK, epoch_zxid(self.epoch)));
                self.phase = Phase::Broadcast;
                let epoch = self.epoch;
                self.actions
                    .push_back(BroadcastAction::Established { epoch });
            }
            (Phase::Synced | Phase::Broadcast, packet_type::PROPOSAL) if !self.observer => {
                if zxid <= self.last_logged {
                    return self.abandon("proposal out of zxid order");
                }
                let t = Txn::new(zxid, p.data.unwrap_or_default());
                self.last_logged = zxid;
                // Log first: the ACK after it vouches for a durable write (Z2).
                self.actions
                    .push_back(BroadcastAction::Log(vec![t.clone()]));
                self.send(QuorumPacket::new(packet_type::ACK, zxid.0));
                self.uncommitted.push_back(t);
            }
            (Phase::Synced | Phase::Broadcast, packet_type::COMMIT) if !self.observer => {
                match self.uncommitted.front() {
                    Some(t) if t.zxid == zxid => {
                        if let Some(t) = self.uncommitted.pop_front() {
                            self.actions.push_back(BroadcastAction::Apply(t));
                        }
                    }
                    _ => self.abandon("commit out of zxid order"),
                }
            }
            (Phase::Synced | Phase::Broadcast, packet_type::INFORM) if self.observer => {
                if zxid <= self.last_logged {
                    return self.abandon("inform out of zxid order");
                }
                let t = Txn::new(zxid, p.data.unwrap_or_default());
                self.last_logged = zxid;
                self.actions
                    .push_back(BroadcastAction::Log(vec![t.clone()]));
                self.actions.push_back(BroadcastAction::Apply(t));
            }
            (Phase::Broadcast, packet_type::SYNC) => {
                self.actions.push_back(BroadcastAction::SyncDone { zxid });
            }
            // Heartbeats are the discovery layer's; anything else is out of place.
            (_, packet_type::PING) => {}
            _ => self.abandon("unexpected packet during sync or broadcast"),
        }
    }

    fn commit_logged(&mut self, zxid: Zxid) {
        if zxid > Zxid::ZERO {
            self.actions.push_back(BroadcastAction::CommitLogged(zxid));
        }
    }

    /// ZOOKEEPER-3911: persist the synced transactions, then `currentEpoch`, then ACK.
    fn on_newleader(&mut self) {
        let pending = std::mem::take(&mut self.sync_pending);
        let committed = self.sync_committed;
        self.sync_committed = 0;
        let ack = QuorumPacket::new(packet_type::ACK, epoch_zxid(self.epoch));
        if self.options.ack_newleader_before_persist {
            self.send(ack.clone());
            self.persist_synced(pending, committed);
            self.phase = Phase::Synced;
            return;
        }
        self.persist_synced(pending, committed);
        self.send(ack);
        self.phase = Phase::Synced;
    }

    fn persist_synced(&mut self, pending: Vec<Txn>, committed: usize) {
        if !pending.is_empty() {
            self.actions
                .push_back(BroadcastAction::Log(pending.clone()));
        }
        let mut rest = pending.into_iter();
        for t in rest.by_ref().take(committed) {
            self.actions.push_back(BroadcastAction::Apply(t));
        }
        self.uncommitted.extend(rest);
        self.actions
            .push_back(BroadcastAction::PersistCurrentEpoch(self.epoch));
    }

    /// The next action for the driver.
    #[must_use = "an action not carried out is a lost send, persist or apply"]
    pub fn poll_action(&mut self) -> Option<BroadcastAction> {
        self.actions.pop_front()
    }
}
