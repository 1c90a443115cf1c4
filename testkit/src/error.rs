//! The harness's typed errors.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, probing or stopping ZooKeeper servers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// ZooKeeper (its jar) or a Java runtime is not installed; `CI` is set, so the test must fail.
    #[error("ZooKeeper is not available ({0}); install Debian's `zookeeper` package (scripts/test.sh does)")]
    ZooKeeperMissing(String),
    /// A Python interpreter or module a real-client test needs is missing; `CI` is set, so the
    /// test must fail.
    #[error("Python client missing ({0}); scripts/test.sh makes a virtual environment with them and sets HA_PYTHON")]
    PythonMissing(String),
    /// An operating-system call (spawn, file, socket) failed.
    #[error("{context}: {source}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No server with this id belongs to the ensemble (or it is an external entry).
    #[error("no local ZooKeeper server with sid {0}")]
    UnknownServer(u64),
    /// The server's process is not running (killed or stopped).
    #[error("ZooKeeper server {0} is not running")]
    NotRunning(u64),
    /// The server's process exited before it answered; its log is at `log`.
    #[error("ZooKeeper server {sid} exited early ({status}); log at {log}")]
    ExitedEarly {
        /// Server id.
        sid: u64,
        /// The exit status as printed by the OS.
        status: String,
        /// Path of the server's log file.
        log: PathBuf,
    },
    /// A wait ran out of time.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long the harness waited.
        waited: Duration,
    },
    /// A four-letter-word answer could not be parsed.
    #[error("unexpected four-letter-word answer: {0:?}")]
    BadAnswer(String),
    /// The builder was given an inconsistent configuration.
    #[error("invalid ensemble configuration: {0}")]
    InvalidConfig(String),
    /// A network-namespace operation of a [`Lab`](crate::netns::Lab) failed.
    #[error("network namespace: {0}")]
    Netns(String),
}

impl TestkitError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TestkitError::Io {
            context: context.into(),
            source,
        }
    }
}
