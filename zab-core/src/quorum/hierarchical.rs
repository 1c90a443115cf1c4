//! [`QuorumHierarchical`]: ZooKeeper's hierarchical quorums, voters split into groups with
//! weights; a quorum is a majority of the weight in a majority of the non-zero-weight groups.

use std::collections::{BTreeMap, BTreeSet};

use super::{server_lines, QuorumVerifier, ServerEntry};
use crate::types::{LearnerType, ServerId};

/// Why a hierarchical configuration is rejected (ZooKeeper's `ConfigException`s).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HierarchicalError {
    /// A server is listed in two groups.
    #[error("server {sid} is in multiple groups")]
    MultipleGroups {
        /// The server.
        sid: ServerId,
    },
    /// A participant belongs to no group.
    #[error("server {sid} is not in a group")]
    NotInGroup {
        /// The server.
        sid: ServerId,
    },
}

/// ZooKeeper's `QuorumHierarchical` (`group.G=sid:sid:…`, `weight.sid=w`, default weight 1).
///
/// A set is a quorum iff **more than half of the groups whose total weight is not zero** each
/// have, inside the set, a weight **greater than half** of that group's total weight. A server of
/// weight 0 can never be elected leader ([`QuorumVerifier::weight`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumHierarchical {
    members: BTreeMap<ServerId, ServerEntry>,
    voters: BTreeSet<ServerId>,
    observers: BTreeSet<ServerId>,
    server_group: BTreeMap<ServerId, i64>,
    server_weight: BTreeMap<ServerId, u64>,
    group_weight: BTreeMap<i64, u64>,
    non_zero_groups: usize,
    version: i64,
}

impl QuorumHierarchical {
    /// Builds the rule. `weights` may omit participants (weight 1).
    pub fn new(
        members: BTreeMap<ServerId, ServerEntry>,
        groups: BTreeMap<i64, Vec<ServerId>>,
        weights: BTreeMap<ServerId, u64>,
        version: i64,
    ) -> Result<Self, HierarchicalError> {
        let mut server_group = BTreeMap::new();
        for (gid, sids) in &groups {
            for sid in sids {
                if server_group.insert(*sid, *gid).is_some() {
                    return Err(HierarchicalError::MultipleGroups { sid: *sid });
                }
            }
        }
        let mut server_weight = weights;
        let mut voters = BTreeSet::new();
        let mut observers = BTreeSet::new();
        for (sid, entry) in &members {
            match entry.learner_type {
                LearnerType::Participant => {
                    if !server_group.contains_key(sid) {
                        return Err(HierarchicalError::NotInGroup { sid: *sid });
                    }
                    server_weight.entry(*sid).or_insert(1);
                    voters.insert(*sid);
                }
                LearnerType::Observer => {
                    observers.insert(*sid);
                }
            }
        }
        let mut group_weight: BTreeMap<i64, u64> = groups.keys().map(|g| (*g, 0)).collect();
        for (sid, gid) in &server_group {
            let w = server_weight.get(sid).copied().unwrap_or(0);
            let total = group_weight.entry(*gid).or_insert(0);
            *total = total.saturating_add(w);
        }
        let non_zero_groups = group_weight.values().filter(|w| **w != 0).count();
        Ok(QuorumHierarchical {
            members,
            voters,
            observers,
            server_group,
            server_weight,
            group_weight,
            non_zero_groups,
            version,
        })
    }

    /// The member table.
    pub fn members(&self) -> &BTreeMap<ServerId, ServerEntry> {
        &self.members
    }
}

impl QuorumVerifier for QuorumHierarchical {
    fn voting_members(&self) -> &BTreeSet<ServerId> {
        &self.voters
    }

    fn observers(&self) -> &BTreeSet<ServerId> {
        &self.observers
    }

    fn weight(&self, sid: ServerId) -> u64 {
        self.server_weight.get(&sid).copied().unwrap_or(0)
    }

