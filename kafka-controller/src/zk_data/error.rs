//! [`ZkDataError`]: why a znode's content could not be decoded.

/// A znode's content is not what ZooKeeper-mode Kafka writes there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZkDataError {
    /// The JSON is malformed or does not have the expected shape.
    #[error("malformed {what} JSON: {reason}")]
    Json {
        /// Which znode kind was decoded.
        what: &'static str,
        /// serde_json's description (line, column, what was expected).
        reason: String,
    },
    /// A plain-text znode (e.g. `/controller_epoch`) is not a decimal integer.
    #[error("malformed {what}: {content:?} is not an integer")]
    NotAnInteger {
        /// Which znode kind was decoded.
        what: &'static str,
        /// The offending content (at most 64 bytes, lossily decoded).
        content: String,
    },
    /// A topic id is not Kafka's 22-character URL-safe base64 form.
    #[error("malformed topic id {content:?}")]
    TopicId {
        /// The offending text (at most 64 characters).
        content: String,
    },
    /// A value encoded to JSON failed (never expected for these types).
    #[error("encoding {what} JSON failed: {reason}")]
    Encode {
        /// Which znode kind was encoded.
        what: &'static str,
        /// serde_json's description.
        reason: String,
    },
}

/// Decodes `bytes` as JSON into `T`, naming `what` in the error.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, ZkDataError> {
    serde_json::from_slice(bytes).map_err(|e| ZkDataError::Json {
        what,
        reason: e.to_string(),
    })
}

/// Encodes `value` as compact JSON.
pub(crate) fn encode<T: serde::Serialize>(
    what: &'static str,
    value: &T,
) -> Result<Vec<u8>, ZkDataError> {
    serde_json::to_vec(value).map_err(|e| ZkDataError::Encode {
        what,
        reason: e.to_string(),
    })
}
