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
//! Decoding checks every length against the bytes left, so arbitrary bytes give a
//! [`RecordError`] and never a panic or an unbounded allocation.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a `__consumer_offsets` key or value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The bytes end before a field does.
    #[error("record truncated: {needed} bytes needed, {remaining} left")]
    Truncated {
        /// Bytes the next field needs.
        needed: usize,
        /// Bytes that remain.
        remaining: usize,
    },
    /// A value version this coordinator cannot read.
    #[error("unsupported {record} version {version}")]
    UnsupportedVersion {
        /// The record type.
        record: &'static str,
        /// The version read.
        version: i16,
    },
    /// A length that is negative where null is not allowed, or out of range.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A string that is not UTF-8.
    #[error("string is not UTF-8")]
    InvalidUtf8,
    /// A non-null field that was null.
    #[error("field {0} must not be null")]
    UnexpectedNull(&'static str),
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
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        match self {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                w.put_i16(1);
                put_string(&mut w, group);
                put_string(&mut w, topic);
                w.put_i32(*partition);
            }
            RecordKey::GroupMetadata { group } => {
                w.put_i16(2);
                put_string(&mut w, group);
            }
        }
        w.freeze()
    }

    /// Reads a key; `Ok(None)` for a key version of another record type (3 and above).
    pub fn decode(bytes: &[u8]) -> Result<Option<RecordKey>, RecordError> {
        let mut r = Reader::new(bytes, false);
        let version = r.i16()?;
        match version {
            0 | 1 => Ok(Some(RecordKey::OffsetCommit {
                group: r.string("group")?,
                topic: r.string("topic")?,
                partition: r.i32()?,
            })),
            2 => Ok(Some(RecordKey::GroupMetadata {
                group: r.string("group")?,
            })),
            v if v > 2 => Ok(None),
            v => Err(RecordError::UnsupportedVersion {
                record: "key",
                version: v,
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
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        if self.expire_timestamp >= 0 {
            w.put_i16(1);
            w.put_i64(self.offset);
            put_string(&mut w, &self.metadata);
            w.put_i64(self.commit_timestamp);
            w.put_i64(self.expire_timestamp);
        } else {
            w.put_i16(3);
            w.put_i64(self.offset);
            w.put_i32(self.leader_epoch);
            put_string(&mut w, &self.metadata);
            w.put_i64(self.commit_timestamp);
        }
        w.freeze()
    }

    /// Reads a value of version 0 to 4.
    pub fn decode(bytes: &[u8]) -> Result<OffsetCommitValue, RecordError> {
        let mut r = Reader::new(bytes, false);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                record: "OffsetCommitValue",
                version,
            });
        }
        r.flexible = version >= 4;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string("metadata")?;
        let commit_timestamp = r.i64()?;
        let expire_timestamp = if version == 1 { r.i64()? } else { -1 };
        r.skip_tagged_fields()?;
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
            expire_timestamp,
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
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(3);
        put_string(&mut w, &self.protocol_type);
        w.put_i32(self.generation);
        put_nullable_string(&mut w, self.protocol.as_deref());
        put_nullable_string(&mut w, self.leader.as_deref());
        w.put_i64(self.current_state_timestamp);
        w.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_string(&mut w, &m.member_id);
            put_nullable_string(&mut w, m.group_instance_id.as_deref());
            put_string(&mut w, &m.client_id);
            put_string(&mut w, &m.client_host);
            w.put_i32(m.rebalance_timeout);
            w.put_i32(m.session_timeout);
            w.put_i32(m.subscription.len() as i32);
            w.put_slice(&m.subscription);
            w.put_i32(m.assignment.len() as i32);
            w.put_slice(&m.assignment);
        }
        w.freeze()
    }

    /// Reads a value of version 0 to 4.
    pub fn decode(bytes: &[u8]) -> Result<GroupMetadataValue, RecordError> {
        let mut r = Reader::new(bytes, false);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                record: "GroupMetadataValue",
                version,
            });
        }
        r.flexible = version >= 4;
        let protocol_type = r.string("protocolType")?;
        let generation = r.i32()?;
        let protocol = r.nullable_string()?;
        let leader = r.nullable_string()?;
        let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        // Each member takes at least 4 bytes on the wire, which bounds the count.
        let count = r.array_len(4)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = r.string("memberId")?;
            let group_instance_id = if version >= 3 {
                r.nullable_string()?
            } else {
                None
            };
            let client_id = r.string("clientId")?;
            let client_host = r.string("clientHost")?;
            let rebalance_timeout = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout = r.i32()?;
            let subscription = r.bytes("subscription")?;
            let assignment = r.bytes("assignment")?;
            r.skip_tagged_fields()?;
            members.push(MemberMetadataValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            });
        }
        r.skip_tagged_fields()?;
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

