//! The transactions that change ZooKeeper's data tree, as the ensemble replicates them: a
//! session opened or closed, one write, or a `multi` of writes. A transaction carries what
//! the applying servers need to decide the write's outcome identically (ZooKeeper decides it
//! in the leader's `PrepRequestProcessor`; here every server decides it when it applies the
//! committed transaction, against the same tree): the session, its authenticated ids for
//! the ACL checks, and the proposer's wall clock for `ctime` / `mtime`.
//!
//! The encoding is this crate's own (a version byte, then big-endian fields and
//! length-prefixed strings); decoding is bounded by the input's length and never panics.

use thiserror::Error;

use super::types::{Acl, CreateMode, Id};

/// The version byte at the front of an encoded [`ZkTxn`].
pub const TXN_VERSION: u8 = 1;

/// One replicated transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkTxn {
    /// The proposing server's incarnation: only that server hands the result to a caller.
    pub origin: u64,
    /// The session the transaction is for (the new session's id for `CreateSession`).
    pub session: i64,
    /// The request's xid, echoed in the reply.
    pub cxid: i32,
    /// The proposing server's wall clock in ms since the epoch (a node's `ctime` / `mtime`).
    pub time: i64,
    /// The session's authenticated ids (`digest:…`, `ip:…`, `super:`), for ACL checks.
    pub auth: Vec<Id>,
    /// What the transaction does.
    pub body: TxnBody,
}

/// What a [`ZkTxn`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnBody {
    /// Opens the session `ZkTxn::session` with this negotiated timeout (ms) and password.
    CreateSession {
        /// The negotiated session timeout, ms.
        timeout: i32,
        /// The session's password.
        passwd: Vec<u8>,
    },
    /// Closes the session: its ephemeral nodes are deleted.
    CloseSession,
    /// One write.
    Op(TxnOp),
    /// A `multi`: every op or none.
    Multi(Vec<TxnOp>),
}

/// One write on the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    /// `create`, `create2`, `createContainer`, `createTTL`.
    Create {
        /// The path (without the sequence suffix of a sequential mode).
        path: String,
        /// The data.
        data: Vec<u8>,
        /// The requested ACL (`auth:` entries are expanded at apply time).
        acl: Vec<Acl>,
        /// The mode.
        mode: CreateMode,
        /// The TTL in ms for a TTL mode; `-1` for every other mode, as ZooKeeper's
        /// `CreateRequest` (a TTL `>= 0` with a non-TTL mode is `BadArguments`, as
        /// `EphemeralType.validateTTL`).
        ttl: i64,
    },
    /// `delete`; `version` -1 matches any version.
    Delete {
        /// The path.
        path: String,
        /// The expected data version, -1 for any.
        version: i32,
    },
    /// `setData`; `version` -1 matches any version.
    SetData {
        /// The path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The expected data version, -1 for any.
        version: i32,
    },
    /// `setACL`; `version` -1 matches any ACL version.
    SetAcl {
        /// The path.
        path: String,
        /// The new ACL (`auth:` entries are expanded at apply time).
        acl: Vec<Acl>,
        /// The expected ACL version, -1 for any.
        version: i32,
    },
    /// `check` (inside a `multi`): the node's data version is `version` (-1: it exists).
    Check {
        /// The path.
        path: String,
        /// The expected data version, -1 for any.
        version: i32,
    },
    /// The leader's container / TTL reaper (`deleteContainer`): no ACL or version check.
    DeleteContainer {
        /// The path.
        path: String,
    },
}

impl TxnOp {
    /// The path the op is about.
    pub fn path(&self) -> &str {
        match self {
            TxnOp::Create { path, .. }
            | TxnOp::Delete { path, .. }
            | TxnOp::SetData { path, .. }
            | TxnOp::SetAcl { path, .. }
            | TxnOp::Check { path, .. }
            | TxnOp::DeleteContainer { path } => path,
        }
    }
}

/// Why bytes are not a [`ZkTxn`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TxnError {
    /// The input ended inside a field.
    #[error("truncated: {needed} more bytes needed for {what}")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// How many bytes were missing.
        needed: usize,
    },
    /// The version byte is not [`TXN_VERSION`].
    #[error("unknown transaction encoding version {0}")]
    UnknownVersion(u8),
    /// A tag byte is not one of the known values.
    #[error("unknown {what} tag {tag}")]
    UnknownTag {
        /// Which tag.
        what: &'static str,
        /// Its value.
        tag: u8,
    },
    /// A string is not UTF-8.
    #[error("{0} is not UTF-8")]
    BadUtf8(&'static str),
    /// Bytes are left after the transaction.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
}

