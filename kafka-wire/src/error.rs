//! Typed errors of decoding and encoding.

use thiserror::Error;

/// Why some bytes could not be decoded.
///
/// Every decoder in this crate returns one of these instead of panicking; none of them is
/// produced after allocating more than a small multiple of the input's size.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before a value was complete.
    #[error("truncated input: {needed} bytes needed, {remaining} remain")]
    Truncated {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length or count is negative (where null is not allowed), or larger than the bytes
    /// that remain could hold.
    #[error("invalid length {length} for {what}")]
    InvalidLength {
        /// What was being read.
        what: &'static str,
        /// The length as read.
        length: i64,
    },
    /// A version outside the range this crate implements for that API.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
    /// An API key this crate does not implement.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// A variable-length integer longer than its type allows.
    #[error("malformed varint")]
    BadVarint,
    /// A string that is not valid UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A checksum that does not match the data.
    #[error("bad CRC: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc {
        /// The CRC stored in the input.
        stored: u32,
        /// The CRC computed over the input.
        computed: u32,
    },
    /// A frame larger than the configured maximum.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    FrameTooLarge {
        /// Size the frame declared.
        size: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A record batch or message set with a magic value other than 2.
    #[error("unsupported record magic {0}")]
    UnsupportedMagic(i8),
    /// A value that is well-formed but not allowed where it stands.
    #[error("invalid {what}: {reason}")]
    InvalidValue {
        /// What was being read.
        what: &'static str,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A compression codec that is unknown or not compiled in (see the crate's features).
    #[error("unsupported compression codec {0}")]
    UnsupportedCompression(u8),
    /// Decompression failed, or the decompressed data exceeded its bound.
    #[error("decompression failed: {0}")]
    Decompression(String),
}

/// Why a value could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A version outside the range this crate implements for that API.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
    /// A field holds a non-default value that the requested version cannot carry.
    #[error("field {field} cannot be encoded at version {version}")]
    FieldNotInVersion {
        /// The field's name.
        field: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// A null value in a field that is not nullable at the requested version.
    #[error("field {field} is not nullable at version {version}")]
    NullNotAllowed {
        /// The field's name.
        field: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// A string, byte string or array longer than its length prefix can express.
    #[error("{what} of length {length} is too long to encode")]
    TooLong {
        /// What was being written.
        what: &'static str,
        /// Its length.
        length: usize,
    },
    /// Compression failed.
    #[error("compression failed: {0}")]
    Compression(String),
}
