//! ZooKeeper's jute `QuorumPacket` as spoken on the quorum port, with the packet types and
//! payloads of discovery, synchronisation, broadcast and heartbeats. Both [`crate::discovery`]
//! and [`crate::broadcast`] speak it; neither imports the other for it.
//!
//! A stream carries records back to back with no outer length prefix:
//! `i32 type; i64 zxid; buffer data (i32 len, -1 = null); vector<Id> authinfo (i32 count, -1 = null)`.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Largest `data` buffer we accept (ZooKeeper's default `jute.maxbuffer` is about 1 MiB).
pub const MAX_PACKET_DATA: usize = 1 << 20;
/// Largest authinfo vector we accept.
pub const MAX_AUTH_ENTRIES: usize = 64;
/// Largest authinfo string we accept.
pub const MAX_AUTH_STRING: usize = 4096;
/// The learner protocol version ZooKeeper 3.8 announces (`0x10000`).
pub const LEARNER_PROTOCOL_VERSION: i32 = 0x10000;

/// `epoch << 32`: the zxid of LEADERINFO, NEWLEADER and their acknowledgements.
pub fn epoch_zxid(epoch: i64) -> i64 {
    epoch.wrapping_shl(32)
}

/// `zxid >> 32`.
pub fn zxid_epoch(zxid: i64) -> i64 {
    zxid >> 32
}

/// Packet types of the quorum port (the packet constants of ZooKeeper's `Leader`).
pub mod packet_type {
    /// Learner forwards a client write to the leader (zxid −1).
    pub const REQUEST: i32 = 1;
    /// Leader proposes a transaction (zxid, payload).
    pub const PROPOSAL: i32 = 2;
    /// Leader commits a proposed transaction.
    pub const COMMIT: i32 = 4;
    /// `sync` barrier: learner → leader asks, leader → learner answers.
    pub const SYNC: i32 = 7;
    /// Leader tells an observer a committed transaction with its payload.
    pub const INFORM: i32 = 8;
    /// Follower acknowledges a proposal, NEWLEADER or UPTODATE.
    pub const ACK: i32 = 3;
    /// Heartbeat, both directions (Z6).
    pub const PING: i32 = 5;
    /// Leader announces the new epoch is established (zxid = epoch << 32).
    pub const NEWLEADER: i32 = 10;
    /// Follower opens discovery with its accepted epoch.
    pub const FOLLOWERINFO: i32 = 11;
    /// Leader tells the learner it may serve.
    pub const UPTODATE: i32 = 12;
    /// Leader's sync choice: a (possibly empty) diff.
    pub const DIFF: i32 = 13;
    /// Leader's sync choice: truncate.
    pub const TRUNC: i32 = 14;
    /// Leader's sync choice: snapshot.
    pub const SNAP: i32 = 15;
    /// Observer opens discovery.
    pub const OBSERVERINFO: i32 = 16;
    /// Leader proposes the new epoch.
    pub const LEADERINFO: i32 = 17;
    /// Learner acknowledges the new epoch with its current epoch and last zxid.
    pub const ACKEPOCH: i32 = 18;
}

/// One authentication id of a REQUEST packet (`scheme`, `id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthId {
    /// Scheme, e.g. `ip`.
    pub scheme: String,
    /// Identity within the scheme.
    pub id: String,
}

/// A jute `QuorumPacket`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPacket {
    /// Packet type (see [`packet_type`]).
    pub kind: i32,
    /// The zxid field (meaning depends on the type).
    pub zxid: i64,
    /// The data buffer; `None` encodes as length −1.
    pub data: Option<Bytes>,
    /// The authinfo vector; `None` encodes as count −1.
    pub auth: Option<Vec<AuthId>>,
}

/// Why a quorum packet could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PacketError {
    /// The input ended inside a record.
    #[error("truncated quorum packet")]
    Truncated,
    /// A length or count is negative (other than −1) or above our limits.
    #[error("bad length {0} in quorum packet")]
    BadLength(i64),
    /// A string is not UTF-8.
    #[error("authinfo string is not UTF-8")]
    BadUtf8,
    /// The payload of a known packet type has the wrong shape.
    #[error("malformed {0} payload")]
    BadPayload(&'static str),
    /// A learner claims an epoch or zxid no correct learner can hold.
    #[error("impossible {what} {value:#x} from a learner")]
    Impossible {
        /// Which field.
        what: &'static str,
        /// The claimed value.
        value: i64,
    },
}

