//! # zab-core
//!
//! Apache ZooKeeper's fast leader election (SPEC Z1–Z8), as a sans-IO state machine with an
//! async driver on top.

pub mod discovery;
pub mod election;
pub mod notification;
#[cfg(feature = "tokio")]
pub mod peer;
pub mod quorum;
pub mod store;
#[cfg(feature = "tokio")]
pub mod transport;
pub mod types;
pub mod vote;
pub mod zxid;

pub use election::{Action, Decision, DecisionPath, ElectionConfig, FastLeaderElection, VoteData};
pub use notification::{DecodeError, Notification};
pub use quorum::{QuorumHierarchical, QuorumMaj, QuorumVerifier, ServerEntry};
pub use types::{LearnerType, ServerId, ServerState};
pub use vote::{total_order_predicate, Candidate, Vote, VoteOrder};
pub use zxid::Zxid;
