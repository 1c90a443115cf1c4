//! The conformance suite of the [`Coordination`](crate::Coordination) trait: ZooKeeper's semantics as the
//! controller relies on them, runnable against any implementation (the in-memory one and the
//! real-ZooKeeper one both pass it; so must yours).
//!
//! The suite has the shape of every conformance suite of the workspace: a builder the
//! implementer provides — here [`CoordinationCluster`]: connect a new client, expire a session,
//! optionally cut one off and let it back — a [`test_all`] that runs every case in order and
//! returns the first failure as a typed [`ConformanceError`] naming the case, and the single
//! cases as public functions. Each case works under its own root path `/<case name>`, removed
//! first if it exists, so the cases can share one server.
//!
//! ```
//! use ha_coordination::{conformance, MemoryCluster};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! conformance::test_all(&MemoryCluster::new()).await.unwrap();
//! # });
//! ```

// Before the submodules, so they see it (textual macro scope).
/// Fails the case with a formatted message unless the condition holds.
macro_rules! ensure {
    ($case:expr, $cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::conformance::ConformanceError::Expectation {
                case: $case.name,
                message: format!($($msg)+),
            });
        }
    };
}

mod case;
mod nodes;
mod watches;

pub use case::delete_recursive;
pub use nodes::{
    bulk_read, conditional_writes, create_and_read, multi_is_atomic,
    multi_reports_the_first_bad_version, sequential_nodes, typed_errors,
};
pub use watches::{
    child_watch, close_removes_ephemerals, connection_loss_keeps_the_session,
    data_watch_is_one_shot, exists_watch_sees_creation, session_expiry,
};

use crate::cluster::CoordinationCluster;
use crate::error::CoordinationError;

/// A failed conformance case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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

impl ConformanceError {
    /// The name of the failed case.
    pub fn case(&self) -> &'static str {
        match self {
            ConformanceError::Operation { case, .. }
            | ConformanceError::Expectation { case, .. } => case,
        }
    }
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
pub async fn test_all(h: &dyn CoordinationCluster) -> Result<(), ConformanceError> {
    create_and_read(h).await?;
    typed_errors(h).await?;
    sequential_nodes(h).await?;
    conditional_writes(h).await?;
    multi_is_atomic(h).await?;
    multi_reports_the_first_bad_version(h).await?;
    bulk_read(h).await?;
    data_watch_is_one_shot(h).await?;
    exists_watch_sees_creation(h).await?;
    child_watch(h).await?;
    session_expiry(h).await?;
    connection_loss_keeps_the_session(h).await?;
    close_removes_ephemerals(h).await?;
    Ok(())
}
