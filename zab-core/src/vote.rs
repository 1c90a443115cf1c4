//! [`Vote`], the [`Candidate`] triple the election orders, and ZooKeeper's vote order and vote
//! equality (ZooKeeper's `totalOrderPredicate` and `Vote.equals`).

use std::cmp::Ordering;

use crate::types::{ServerId, ServerState};
use crate::zxid::Zxid;

/// What a vote proposes: a leader together with *that leader's* last zxid and epoch.
///
/// Ordered lexicographically by `(peer_epoch, zxid, leader)` (Z7: "ZooKeeper compares the
/// peer epoch first"). This derived order is the fixed, transitive order of ZOOKEEPER-1419.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// The proposed leader's id.
    pub leader: ServerId,
    /// The proposed leader's last logged zxid.
    pub zxid: Zxid,
    /// The proposed leader's `currentEpoch` (how recent its history is).
    pub peer_epoch: i64,
}

impl Candidate {
    /// Builds a candidate.
    pub const fn new(leader: ServerId, zxid: Zxid, peer_epoch: i64) -> Self {
        Candidate {
            leader,
            zxid,
            peer_epoch,
        }
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.peer_epoch
            .cmp(&other.peer_epoch)
            .then(self.zxid.cmp(&other.zxid))
            .then(self.leader.cmp(&other.leader))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Which vote order the election uses. Always ZooKeeper 3.8's, except in a configuration
/// made by the `never-in-production` feature's
/// [`ElectionConfig::with_broken_pre_1419_order`](crate::ElectionConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum VoteOrder {
    /// ZooKeeper ≥ 3.4.4: lexicographic `(peer_epoch, zxid, sid)`; weight 0 never wins.
    #[default]
    ZooKeeper,
    /// The order before ZOOKEEPER-1419: the sid tie-break ignored the epoch, so the relation is
    /// not transitive (not even asymmetric) and a 5-voter election could oscillate. Exists only
    /// so tests can show that the simulator catches it; nothing selects it without the
    /// `never-in-production` feature.
    #[cfg_attr(not(feature = "never-in-production"), allow(dead_code))]
    BrokenPre1419,
}

impl VoteOrder {
    /// ZooKeeper's `totalOrderPredicate(new, cur)`: whether `new` supersedes `cur`, given the
    /// quorum weight of `new.leader`. A leader of weight 0 never supersedes anything (Z7).
    pub(crate) fn supersedes(self, new: Candidate, cur: Candidate, new_leader_weight: u64) -> bool {
        if new_leader_weight == 0 {
            return false;
        }
        match self {
            VoteOrder::ZooKeeper => new > cur,
            VoteOrder::BrokenPre1419 => broken_pre_1419(new, cur),
        }
    }
}

/// ZooKeeper's vote order (`totalOrderPredicate`, Z7): `new` wins over `cur` iff the
/// weight of `new.leader` is not zero and `(peer_epoch, zxid, leader)` of `new` is
/// lexicographically greater.
pub fn total_order_predicate(new: Candidate, cur: Candidate, new_leader_weight: u64) -> bool {
    VoteOrder::ZooKeeper.supersedes(new, cur, new_leader_weight)
}

/// The predicate before ZOOKEEPER-1419 (**never in production**, feature
/// `never-in-production`): the third disjunct lacks the epoch equality, so the order is not
/// transitive. For tests that show the bug.
#[cfg(feature = "never-in-production")]
pub fn pre_1419_predicate(new: Candidate, cur: Candidate) -> bool {
    broken_pre_1419(new, cur)
}

fn broken_pre_1419(new: Candidate, cur: Candidate) -> bool {
    new.peer_epoch > cur.peer_epoch
        || (new.peer_epoch == cur.peer_epoch && new.zxid > cur.zxid)
        || (new.zxid == cur.zxid && new.leader > cur.leader)
}

/// A vote: a [`Candidate`] plus the round it was cast in, the state of the server that cast
/// it, and the notification format version it arrived with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vote {
    /// The proposed (or elected) leader.
    pub leader: ServerId,
    /// The proposed leader's last zxid (as of the election).
    pub zxid: Zxid,
    /// The election round (`logicalclock` of the voter when it voted).
    pub election_epoch: i64,
    /// The proposed leader's epoch; rewritten after sync by `update_election_vote`
    /// (ZOOKEEPER-1732).
    pub peer_epoch: i64,
    /// The voter's state.
    pub state: ServerState,
    /// Notification format version the vote arrived with (0 for votes built locally).
    pub version: i32,
}

