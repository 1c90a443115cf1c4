//! The records of `__consumer_offsets`: the keys and values a coordinator appends and loads.
//!
//! A key starts with an `int16` version that names the record type: versions 0 and 1 are an
//! `OffsetCommitKey` (group, topic, partition), version 2 a `GroupMetadataKey` (group). Later
//! key versions belong to record types of the KIP-848 coordinator and are skipped on load
//! ([`RecordKey::decode`] answers `None`). Values carry their own `int16` version too:
//! `OffsetCommitValue` 0-4 and `GroupMetadataValue` 0-4 are read (version 4 of both is the
//! flexible encoding with compact strings and tagged fields); this coordinator writes
//! `OffsetCommitValue` v3 (v1 when the commit carries an explicit expire timestamp, as Kafka's
//! `GroupMetadataManager.offsetCommitValue`), `GroupMetadataValue` v3, `OffsetCommitKey` v1 and
//! `GroupMetadataKey` v2. A key with a null value is a tombstone.
//!
//! The bytes are those of `kafka-wire`'s record types, generated from Kafka's specs of these
//! records ([`kafka_wire::DataRecord`]); the types here are the coordinator's own view of them.
//! Decoding checks every length against the bytes left, so arbitrary bytes give a
//! [`RecordError`] and never a panic or an unbounded allocation. Encoding fails (never writes
//! a wrong length) when a string does not fit the version written, e.g. a group id longer
//! than an `int16` string can hold.

use bytes::Bytes;
use kafka_wire::messages as wire;
use kafka_wire::{DataRecord, DecodeError, EncodeError};

/// Why a `__consumer_offsets` key or value could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The bytes are not a record of this type at any version read here.
    #[error("reading {record}: {source}")]
    Decode {
        /// The record type.
        record: &'static str,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// The record cannot be written at the version written (a string too long for it).
    #[error("writing {record}: {source}")]
    Encode {
        /// The record type.
        record: &'static str,
        /// Why.
        #[source]
        source: EncodeError,
    },
}

fn decode_err(record: &'static str) -> impl Fn(DecodeError) -> RecordError {
    move |source| RecordError::Decode { record, source }
}

fn encode_err(record: &'static str) -> impl Fn(EncodeError) -> RecordError {
    move |source| RecordError::Encode { record, source }
}

/// The key of a `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKey {
    /// `OffsetCommitKey`: the committed offset of one partition for one group.
    OffsetCommit {
        /// The group id.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// `GroupMetadataKey`: the metadata (generation, members, assignment) of one group.
    GroupMetadata {
        /// The group id.
        group: String,
    },
}

impl RecordKey {
    /// The group this key belongs to.
    pub fn group(&self) -> &str {
        match self {
            RecordKey::OffsetCommit { group, .. } | RecordKey::GroupMetadata { group } => group,
        }
    }

    /// The key's bytes (`OffsetCommitKey` v1, `GroupMetadataKey` v2).
    pub fn encode(&self) -> Result<Bytes, RecordError> {
        match self {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => wire::OffsetCommitKey {
                group: group.as_str().into(),
                topic: topic.as_str().into(),
                partition: *partition,
                ..Default::default()
            }
            .to_versioned_bytes(1)
            .map_err(encode_err("OffsetCommitKey")),
            RecordKey::GroupMetadata { group } => wire::GroupMetadataKey {
                group: group.as_str().into(),
                ..Default::default()
            }
            .to_versioned_bytes(2)
            .map_err(encode_err("GroupMetadataKey")),
        }
    }

