//! A server's configuration ([`PeerConfig`]) and the status it reports ([`PeerStatus`]).

use std::sync::Arc;
use std::time::Duration;

use crate::broadcast::{LearnerOptions, COMMIT_LOG_COUNT};
use crate::discovery::Timing;
use crate::election::ElectionConfig;
use crate::quorum::QuorumVerifier;
use crate::types::{LearnerType, ServerId, ServerState};

/// Configuration of a server ([`PeerCore`](super::PeerCore), and the tokio `QuorumPeer` on it):
/// [`PeerConfig::new`] and the `with_*` setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeerConfig {
    /// Our sid (`myid`).
    pub my_id: ServerId,
    /// Participant or observer.
    pub learner_type: LearnerType,
    /// The ensemble's quorum rule.
    pub quorum: Arc<dyn QuorumVerifier>,
    /// Election timing and options.
    pub election: ElectionConfig,
    /// `tickTime`, `initLimit`, `syncLimit` (Z6).
    pub timing: Timing,
    /// At start-up, how long to wait for connections to every other voter before the first
    /// election round. With `fast_decide`, a server that has only part of the ensemble
    /// connected may otherwise decide on that part's view at once, and make the others wait
    /// out their `finalize_wait`. Zero starts at once, as ZooKeeper does.
    pub connect_grace: Duration,
    /// The learner's synchronisation and broadcast options. Whether it follows broadcast
    /// traffic is the core's choice (only with a log); the rest is kept as given.
    pub learner: LearnerOptions,
    /// How many of the newest committed transactions a leader keeps in memory to sync
    /// learners from (ZooKeeper's `zookeeper.commitLogCount`, default
    /// [`COMMIT_LOG_COUNT`]); a learner further behind is synced from the log on disk.
    pub commit_log_count: usize,
    /// The check the leader makes of every write before proposing it — its own and those its
    /// learners forward (ZooKeeper's `PrepRequestProcessor` validates each request on the
    /// leader): a payload it refuses is dropped with a log line and never reaches a log.
    /// `None` (the default) proposes every payload.
    pub request_validator: Option<RequestValidator>,
}

/// A pure check of a write's payload, run by the leader before proposing it: `Err` names what
/// is wrong. It must be deterministic (it sees only the bytes).
pub type RequestValidator = fn(&[u8]) -> Result<(), String>;

impl PeerConfig {
    /// A configuration with the default election options, ZooKeeper's sample timing
    /// (2000 ms, 10, 5) and a 100 ms start-up connect grace.
    pub fn new(
        my_id: ServerId,
        learner_type: LearnerType,
        quorum: Arc<dyn QuorumVerifier>,
    ) -> Self {
        Self {
            my_id,
            learner_type,
            quorum,
            election: ElectionConfig::default(),
            timing: Timing::default(),
            connect_grace: Duration::from_millis(100),
            learner: LearnerOptions::default(),
            commit_log_count: COMMIT_LOG_COUNT,
            request_validator: None,
        }
    }

    /// This configuration with a [`RequestValidator`] run by the leader on every write.
    #[must_use]
    pub fn with_request_validator(mut self, validator: RequestValidator) -> Self {
        self.request_validator = Some(validator);
        self
    }

    /// This configuration with another in-memory window of committed transactions (ZooKeeper's
    /// `commitLogCount`; at least 1).
    #[must_use]
    pub fn with_commit_log_count(mut self, n: usize) -> Self {
        self.commit_log_count = n.max(1);
        self
    }

    /// This configuration with other election options.
    #[must_use]
    pub fn with_election(mut self, election: ElectionConfig) -> Self {
        self.election = election;
        self
    }

    /// This configuration with another `tickTime`, `initLimit` and `syncLimit`.
    #[must_use]
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// This configuration with other learner options (a test uses it to plant a known bug
    /// through the `never-in-production` setters of [`LearnerOptions`]).
    #[must_use]
    pub fn with_learner_options(mut self, options: LearnerOptions) -> Self {
        self.learner = options;
        self
    }

    /// This configuration with another start-up [`connect_grace`](Self::connect_grace).
    #[must_use]
    pub fn with_connect_grace(mut self, grace: Duration) -> Self {
        self.connect_grace = grace;
        self
    }
}

/// A leader's figures: learners in its broadcast and `sync` barriers waiting (ZooKeeper's
/// `zk_synced_followers`, `zk_synced_observers`, `zk_pending_syncs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LeaderFigures {
    /// Followers that acknowledged NEWLEADER and receive proposals.
    pub synced_followers: usize,
    /// Observers that receive INFORMs.
    pub synced_observers: usize,
    /// `sync` barriers (this server's and its learners') not answered yet.
    pub pending_syncs: usize,
}

/// What a peer is doing, as published on its watch channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerStatus {
    /// LOOKING, LEADING, FOLLOWING or OBSERVING (Z3).
    pub state: ServerState,
    /// The leader we decided for (ourselves when LEADING); `None` while LOOKING.
    pub leader: Option<ServerId>,
    /// The epoch, set only once it is established with a quorum: for a leader, a quorum
    /// acknowledged NEWLEADER; for a learner, UPTODATE arrived. `None` during discovery.
    pub epoch: Option<i64>,
}

impl PeerStatus {
    /// LOOKING, no leader, no epoch.
    pub const LOOKING: PeerStatus = PeerStatus {
        state: ServerState::Looking,
        leader: None,
        epoch: None,
    };

    /// Whether this is an established leader ("I lead epoch E").
    pub fn is_established_leader(&self) -> bool {
        self.state == ServerState::Leading && self.epoch.is_some()
    }
}