fn put_string(w: &mut BytesMut, s: &str) {
    w.put_i16(s.len() as i16);
    w.put_slice(s.as_bytes());
}

fn put_nullable_string(w: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(w, s),
        None => w.put_i16(-1),
    }
}

/// A bounds-checked reader over a record's bytes.
struct Reader<'a> {
    buf: &'a [u8],
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], flexible: bool) -> Self {
        Reader { buf, flexible }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.buf.len() < n {
            return Err(RecordError::Truncated {
                needed: n,
                remaining: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn uvarint(&mut self) -> Result<u64, RecordError> {
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::InvalidLength(-1))
    }

    /// A length: `None` for null.
    fn len(&mut self, int32: bool) -> Result<Option<usize>, RecordError> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else if int32 {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        match n {
            -1 => Ok(None),
            n if n < -1 => Err(RecordError::InvalidLength(n)),
            n => Ok(Some(n as usize)),
        }
    }

    fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => {
                let b = self.take(n)?;
                std::str::from_utf8(b)
                    .map(|s| Some(s.to_owned()))
                    .map_err(|_| RecordError::InvalidUtf8)
            }
        }
    }

    fn string(&mut self, field: &'static str) -> Result<String, RecordError> {
        self.nullable_string()?
            .ok_or(RecordError::UnexpectedNull(field))
    }

    fn bytes(&mut self, field: &'static str) -> Result<Bytes, RecordError> {
        match self.len(true)? {
            None => Err(RecordError::UnexpectedNull(field)),
            Some(n) => Ok(Bytes::copy_from_slice(self.take(n)?)),
        }
    }

    /// An array length, checked against the bytes left at `min_size` bytes per element.
    fn array_len(&mut self, min_size: usize) -> Result<usize, RecordError> {
        let n = self
            .len(true)?
            .ok_or(RecordError::UnexpectedNull("array"))?;
        if n.saturating_mul(min_size) > self.buf.len() {
            return Err(RecordError::Truncated {
                needed: n.saturating_mul(min_size),
                remaining: self.buf.len(),
            });
        }
        Ok(n)
    }

    fn skip_tagged_fields(&mut self) -> Result<(), RecordError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let k = RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(RecordKey::decode(&k.encode()).unwrap(), Some(k));
        let k = RecordKey::GroupMetadata { group: "g".into() };
        assert_eq!(RecordKey::decode(&k.encode()).unwrap(), Some(k));
        let v = OffsetCommitValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1000,
            expire_timestamp: -1,
        };
        assert_eq!(OffsetCommitValue::decode(&v.encode()).unwrap(), v);
        let v1 = OffsetCommitValue {
            leader_epoch: -1,
            expire_timestamp: 5000,
            ..v
        };
        assert_eq!(OffsetCommitValue::decode(&v1.encode()).unwrap(), v1);
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
        assert_eq!(GroupMetadataValue::decode(&g.encode()).unwrap(), g);
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
        let v = OffsetCommitValue::decode(&w).unwrap();
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
        assert_eq!(RecordKey::decode(&w).unwrap(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for len in 0..64usize {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
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
            GroupMetadataValue::decode(&w),
            Err(RecordError::Truncated { .. })
        ));
    }
}
