//! What the discovery state machines ask their driver to do.

use std::time::Duration;

use crate::broadcast::BroadcastAction;
use crate::packet::QuorumPacket;
use crate::types::ServerId;
use crate::zxid::Zxid;

/// One step for the driver, carried out in order. A `Persist*` must be durable before any
/// later action is carried out (a `Send` after it may acknowledge the persisted epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiscoveryAction {
    /// Send a quorum packet.
    Send {
        /// The destination.
        to: ServerId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// Durably store `acceptedEpoch` (Z1).
    PersistAcceptedEpoch(i64),
    /// Durably store `currentEpoch`.
    PersistCurrentEpoch(i64),
    /// Close the quorum connection with this server.
    Close(ServerId),
    /// The epoch is established with a quorum: the leader has a quorum of NEWLEADER
    /// acknowledgements, or the learner received UPTODATE.
    Established {
        /// The established epoch.
        epoch: i64,
    },
    /// A synchronisation or broadcast step for the transaction log or state machine (log,
    /// apply, truncate, restore a snapshot, a `sync` barrier done), carried out in order with
    /// the others. Never a `Send`, `PersistCurrentEpoch`, `Established` or `Abandon`: those
    /// are mapped to the variants above.
    Zab(BroadcastAction),
    /// The leader syncs `learner` from its transaction log: read the logged transactions of
    /// `(after, upto]` (at most `max_bytes` of [`sync_weight`](crate::broadcast::sync_weight)
    /// and `max_txns` of them; `max_bytes == 0` only counts them) and give the result to
    /// [`LeaderDiscovery::log_read`](super::LeaderDiscovery::log_read).
    ReadLog {
        /// The learner being synced.
        learner: ServerId,
        /// Read after this zxid.
        after: Zxid,
        /// Up to and including this zxid.
        upto: Zxid,
        /// At most this weight; zero for a probe that only counts.
        max_bytes: u64,
        /// At most this many transactions.
        max_txns: usize,
    },
    /// The leader syncs `learner` by SNAP: read the newest snapshot and give it to
    /// [`LeaderDiscovery::snapshot_read`](super::LeaderDiscovery::snapshot_read).
    ReadSnapshot(ServerId),
    /// The leader sent `learner` a batch of its SNAP and has more: once what waits for that
    /// learner in the transport has drained, call
    /// [`LeaderDiscovery::drained`](super::LeaderDiscovery::drained) (flow control only; an
    /// embedder without a transport queue may call it at once).
    AwaitDrain(ServerId),
    /// Give up and go back to LOOKING (Z6, Z8).
    Abandon {
        /// Why.
        reason: &'static str,
    },
}

/// ZooKeeper's time limits (Z6): `tickTime`, `initLimit` and `syncLimit`. Build it with
/// [`Timing::new`] or [`Timing::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timing {
    /// The basic time unit; the leader pings every half tick.
    pub tick_time: Duration,
    /// Ticks allowed for discovery and synchronisation.
    pub init_limit: u32,
    /// Ticks a synced learner (or its leader) may stay silent.
    pub sync_limit: u32,
}

impl Timing {
    /// `tickTime`, `initLimit` (in ticks) and `syncLimit` (in ticks).
    pub const fn new(tick_time: Duration, init_limit: u32, sync_limit: u32) -> Self {
        Self {
            tick_time,
            init_limit,
            sync_limit,
        }
    }

    /// `initLimit * tickTime`.
    pub fn init_timeout(&self) -> Duration {
        self.tick_time.saturating_mul(self.init_limit)
    }

    /// `syncLimit * tickTime`.
    pub fn sync_timeout(&self) -> Duration {
        self.tick_time.saturating_mul(self.sync_limit)
    }
}

impl Default for Timing {
    /// ZooKeeper's sample configuration: 2000 ms, 10, 5.
    fn default() -> Self {
        Self {
            tick_time: Duration::from_millis(2000),
            init_limit: 10,
            sync_limit: 5,
        }
    }
}