impl Vote {
    /// A LOOKING vote of version 0 (ZooKeeper's four-argument `Vote` constructor).
    pub const fn new(leader: ServerId, zxid: Zxid, election_epoch: i64, peer_epoch: i64) -> Self {
        Vote {
            leader,
            zxid,
            election_epoch,
            peer_epoch,
            state: ServerState::Looking,
            version: 0,
        }
    }

    /// The same vote with another state.
    #[must_use]
    pub const fn with_state(mut self, state: ServerState) -> Self {
        self.state = state;
        self
    }

    /// The same vote with another format version.
    #[must_use]
    pub const fn with_version(mut self, version: i32) -> Self {
        self.version = version;
        self
    }

    /// The ordered part of the vote.
    pub const fn candidate(&self) -> Candidate {
        Candidate::new(self.leader, self.zxid, self.peer_epoch)
    }

    /// ZooKeeper's `Vote.equals`, used when counting votes:
    /// - if either vote is LOOKING: leader, zxid, round and peer epoch must all be equal;
    /// - otherwise (both FOLLOWING/LEADING/OBSERVING): leader and peer epoch must be equal, zxid
    ///   and round are ignored (ZOOKEEPER-1805/1818); if exactly one side has `version > 0`,
    ///   only the leader is compared (rolling-upgrade shim for ZOOKEEPER-1732).
    pub fn matches(&self, other: &Vote) -> bool {
        if self.state == ServerState::Looking || other.state == ServerState::Looking {
            self.leader == other.leader
                && self.zxid == other.zxid
                && self.election_epoch == other.election_epoch
                && self.peer_epoch == other.peer_epoch
        } else if (self.version > 0) ^ (other.version > 0) {
            self.leader == other.leader
        } else {
            self.leader == other.leader && self.peer_epoch == other.peer_epoch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(leader: i64, zxid: i64, epoch: i64) -> Candidate {
        Candidate::new(ServerId(leader), Zxid(zxid), epoch)
    }

    #[test]
    fn z7_peer_epoch_then_zxid_then_sid() {
        assert!(total_order_predicate(c(1, 0, 2), c(3, 9, 1), 1));
        assert!(total_order_predicate(c(1, 9, 1), c(3, 5, 1), 1));
        assert!(total_order_predicate(c(3, 5, 1), c(1, 5, 1), 1));
        assert!(!total_order_predicate(c(3, 5, 1), c(3, 5, 1), 1));
        assert!(!total_order_predicate(c(9, 9, 9), c(1, 0, 0), 0));
    }

    #[test]
    fn vote_equals_looking_compares_everything() {
        let a = Vote::new(ServerId(1), Zxid(5), 2, 1);
        assert!(a.matches(&a));
        assert!(!a.matches(&Vote::new(ServerId(1), Zxid(5), 3, 1)));
        let f = a.with_state(ServerState::Following);
        assert!(a.matches(&f));
        assert!(!f.matches(&Vote::new(ServerId(1), Zxid(6), 2, 1)));
    }

    #[test]
    fn zookeeper_1805_vote_equals_ignores_zxid_and_round_out_of_election() {
        let f = Vote::new(ServerId(3), Zxid(5), 2, 1).with_state(ServerState::Following);
        let l = Vote::new(ServerId(3), Zxid(9), 7, 1).with_state(ServerState::Leading);
        assert!(f.matches(&l));
        let other_epoch = Vote::new(ServerId(3), Zxid(5), 2, 2).with_state(ServerState::Leading);
        assert!(!f.matches(&other_epoch));
        // ZOOKEEPER-1732 shim: one side version > 0, the other 0 → leader only.
        assert!(f.matches(&other_epoch.with_version(2)));
        assert!(!f.with_version(2).matches(&other_epoch.with_version(2)));
    }
}
