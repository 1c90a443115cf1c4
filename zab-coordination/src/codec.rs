//! The bytes Zab carries for the coordination store: transactions (create / close a session, a
//! multi of znode operations), each tagged with the originating server's request id so that
//! server can hand the result to its caller, and the snapshot of the replicated state. Every
//! length is checked against what is left: a malformed payload is a typed error, never a panic
//! or an unbounded allocation.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ha_coordination::{CreateMode, Op, SessionId, Stat};

/// Who waits for a transaction's result: a server incarnation and its request counter.
/// `Origin::NONE` for transactions nobody waits for (a leader's expiry of a session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The originating server incarnation (unique in the process).
    pub server: u64,
    /// The request id at that server.
    pub request: u64,
}

impl Origin {
    /// No one waits.
    pub const NONE: Origin = Origin {
        server: 0,
        request: 0,
    };
}

/// What a transaction does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnBody {
    /// Opens a session with this timeout; the session's id is the transaction's zxid.
    CreateSession {
        /// Session timeout in milliseconds.
        timeout_ms: i32,
    },
    /// Ends a session: its ephemerals are deleted (ZooKeeper's `closeSession`).
    CloseSession {
        /// The session.
        session: SessionId,
    },
    /// Znode operations of a session, all or nothing.
    Multi {
        /// The session.
        session: SessionId,
        /// The operations.
        ops: Vec<Op>,
    },
}

/// A transaction with its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordTxn {
    /// Who waits for the result.
    pub origin: Origin,
    /// What it does.
    pub body: TxnBody,
}

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The payload ended early.
    #[error("payload truncated while reading {0}")]
    Truncated(&'static str),
    /// An unknown tag.
    #[error("unknown {what} tag {tag}")]
    BadTag {
        /// Which field.
        what: &'static str,
        /// The tag.
        tag: u8,
    },
    /// A string that is not UTF-8.
    #[error("path is not UTF-8")]
    NotUtf8,
    /// Bytes left over after the value.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

const TXN_CREATE_SESSION: u8 = 1;
const TXN_CLOSE_SESSION: u8 = 2;
const TXN_MULTI: u8 = 3;
const OP_CHECK: u8 = 1;
const OP_CREATE: u8 = 2;
const OP_SET: u8 = 3;
const OP_DELETE: u8 = 4;

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
    out.put_slice(b);
}

fn mode_tag(m: CreateMode) -> u8 {
    match m {
        CreateMode::Persistent => 0,
        CreateMode::PersistentSequential => 1,
        CreateMode::Ephemeral => 2,
        CreateMode::EphemeralSequential => 3,
    }
}

impl CoordTxn {
    /// The payload to propose.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        let tag = match self.body {
            TxnBody::CreateSession { .. } => TXN_CREATE_SESSION,
            TxnBody::CloseSession { .. } => TXN_CLOSE_SESSION,
            TxnBody::Multi { .. } => TXN_MULTI,
        };
        out.put_u8(tag);
        out.put_u64(self.origin.server);
        out.put_u64(self.origin.request);
        match &self.body {
            TxnBody::CreateSession { timeout_ms } => out.put_i32(*timeout_ms),
            TxnBody::CloseSession { session } => out.put_i64(*session),
            TxnBody::Multi { session, ops } => {
                out.put_i64(*session);
                out.put_u32(u32::try_from(ops.len()).unwrap_or(u32::MAX));
                for op in ops {
                    encode_op(&mut out, op);
                }
            }
        }
        out.freeze()
    }

    /// Reads a payload written by [`encode`](Self::encode).
    pub fn decode(data: &[u8]) -> Result<CoordTxn, CodecError> {
        let mut r = Reader(data);
        let tag = r.u8("txn tag")?;
        let origin = Origin {
            server: r.u64("origin")?,
            request: r.u64("origin")?,
        };
        let body = match tag {
            TXN_CREATE_SESSION => TxnBody::CreateSession {
                timeout_ms: r.i32("timeout")?,
            },
            TXN_CLOSE_SESSION => TxnBody::CloseSession {
                session: r.i64("session")?,
            },
            TXN_MULTI => {
                let session = r.i64("session")?;
                let n = r.u32("op count")? as usize;
                // Each op takes at least 9 bytes: never reserve more than the payload can hold.
                let mut ops = Vec::with_capacity(n.min(r.0.len() / 9));
                for _ in 0..n {
                    ops.push(decode_op(&mut r)?);
                }
                TxnBody::Multi { session, ops }
            }
            tag => return Err(CodecError::BadTag { what: "txn", tag }),
        };
        r.finish()?;
        Ok(CoordTxn { origin, body })
    }
}

fn encode_op(out: &mut BytesMut, op: &Op) {
    match op {
        Op::Check { path, version } => {
            out.put_u8(OP_CHECK);
            put_bytes(out, path.as_bytes());
            out.put_i32(*version);
        }
        Op::Create { path, data, mode } => {
            out.put_u8(OP_CREATE);
            put_bytes(out, path.as_bytes());
            put_bytes(out, data);
            out.put_u8(mode_tag(*mode));
        }
        Op::SetData {
            path,
            data,
            version,
        } => {
            out.put_u8(OP_SET);
            put_bytes(out, path.as_bytes());
            put_bytes(out, data);
            out.put_i32(*version);
        }
        Op::Delete { path, version } => {
            out.put_u8(OP_DELETE);
            put_bytes(out, path.as_bytes());
            out.put_i32(*version);
        }
    }
}

