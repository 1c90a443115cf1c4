//! Control records, which control batches hold: the record key says the type (transaction
//! commit or abort markers, and KRaft's own types), and for commit and abort the value holds
//! the [`EndTransactionMarker`].
//!
//! Key: `version int16` (0), `type int16`. End-transaction value: `version int16` (0),
//! `coordinatorEpoch int32`.

use super::record::Record;
use crate::DecodeError;

/// The type of a control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// A transaction was aborted (type 0).
    Abort,
    /// A transaction was committed (type 1).
    Commit,
    /// KRaft leader change (type 2).
    LeaderChange,
    /// KRaft snapshot header (type 3).
    SnapshotHeader,
    /// KRaft snapshot footer (type 4).
    SnapshotFooter,
    /// KRaft version (type 5).
    KraftVersion,
    /// KRaft voters (type 6).
    KraftVoters,
    /// A type this crate does not know.
    Unknown(i16),
}

impl ControlRecordType {
    /// The type for its number.
    pub const fn from_id(id: i16) -> ControlRecordType {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KraftVersion,
            6 => ControlRecordType::KraftVoters,
            other => ControlRecordType::Unknown(other),
        }
    }

    /// The type's number.
    pub const fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KraftVersion => 5,
            ControlRecordType::KraftVoters => 6,
            ControlRecordType::Unknown(id) => id,
        }
    }

    /// Reads the type from a control record's key.
    pub fn from_key(key: Option<&[u8]>) -> Result<ControlRecordType, DecodeError> {
        let key = key.ok_or(DecodeError::InvalidValue {
            what: "control record key",
            reason: "null",
        })?;
        if key.len() < 4 {
            return Err(DecodeError::Truncated {
                needed: 4,
                remaining: key.len(),
            });
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(DecodeError::InvalidValue {
                what: "control record key version",
                reason: "negative",
            });
        }
        Ok(ControlRecordType::from_id(i16::from_be_bytes([
            key[2], key[3],
        ])))
    }

    /// The record key for this type (version 0).
    pub fn key(self) -> [u8; 4] {
        let id = self.id().to_be_bytes();
        [0, 0, id[0], id[1]]
    }
}

/// The commit or abort marker a transaction coordinator writes to each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTransactionMarker {
    /// Whether the transaction committed ([`ControlRecordType::Commit`]) or aborted.
    pub kind: ControlRecordType,
    /// Epoch of the coordinator that wrote the marker.
    pub coordinator_epoch: i32,
}

impl EndTransactionMarker {
    /// Reads a marker from a control record; other control types are an error.
    pub fn from_record(record: &Record) -> Result<EndTransactionMarker, DecodeError> {
        let kind = ControlRecordType::from_key(record.key.as_deref())?;
        if !matches!(kind, ControlRecordType::Commit | ControlRecordType::Abort) {
            return Err(DecodeError::InvalidValue {
                what: "control record type",
                reason: "not an end-transaction marker",
            });
        }
        let value = record.value.as_deref().ok_or(DecodeError::InvalidValue {
            what: "end transaction marker",
            reason: "null value",
        })?;
        if value.len() < 6 {
            return Err(DecodeError::Truncated {
                needed: 6,
                remaining: value.len(),
            });
        }
        Ok(EndTransactionMarker {
            kind,
            coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
        })
    }

    /// The record value of the marker (version 0).
    pub fn value(&self) -> [u8; 6] {
        let e = self.coordinator_epoch.to_be_bytes();
        [0, 0, e[0], e[1], e[2], e[3]]
    }
}