    fn contains_quorum(&self, set: &BTreeSet<ServerId>) -> bool {
        let mut expansion: BTreeMap<i64, u64> = BTreeMap::new();
        for sid in set.iter().filter(|s| self.voters.contains(s)) {
            if let Some(gid) = self.server_group.get(sid) {
                let e = expansion.entry(*gid).or_insert(0);
                *e = e.saturating_add(self.weight(*sid));
            }
        }
        let majority_groups = expansion
            .iter()
            .filter(|(gid, w)| **w > self.group_weight.get(gid).copied().unwrap_or(0) / 2)
            .count();
        majority_groups > self.non_zero_groups / 2
    }

    fn version(&self) -> i64 {
        self.version
    }

    fn config_string(&self) -> String {
        let mut s = server_lines(&self.members);
        let mut groups: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for (sid, gid) in &self.server_group {
            groups.entry(*gid).or_default().push(sid.to_string());
        }
        for (gid, sids) in groups {
            s.push_str(&format!("group.{}={}\n", gid, sids.join(":")));
        }
        for (sid, w) in &self.server_weight {
            s.push_str(&format!("weight.{sid}={w}\n"));
        }
        s.push_str(&format!("version={:x}", self.version));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[i64]) -> Vec<ServerId> {
        v.iter().map(|i| ServerId(*i)).collect()
    }

    fn set(v: &[i64]) -> BTreeSet<ServerId> {
        v.iter().map(|i| ServerId(*i)).collect()
    }

    fn nine() -> BTreeMap<ServerId, ServerEntry> {
        (1..=9)
            .map(|i| (ServerId(i), ServerEntry::participant("")))
            .collect()
    }

    #[test]
    fn z5_hierarchical_needs_majority_of_weight_in_majority_of_groups() {
        let groups = BTreeMap::from([
            (1, ids(&[1, 2, 3])),
            (2, ids(&[4, 5, 6])),
            (3, ids(&[7, 8, 9])),
        ]);
        let q = QuorumHierarchical::new(nine(), groups, BTreeMap::new(), 0).unwrap();
        assert!(q.contains_quorum(&set(&[1, 2, 4, 5])));
        assert!(!q.contains_quorum(&set(&[1, 2, 3, 4])));
        assert!(!q.contains_quorum(&set(&[])));
        assert_eq!(q.weight(ServerId(5)), 1);
        assert_eq!(q.weight(ServerId(42)), 0);
    }

    #[test]
    fn zero_weight_groups_are_excluded_and_weight_zero_never_wins() {
        let groups = BTreeMap::from([
            (1, ids(&[1, 2, 3])),
            (2, ids(&[4, 5, 6])),
            (3, ids(&[7, 8, 9])),
        ]);
        let weights = BTreeMap::from([(ServerId(7), 0), (ServerId(8), 0), (ServerId(9), 0)]);
        let q = QuorumHierarchical::new(nine(), groups, weights, 0).unwrap();
        // two non-zero groups: a quorum needs both
        assert!(!q.contains_quorum(&set(&[1, 2, 7, 8, 9])));
        assert!(q.contains_quorum(&set(&[1, 2, 4, 5])));
        assert_eq!(q.weight(ServerId(7)), 0);
        assert!(q.config_string().contains("group.3=7:8:9\n"));
        assert!(q.config_string().contains("weight.7=0\n"));
    }

    #[test]
    fn rejects_bad_group_layouts() {
        let groups = BTreeMap::from([(1, ids(&[1, 2])), (2, ids(&[2, 3]))]);
        assert_eq!(
            QuorumHierarchical::new(nine(), groups, BTreeMap::new(), 0),
            Err(HierarchicalError::MultipleGroups { sid: ServerId(2) })
        );
        let groups = BTreeMap::from([(1, ids(&[1, 2]))]);
        assert!(matches!(
            QuorumHierarchical::new(nine(), groups, BTreeMap::new(), 0),
            Err(HierarchicalError::NotInGroup { .. })
        ));
    }
}