fn decode_op(r: &mut Reader<'_>) -> Result<Op, CodecError> {
    let tag = r.u8("op tag")?;
    let path = r.string()?;
    Ok(match tag {
        OP_CHECK => Op::Check {
            path,
            version: r.i32("version")?,
        },
        OP_CREATE => {
            let data = r.bytes("data")?.to_vec();
            let mode = match r.u8("mode")? {
                0 => CreateMode::Persistent,
                1 => CreateMode::PersistentSequential,
                2 => CreateMode::Ephemeral,
                3 => CreateMode::EphemeralSequential,
                tag => return Err(CodecError::BadTag { what: "mode", tag }),
            };
            Op::Create { path, data, mode }
        }
        OP_SET => Op::SetData {
            path,
            data: r.bytes("data")?.to_vec(),
            version: r.i32("version")?,
        },
        OP_DELETE => Op::Delete {
            path,
            version: r.i32("version")?,
        },
        tag => return Err(CodecError::BadTag { what: "op", tag }),
    })
}

/// The replicated state: sessions with their timeouts, and every znode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnapshotData {
    /// Open sessions and their timeouts (ms).
    pub sessions: Vec<(SessionId, i32)>,
    /// Every node, parents first.
    pub nodes: Vec<(String, Vec<u8>, Stat)>,
}

impl SnapshotData {
    /// Serialises the state.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_u32(u32::try_from(self.sessions.len()).unwrap_or(u32::MAX));
        for (s, t) in &self.sessions {
            out.put_i64(*s);
            out.put_i32(*t);
        }
        out.put_u32(u32::try_from(self.nodes.len()).unwrap_or(u32::MAX));
        for (path, data, st) in &self.nodes {
            put_bytes(&mut out, path.as_bytes());
            put_bytes(&mut out, data);
            for v in [st.czxid, st.mzxid, st.pzxid, st.ctime, st.mtime] {
                out.put_i64(v);
            }
            out.put_i32(st.version);
            out.put_i32(st.cversion);
            out.put_i64(st.ephemeral_owner);
        }
        out.freeze()
    }

    /// Reads what [`encode`](Self::encode) wrote.
    pub fn decode(data: &[u8]) -> Result<SnapshotData, CodecError> {
        let mut r = Reader(data);
        let n = r.u32("session count")? as usize;
        let mut sessions = Vec::with_capacity(n.min(r.0.len() / 12));
        for _ in 0..n {
            sessions.push((r.i64("session")?, r.i32("timeout")?));
        }
        let n = r.u32("node count")? as usize;
        let mut nodes = Vec::with_capacity(n.min(r.0.len() / 72));
        for _ in 0..n {
            let path = r.string()?;
            let data = r.bytes("data")?.to_vec();
            let st = Stat {
                czxid: r.i64("stat")?,
                mzxid: r.i64("stat")?,
                pzxid: r.i64("stat")?,
                ctime: r.i64("stat")?,
                mtime: r.i64("stat")?,
                version: r.i32("stat")?,
                cversion: r.i32("stat")?,
                ephemeral_owner: r.i64("stat")?,
                data_length: 0,
                num_children: 0,
            };
            nodes.push((path, data, st));
        }
        r.finish()?;
        Ok(SnapshotData { sessions, nodes })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn need(&self, n: usize, what: &'static str) -> Result<(), CodecError> {
        if self.0.len() < n {
            Err(CodecError::Truncated(what))
        } else {
            Ok(())
        }
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, CodecError> {
        self.need(1, what)?;
        Ok(self.0.get_u8())
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, CodecError> {
        self.need(4, what)?;
        Ok(self.0.get_u32())
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, CodecError> {
        self.need(4, what)?;
        Ok(self.0.get_i32())
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, CodecError> {
        self.need(8, what)?;
        Ok(self.0.get_u64())
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, CodecError> {
        self.need(8, what)?;
        Ok(self.0.get_i64())
    }
    fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], CodecError> {
        let n = self.u32(what)? as usize;
        self.need(n, what)?;
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(b)
    }
    fn string(&mut self) -> Result<String, CodecError> {
        let b = self.bytes("path")?;
        String::from_utf8(b.to_vec()).map_err(|_| CodecError::NotUtf8)
    }
    fn finish(&self) -> Result<(), CodecError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(CodecError::Trailing(self.0.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_round_trip_and_every_truncation_is_an_error() {
        let t = CoordTxn {
            origin: Origin {
                server: 3,
                request: 9,
            },
            body: TxnBody::Multi {
                session: 42,
                ops: vec![
                    Op::check("/a", 1),
                    Op::create("/a/b", b"x".to_vec(), CreateMode::EphemeralSequential),
                    Op::set_data("/a", b"yy".to_vec(), -1),
                    Op::delete("/c", 0),
                ],
            },
        };
        let b = t.encode();
        assert_eq!(CoordTxn::decode(&b), Ok(t));
        for cut in 0..b.len() {
            assert!(CoordTxn::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_to_a_value_or_an_error_never_a_panic(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)
        ) {
            let _ = CoordTxn::decode(&data);
            let _ = SnapshotData::decode(&data);
        }
    }

    #[test]
    fn a_huge_op_count_in_a_short_payload_is_refused_without_allocating_it() {
        let mut b = BytesMut::new();
        b.put_u8(TXN_MULTI);
        b.put_u64(0);
        b.put_u64(0);
        b.put_i64(1);
        b.put_u32(u32::MAX);
        assert_eq!(CoordTxn::decode(&b), Err(CodecError::Truncated("op tag")));
    }
}
