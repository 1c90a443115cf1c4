//! The `attributes` field of a record batch: compression codec, timestamp type, and the
//! transactional, control and delete-horizon flags.

use crate::DecodeError;

/// A record batch's compression codec (attribute bits 0–2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Records are stored as they are.
    #[default]
    None,
    /// gzip (feature `gzip`).
    Gzip,
    /// Snappy (feature `snappy`).
    Snappy,
    /// LZ4 frame format (feature `lz4`).
    Lz4,
    /// Zstandard (feature `zstd`).
    Zstd,
}

impl Compression {
    /// The codec for attribute bits 0–2; ids 5–7 are [`DecodeError::UnsupportedCompression`].
    pub fn from_id(id: u8) -> Result<Compression, DecodeError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(DecodeError::UnsupportedCompression(other)),
        }
    }

    /// The codec's id in the attributes.
    pub const fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Whether this build can compress and decompress with the codec (its cargo feature is on).
    pub const fn is_available(self) -> bool {
        match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            Compression::Lz4 => cfg!(feature = "lz4"),
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }
}

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Set by the producer.
    #[default]
    CreateTime,
    /// Set by the broker on append; every record's timestamp is the batch's `maxTimestamp`.
    LogAppendTime,
}

/// The 16-bit `attributes` of a record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Attributes(pub i16);

impl Attributes {
    const COMPRESSION_MASK: i16 = 0x07;
    const TIMESTAMP_TYPE: i16 = 0x08;
    const TRANSACTIONAL: i16 = 0x10;
    const CONTROL: i16 = 0x20;
    const DELETE_HORIZON: i16 = 0x40;

    /// The raw value.
    pub const fn raw(self) -> i16 {
        self.0
    }

    /// The compression codec id (bits 0–2), unchecked.
    pub const fn compression_id(self) -> u8 {
        (self.0 & Self::COMPRESSION_MASK) as u8
    }

    /// The compression codec; ids 5–7 are an error.
    pub fn compression(self) -> Result<Compression, DecodeError> {
        Compression::from_id(self.compression_id())
    }

    /// The timestamp type.
    pub const fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch belongs to a transaction.
    pub const fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    /// Whether the batch holds control records (transaction markers).
    pub const fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// Whether `baseTimestamp` holds the delete horizon of a compacted batch (KIP-534).
    pub const fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON != 0
    }

    /// Attributes from their parts.
    pub const fn new(
        compression: Compression,
        timestamp_type: TimestampType,
        transactional: bool,
        control: bool,
    ) -> Attributes {
        let mut v = compression.id() as i16;
        if matches!(timestamp_type, TimestampType::LogAppendTime) {
            v |= Self::TIMESTAMP_TYPE;
        }
        if transactional {
            v |= Self::TRANSACTIONAL;
        }
        if control {
            v |= Self::CONTROL;
        }
        Attributes(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_bits_round_trip() {
        let a = Attributes::new(Compression::Zstd, TimestampType::LogAppendTime, true, true);
        assert_eq!(a.raw(), 0x3c);
        assert_eq!(a.compression(), Ok(Compression::Zstd));
        assert_eq!(a.timestamp_type(), TimestampType::LogAppendTime);
        assert!(a.is_transactional() && a.is_control() && !a.has_delete_horizon());
        assert_eq!(
            Attributes(5).compression(),
            Err(DecodeError::UnsupportedCompression(5))
        );
    }
}
