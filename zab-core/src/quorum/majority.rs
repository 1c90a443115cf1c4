//! [`QuorumMaj`]: the majority rule, more than half of the voting members (Z5).

use std::collections::{BTreeMap, BTreeSet};

use super::{server_lines, QuorumVerifier, ServerEntry};
use crate::types::{LearnerType, ServerId};

/// ZooKeeper's `QuorumMaj`: a set is a quorum iff it holds more than `voters / 2` (integer
/// division) voting members. Every server has weight 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumMaj {
    members: BTreeMap<ServerId, ServerEntry>,
    voters: BTreeSet<ServerId>,
    observers: BTreeSet<ServerId>,
    version: i64,
}

impl QuorumMaj {
    /// A majority rule over `members` with configuration `version`.
    pub fn new(members: BTreeMap<ServerId, ServerEntry>, version: i64) -> Self {
        let voters = members
            .iter()
            .filter(|(_, e)| e.learner_type == LearnerType::Participant)
            .map(|(id, _)| *id)
            .collect();
        let observers = members
            .iter()
            .filter(|(_, e)| e.learner_type == LearnerType::Observer)
            .map(|(id, _)| *id)
            .collect();
        QuorumMaj {
            members,
            voters,
            observers,
            version,
        }
    }

    /// A majority rule over the given voters and observers, with empty addresses and version 0
    /// (handy in tests and simulations).
    pub fn with_ids(
        voters: impl IntoIterator<Item = i64>,
        observers: impl IntoIterator<Item = i64>,
    ) -> Self {
        let mut members = BTreeMap::new();
        for v in voters {
            members.insert(ServerId(v), ServerEntry::participant(""));
        }
        for o in observers {
            members.insert(ServerId(o), ServerEntry::observer(""));
        }
        QuorumMaj::new(members, 0)
    }

    /// The member table.
    pub fn members(&self) -> &BTreeMap<ServerId, ServerEntry> {
        &self.members
    }
}

impl QuorumVerifier for QuorumMaj {
    fn voting_members(&self) -> &BTreeSet<ServerId> {
        &self.voters
    }

    fn observers(&self) -> &BTreeSet<ServerId> {
        &self.observers
    }

    fn weight(&self, _sid: ServerId) -> u64 {
        1
    }

    /// Z5: more than half of the voters.
    fn contains_quorum(&self, set: &BTreeSet<ServerId>) -> bool {
        let count = set.iter().filter(|s| self.voters.contains(s)).count();
        count > self.voters.len() / 2
    }

    fn version(&self) -> i64 {
        self.version
    }

    fn config_string(&self) -> String {
        format!("{}version={:x}", server_lines(&self.members), self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i64]) -> BTreeSet<ServerId> {
        ids.iter().map(|i| ServerId(*i)).collect()
    }

    #[test]
    fn z5_majority_is_more_than_half_of_voters_only() {
        let q = QuorumMaj::with_ids([1, 2, 3, 4], [9]);
        assert!(!q.contains_quorum(&set(&[1, 2])));
        assert!(!q.contains_quorum(&set(&[1, 2, 9])));
        assert!(q.contains_quorum(&set(&[1, 2, 3])));
        let q5 = QuorumMaj::with_ids([1, 2, 3, 4, 5], []);
        assert!(q5.contains_quorum(&set(&[1, 2, 3])));
        assert!(!q5.contains_quorum(&set(&[4, 5])));
    }

    #[test]
    fn config_string_matches_zookeeper_layout() {
        let mut m = BTreeMap::new();
        m.insert(
            ServerId(1),
            ServerEntry::participant("127.0.0.1:28881:38881"),
        );
        m.insert(ServerId(2), ServerEntry::observer("127.0.0.1:28882:38882"));
        let q = QuorumMaj::new(m, 0x10);
        assert_eq!(
            q.config_string(),
            "server.1=127.0.0.1:28881:38881:participant\n\
             server.2=127.0.0.1:28882:38882:observer\nversion=10"
        );
    }
}
