//! [`ElectionConfig`]: the election's timing constants and switches, and [`VoteData`], the
//! durable data a server votes with.

use std::time::Duration;

use crate::vote::VoteOrder;
use crate::zxid::Zxid;

/// Timing and behaviour switches of [`FastLeaderElection`](super::FastLeaderElection).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The vote order; always [`VoteOrder::ZooKeeper`] outside tests.
    pub vote_order: VoteOrder,
}

impl ElectionConfig {
    /// ZooKeeper 3.8's behaviour exactly: the default timings, `fast_decide` off.
    pub fn zookeeper() -> Self {
        ElectionConfig {
            fast_decide: false,
            ..ElectionConfig::default()
        }
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
