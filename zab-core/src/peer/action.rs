//! What goes into a [`PeerCore`](super::PeerCore) ([`PeerInput`]) and what comes out of it
//! ([`PeerAction`]), with the contract an embedder follows when carrying the actions out.

use std::time::Duration;

use bytes::Bytes;

use super::config::PeerStatus;
use super::sessions::SessionId;
use crate::broadcast::LogRead;
use crate::election::Decision;
use crate::notification::Notification;
use crate::packet::QuorumPacket;
use crate::txnlog::{Snapshot, Txn};
use crate::types::ServerId;
use crate::zxid::Zxid;

/// The embedder's name for one `sync` barrier, given in [`PeerInput::Sync`] and returned in
/// [`PeerAction::SyncDone`] or [`PeerAction::SyncFailed`].
pub type SyncId = u64;

/// Something that happened to the server, given to [`PeerCore::handle`](super::PeerCore::handle)
/// with the time it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerInput {
    /// The server starts: the core asks to connect to every voter and starts its first
    /// election round once all are connected or the configured connect grace ran out.
    Start,
    /// A (decoded) election notification arrived from `from`.
    Notification {
        /// The sender.
        from: ServerId,
        /// The notification.
        notification: Notification,
    },
    /// The election connection with this server came up.
    ElectionConnected(ServerId),
    /// The election connection with this server went down.
    ElectionDisconnected(ServerId),
    /// A quorum packet arrived from `from`.
    Packet {
        /// The sender.
        from: ServerId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// The quorum connection with this server closed or broke.
    QuorumDown(ServerId),
    /// This server refused our quorum connection (it does not lead).
    QuorumRefused(ServerId),
    /// A write from a client of this server (see `PeerHandle::propose`).
    Write(Bytes),
    /// A `sync` barrier asked by a client of this server.
    Sync(SyncId),
    /// A sign of life of a client session at this server, with its timeout.
    Touch {
        /// The session.
        session: SessionId,
        /// Its timeout.
        timeout: Duration,
    },
    /// The session was closed: stop tracking it.
    EndSession(SessionId),
    /// Every [`PeerAction::Append`]ed transaction up to and including this zxid is durable
    /// (fsynced). An embedder that syncs in groups reports each group here.
    LogDurable(Zxid),
    /// The answer to [`PeerAction::LoadHistory`]: the newest logged transactions, which the
    /// leader keeps in memory to sync learners from (ZooKeeper's `committedLog`; see
    /// [`read_committed_window`](crate::txnlog::read_committed_window)).
    History {
        /// The zxid the transactions follow without a gap: the logged transaction before
        /// the first of them, else the newest snapshot's (then only transactions after it
        /// are given), else zero.
        base: Zxid,
        /// The newest logged transactions, in order: at most `max` of
        /// [`PeerAction::LoadHistory`] (more are ignored but for the newest).
        committed: Vec<Txn>,
    },
    /// The answer to [`PeerAction::ReadLog`] (see
    /// [`read_for_sync`](crate::txnlog::read_for_sync)).
    LogRead {
        /// The learner named in the request.
        learner: ServerId,
        /// What was read.
        read: LogRead,
    },
    /// The answer to [`PeerAction::ReadSnapshot`]: the newest snapshot, if any.
    SnapshotRead {
        /// The learner named in the request.
        learner: ServerId,
        /// The snapshot.
        snapshot: Option<Snapshot>,
    },
    /// The answer to [`PeerAction::AwaitDrain`]: what waited for `learner` in the transport
    /// has drained.
    Drained(ServerId),
    /// Time passed: the core acts on every deadline at or before `now`
    /// (see [`PeerCore::next_deadline`](super::PeerCore::next_deadline)).
    Tick,
}