impl ZkTxn {
    /// The transaction's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(TXN_VERSION);
        w.u64(self.origin);
        w.i64(self.session);
        w.i32(self.cxid);
        w.i64(self.time);
        w.len(self.auth.len());
        for id in &self.auth {
            w.id(id);
        }
        match &self.body {
            TxnBody::CreateSession { timeout, passwd } => {
                w.u8(0);
                w.i32(*timeout);
                w.bytes(passwd);
            }
            TxnBody::CloseSession => w.u8(1),
            TxnBody::Op(op) => {
                w.u8(2);
                write_op(&mut w, op);
            }
            TxnBody::Multi(ops) => {
                w.u8(3);
                w.len(ops.len());
                for op in ops {
                    write_op(&mut w, op);
                }
            }
        }
        w.out
    }

    /// Decodes [`encode`](Self::encode)'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<ZkTxn, TxnError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("version")?;
        if version != TXN_VERSION {
            return Err(TxnError::UnknownVersion(version));
        }
        let origin = r.u64("origin")?;
        let session = r.i64("session")?;
        let cxid = r.i32("cxid")?;
        let time = r.i64("time")?;
        let n = r.count("auth", 8)?;
        let mut auth = Vec::with_capacity(n);
        for _ in 0..n {
            auth.push(r.id()?);
        }
        let body = match r.u8("body")? {
            0 => TxnBody::CreateSession {
                timeout: r.i32("timeout")?,
                passwd: r.bytes("passwd")?.to_vec(),
            },
            1 => TxnBody::CloseSession,
            2 => TxnBody::Op(read_op(&mut r)?),
            3 => {
                let n = r.count("multi", 5)?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(read_op(&mut r)?);
                }
                TxnBody::Multi(ops)
            }
            tag => return Err(TxnError::UnknownTag { what: "body", tag }),
        };
        r.finish()?;
        Ok(ZkTxn {
            origin,
            session,
            cxid,
            time,
            auth,
            body,
        })
    }
}

fn write_op(w: &mut Writer, op: &TxnOp) {
    match op {
        TxnOp::Create {
            path,
            data,
            acl,
            mode,
            ttl,
        } => {
            w.u8(0);
            w.str(path);
            w.bytes(data);
            w.acl(acl);
            // Flags are 0..=6: one byte.
            w.u8(mode.flags() as u8);
            w.i64(*ttl);
        }
        TxnOp::Delete { path, version } => {
            w.u8(1);
            w.str(path);
            w.i32(*version);
        }
        TxnOp::SetData {
            path,
            data,
            version,
        } => {
            w.u8(2);
            w.str(path);
            w.bytes(data);
            w.i32(*version);
        }
        TxnOp::SetAcl { path, acl, version } => {
            w.u8(3);
            w.str(path);
            w.acl(acl);
            w.i32(*version);
        }
        TxnOp::Check { path, version } => {
            w.u8(4);
            w.str(path);
            w.i32(*version);
        }
        TxnOp::DeleteContainer { path } => {
            w.u8(5);
            w.str(path);
        }
    }
}

fn read_op(r: &mut Reader<'_>) -> Result<TxnOp, TxnError> {
    Ok(match r.u8("op")? {
        0 => {
            let path = r.string("path")?;
            let data = r.bytes("data")?.to_vec();
            let acl = r.acl()?;
            let flags = r.u8("mode")?;
            let mode = CreateMode::from_flags(i32::from(flags)).ok_or(TxnError::UnknownTag {
                what: "create mode",
                tag: flags,
            })?;
            let ttl = r.i64("ttl")?;
            TxnOp::Create {
                path,
                data,
                acl,
                mode,
                ttl,
            }
        }
        1 => TxnOp::Delete {
            path: r.string("path")?,
            version: r.i32("version")?,
        },
        2 => TxnOp::SetData {
            path: r.string("path")?,
            data: r.bytes("data")?.to_vec(),
            version: r.i32("version")?,
        },
        3 => TxnOp::SetAcl {
            path: r.string("path")?,
            acl: r.acl()?,
            version: r.i32("version")?,
        },
        4 => TxnOp::Check {
            path: r.string("path")?,
            version: r.i32("version")?,
        },
        5 => TxnOp::DeleteContainer {
            path: r.string("path")?,
        },
        tag => return Err(TxnError::UnknownTag { what: "op", tag }),
    })
}

/// Big-endian writer shared by the transaction and snapshot encodings.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) out: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub(crate) fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    /// A length or count. In-memory values never reach 4 GiB (ZooKeeper's `jute.maxbuffer`
    /// bounds every request far below that).
    pub(crate) fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.out.extend_from_slice(b);
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    pub(crate) fn id(&mut self, id: &Id) {
        self.str(&id.scheme);
        self.str(&id.id);
    }
    pub(crate) fn acl(&mut self, acl: &[Acl]) {
        self.len(acl.len());
        for a in acl {
            self.i32(a.perms);
            self.id(&a.id);
        }
    }
}

