//! [`LeaderBroadcast`]: the leader's side of atomic broadcast (Z2, Zab's phase 3 as ZooKeeper's `Leader` runs it).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use tracing::{debug, warn};

use super::{BroadcastAction, BroadcastError};
use crate::packet::{packet_type, QuorumPacket};
use crate::peer::RequestValidator;
use crate::quorum::QuorumVerifier;
use crate::txnlog::Txn;
use crate::types::ServerId;
use crate::zxid::Zxid;

#[derive(Debug)]
struct Outstanding {
    txn: Txn,
    acks: BTreeSet<ServerId>,
}

/// The leader of an established epoch: assigns zxids, proposes, counts acknowledgements and
/// commits in zxid order.
///
/// The driver adds each learner once it acknowledged NEWLEADER ([`add_learner`]), carries out
/// every [`BroadcastAction`] in order, and reports its own log writes with [`local_logged`].
///
/// [`add_learner`]: LeaderBroadcast::add_learner
/// [`local_logged`]: LeaderBroadcast::local_logged
#[derive(Debug)]
pub struct LeaderBroadcast {
    me: ServerId,
    quorum: Arc<dyn QuorumVerifier>,
    epoch: i64,
    last_proposed: Zxid,
    last_committed: Zxid,
    followers: BTreeSet<ServerId>,
    observers: BTreeSet<ServerId>,
    outstanding: VecDeque<Outstanding>,
    barriers: Vec<(Zxid, ServerId)>,
    actions: VecDeque<BroadcastAction>,
    left: bool,
    validator: Option<RequestValidator>,
}

impl LeaderBroadcast {
    /// A leader of `epoch` whose history (all committed once the epoch is established) ends at
    /// `last_zxid`. Its first proposal is `epoch << 32 | 1`.
    pub fn new(me: ServerId, quorum: Arc<dyn QuorumVerifier>, epoch: i64, last_zxid: Zxid) -> Self {
        Self::starting_at(me, quorum, epoch, last_zxid, Zxid::new(epoch, 0))
    }

    /// As [`new`](Self::new), with the zxid counter continuing after `last_proposed` (which
    /// must be in `epoch`). Lets tests reach the counter's end.
    pub fn starting_at(
        me: ServerId,
        quorum: Arc<dyn QuorumVerifier>,
        epoch: i64,
        last_zxid: Zxid,
        last_proposed: Zxid,
    ) -> Self {
        Self {
            me,
            quorum,
            epoch,
            last_proposed,
            last_committed: last_zxid,
            followers: BTreeSet::new(),
            observers: BTreeSet::new(),
            outstanding: VecDeque::new(),
            barriers: Vec::new(),
            actions: VecDeque::new(),
            left: false,
            validator: None,
        }
    }

    /// Checks every write forwarded by a learner (REQUEST) with `validator` before proposing
    /// it; a refused one is dropped (see
    /// [`PeerConfig::request_validator`](crate::peer::PeerConfig::request_validator)).
    pub fn set_request_validator(&mut self, validator: Option<RequestValidator>) {
        self.validator = validator;
    }

    /// Whether the validator, if any, accepts `data`.
    pub fn accepts(&self, data: &[u8]) -> bool {
        match self.validator.map(|v| v(data)) {
            Some(Err(reason)) => {
                warn!(
                    len = data.len(),
                    reason, "write refused by the request validator"
                );
                false
            }
            _ => true,
        }
    }

    /// The epoch led.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// The last committed zxid.
    pub fn last_committed(&self) -> Zxid {
        self.last_committed
    }

    /// The last proposed zxid (what PINGs carry).
    pub fn last_proposed(&self) -> Zxid {
        self.last_proposed
    }

    /// Proposals not yet committed, oldest first.
    pub fn outstanding(&self) -> Vec<Zxid> {
        self.outstanding.iter().map(|o| o.txn.zxid).collect()
    }

    /// Adds a learner that acknowledged NEWLEADER. A follower is sent every proposal still
    /// outstanding (it must acknowledge them to count); an observer learns commits by INFORM.
    pub fn add_learner(&mut self, sid: ServerId) {
        if self.quorum.is_voter(sid) {
            self.followers.insert(sid);
            let pending: Vec<Txn> = self.outstanding.iter().map(|o| o.txn.clone()).collect();
            for t in pending {
                self.send(sid, proposal(&t));
            }
        } else {
            self.observers.insert(sid);
        }
    }

    /// The followers in the broadcast (synced: they acknowledged NEWLEADER).
    pub fn followers(&self) -> &BTreeSet<ServerId> {
        &self.followers
    }

    /// The observers in the broadcast.
    pub fn observers(&self) -> &BTreeSet<ServerId> {
        &self.observers
    }

    /// `sync` barriers of learners waiting for outstanding proposals to commit.
    pub fn pending_barriers(&self) -> usize {
        self.barriers.len()
    }

