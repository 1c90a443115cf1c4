//! The conformance suite of the [`Coordination`] trait: ZooKeeper's semantics as the
//! controller relies on them, runnable against any implementation (the in-memory one and the
//! real-ZooKeeper one both pass it; so must yours).
//!
//! Implement [`ConformanceHarness`] (connect a new client; expire a session), then call
//! [`run_all`] or the single cases. Each case works under its own root path `/<case name>`,
//! removed first if it exists, so the cases can share one server.
//!
//! ```
//! use kafka_controller::coordination::conformance::{self, MemoryHarness};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! conformance::run_all(&MemoryHarness::new()).await.unwrap();
//! # });
//! ```

// Before the submodules, so they see it (textual macro scope).
/// Fails the case with a formatted message unless the condition holds.
macro_rules! ensure {
    ($case:expr, $cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::coordination::conformance::ConformanceError::Expectation {
                case: $case.name,
                message: format!($($msg)+),
            });
        }
    };
}

mod case;
mod nodes;
mod watches;

use std::sync::Arc;

use async_trait::async_trait;

pub use case::delete_recursive;
pub use nodes::{
    bulk_read, conditional_writes, create_and_read, multi_is_atomic, sequential_nodes, typed_errors,
};
pub use watches::{
    child_watch, close_removes_ephemerals, connection_loss_keeps_the_session,
    data_watch_is_one_shot, exists_watch_sees_creation, session_expiry,
};

use super::error::CoordinationError;
use super::memory::MemoryTree;
use super::service::Coordination;
use super::types::SessionId;

/// What the suite needs from an implementation.
#[async_trait]
pub trait ConformanceHarness: Send + Sync {
    /// A new client, with a new session, on the store shared by all clients of this harness.
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError>;

    /// Makes session `session` (of a client from [`connect`](Self::connect)) expire, as the
    /// server does when the session times out.
    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError>;

    /// Cuts session `session`'s client off from the service (a connection loss) without
    /// ending the session. Returns `false` when the harness cannot, which skips the cases
    /// that need it. The default cannot.
    async fn disconnect(&self, session: SessionId) -> Result<bool, CoordinationError> {
        let _ = session;
        Ok(false)
    }

    /// Lets a client cut off by [`disconnect`](Self::disconnect) reconnect.
    async fn reconnect(&self, session: SessionId) -> Result<(), CoordinationError> {
        let _ = session;
        Ok(())
    }
}

/// A failed conformance case.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// An operation that should have succeeded failed.
    #[error("{case}: {context}: {error}")]
    Operation {
        /// The case.
        case: &'static str,
        /// What the case was doing.
        context: String,
        /// The error.
        error: CoordinationError,
    },
    /// An expectation did not hold.
    #[error("{case}: {message}")]
    Expectation {
        /// The case.
        case: &'static str,
        /// What was expected and what happened.
        message: String,
    },
}

pub(crate) fn op_err(
    case: &'static str,
    context: &'static str,
) -> impl Fn(CoordinationError) -> ConformanceError {
    move |error| ConformanceError::Operation {
        case,
        context: context.to_string(),
        error,
    }
}

/// Runs every case in order and stops at the first failure.
pub async fn run_all(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    create_and_read(h).await?;
    typed_errors(h).await?;
    sequential_nodes(h).await?;
    conditional_writes(h).await?;
    multi_is_atomic(h).await?;
    bulk_read(h).await?;
    data_watch_is_one_shot(h).await?;
    exists_watch_sees_creation(h).await?;
    child_watch(h).await?;
    session_expiry(h).await?;
    connection_loss_keeps_the_session(h).await?;
    close_removes_ephemerals(h).await?;
    Ok(())
}

/// The harness for [`MemoryCoordination`](super::MemoryCoordination): clients on one
/// [`MemoryTree`], expiry through [`MemoryTree::expire`].
#[derive(Debug, Clone, Default)]
pub struct MemoryHarness {
    tree: MemoryTree,
}

impl MemoryHarness {
    /// A harness on a new tree.
    pub fn new() -> MemoryHarness {
        MemoryHarness::default()
    }
}

#[async_trait]
impl ConformanceHarness for MemoryHarness {
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        Ok(Arc::new(self.tree.connect()))
    }

    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        if self.tree.expire(session) {
            Ok(())
        } else {
            Err(CoordinationError::SessionExpired)
        }
    }

    async fn disconnect(&self, session: SessionId) -> Result<bool, CoordinationError> {
        Ok(self.tree.suspend(session))
    }

    async fn reconnect(&self, session: SessionId) -> Result<(), CoordinationError> {
        self.tree.resume(session);
        Ok(())
    }
}
