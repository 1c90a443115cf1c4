//! Server identity and roles: [`ServerId`], [`ServerState`] and [`LearnerType`] (Z2, Z3).

use std::fmt;

/// A server's id (`myid`, "sid"), unique in the ensemble (Z4). ZooKeeper uses a Java
/// `long`, so this is an `i64`; the fast leader election breaks ties towards the larger id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub i64);

impl ServerId {
    /// `Long.MAX_VALUE`: ZooKeeper's legacy id of an observer that has no id of its own.
    pub const OBSERVER_ID: ServerId = ServerId(i64::MAX);
    /// `Long.MIN_VALUE`: the leader id an observer proposes in its initial vote (it never
    /// proposes a real server).
    pub const NONE: ServerId = ServerId(i64::MIN);

    /// Wraps a raw id.
    pub const fn new(id: i64) -> Self {
        ServerId(id)
    }

    /// The raw id.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for ServerId {
    fn from(id: i64) -> Self {
        ServerId(id)
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A server's state (Z3). The wire value is ZooKeeper's `ServerState.ordinal()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerState {
    /// Looking for a leader: an election is (or is about to be) running.
    Looking,
    /// Following an elected leader.
    Following,
    /// Leading the ensemble.
    Leading,
    /// Observing: an observer that knows the leader. Observers never vote (Z2).
    Observing,
}

impl ServerState {
    /// The value carried in the first field of an election notification.
    pub const fn wire_value(self) -> i32 {
        match self {
            ServerState::Looking => 0,
            ServerState::Following => 1,
            ServerState::Leading => 2,
            ServerState::Observing => 3,
        }
    }

    /// Decodes a wire value; any value other than 0..=3 is `None` (ZooKeeper drops such a
    /// message).
    pub const fn from_wire(value: i32) -> Option<Self> {
        match value {
            0 => Some(ServerState::Looking),
            1 => Some(ServerState::Following),
            2 => Some(ServerState::Leading),
            3 => Some(ServerState::Observing),
            _ => None,
        }
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerState::Looking => "LOOKING",
            ServerState::Following => "FOLLOWING",
            ServerState::Leading => "LEADING",
            ServerState::Observing => "OBSERVING",
        })
    }
}

/// Whether a server votes (Z2): a participant votes in elections and on proposals, an
/// observer does neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnerType {
    /// A voting member (leader or follower).
    Participant,
    /// A non-voting member.
    Observer,
}

impl LearnerType {
    /// The word ZooKeeper writes after a server's addresses in a config string.
    pub const fn config_word(self) -> &'static str {
        match self {
            LearnerType::Participant => "participant",
            LearnerType::Observer => "observer",
        }
    }
}