    /// Forgets a learner that left. Its acknowledgements already counted stay counted.
    pub fn remove_learner(&mut self, sid: ServerId) {
        self.followers.remove(&sid);
        self.observers.remove(&sid);
        self.barriers.retain(|(_, s)| *s != sid);
    }

    fn send(&mut self, to: ServerId, packet: QuorumPacket) {
        self.actions.push_back(BroadcastAction::Send { to, packet });
    }

    /// Z2: orders a write. Assigns the next zxid, asks the driver to log it and sends PROPOSAL
    /// to every follower. When the counter would reach `0xffffffff` the leader leaves its
    /// epoch instead (`Abandon`), as ZooKeeper does on `XidRolloverException`.
    pub fn propose(&mut self, data: Bytes) -> Result<Zxid, BroadcastError> {
        if self.left {
            return Err(BroadcastError::NotLeading);
        }
        let counter = self.last_proposed.counter();
        if counter >= u32::MAX - 1 {
            self.left = true;
            self.actions.push_back(BroadcastAction::Abandon {
                reason: "zxid counter rollover: a new epoch is needed",
            });
            return Err(BroadcastError::Rollover { epoch: self.epoch });
        }
        let zxid = Zxid::new(self.epoch, counter + 1);
        self.last_proposed = zxid;
        let txn = Txn::new(zxid, data);
        self.actions
            .push_back(BroadcastAction::Log(vec![txn.clone()]));
        let followers: Vec<ServerId> = self.followers.iter().copied().collect();
        for f in followers {
            self.send(f, proposal(&txn));
        }
        self.outstanding.push_back(Outstanding {
            txn,
            acks: BTreeSet::new(),
        });
        debug!(zxid = %zxid, "proposed");
        Ok(zxid)
    }

    /// The driver made every proposal up to `zxid` durable in the leader's own log: the
    /// leader's acknowledgement counts towards the quorum.
    pub fn local_logged(&mut self, zxid: Zxid) {
        let me = self.me;
        for o in self.outstanding.iter_mut().filter(|o| o.txn.zxid <= zxid) {
            o.acks.insert(me);
        }
        self.try_commit();
    }

    /// A packet from a learner: ACK of a proposal, a forwarded write (REQUEST), a `sync`
    /// barrier (SYNC). Anything else is ignored here.
    pub fn handle_packet(&mut self, from: ServerId, p: QuorumPacket) {
        match p.kind {
            packet_type::ACK => {
                // ACKs of NEWLEADER / UPTODATE (counter 0) are not proposal acks.
                if Zxid(p.zxid).counter() == 0 || !self.followers.contains(&from) {
                    return;
                }
                if let Some(o) = self.outstanding.iter_mut().find(|o| o.txn.zxid.0 == p.zxid) {
                    o.acks.insert(from);
                }
                self.try_commit();
            }
            packet_type::REQUEST => {
                let data = p.data.unwrap_or_default();
                if !self.accepts(&data) {
                    return;
                }
                if let Err(e) = self.propose(data) {
                    debug!(sid = from.0, "forwarded write not proposed: {e}");
                }
            }
            packet_type::SYNC => {
                if self.outstanding.is_empty() {
                    let z = self.last_committed;
                    self.send(from, QuorumPacket::new(packet_type::SYNC, z.0));
                } else {
                    self.barriers.push((self.last_proposed, from));
                }
            }
            _ => {}
        }
    }

    /// Commits, in zxid order, every oldest proposal a quorum acknowledged: COMMIT to
    /// followers, INFORM to observers, apply locally, then release `sync` barriers.
    fn try_commit(&mut self) {
        while let Some(o) = self.outstanding.front() {
            if !self.quorum.contains_quorum(&o.acks) {
                break;
            }
            let Some(o) = self.outstanding.pop_front() else {
                break;
            };
            let t = o.txn;
            self.last_committed = t.zxid;
            let followers: Vec<ServerId> = self.followers.iter().copied().collect();
            for f in followers {
                self.send(f, QuorumPacket::new(packet_type::COMMIT, t.zxid.0));
            }
            let observers: Vec<ServerId> = self.observers.iter().copied().collect();
            for ob in observers {
                self.send(
                    ob,
                    QuorumPacket::with_data(packet_type::INFORM, t.zxid.0, t.data.clone()),
                );
            }
            debug!(zxid = %t.zxid, "committed");
            self.actions.push_back(BroadcastAction::Apply(t));
        }
        let committed = self.last_committed;
        let (done, waiting): (Vec<_>, Vec<_>) =
            self.barriers.drain(..).partition(|(z, _)| *z <= committed);
        self.barriers = waiting;
        for (_, sid) in done {
            self.send(sid, QuorumPacket::new(packet_type::SYNC, committed.0));
        }
    }

    /// The next action for the driver.
    #[must_use = "an action not carried out is a lost send, persist or apply"]
    pub fn poll_action(&mut self) -> Option<BroadcastAction> {
        self.actions.pop_front()
    }
}

fn proposal(t: &Txn) -> QuorumPacket {
    QuorumPacket::with_data(packet_type::PROPOSAL, t.zxid.0, t.data.clone())
}
