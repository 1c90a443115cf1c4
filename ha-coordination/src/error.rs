//! [`CoordinationError`]: the typed errors of every [`Coordination`](super::Coordination)
//! operation, named after ZooKeeper's error codes.

/// Why a coordination operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinationError {
    /// The node (or, for a create, its parent) does not exist.
    #[error("no node {path}")]
    NoNode {
        /// The path that was missing.
        path: String,
    },
    /// A node already exists at the path.
    #[error("node {path} already exists")]
    NodeExists {
        /// The path.
        path: String,
    },
    /// The node's version differs from the expected one.
    #[error("version mismatch on {path}")]
    BadVersion {
        /// The path.
        path: String,
    },
    /// The node still has children and cannot be deleted.
    #[error("node {path} has children")]
    NotEmpty {
        /// The path.
        path: String,
    },
    /// The parent is ephemeral; ephemeral nodes cannot have children.
    #[error("ephemeral parent of {path} cannot have children")]
    NoChildrenForEphemerals {
        /// The path whose creation was refused.
        path: String,
    },
    /// The path is not a valid absolute ZooKeeper path.
    #[error("invalid path {path:?}: {reason}")]
    BadPath {
        /// The offending path.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Arguments that no server would accept (e.g. deleting `/`).
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// The session has expired; its ephemeral nodes and watches are gone.
    #[error("session expired")]
    SessionExpired,
    /// The connection is (temporarily) lost; the outcome of a write is unknown.
    #[error("connection lost")]
    ConnectionLoss,
    /// The client has been closed.
    #[error("client closed")]
    Closed,
    /// Operation `index` of a `multi` failed with `error`; nothing of the multi was applied.
    #[error("multi operation {index} failed: {error}")]
    MultiOpFailed {
        /// Index of the first failing operation.
        index: usize,
        /// Its error.
        error: Box<CoordinationError>,
    },
    /// Any other failure reported by the backend.
    #[error("coordination backend error: {0}")]
    Backend(String),
}

impl CoordinationError {
    /// The error itself, or for a failed `multi` the failing operation's error.
    pub fn root(&self) -> &CoordinationError {
        match self {
            CoordinationError::MultiOpFailed { error, .. } => error.root(),
            other => other,
        }
    }

    /// True for [`NoNode`](Self::NoNode) (also inside a failed multi).
    pub fn is_no_node(&self) -> bool {
        matches!(self.root(), CoordinationError::NoNode { .. })
    }

    /// True for [`NodeExists`](Self::NodeExists) (also inside a failed multi).
    pub fn is_node_exists(&self) -> bool {
        matches!(self.root(), CoordinationError::NodeExists { .. })
    }

    /// True for [`BadVersion`](Self::BadVersion) (also inside a failed multi).
    pub fn is_bad_version(&self) -> bool {
        matches!(self.root(), CoordinationError::BadVersion { .. })
    }

    /// True when the session or connection is gone: the caller should re-read its state once
    /// connected again (and, after expiry, re-create its ephemerals and watches).
    pub fn is_session_problem(&self) -> bool {
        matches!(
            self.root(),
            CoordinationError::SessionExpired
                | CoordinationError::ConnectionLoss
                | CoordinationError::Closed
        )
    }
}