    /// Reads a key; `Ok(None)` for a key version of another record type (3 and above).
    pub fn decode(bytes: &Bytes) -> Result<Option<RecordKey>, RecordError> {
        let version = match bytes.as_ref() {
            [a, b, ..] => i16::from_be_bytes([*a, *b]),
            _ => {
                return Err(RecordError::Decode {
                    record: "key",
                    source: DecodeError::Truncated {
                        needed: 2,
                        remaining: bytes.len(),
                    },
                })
            }
        };
        // A clone of `Bytes` shares the buffer: the strings read are slices of the record.
        let bytes = bytes.clone();
        match version {
            0 | 1 => {
                let (_, k) = wire::OffsetCommitKey::from_versioned_bytes(bytes)
                    .map_err(decode_err("OffsetCommitKey"))?;
                Ok(Some(RecordKey::OffsetCommit {
                    group: k.group.to_string(),
                    topic: k.topic.to_string(),
                    partition: k.partition,
                }))
            }
            2 => {
                let (_, k) = wire::GroupMetadataKey::from_versioned_bytes(bytes)
                    .map_err(decode_err("GroupMetadataKey"))?;
                Ok(Some(RecordKey::GroupMetadata {
                    group: k.group.to_string(),
                }))
            }
            v if v > 2 => Ok(None),
            v => Err(RecordError::Decode {
                record: "key",
                source: DecodeError::UnsupportedVersion {
                    api_key: -1,
                    version: v,
                },
            }),
        }
    }
}

/// `OffsetCommitValue`: a committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitValue {
    /// The committed offset.
    pub offset: i64,
    /// The leader epoch of the committed offset, -1 when unknown.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When the commit was made (ms).
    pub commit_timestamp: i64,
    /// The explicit expiry time of a commit with a retention time (v1 only), -1 when none.
    pub expire_timestamp: i64,
}

impl OffsetCommitValue {
    /// The value's bytes: v3, or v1 when `expire_timestamp` is set.
    pub fn encode(&self) -> Result<Bytes, RecordError> {
        let (version, leader_epoch) = if self.expire_timestamp >= 0 {
            (1, -1)
        } else {
            (3, self.leader_epoch)
        };
        wire::OffsetCommitValue {
            offset: self.offset,
            leader_epoch,
            metadata: self.metadata.as_str().into(),
            commit_timestamp: self.commit_timestamp,
            expire_timestamp: self.expire_timestamp,
            ..Default::default()
        }
        .to_versioned_bytes(version)
        .map_err(encode_err("OffsetCommitValue"))
    }

    /// Reads a value of version 0 to 4.
    pub fn decode(bytes: &Bytes) -> Result<OffsetCommitValue, RecordError> {
        let (_, v) = wire::OffsetCommitValue::from_versioned_bytes(bytes.clone())
            .map_err(decode_err("OffsetCommitValue"))?;
        Ok(OffsetCommitValue {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata.to_string(),
            commit_timestamp: v.commit_timestamp,
            expire_timestamp: v.expire_timestamp,
        })
    }
}

/// One member in a `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    /// The member id.
    pub member_id: String,
    /// The static member's `group.instance.id` (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// The rebalance timeout (ms), -1 when not recorded (v0).
    pub rebalance_timeout: i32,
    /// The session timeout (ms).
    pub session_timeout: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// `GroupMetadataValue`: a group's generation, protocol, leader and members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupMetadataValue {
    /// The protocol type (`"consumer"`), empty for none.
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The selected protocol, if any.
    pub protocol: Option<String>,
    /// The leader's member id, if any.
    pub leader: Option<String>,
    /// When the group entered its current state (ms), -1 when unknown.
    pub current_state_timestamp: i64,
    /// The members.
    pub members: Vec<MemberMetadataValue>,
}

