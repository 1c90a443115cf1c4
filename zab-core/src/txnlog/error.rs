//! Typed errors of the transaction logs.

use std::path::PathBuf;

use crate::zxid::Zxid;

/// Why a transaction log operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TxnLogError {
    /// An appended zxid does not exceed the last one.
    #[error("zxid {got} does not follow {last}")]
    OutOfOrder {
        /// The last zxid already logged (or earlier in the same batch).
        last: Zxid,
        /// The offending zxid.
        got: Zxid,
    },
    /// A transaction payload above [`MAX_TXN_DATA`](super::MAX_TXN_DATA).
    #[error("transaction of {len} bytes is too large")]
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// A file exists but cannot be trusted (bad magic, length or checksum) in a place where
    /// no torn-tail recovery applies.
    #[error("{path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// An operating-system error.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