/// Bounded big-endian reader: every length is checked against what is left.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], TxnError> {
        if self.rest.len() < n {
            return Err(TxnError::Truncated {
                what,
                needed: n - self.rest.len(),
            });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], TxnError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, TxnError> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, TxnError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, TxnError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, TxnError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, TxnError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }
    /// A count of elements of at least `min_size` bytes each: refused when the rest of the
    /// input cannot hold that many, so a forged count never allocates.
    pub(crate) fn count(&mut self, what: &'static str, min_size: usize) -> Result<usize, TxnError> {
        let n = self.u32(what)? as usize;
        let need = n.saturating_mul(min_size.max(1));
        if need > self.rest.len() {
            return Err(TxnError::Truncated {
                what,
                needed: need - self.rest.len(),
            });
        }
        Ok(n)
    }
    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], TxnError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
    pub(crate) fn string(&mut self, what: &'static str) -> Result<String, TxnError> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| TxnError::BadUtf8(what))
    }
    pub(crate) fn id(&mut self) -> Result<Id, TxnError> {
        Ok(Id {
            scheme: self.string("id scheme")?,
            id: self.string("id")?,
        })
    }
    pub(crate) fn acl(&mut self) -> Result<Vec<Acl>, TxnError> {
        let n = self.count("acl", 12)?;
        let mut acl = Vec::with_capacity(n);
        for _ in 0..n {
            let perms = self.i32("perms")?;
            acl.push(Acl {
                perms,
                id: self.id()?,
            });
        }
        Ok(acl)
    }
    pub(crate) fn finish(&self) -> Result<(), TxnError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(TxnError::TrailingBytes(self.rest.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zookeeper::types::perms;
    use proptest::prelude::*;

    fn arb_string() -> impl Strategy<Value = String> {
        "[/a-z0-9é]{0,12}"
    }

    fn arb_acl() -> impl Strategy<Value = Vec<Acl>> {
        proptest::collection::vec(
            (0..=perms::ALL, arb_string(), arb_string()).prop_map(|(p, s, i)| Acl {
                perms: p,
                id: Id::new(s, i),
            }),
            0..3,
        )
    }

    fn arb_op() -> impl Strategy<Value = TxnOp> {
        prop_oneof![
            (
                arb_string(),
                proptest::collection::vec(any::<u8>(), 0..8),
                arb_acl(),
                0..7i32,
                any::<i64>()
            )
                .prop_map(|(path, data, acl, f, ttl)| TxnOp::Create {
                    path,
                    data,
                    acl,
                    mode: CreateMode::from_flags(f).unwrap_or(CreateMode::Persistent),
                    ttl
                }),
            (arb_string(), any::<i32>())
                .prop_map(|(path, version)| TxnOp::Delete { path, version }),
            (
                arb_string(),
                proptest::collection::vec(any::<u8>(), 0..8),
                any::<i32>()
            )
                .prop_map(|(path, data, version)| TxnOp::SetData {
                    path,
                    data,
                    version
                }),
            (arb_string(), arb_acl(), any::<i32>())
                .prop_map(|(path, acl, version)| TxnOp::SetAcl { path, acl, version }),
            (arb_string(), any::<i32>()).prop_map(|(path, version)| TxnOp::Check { path, version }),
            arb_string().prop_map(|path| TxnOp::DeleteContainer { path }),
        ]
    }

    fn arb_txn() -> impl Strategy<Value = ZkTxn> {
        let body = prop_oneof![
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..16))
                .prop_map(|(timeout, passwd)| TxnBody::CreateSession { timeout, passwd }),
            Just(TxnBody::CloseSession),
            arb_op().prop_map(TxnBody::Op),
            proptest::collection::vec(arb_op(), 0..4).prop_map(TxnBody::Multi),
        ];
        (
            any::<u64>(),
            any::<i64>(),
            any::<i32>(),
            any::<i64>(),
            proptest::collection::vec(
                (arb_string(), arb_string()).prop_map(|(s, i)| Id::new(s, i)),
                0..3,
            ),
            body,
        )
            .prop_map(|(origin, session, cxid, time, auth, body)| ZkTxn {
                origin,
                session,
                cxid,
                time,
                auth,
                body,
            })
    }

    proptest! {
        #[test]
        fn txn_encode_decode_round_trips(txn in arb_txn()) {
            let bytes = txn.encode();
            prop_assert_eq!(ZkTxn::decode(&bytes), Ok(txn.clone()));
            // Every strict prefix is refused, never misread.
            for cut in 0..bytes.len() {
                prop_assert!(ZkTxn::decode(&bytes[..cut]).is_err());
            }
        }
    }

    #[test]
    fn a_forged_count_is_refused_without_allocating() {
        let mut w = Writer::default();
        w.u8(TXN_VERSION);
        w.u64(1);
        w.i64(2);
        w.i32(3);
        w.i64(4);
        w.u32(u32::MAX);
        assert!(matches!(
            ZkTxn::decode(&w.out),
            Err(TxnError::Truncated { what: "auth", .. })
        ));
    }

    #[test]
    fn an_unknown_version_is_refused() {
        assert_eq!(ZkTxn::decode(&[9]), Err(TxnError::UnknownVersion(9)));
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut bytes = ZkTxn {
            origin: 1,
            session: 2,
            cxid: 3,
            time: 4,
            auth: vec![],
            body: TxnBody::CloseSession,
        }
        .encode();
        bytes.push(0);
        assert_eq!(ZkTxn::decode(&bytes), Err(TxnError::TrailingBytes(1)));
    }

    #[test]
    fn fuzz_txn_decode_never_panics_and_reencodes() {
        bolero::check!().for_each(|input: &[u8]| {
            if let Ok(t) = ZkTxn::decode(input) {
                assert_eq!(t.encode(), input);
            }
        });
    }

    #[test]
    fn fuzz_txn_decode_of_mutated_valid_txns_never_panics() {
        let valid = ZkTxn {
            origin: 1,
            session: 2,
            cxid: 3,
            time: 4,
            auth: vec![Id::new("digest", "a:b")],
            body: TxnBody::Multi(vec![
                TxnOp::Create {
                    path: "/a".into(),
                    data: b"x".to_vec(),
                    acl: Acl::open_unsafe(),
                    mode: CreateMode::EphemeralSequential,
                    ttl: -1,
                },
                TxnOp::SetAcl {
                    path: "/a".into(),
                    acl: Acl::open_unsafe(),
                    version: 1,
                },
            ]),
        }
        .encode();
        bolero::check!()
            .with_type::<(u16, u8)>()
            .for_each(|(at, byte)| {
                let mut b = valid.clone();
                let i = usize::from(*at) % b.len();
                b[i] = *byte;
                if let Ok(t) = ZkTxn::decode(&b) {
                    assert_eq!(t.encode(), b);
                }
            });
    }
}

