//! [`Action`]s the election asks its driver to carry out, and the [`Decision`] it reaches.

use std::collections::BTreeSet;

use crate::notification::Notification;
use crate::types::{ServerId, ServerState};
use crate::vote::Vote;

/// Something the driver must do, returned by
/// [`FastLeaderElection::poll_action`](super::FastLeaderElection::poll_action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `notification` to server `to` (never to ourselves: messages to self are looped
    /// back inside the core). If there is no connection to `to`, the driver should try to
    /// open one, as ZooKeeper's `toSend` does, and may drop the message meanwhile.
    Send {
        /// Recipient.
        to: ServerId,
        /// Message.
        notification: Notification,
    },
    /// The notification timeout fired with no peer connected: (re)connect to every voter
    /// (ZooKeeper's `connectAll`).
    ConnectAll,
    /// The election ended; the server is now in `decision.state`.
    Decided(Decision),
}

/// How a decision was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionPath {
    /// A quorum of LOOKING votes of this round agreed with our proposal and nothing better
    /// arrived during `finalize_wait` (ZooKeeper).
    FinalizeWait,
    /// A quorum agreed and every connected voter agreed, so `finalize_wait` was skipped
    /// (beyond ZooKeeper, [`fast_decide`](super::ElectionConfig::fast_decide)).
    AllConnectedAgreed,
    /// A quorum of this round's votes, including FOLLOWING/LEADING ones, agreed with a
    /// FOLLOWING/LEADING notification and `checkLeader` held.
    RoundFollowing,
    /// A quorum of FOLLOWING/LEADING votes of any round agreed (`outofelection`) and
    /// `checkLeader` held: joining an established ensemble.
    OutOfElection,
    /// Only under the test-only pre-ZOOKEEPER-975 rule (see
    /// `FastLeaderElection::use_pre_975_termination_for_tests`): a LOOKING vote of this round
    /// had arrived from every voter, and the election stopped with our proposal whatever they
    /// voted for. The fixed election never decides this way.
    Pre975AllVotersHeard,
}

/// The outcome of an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The elected vote (leader, its zxid and epoch, the round), state LOOKING as in
    /// ZooKeeper's `endVote`; it becomes the server's current vote.
    pub vote: Vote,
    /// The state the server moves to: LEADING, FOLLOWING or OBSERVING.
    pub state: ServerState,
    /// The voters whose votes formed the quorum.
    pub supporters: BTreeSet<ServerId>,
    /// How the decision was reached.
    pub path: DecisionPath,
}
