//! Quorum verifiers: who votes, with what weight, and which sets of servers form a quorum
//! (Z5: "a majority (> n/2 of the voters)"). [`QuorumMaj`] is ZooKeeper's default
//! majority rule, [`QuorumHierarchical`] its groups-and-weights rule. Both also render the
//! config string carried in election notifications.

mod hierarchical;
mod majority;
mod tracker;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use hierarchical::{HierarchicalError, QuorumHierarchical};
pub use majority::QuorumMaj;
pub use tracker::matching_voters;

use crate::types::{LearnerType, ServerId};

/// One `server.N=…` line of an ensemble configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// Participant (voter) or observer.
    pub learner_type: LearnerType,
    /// `host:quorumPort:electionPort` as ZooKeeper prints it (may be empty when unknown; a
    /// ZooKeeper receiver then ignores the config, which is harmless).
    pub address: String,
    /// The optional client address `host:port` printed after `;`.
    pub client_address: Option<String>,
}

impl ServerEntry {
    /// A participant at `address` (`host:quorumPort:electionPort`).
    pub fn participant(address: impl Into<String>) -> Self {
        ServerEntry {
            learner_type: LearnerType::Participant,
            address: address.into(),
            client_address: None,
        }
    }

    /// An observer at `address` (`host:quorumPort:electionPort`).
    pub fn observer(address: impl Into<String>) -> Self {
        ServerEntry {
            learner_type: LearnerType::Observer,
            address: address.into(),
            client_address: None,
        }
    }

    /// The value of the `server.N=` line (ZooKeeper's `QuorumServer.toString()`).
    pub fn config_value(&self) -> String {
        let mut s = format!("{}:{}", self.address, self.learner_type.config_word());
        if let Some(client) = &self.client_address {
            s.push(';');
            s.push_str(client);
        }
        s
    }
}

/// Renders the `server.N=…` lines of a member table, in id order.
pub(crate) fn server_lines(members: &BTreeMap<ServerId, ServerEntry>) -> String {
    let mut s = String::new();
    for (id, entry) in members {
        s.push_str(&format!("server.{}={}\n", id, entry.config_value()));
    }
    s
}

/// A quorum rule (ZooKeeper's `QuorumVerifier`).
pub trait QuorumVerifier: fmt::Debug + Send + Sync {
    /// The voting members (participants).
    fn voting_members(&self) -> &BTreeSet<ServerId>;

    /// The observers (non-voting members).
    fn observers(&self) -> &BTreeSet<ServerId>;

    /// Whether `sid` is a voting member.
    fn is_voter(&self, sid: ServerId) -> bool {
        self.voting_members().contains(&sid)
    }

    /// The weight of `sid` in elections. Weight 0 means "can never be elected"
    /// (`totalOrderPredicate` rejects it). Unknown ids have weight 0 unless the rule says
    /// otherwise (the majority rule gives everyone 1, as ZooKeeper does).
    fn weight(&self, sid: ServerId) -> u64;

    /// Whether `set` contains a quorum. Ids that are not voting members are ignored.
    fn contains_quorum(&self, set: &BTreeSet<ServerId>) -> bool;

    /// The configuration version (`version=` line, hexadecimal on the wire).
    fn version(&self) -> i64;

    /// The configuration as ZooKeeper's `QuorumVerifier.toString()` renders it; sent in every
    /// version-2 election notification.
    fn config_string(&self) -> String;
}
