//! [`ElectionConfig`]: the election's timing constants and switches, and [`VoteData`], the
//! durable data a server votes with.

use std::time::Duration;

use crate::vote::VoteOrder;
use crate::zxid::Zxid;

/// Timing and behaviour switches of [`FastLeaderElection`](super::FastLeaderElection).
///
/// Build it from [`ElectionConfig::default`] (this crate's defaults) or
/// [`ElectionConfig::zookeeper`] (ZooKeeper 3.8 exactly) and the `with_*` setters; the
/// fields can also be read and set directly.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionConfig {
    /// Quiet period after a quorum agrees before deciding (ZooKeeper's `finalizeWait`,
    /// 200 ms). Any notification that does not beat the proposal restarts it.
    pub finalize_wait: Duration,
    /// First notification timeout (`minNotificationInterval`, 200 ms).
    pub min_notification_interval: Duration,
    /// Cap of the doubling notification timeout (`maxNotificationInterval`, 60 s).
    pub max_notification_interval: Duration,
    /// Beyond ZooKeeper (on by default): decide at once, without the `finalize_wait` pause,
    /// when every voter currently connected (and this server) has sent the matching vote for
    /// the current round and they form a quorum. See the crate docs for why this is safe.
    pub fast_decide: bool,
    /// The vote order: ZooKeeper's, unless set by the `never-in-production` feature's
    /// `with_broken_pre_1419_order`.
    pub(crate) vote_order: VoteOrder,
}

impl ElectionConfig {
    /// ZooKeeper 3.8's behaviour exactly: the default timings, `fast_decide` off.
    pub fn zookeeper() -> Self {
        ElectionConfig {
            fast_decide: false,
            ..ElectionConfig::default()
        }
    }

    /// This configuration with another [`finalize_wait`](Self::finalize_wait).
    #[must_use]
    pub fn with_finalize_wait(mut self, finalize_wait: Duration) -> Self {
        self.finalize_wait = finalize_wait;
        self
    }

    /// This configuration with another
    /// [`min_notification_interval`](Self::min_notification_interval).
    #[must_use]
    pub fn with_min_notification_interval(mut self, interval: Duration) -> Self {
        self.min_notification_interval = interval;
        self
    }

    /// This configuration with another
    /// [`max_notification_interval`](Self::max_notification_interval).
    #[must_use]
    pub fn with_max_notification_interval(mut self, interval: Duration) -> Self {
        self.max_notification_interval = interval;
        self
    }

    /// This configuration with [`fast_decide`](Self::fast_decide) set to `on`.
    #[must_use]
    pub fn with_fast_decide(mut self, on: bool) -> Self {
        self.fast_decide = on;
        self
    }

    /// **Never in production** (feature `never-in-production`): this configuration with the
    /// vote order ZooKeeper used before ZOOKEEPER-1419, whose sid tie-break ignores the epoch,
    /// so that the order is not transitive and a 5-voter election can oscillate. Exists so
    /// that tests can show the simulator catches it.
    #[cfg(feature = "never-in-production")]
    #[must_use]
    pub fn with_broken_pre_1419_order(mut self) -> Self {
        self.vote_order = VoteOrder::BrokenPre1419;
        self
    }

    /// Whether this configuration uses ZooKeeper's (ZOOKEEPER-1419-fixed) vote order, which
    /// it always does unless made by the `never-in-production` feature's
    /// `with_broken_pre_1419_order`.
    pub fn uses_zookeeper_vote_order(&self) -> bool {
        self.vote_order == VoteOrder::ZooKeeper
    }
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            finalize_wait: Duration::from_millis(200),
            min_notification_interval: Duration::from_millis(200),
            max_notification_interval: Duration::from_millis(60_000),
            fast_decide: true,
            vote_order: VoteOrder::ZooKeeper,
        }
    }
}

/// The durable data a server votes with at the start of an election: its last logged zxid
/// and its `currentEpoch` (both persisted by the embedder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VoteData {
    /// Last logged zxid.
    pub last_zxid: Zxid,
    /// `currentEpoch`: the epoch of the last leader this server completed sync with.
    pub current_epoch: i64,
}

impl VoteData {
    /// Builds vote data.
    pub const fn new(last_zxid: Zxid, current_epoch: i64) -> Self {
        VoteData {
            last_zxid,
            current_epoch,
        }
    }
}