/// The largest epoch a learner may have accepted: the next leader proposes one more, and an
/// epoch must fit the 32 high bits of a zxid (Z4).
pub const MAX_ACCEPTED_EPOCH: i64 = i32::MAX as i64 - 1;

/// Checks what a learner claims in discovery before the leader acts on it (Z1, Z4, Z5):
///
/// - FOLLOWERINFO / OBSERVERINFO: `zxid` is `acceptedEpoch << 32` with
///   `0 <= acceptedEpoch <=` [`MAX_ACCEPTED_EPOCH`] and a zero counter; the data, if any, is
///   a `LearnerInfo` naming `from` itself.
/// - ACKEPOCH (once `new_epoch` is proposed): `lastZxid` is −1 or a zxid whose epoch is in
///   `0..=new_epoch`; `currentEpoch` is −1 or in `0..=new_epoch`.
///
/// Other packet types are not checked here.
pub fn check_learner_claim(
    p: &QuorumPacket,
    from: i64,
    new_epoch: Option<i64>,
) -> Result<(), PacketError> {
    let impossible = |what, value| Err(PacketError::Impossible { what, value });
    match p.kind {
        packet_type::FOLLOWERINFO | packet_type::OBSERVERINFO => {
            let epoch = p.zxid >> 32;
            if p.zxid & 0xffff_ffff != 0 || !(0..=MAX_ACCEPTED_EPOCH).contains(&epoch) {
                return impossible("acceptedEpoch zxid", p.zxid);
            }
            // (A packet without data is a legacy learner's; its sid is the connection's.)
            if let Some(d) = p.data.as_deref().filter(|d| !d.is_empty()) {
                let info = LearnerInfo::decode(d)?;
                if info.sid != from {
                    return impossible("LearnerInfo sid", info.sid);
                }
            }
            Ok(())
        }
        packet_type::ACKEPOCH => {
            let Some(new_epoch) = new_epoch else {
                return Ok(());
            };
            let cur = i64::from(decode_i32_payload(p.data.as_ref(), "ACKEPOCH")?);
            if cur != -1 && !(0..=new_epoch).contains(&cur) {
                return impossible("currentEpoch", cur);
            }
            if p.zxid != -1 && (p.zxid < 0 || p.zxid >> 32 > new_epoch) {
                return impossible("last zxid", p.zxid);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

impl QuorumPacket {
    /// A packet with no data and no authinfo.
    pub fn new(kind: i32, zxid: i64) -> Self {
        Self {
            kind,
            zxid,
            data: None,
            auth: None,
        }
    }

    /// A packet with a data buffer.
    pub fn with_data(kind: i32, zxid: i64, data: Bytes) -> Self {
        Self {
            kind,
            zxid,
            data: Some(data),
            auth: None,
        }
    }

    /// Appends the jute encoding to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_i32(self.kind);
        out.put_i64(self.zxid);
        match &self.data {
            None => out.put_i32(-1),
            Some(d) => {
                out.put_i32(d.len() as i32);
                out.put_slice(d);
            }
        }
        match &self.auth {
            None => out.put_i32(-1),
            Some(v) => {
                out.put_i32(v.len() as i32);
                for a in v {
                    for s in [&a.scheme, &a.id] {
                        out.put_i32(s.len() as i32);
                        out.put_slice(s.as_bytes());
                    }
                }
            }
        }
    }

    /// Decodes one record from the front of `buf`. Returns `Ok(None)` if `buf` does not yet hold
    /// a whole record (nothing is consumed then), so it can be used on a growing stream buffer.
    pub fn decode(buf: &mut BytesMut) -> Result<Option<Self>, PacketError> {
        let mut cur: &[u8] = buf;
        match decode_from(&mut cur) {
            Ok(p) => {
                let used = buf.len() - cur.len();
                buf.advance(used);
                Ok(Some(p))
            }
            Err(PacketError::Truncated) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn need(cur: &[u8], n: usize) -> Result<(), PacketError> {
    if cur.remaining() < n {
        Err(PacketError::Truncated)
    } else {
        Ok(())
    }
}

fn get_i32(cur: &mut &[u8]) -> Result<i32, PacketError> {
    need(cur, 4)?;
    Ok(cur.get_i32())
}

fn get_string(cur: &mut &[u8]) -> Result<String, PacketError> {
    let len = get_i32(cur)?;
    if len < 0 || len as usize > MAX_AUTH_STRING {
        return Err(PacketError::BadLength(len.into()));
    }
    need(cur, len as usize)?;
    let s = std::str::from_utf8(&cur[..len as usize])
        .map_err(|_| PacketError::BadUtf8)?
        .to_string();
    cur.advance(len as usize);
    Ok(s)
}

fn decode_from(cur: &mut &[u8]) -> Result<QuorumPacket, PacketError> {
    let kind = get_i32(cur)?;
    need(cur, 8)?;
    let zxid = cur.get_i64();
    let len = get_i32(cur)?;
    let data = match len {
        -1 => None,
        l if l < 0 || l as usize > MAX_PACKET_DATA => return Err(PacketError::BadLength(l.into())),
        l => {
            need(cur, l as usize)?;
            let d = Bytes::copy_from_slice(&cur[..l as usize]);
            cur.advance(l as usize);
            Some(d)
        }
    };
    let count = get_i32(cur)?;
    let auth = match count {
        -1 => None,
        c if c < 0 || c as usize > MAX_AUTH_ENTRIES => {
            return Err(PacketError::BadLength(c.into()))
        }
        c => {
            let mut v = Vec::with_capacity(c as usize);
            for _ in 0..c {
                let scheme = get_string(cur)?;
                let id = get_string(cur)?;
                v.push(AuthId { scheme, id });
            }
            Some(v)
        }
    };
    Ok(QuorumPacket {
        kind,
        zxid,
        data,
        auth,
    })
}

/// The `LearnerInfo` record carried by FOLLOWERINFO / OBSERVERINFO (20 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerInfo {
    /// The learner's sid.
    pub sid: i64,
    /// Learner protocol version (`0x10000` in 3.8).
    pub protocol_version: i32,
    /// Version of the learner's quorum configuration.
    pub config_version: i64,
}

impl LearnerInfo {
    /// Encodes the 20-byte record.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(20);
        b.put_i64(self.sid);
        b.put_i32(self.protocol_version);
        b.put_i64(self.config_version);
        b.freeze()
    }

    /// Decodes the record; older learners send only the sid (8 bytes) or sid + version (12).
    pub fn decode(mut data: &[u8]) -> Result<Self, PacketError> {
        if data.len() < 8 {
            return Err(PacketError::BadPayload("LearnerInfo"));
        }
        let sid = data.get_i64();
        let protocol_version = if data.len() >= 4 { data.get_i32() } else { 0 };
        let config_version = if data.len() >= 8 { data.get_i64() } else { 0 };
        Ok(Self {
            sid,
            protocol_version,
            config_version,
        })
    }
}

/// Reads the big-endian `i32` payload of LEADERINFO (protocol version) or ACKEPOCH (current epoch).
pub fn decode_i32_payload(data: Option<&Bytes>, what: &'static str) -> Result<i32, PacketError> {
    match data {
        Some(d) if d.len() >= 4 => Ok((&d[..4]).get_i32()),
        _ => Err(PacketError::BadPayload(what)),
    }
}

/// Encodes a big-endian `i32` payload.
pub fn i32_payload(v: i32) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_round_trips_and_partial_input_waits() {
        let p = QuorumPacket {
            kind: packet_type::FOLLOWERINFO,
            zxid: 5 << 32,
            data: Some(
                LearnerInfo {
                    sid: 1,
                    protocol_version: LEARNER_PROTOCOL_VERSION,
                    config_version: 0,
                }
                .encode(),
            ),
            auth: Some(vec![AuthId {
                scheme: "ip".into(),
                id: "127.0.0.1".into(),
            }]),
        };
        let mut b = BytesMut::new();
        p.encode(&mut b);
        let full = b.clone();
        let mut half = BytesMut::from(&full[..full.len() - 3]);
        assert_eq!(QuorumPacket::decode(&mut half), Ok(None));
        assert_eq!(half.len(), full.len() - 3);
        assert_eq!(QuorumPacket::decode(&mut b), Ok(Some(p)));
        assert!(b.is_empty());
    }

    #[test]
    fn a_huge_data_length_is_rejected_before_allocation() {
        let mut b = BytesMut::new();
        b.put_i32(5);
        b.put_i64(0);
        b.put_i32(i32::MAX);
        assert_eq!(
            QuorumPacket::decode(&mut b),
            Err(PacketError::BadLength(i32::MAX.into()))
        );
    }
}
