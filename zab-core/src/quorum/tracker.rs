//! Vote counting (ZooKeeper's `getVoteTracker` with `SyncedLearnerTracker`): which voters
//! hold a vote equal to a given one.

use std::collections::{BTreeMap, BTreeSet};

use super::QuorumVerifier;
use crate::types::ServerId;
use crate::vote::Vote;

/// The voting members whose vote in `votes` [matches](Vote::matches) `vote`. Votes of
/// non-voters are not counted (`SyncedLearnerTracker.addAck`).
pub fn matching_voters(
    qv: &dyn QuorumVerifier,
    votes: &BTreeMap<ServerId, Vote>,
    vote: &Vote,
) -> BTreeSet<ServerId> {
    votes
        .iter()
        .filter(|(sid, v)| qv.is_voter(**sid) && vote.matches(v))
        .map(|(sid, _)| *sid)
        .collect()
}
