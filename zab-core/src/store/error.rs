//! Typed errors of the election stores.

use std::path::PathBuf;

/// Why a store could not load or save its state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The state file does not exist. Use `FileElectionStore::create_fresh` to start a new
    /// server; an existing server's state is never silently reset.
    #[error("election state file {path} is missing")]
    Missing {
        /// The file that was expected.
        path: PathBuf,
    },
    /// The state file exists but cannot be trusted (bad header, field, checksum).
    #[error("election state file {path} is corrupt: {reason}")]
    Corrupt {
        /// The corrupt file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// `create_fresh` found an existing state file and refused to overwrite it.
    #[error("election state file {path} already exists")]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// An operating-system error while reading or writing.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