/// One step the embedder carries out, returned by
/// [`PeerCore::poll_action`](super::PeerCore::poll_action).
///
/// # The contract
///
/// Actions are carried out **one at a time, in the order they are polled**. Each one is
/// complete (and, for `Persist*`, `Truncate`, `RestoreSnapshot` and `TakeSnapshot`, durable)
/// before the next is carried out, with one exception: an [`Append`](Self::Append) may stay
/// buffered (group commit); the embedder makes it durable when it likes and reports it with
/// [`PeerInput::LogDurable`]. The core relies on that order:
///
/// - an ACK of a PROPOSAL (or of NEWLEADER, after the sync data was appended) is never
///   emitted before [`PeerInput::LogDurable`] covered the appends it vouches for, or a
///   [`SyncLog`](Self::SyncLog) came before it; a leader counts its own acknowledgement only
///   then (Z2);
/// - every action that must follow durable appends comes after a [`SyncLog`](Self::SyncLog)
///   when appends are pending: `PersistAcceptedEpoch`, `PersistCurrentEpoch` (after a sync it
///   must not claim an epoch whose transactions could still be lost), `Truncate`,
///   `RestoreSnapshot`, `CommitLogged`, `LoadHistory`, `Close`, and the `Status` that reports
///   an established epoch or the return to LOOKING. `Send` (but for ACKs, above), `Apply`,
///   `TakeSnapshot` (of committed, applied state) and further `Append`s need not wait;
/// - `PersistAcceptedEpoch(e)` comes before the ACKEPOCH (or LEADERINFO) that announces `e`,
///   and `PersistCurrentEpoch(e)` before the ACK of NEWLEADER (ZOOKEEPER-3911): carrying
///   them out in order makes that durable-before-sent;
/// - `Apply` and `CommitLogged` only ever name transactions committed by a quorum, so they
///   need not wait for this server's own fsync.
///
/// Sends may be dropped by the embedder when there is no connection (the protocol retries);
/// everything else must be carried out or the embedder must stop the server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerAction {
    /// Send an election notification (open the election connection if there is none).
    SendNotification {
        /// The recipient.
        to: ServerId,
        /// The notification.
        notification: Notification,
    },
    /// Connect the election port to every voter (ZooKeeper's `connectAll`).
    ConnectAll,
    /// Send a quorum packet (opening the quorum connection to a leader if needed).
    Send {
        /// The recipient.
        to: ServerId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// Close the quorum connection with this server.
    Close(ServerId),
    /// Refuse this server's quorum connection: we do not lead (ZooKeeper has no listener).
    Refuse(ServerId),
    /// Durably store `acceptedEpoch` (Z1) before carrying out the next action.
    PersistAcceptedEpoch(i64),
    /// Durably store `currentEpoch` before carrying out the next action.
    PersistCurrentEpoch(i64),
    /// Append these transactions to the log. Durability may be deferred: report it with
    /// [`PeerInput::LogDurable`].
    Append(Vec<Txn>),
    /// Make every appended transaction durable now, before carrying out the next action. The
    /// core counts them durable once this is polled.
    SyncLog,
    /// Drop every logged transaction above this zxid (TRUNC); rebuild the state machine from
    /// its snapshot and the log if it applied any of them.
    Truncate(Zxid),
    /// Clear the log, restore the state machine from this snapshot and store it (SNAP).
    RestoreSnapshot(Snapshot),
    /// Apply this committed transaction to the state machine (zxid order; skip it if the
    /// state machine already applied it, e.g. replayed at start-up).
    Apply(Txn),
    /// Apply, in zxid order, every logged transaction up to and including this zxid that the
    /// state machine has not applied yet: the leader's sync choice vouches that they are
    /// committed.
    CommitLogged(Zxid),
    /// Snapshot the state machine, store the snapshot durably and purge the log it covers
    /// (ZooKeeper's `snapCount`; asked only while serving an established epoch).
    TakeSnapshot,
    /// This server is about to lead: read the newest at most `max` logged transactions and
    /// give them to the core with [`PeerInput::History`] before any other input
    /// ([`read_committed_window`](crate::txnlog::read_committed_window) does it for any
    /// [`TxnLog`](crate::txnlog::TxnLog)). The leader keeps only those, and the ones it
    /// commits, in memory, at most `max` at a time; learners further behind are synced from
    /// the log with [`ReadLog`](Self::ReadLog).
    LoadHistory {
        /// How many (ZooKeeper's `commitLogCount`, [`PeerConfig::commit_log_count`](super::PeerConfig::commit_log_count)).
        max: usize,
    },
    /// The leader syncs `learner`, further behind than its in-memory window, from the log
    /// (ZooKeeper's `ZKDatabase.getProposalsFromTxnLog`). Read the log and give the result to
    /// the core with [`PeerInput::LogRead`]
    /// ([`read_for_sync`](crate::txnlog::read_for_sync) does it for any
    /// [`TxnLog`](crate::txnlog::TxnLog)):
    ///
    /// - `max_bytes == 0`, a probe: the newest logged zxid at or below `after`, how many
    ///   logged transactions lie in `(after, upto]` and their
    ///   [`sync_weight`](crate::broadcast::sync_weight) (not the transactions);
    /// - otherwise, a read: the logged transactions of `(after, upto]` in order, stopping
    ///   before the one that would bring their weight above `max_bytes` or their number above
    ///   `max_txns` (the first is always given), and whether the range was read to its end;
    ///
    /// both with the log's first zxid and the newest snapshot's zxid and size. The answer may
    /// come at once or later (other inputs between are fine: the core checks that it still
    /// fits the learner's sync), but must reflect every `Append` carried out before the
    /// request. Everything in `(after, upto]` is committed, so no `SyncLog` precedes it.
    ReadLog {
        /// The learner being synced.
        learner: ServerId,
        /// Read after this zxid.
        after: Zxid,
        /// Up to and including this zxid.
        upto: Zxid,
        /// At most this weight; zero for a probe.
        max_bytes: u64,
        /// At most this many transactions.
        max_txns: usize,
    },
    /// The leader syncs `learner` by SNAP: read the newest snapshot and give it to the core
    /// with [`PeerInput::SnapshotRead`] (at once or later, as for [`ReadLog`](Self::ReadLog)).
    ReadSnapshot(ServerId),
    /// The leader sent `learner` a batch of a SNAP
    /// ([`SNAP_PACKETS_PER_BATCH`](crate::discovery::SNAP_PACKETS_PER_BATCH) packets) and
    /// has more: answer with [`PeerInput::Drained`] once few enough packets wait for that
    /// learner in the transport (flow control only: the core decides what is sent; an
    /// embedder whose transport does not queue may answer at once). So a snapshot of any size
    /// goes out a batch at a time and never overflows a connection's queue.
    AwaitDrain(ServerId),
    /// The election decided (a report: nothing to carry out). A [`Status`](Self::Status) with
    /// the new role follows.
    Decided(Decision),
    /// The server's status changed.
    Status(PeerStatus),
    /// A `sync` barrier completed: every transaction committed before it was asked (and up to
    /// `zxid`) is applied here.
    SyncDone {
        /// The barrier.
        id: SyncId,
        /// The zxid it waited for.
        zxid: Zxid,
    },
    /// A `sync` barrier failed: the server serves no established epoch, or left it.
    SyncFailed(SyncId),
    /// The leader found this client session expired (no touch within its timeout); the
    /// embedder commits its close through a transaction.
    SessionExpired(SessionId),
}
