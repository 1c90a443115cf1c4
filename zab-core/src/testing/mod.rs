//! Conformance suites (feature `testing`) for the storage and network traits of this crate:
//! [`txn_log`] for [`TxnLog`](crate::txnlog::TxnLog), [`election_store`] for
//! [`ElectionStore`](crate::store::ElectionStore), [`state_machine`] for
//! [`StateMachine`](crate::state_machine::StateMachine) and, with feature `tokio`, `transport`
//! for `Transport` (`crate::transport`).
//!
//! Every suite has one shape: a *builder* trait the implementer provides (build a fresh
//! instance; for storage also reopen the same one after a restart and, for files, damage them),
//! a `test_all(&builder)` that runs every case in order and stops at the first failure, and the
//! single cases as public functions. A failure is a [`ConformanceError`] naming the case and
//! what went wrong; nothing panics to report it.

pub mod election_store;
pub mod state_machine;
#[cfg(feature = "tokio")]
pub mod transport;
pub mod txn_log;

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
        #[source]
        error: Box<dyn std::error::Error + Send + Sync>,
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

/// One running case: its name, for the errors it reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case(pub(crate) &'static str);

impl Case {
    /// `r`'s value, or an [`ConformanceError::Operation`] saying what the case was doing.
    pub(crate) fn op<T, E>(self, context: &str, r: Result<T, E>) -> Result<T, ConformanceError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        r.map_err(|error| ConformanceError::Operation {
            case: self.0,
            context: context.to_string(),
            error: Box::new(error),
        })
    }

    /// Fails unless `cond` holds.
    pub(crate) fn ensure(
        self,
        cond: bool,
        message: impl FnOnce() -> String,
    ) -> Result<(), ConformanceError> {
        if cond {
            Ok(())
        } else {
            Err(self.fail(message()))
        }
    }

    /// Fails unless `got == want`.
    pub(crate) fn eq<T: PartialEq + std::fmt::Debug>(
        self,
        what: &str,
        got: T,
        want: T,
    ) -> Result<(), ConformanceError> {
        self.ensure(got == want, || {
            format!("{what}: expected {want:?}, got {got:?}")
        })
    }

    /// An [`ConformanceError::Expectation`] of this case.
    pub(crate) fn fail(self, message: String) -> ConformanceError {
        ConformanceError::Expectation {
            case: self.0,
            message,
        }
    }
}