/// The leader's check of every write before it proposes it
/// ([`zab_core::peer::PeerConfig::request_validator`]): the payload must be a well-formed
/// [`ZkTxn`] whose paths are absolute and free of NUL characters, and a `createSession` must
/// carry a 16-byte password and a positive timeout. The server a client is connected to makes
/// the same checks (and ZooKeeper's rules) before forwarding; this keeps what a faulty or
/// hostile peer forwards out of every log.
pub fn validate_payload(bytes: &[u8]) -> Result<(), String> {
    let txn = ZkTxn::decode(bytes).map_err(|e| e.to_string())?;
    let ops: &[TxnOp] = match &txn.body {
        TxnBody::Op(op) => std::slice::from_ref(op),
        TxnBody::Multi(ops) => ops,
        TxnBody::CreateSession { timeout, passwd } => {
            if passwd.len() != 16 || *timeout <= 0 {
                return Err(format!(
                    "createSession with a {}-byte password and timeout {timeout}",
                    passwd.len()
                ));
            }
            &[]
        }
        TxnBody::CloseSession => &[],
    };
    for op in ops {
        let path = op.path();
        if !path.starts_with('/') || path.contains('\0') {
            return Err(format!("invalid path {path:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod validate_tests {
    use super::*;

    #[test]
    fn the_leader_refuses_undecodable_payloads_and_relative_paths() {
        assert!(validate_payload(b"garbage").is_err());
        let mut txn = ZkTxn {
            origin: 1,
            session: 7,
            cxid: 1,
            time: 0,
            auth: Vec::new(),
            body: TxnBody::Op(TxnOp::Delete {
                path: "/ok".into(),
                version: -1,
            }),
        };
        assert_eq!(validate_payload(&txn.encode()), Ok(()));
        txn.body = TxnBody::Op(TxnOp::Delete {
            path: "relative".into(),
            version: -1,
        });
        assert!(validate_payload(&txn.encode()).is_err());
        txn.body = TxnBody::CreateSession {
            timeout: 4000,
            passwd: vec![0; 3],
        };
        assert!(validate_payload(&txn.encode()).is_err());
    }
}