impl GroupMetadataValue {
    /// The value's bytes (v3).
    pub fn encode(&self) -> Result<Bytes, RecordError> {
        wire::GroupMetadataValue {
            protocol_type: self.protocol_type.as_str().into(),
            generation: self.generation,
            protocol: self.protocol.as_deref().map(Into::into),
            leader: self.leader.as_deref().map(Into::into),
            current_state_timestamp: self.current_state_timestamp,
            members: self
                .members
                .iter()
                .map(|m| wire::group_metadata_value::MemberMetadata {
                    member_id: m.member_id.as_str().into(),
                    group_instance_id: m.group_instance_id.as_deref().map(Into::into),
                    client_id: m.client_id.as_str().into(),
                    client_host: m.client_host.as_str().into(),
                    rebalance_timeout: m.rebalance_timeout,
                    session_timeout: m.session_timeout,
                    subscription: m.subscription.clone(),
                    assignment: m.assignment.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
        .to_versioned_bytes(3)
        .map_err(encode_err("GroupMetadataValue"))
    }

    /// Reads a value of version 0 to 4.
    pub fn decode(bytes: &Bytes) -> Result<GroupMetadataValue, RecordError> {
        let (_, v) = wire::GroupMetadataValue::from_versioned_bytes(bytes.clone())
            .map_err(decode_err("GroupMetadataValue"))?;
        Ok(GroupMetadataValue {
            protocol_type: v.protocol_type.to_string(),
            generation: v.generation,
            protocol: v.protocol.map(|p| p.to_string()),
            leader: v.leader.map(|l| l.to_string()),
            current_state_timestamp: v.current_state_timestamp,
            members: v
                .members
                .into_iter()
                .map(|m| MemberMetadataValue {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    rebalance_timeout: m.rebalance_timeout,
                    session_timeout: m.session_timeout,
                    subscription: m.subscription,
                    assignment: m.assignment,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    fn put_string(w: &mut BytesMut, s: &str) {
        w.put_i16(s.len() as i16);
        w.put_slice(s.as_bytes());
    }

    #[test]
    fn keys_and_values_round_trip() {
        let k = RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(RecordKey::decode(&k.encode().unwrap()).unwrap(), Some(k));
        let k = RecordKey::GroupMetadata { group: "g".into() };
        assert_eq!(RecordKey::decode(&k.encode().unwrap()).unwrap(), Some(k));
        let v = OffsetCommitValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1000,
            expire_timestamp: -1,
        };
        assert_eq!(OffsetCommitValue::decode(&v.encode().unwrap()).unwrap(), v);
        let v1 = OffsetCommitValue {
            leader_epoch: -1,
            expire_timestamp: 5000,
            ..v
        };
        assert_eq!(
            OffsetCommitValue::decode(&v1.encode().unwrap()).unwrap(),
            v1
        );
        let g = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            current_state_timestamp: 99,
            members: vec![MemberMetadataValue {
                member_id: "c-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout: 300_000,
                session_timeout: 10_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupMetadataValue::decode(&g.encode().unwrap()).unwrap(), g);
    }

    #[test]
    fn flexible_v4_values_are_read() {
        // OffsetCommitValue v4: offset, leaderEpoch, compact metadata, commitTimestamp, tags.
        let mut w = BytesMut::new();
        w.put_i16(4);
        w.put_i64(10);
        w.put_i32(2);
        w.put_u8(2); // compact string of length 1
        w.put_slice(b"x");
        w.put_i64(77);
        w.put_u8(1); // one tagged field
        w.put_u8(9);
        w.put_u8(1);
        w.put_u8(0xff);
        let v = OffsetCommitValue::decode(&w.freeze()).unwrap();
        assert_eq!(
            (v.offset, v.leader_epoch, v.metadata.as_str()),
            (10, 2, "x")
        );
    }

    #[test]
    fn later_key_versions_are_other_record_types() {
        let mut w = BytesMut::new();
        w.put_i16(3);
        put_string(&mut w, "g");
        assert_eq!(RecordKey::decode(&w.freeze()).unwrap(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for len in 0..64usize {
            let bytes: Bytes = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = RecordKey::decode(&bytes);
            let _ = OffsetCommitValue::decode(&bytes);
            let _ = GroupMetadataValue::decode(&bytes);
        }
        let mut w = BytesMut::new();
        w.put_i16(3);
        put_string(&mut w, "");
        w.put_i32(0);
        w.put_i16(-1);
        w.put_i16(-1);
        w.put_i64(0);
        w.put_i32(i32::MAX);
        assert!(matches!(
            GroupMetadataValue::decode(&w.freeze()),
            Err(RecordError::Decode { .. })
        ));
    }

    /// A string longer than an `int16` string can hold is an error, never a wrong length
    /// written into `__consumer_offsets`.
    #[test]
    fn a_group_id_too_long_for_the_key_is_an_encode_error() {
        let k = RecordKey::GroupMetadata {
            group: "g".repeat(40_000),
        };
        assert!(matches!(k.encode(), Err(RecordError::Encode { .. })));
    }
}
