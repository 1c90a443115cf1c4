//! Values exchanged with a [`Coordination`](super::Coordination) service: node metadata
//! ([`Stat`]), create modes, `multi` operations and their results, and the events of the
//! event stream (watches and session state).

use std::pin::Pin;

use futures::Stream;

/// "Any version": as the expected version of `set_data`, `delete` or `Check`, matches every
/// version (ZooKeeper's `-1`).
pub const ANY_VERSION: i32 = -1;

/// A session's identifier as the server assigned it (ZooKeeper's 64-bit session id). It is the
/// `ephemeral_owner` of the session's ephemeral nodes.
pub type SessionId = i64;

/// The metadata of a node (ZooKeeper's `Stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    /// Zxid of the transaction that created the node. For `/brokers/ids/<id>` this is the
    /// broker epoch (KIP-380).
    pub czxid: i64,
    /// Zxid of the transaction that last changed the node's data.
    pub mzxid: i64,
    /// Zxid of the transaction that last changed the node's children.
    pub pzxid: i64,
    /// Creation time in ms since the epoch (0 from the in-memory service, which reads no clock).
    pub ctime: i64,
    /// Last modification time in ms since the epoch (0 from the in-memory service).
    pub mtime: i64,
    /// Number of changes to the data: the version checked by conditional writes. For a
    /// partition-state znode it is the partition epoch.
    pub version: i32,
    /// Number of changes to the children.
    pub cversion: i32,
    /// Session owning the node if ephemeral, else 0.
    pub ephemeral_owner: SessionId,
    /// Length of the data in bytes.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
}

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Lives until deleted.
    Persistent,
    /// Lives until deleted; the server appends a 10-digit sequence number to the name.
    PersistentSequential,
    /// Deleted when the creating session ends; cannot have children.
    Ephemeral,
    /// Ephemeral with a sequence number appended to the name.
    EphemeralSequential,
}

impl CreateMode {
    /// True for the ephemeral modes.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// True for the sequential modes.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// One operation of an atomic [`multi`](super::Coordination::multi).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an operation does nothing until it is passed to `Coordination::multi`"]
pub enum Op {
    /// Fails the multi unless the node exists with `version` (or any version for
    /// [`ANY_VERSION`]).
    Check {
        /// Path to check.
        path: String,
        /// Expected version.
        version: i32,
    },
    /// Creates a node.
    Create {
        /// Path (prefix for sequential modes).
        path: String,
        /// Initial data.
        data: Vec<u8>,
        /// Mode.
        mode: CreateMode,
    },
    /// Replaces a node's data if its version matches.
    SetData {
        /// Path.
        path: String,
        /// New data.
        data: Vec<u8>,
        /// Expected version or [`ANY_VERSION`].
        version: i32,
    },
    /// Deletes a childless node if its version matches.
    Delete {
        /// Path.
        path: String,
        /// Expected version or [`ANY_VERSION`].
        version: i32,
    },
}

impl Op {
    /// `Check { path, version }`.
    pub fn check(path: impl Into<String>, version: i32) -> Op {
        Op::Check {
            path: path.into(),
            version,
        }
    }

    /// `Create { path, data, mode }`.
    pub fn create(path: impl Into<String>, data: impl Into<Vec<u8>>, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: data.into(),
            mode,
        }
    }

    /// `SetData { path, data, version }`.
    pub fn set_data(path: impl Into<String>, data: impl Into<Vec<u8>>, version: i32) -> Op {
        Op::SetData {
            path: path.into(),
            data: data.into(),
            version,
        }
    }

    /// `Delete { path, version }`.
    pub fn delete(path: impl Into<String>, version: i32) -> Op {
        Op::Delete {
            path: path.into(),
            version,
        }
    }

    /// The path the operation works on.
    pub fn path(&self) -> &str {
        match self {
            Op::Check { path, .. }
            | Op::Create { path, .. }
            | Op::SetData { path, .. }
            | Op::Delete { path, .. } => path,
        }
    }
}

/// The result of one operation of a successful `multi`, in the order of the operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The check passed.
    Check,
    /// The node was created at `path` (with the sequence number for sequential modes).
    Create {
        /// The created path.
        path: String,
    },
    /// The data was replaced; `stat` is the node's new metadata.
    SetData {
        /// New metadata (its `version` is the next expected version).
        stat: Stat,
    },
    /// The node was deleted.
    Delete,
}

/// What happened to a watched node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEventKind {
    /// A node watched by `exists` while absent was created.
    NodeCreated,
    /// A watched node was deleted.
    NodeDeleted,
    /// A watched node's data changed.
    NodeDataChanged,
    /// A node's children (watched by `children`) changed.
    NodeChildrenChanged,
}

/// A fired watch. Watches are one-shot, as in ZooKeeper: each fires at most once and is
/// registered again by reading with `watch = true`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchEvent {
    /// What happened.
    pub kind: WatchEventKind,
    /// The watched path.
    pub path: String,
}

/// The state of a client's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Connected; operations and watches work.
    Connected,
    /// Connection lost, the session may still be alive (it will be resumed or expire);
    /// operations fail with `ConnectionLoss`, watch events are delivered after reconnection.
    Disconnected,
    /// The session expired: its ephemerals and watches are gone. The client opens a new
    /// session by itself and reports `Connected` with the new id.
    Expired,
    /// The client was closed.
    Closed,
}

/// A change of session state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// (Re)connected with this session. After `Expired`, a *new* session id: re-create ephemerals
    /// and re-register watches (Kafka's controller re-registers and re-elects here).
    Connected {
        /// The current session.
        session_id: SessionId,
    },
    /// The connection was lost; the session may still be alive.
    Disconnected,
    /// The session `session_id` expired; its ephemerals are deleted and its watches gone.
    Expired {
        /// The expired session.
        session_id: SessionId,
    },
    /// The client was closed.
    Closed,
}

/// One item of a client's event stream, in the order the client observed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinationEvent {
    /// A watch fired.
    Watch(WatchEvent),
    /// The session state changed.
    Session(SessionEvent),
}

/// The event stream of a client (see [`Coordination::events`](super::Coordination::events)).
pub type EventStream = Pin<Box<dyn Stream<Item = CoordinationEvent> + Send>>;
