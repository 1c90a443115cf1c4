//! The ZAB state machine of the ZooKeeper server: [`ZkMachine`] applies committed
//! [`ZkTxn`]s to the replicated [`ZkDatabase`] (the data tree and the open sessions,
//! identical on every server) and, as it goes, fires the watches of the sessions connected
//! to this server and hands each write's result to the connection that proposed it.
//!
//! Ordering (ZooKeeper's guarantee that a client sees a watch event before the data that
//! triggered it): while the lock is held, every watch event of a transaction is sent to its
//! session's sink before the transaction's [`Notice::Reply`].
//!
//! Snapshots hold the database only. The watches and sinks are this server's and survive a
//! [`restore`](StateMachine::restore) or [`reset`](StateMachine::reset); ZooKeeper drops
//! them with its connections when a server resynchronises, its clients re-registering them
//! with `setWatches`. Here, after a restore, every watch is re-checked against the new tree
//! as `setWatches` would with the previous tree's state (the state before a `reset` when one
//! came first): a watched node that appeared, vanished, or whose data or children changed
//! fires its event (with the snapshot's zxid). Transactions replayed after a `reset` without
//! a snapshot fire their events again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::warn;
use zab_core::state_machine::{SnapshotError, StateMachine};
use zab_core::txnlog::{Snapshot, Txn};
use zab_core::zxid::Zxid;

use super::tree::{DataTree, OpOutcome, TreeError};
use super::txn::{Reader, TxnBody, TxnError, TxnOp, Writer, ZkTxn};
use super::types::{ErrorCode, EventType, Stat};
use super::watches::WatchManager;

/// The version byte at the front of a database snapshot.
pub const DATABASE_VERSION: u8 = 1;

/// An open session, as replicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEntry {
    /// The negotiated timeout, ms.
    pub timeout: i32,
    /// The session's password.
    pub passwd: Vec<u8>,
}

/// The replicated state: the tree, the open sessions and the last applied zxid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ZkDatabase {
    /// The data tree.
    pub tree: DataTree,
    /// The open sessions by id.
    pub sessions: BTreeMap<i64, SessionEntry>,
    /// The zxid of the last applied transaction.
    pub last_applied: Zxid,
}

/// Why bytes are not a [`ZkDatabase`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DatabaseError {
    /// A field could not be read.
    #[error("malformed database: {0}")]
    Malformed(#[from] TxnError),
    /// The version byte is not [`DATABASE_VERSION`].
    #[error("unknown database encoding version {0}")]
    UnknownVersion(u8),
    /// The tree is malformed.
    #[error(transparent)]
    Tree(#[from] TreeError),
}

impl ZkDatabase {
    /// A fresh database: ZooKeeper's initial tree, no session, nothing applied.
    pub fn new() -> ZkDatabase {
        ZkDatabase::default()
    }

    /// The database's bytes: the version, the last zxid, the sessions, then the tree.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(DATABASE_VERSION);
        w.i64(self.last_applied.0);
        w.len(self.sessions.len());
        for (id, s) in &self.sessions {
            w.i64(*id);
            w.i32(s.timeout);
            w.bytes(&s.passwd);
        }
        w.bytes(&self.tree.encode());
        w.out
    }

    /// Decodes [`encode`](Self::encode)'s bytes; bounded by the input's length.
    pub fn decode(bytes: &[u8]) -> Result<ZkDatabase, DatabaseError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("version")?;
        if version != DATABASE_VERSION {
            return Err(DatabaseError::UnknownVersion(version));
        }
        let last_applied = Zxid(r.i64("last zxid")?);
        let n = r.count("sessions", 16)?;
        let mut sessions = BTreeMap::new();
        for _ in 0..n {
            let id = r.i64("session")?;
            let timeout = r.i32("timeout")?;
            let passwd = r.bytes("passwd")?.to_vec();
            sessions.insert(id, SessionEntry { timeout, passwd });
        }
        let tree = DataTree::decode(r.bytes("tree")?)?;
        r.finish()?;
        Ok(ZkDatabase {
            tree,
            sessions,
            last_applied,
        })
    }
}

/// What a transaction did, for its proposer's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnResult {
    /// The session was opened.
    SessionCreated,
    /// The session was closed.
    SessionClosed,
    /// One write's outcome.
    Op(Result<OpOutcome, ErrorCode>),
    /// A `multi`'s outcomes, or the per-op codes of its failure.
    Multi(Result<Vec<OpOutcome>, Vec<ErrorCode>>),
}

/// What this server tells a connected session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A watch of the session fired in transaction `zxid`.
    Watch {
        /// The transaction that fired it.
        zxid: i64,
        /// The event.
        event_type: EventType,
        /// The node's path.
        path: String,
    },
    /// The result of the session's write `cxid`, applied as `zxid`: sent when this server
    /// proposed it (`origin` is its incarnation) and the session has a sink here (register
    /// a new session's sink before proposing its `CreateSession`).
    Reply {
        /// The request's xid.
        cxid: i32,
        /// The transaction's zxid.
        zxid: i64,
        /// What it did.
        result: TxnResult,
    },
    /// The session was closed (by its request or expiry): its sink is dropped after this.
    SessionClosed,
}

/// One server's ZooKeeper state: the replicated database and the local watches and sinks.
#[derive(Debug)]
pub struct ZkState {
    /// The replicated database.
    pub db: ZkDatabase,
    /// The watches of the sessions connected here.
    pub watches: WatchManager,
    /// This server's incarnation (the `origin` of the transactions it proposes).
    pub incarnation: u64,
    sinks: HashMap<i64, mpsc::UnboundedSender<Notice>>,
    closed_tx: mpsc::UnboundedSender<i64>,
    undecodable: u64,
    /// The watched nodes' stats before a [`reset`](StateMachine::reset), for the restore
    /// that follows to compare against.
    baseline: Option<HashMap<String, Option<Stat>>>,
}

/// A server's state behind its lock (a std mutex; a poisoned lock is recovered).
pub type ZkShared = Arc<Mutex<ZkState>>;

/// Locks `shared`, recovering a poisoned lock.
pub fn lock(shared: &ZkShared) -> MutexGuard<'_, ZkState> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ZkState {
    /// A fresh state; the ids of sessions closed by committed transactions go to `closed_tx`.
    pub fn new(incarnation: u64, closed_tx: mpsc::UnboundedSender<i64>) -> Self {
        ZkState {
            db: ZkDatabase::new(),
            watches: WatchManager::new(),
            incarnation,
            sinks: HashMap::new(),
            closed_tx,
            undecodable: 0,
            baseline: None,
        }
    }

    /// The notices for `session` go to `sink` from now on.
    pub fn register_sink(&mut self, session: i64, sink: mpsc::UnboundedSender<Notice>) {
        self.sinks.insert(session, sink);
    }

    /// No more notices for `session` (its watches stay until
    /// [`WatchManager::remove_session`]).
    pub fn unregister_sink(&mut self, session: i64) {
        self.sinks.remove(&session);
    }

    /// Whether `session` has a sink here.
    /// The connection of `session` whose sink is `sink` ended: its sink and its watches here
    /// go (ZooKeeper's watches belong to a connection; the client registers them again with
    /// `setWatches` on the server it moves to). Nothing changes if a newer connection of the
    /// session registered its own sink meanwhile.
    pub fn detach(&mut self, session: i64, sink: &mpsc::UnboundedSender<Notice>) {
        if self
            .sinks
            .get(&session)
            .is_some_and(|s| s.same_channel(sink))
        {
            self.sinks.remove(&session);
            self.watches.remove_session(session);
        }
    }

    /// Whether `session` has a sink here.
    pub fn has_sink(&self, session: i64) -> bool {
        self.sinks.contains_key(&session)
    }

    /// The zxid of the last applied transaction.
    pub fn last_applied(&self) -> Zxid {
        self.db.last_applied
    }

    /// How many committed transactions could not be decoded (and were skipped).
    pub fn undecodable(&self) -> u64 {
        self.undecodable
    }

    fn notify(&mut self, session: i64, notice: Notice) {
        if let Some(tx) = self.sinks.get(&session) {
            if tx.send(notice).is_err() {
                self.sinks.remove(&session);
            }
        }
    }

    fn fire(&mut self, zxid: i64, events: Vec<(String, EventType)>) {
        for (path, event) in events {
            for (session, event_type, path) in self.watches.trigger(&path, event) {
                self.notify(
                    session,
                    Notice::Watch {
                        zxid,
                        event_type,
                        path,
                    },
                );
            }
        }
    }

    /// Applies one committed transaction (see the module's header).
    pub fn apply_txn(&mut self, txn: &Txn) {
        let zxid = txn.zxid.0;
        self.baseline = None;
        self.db.last_applied = txn.zxid;
        self.db.tree.set_last_processed_zxid(zxid);
        let ztxn = match ZkTxn::decode(&txn.data) {
            Ok(t) => t,
            Err(e) => {
                self.undecodable += 1;
                warn!(zxid = %format_args!("{zxid:#x}"), error = %e, "undecodable transaction skipped");
                return;
            }
        };
        let session = ztxn.session;
        let open = self.db.sessions.contains_key(&session);
        let mut events = Vec::new();
        let result = match &ztxn.body {
            TxnBody::CreateSession { timeout, passwd } => {
                self.db.sessions.insert(
                    session,
                    SessionEntry {
                        timeout: *timeout,
                        passwd: passwd.clone(),
                    },
                );
                TxnResult::SessionCreated
            }
            TxnBody::CloseSession => {
                self.db.tree.close_session(zxid, session, &mut events);
                self.db.sessions.remove(&session);
                TxnResult::SessionClosed
            }
            TxnBody::Op(op @ TxnOp::DeleteContainer { .. }) => TxnResult::Op(
                self.db
                    .tree
                    .apply_op(zxid, ztxn.time, session, &ztxn.auth, op, &mut events),
            ),
            TxnBody::Op(_) if !open => TxnResult::Op(Err(ErrorCode::SessionExpired)),
            TxnBody::Op(op) => TxnResult::Op(self.db.tree.apply_op(
                zxid,
                ztxn.time,
                session,
                &ztxn.auth,
                op,
                &mut events,
            )),
            TxnBody::Multi(ops) if !open && !ops.is_empty() => {
                // ZooKeeper's checkSession fails the first op; the rest are not tried.
                let mut codes = vec![ErrorCode::SessionExpired];
                codes.resize(ops.len(), ErrorCode::RuntimeInconsistency);
                TxnResult::Multi(Err(codes))
            }
            TxnBody::Multi(ops) => TxnResult::Multi(self.db.tree.apply_multi(
                zxid,
                ztxn.time,
                session,
                &ztxn.auth,
                ops,
                &mut events,
            )),
        };
        self.fire(zxid, events);
        let closed = matches!(result, TxnResult::SessionClosed);
        if ztxn.origin == self.incarnation {
            self.notify(
                session,
                Notice::Reply {
                    cxid: ztxn.cxid,
                    zxid,
                    result,
                },
            );
        }
        if closed {
            self.watches.remove_session(session);
            self.notify(session, Notice::SessionClosed);
            self.sinks.remove(&session);
            // The receiver may be gone when the server is shutting down.
            let _ = self.closed_tx.send(session);
        }
    }

    fn watched_stats(&self) -> HashMap<String, Option<Stat>> {
        self.watches
            .paths()
            .into_iter()
            .map(|p| {
                let stat = self.db.tree.stat(&p);
                (p, stat)
            })
            .collect()
    }

    /// Discards the database (TRUNC), remembering the watched nodes' stats for the restore.
    fn reset_db(&mut self) {
        if self.baseline.is_none() {
            self.baseline = Some(self.watched_stats());
        }
        self.db = ZkDatabase::new();
    }

    /// Replaces the database with `db`, re-checking every watch against it (against the
    /// state before a [`reset`](StateMachine::reset) if one came first).
    fn replace_db(&mut self, db: ZkDatabase) {
        let base = match self.baseline.take() {
            Some(b) => b,
            None => self.watched_stats(),
        };
        self.db = db;
        let zxid = self.db.last_applied.0;
        let mut events = Vec::new();
        for path in self.watches.paths() {
            let before = base.get(&path).copied().flatten();
            let after = self.db.tree.stat(&path);
            match (before, after) {
                (None, Some(_)) => events.push((path, EventType::NodeCreated)),
                (Some(_), None) => events.push((path, EventType::NodeDeleted)),
                (Some(b), Some(a)) => {
                    if a.czxid != b.czxid {
                        // Deleted and created again meanwhile.
                        events.push((path.clone(), EventType::NodeDeleted));
                        events.push((path, EventType::NodeCreated));
                        continue;
                    }
                    if a.mzxid != b.mzxid {
                        events.push((path.clone(), EventType::NodeDataChanged));
                    }
                    if a.pzxid != b.pzxid {
                        events.push((path, EventType::NodeChildrenChanged));
                    }
                }
                (None, None) => {}
            }
        }
        self.fire(zxid, events);
    }
}

/// The state machine over a [`ZkShared`].
#[derive(Debug, Clone)]
pub struct ZkMachine(pub ZkShared);

impl ZkMachine {
    /// A machine over a fresh state.
    pub fn new(incarnation: u64, closed_tx: mpsc::UnboundedSender<i64>) -> Self {
        ZkMachine(Arc::new(Mutex::new(ZkState::new(incarnation, closed_tx))))
    }

    fn state(&self) -> MutexGuard<'_, ZkState> {
        lock(&self.0)
    }
}

impl StateMachine for ZkMachine {
    fn apply(&mut self, txn: &Txn) {
        self.state().apply_txn(txn);
    }

    fn last_applied(&self) -> Zxid {
        self.state().db.last_applied
    }

    fn take_snapshot(&self) -> Snapshot {
        let s = self.state();
        Snapshot {
            zxid: s.db.last_applied,
            data: Bytes::from(s.db.encode()),
        }
    }

    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let db = ZkDatabase::decode(&snapshot.data).map_err(|e| SnapshotError {
            zxid: snapshot.zxid,
            reason: e.to_string(),
        })?;
        if db.last_applied != snapshot.zxid {
            return Err(SnapshotError {
                zxid: snapshot.zxid,
                reason: format!(
                    "the snapshot's database is at {:#x}, not at its zxid",
                    db.last_applied.0
                ),
            });
        }
        self.state().replace_db(db);
        Ok(())
    }

    fn reset(&mut self) {
        self.state().reset_db();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zookeeper::types::{Acl, CreateMode};
    use crate::zookeeper::watches::WatchKind;
    use zab_core::testing::state_machine::{self, StateMachineBuilder};

    const ME: u64 = 42;

    fn txn(zxid: u32, session: i64, origin: u64, cxid: i32, body: TxnBody) -> Txn {
        Txn::new(
            Zxid::new(1, zxid),
            Bytes::from(
                ZkTxn {
                    origin,
                    session,
                    cxid,
                    time: i64::from(zxid) * 1000,
                    auth: vec![],
                    body,
                }
                .encode(),
            ),
        )
    }

    fn open(session: i64) -> TxnBody {
        let _ = session;
        TxnBody::CreateSession {
            timeout: 4000,
            passwd: vec![1; 16],
        }
    }

    fn create(path: &str, mode: CreateMode) -> TxnBody {
        TxnBody::Op(TxnOp::Create {
            path: path.into(),
            data: path.as_bytes().to_vec(),
            acl: Acl::open_unsafe(),
            mode,
            ttl: -1,
        })
    }

    fn machine() -> (ZkMachine, mpsc::UnboundedReceiver<i64>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ZkMachine::new(ME, tx), rx)
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Notice>) -> Vec<Notice> {
        let mut out = Vec::new();
        while let Ok(n) = rx.try_recv() {
            out.push(n);
        }
        out
    }

    struct Builder;

    impl StateMachineBuilder for Builder {
        type Machine = ZkMachine;
        type State = Vec<u8>;

        fn build(&self) -> ZkMachine {
            machine().0
        }

        fn payload(&self, i: u32) -> Bytes {
            let body = if i == 1 {
                open(1)
            } else {
                let mode = if i.is_multiple_of(2) {
                    CreateMode::Ephemeral
                } else {
                    CreateMode::PersistentSequential
                };
                create(&format!("/n{i}"), mode)
            };
            txn(i, 1, 7, i as i32, body).data
        }

        fn state(&self, m: &ZkMachine) -> Vec<u8> {
            lock(&m.0).db.encode()
        }
    }

    #[test]
    fn zookeeper_machine_passes_the_state_machine_conformance_suite() {
        state_machine::test_all(&Builder).unwrap();
    }

    #[test]
    fn watch_event_reaches_the_watcher_before_the_writers_reply() {
        let (mut m, _closed) = machine();
        m.apply(&txn(1, 1, ME, 0, open(1)));
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut s = lock(&m.0);
            s.register_sink(1, tx);
            s.watches.add("/a", WatchKind::Exist, 1);
        }
        m.apply(&txn(2, 1, ME, 5, create("/a", CreateMode::Persistent)));
        let notices = drain(&mut rx);
        assert_eq!(notices.len(), 2);
        assert_eq!(
            notices[0],
            Notice::Watch {
                zxid: Zxid::new(1, 2).0,
                event_type: EventType::NodeCreated,
                path: "/a".into()
            }
        );
        let Notice::Reply { cxid, zxid, result } = &notices[1] else {
            panic!("{notices:?}")
        };
        assert_eq!((*cxid, *zxid), (5, Zxid::new(1, 2).0));
        assert!(matches!(
            result,
            TxnResult::Op(Ok(OpOutcome::Created { .. }))
        ));
    }

    #[test]
    fn only_the_proposing_incarnation_gets_the_reply() {
        let (mut m, _closed) = machine();
        let (tx, mut rx) = mpsc::unbounded_channel();
        lock(&m.0).register_sink(1, tx);
        m.apply(&txn(1, 1, ME + 1, 0, open(1)));
        assert!(drain(&mut rx).is_empty());
        m.apply(&txn(2, 1, ME, 3, create("/a", CreateMode::Persistent)));
        assert_eq!(drain(&mut rx).len(), 1);
    }

    #[test]
    fn write_from_a_session_that_is_not_open_is_session_expired() {
        let (mut m, _closed) = machine();
        let (tx, mut rx) = mpsc::unbounded_channel();
        lock(&m.0).register_sink(9, tx);
        m.apply(&txn(1, 9, ME, 1, create("/a", CreateMode::Persistent)));
        m.apply(&txn(
            2,
            9,
            ME,
            2,
            TxnBody::Multi(vec![
                TxnOp::Check {
                    path: "/".into(),
                    version: -1,
                },
                TxnOp::Check {
                    path: "/".into(),
                    version: -1,
                },
            ]),
        ));
        let n = drain(&mut rx);
        assert_eq!(
            n[0],
            Notice::Reply {
                cxid: 1,
                zxid: Zxid::new(1, 1).0,
                result: TxnResult::Op(Err(ErrorCode::SessionExpired))
            }
        );
        assert_eq!(
            n[1],
            Notice::Reply {
                cxid: 2,
                zxid: Zxid::new(1, 2).0,
                result: TxnResult::Multi(Err(vec![
                    ErrorCode::SessionExpired,
                    ErrorCode::RuntimeInconsistency
                ]))
            }
        );
        assert!(lock(&m.0).db.tree.stat("/a").is_none());
        // The container reaper needs no session.
        m.apply(&txn(3, 1, ME, 0, open(1)));
        m.apply(&txn(4, 1, ME, 0, create("/c", CreateMode::Container)));
        m.apply(&txn(
            5,
            0,
            ME,
            0,
            TxnBody::Op(TxnOp::DeleteContainer { path: "/c".into() }),
        ));
        assert!(lock(&m.0).db.tree.stat("/c").is_none());
    }

    #[test]
    fn close_session_deletes_ephemerals_fires_watches_and_reports_the_session() {
        let (mut m, mut closed) = machine();
        m.apply(&txn(1, 1, ME, 0, open(1)));
        m.apply(&txn(2, 2, ME, 0, open(2)));
        m.apply(&txn(3, 1, ME, 0, create("/e", CreateMode::Ephemeral)));
        let (tx1, mut rx1) = mpsc::unbounded_channel();
        let (tx2, mut rx2) = mpsc::unbounded_channel();
        {
            let mut s = lock(&m.0);
            s.register_sink(1, tx1);
            s.register_sink(2, tx2);
            s.watches.add("/e", WatchKind::Data, 2);
            s.watches.add("/", WatchKind::Child, 1);
        }
        m.apply(&txn(4, 1, ME, 8, TxnBody::CloseSession));
        assert_eq!(
            drain(&mut rx2),
            vec![Notice::Watch {
                zxid: Zxid::new(1, 4).0,
                event_type: EventType::NodeDeleted,
                path: "/e".into()
            }]
        );
        let n1 = drain(&mut rx1);
        assert_eq!(n1.len(), 3, "{n1:?}");
        assert!(matches!(
            n1[0],
            Notice::Watch {
                event_type: EventType::NodeChildrenChanged,
                ..
            }
        ));
        assert!(matches!(
            n1[1],
            Notice::Reply {
                cxid: 8,
                result: TxnResult::SessionClosed,
                ..
            }
        ));
        assert_eq!(n1[2], Notice::SessionClosed);
        assert_eq!(closed.try_recv(), Ok(1));
        let s = lock(&m.0);
        assert!(!s.db.sessions.contains_key(&1));
        assert!(s.db.tree.stat("/e").is_none());
        assert!(!s.has_sink(1));
        assert!(s.watches.sessions_with_watches() == vec![]);
    }

    #[test]
    fn an_undecodable_transaction_is_skipped_and_counted() {
        let (mut m, _closed) = machine();
        m.apply(&Txn::new(Zxid::new(1, 1), Bytes::from_static(b"\xffjunk")));
        let s = lock(&m.0);
        assert_eq!(s.undecodable(), 1);
        assert_eq!(s.last_applied(), Zxid::new(1, 1));
        assert_eq!(s.db.tree, {
            let mut t = DataTree::new();
            t.set_last_processed_zxid(Zxid::new(1, 1).0);
            t
        });
    }

    #[test]
    fn restore_keeps_watches_and_fires_those_whose_node_changed() {
        let (mut m, _closed) = machine();
        m.apply(&txn(1, 1, ME, 0, open(1)));
        m.apply(&txn(2, 1, ME, 0, create("/a", CreateMode::Persistent)));
        // Another server's history: /a changed, /b created.
        let (mut other, _c) = machine();
        other.apply(&txn(1, 1, ME, 0, open(1)));
        other.apply(&txn(2, 1, ME, 0, create("/a", CreateMode::Persistent)));
        other.apply(&txn(
            3,
            1,
            ME,
            0,
            TxnBody::Op(TxnOp::SetData {
                path: "/a".into(),
                data: vec![],
                version: -1,
            }),
        ));
        other.apply(&txn(4, 1, ME, 0, create("/b", CreateMode::Persistent)));
        let snap = other.take_snapshot();
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut s = lock(&m.0);
            s.register_sink(1, tx);
            s.watches.add("/a", WatchKind::Data, 1);
            s.watches.add("/b", WatchKind::Exist, 1);
            s.watches.add("/x", WatchKind::Exist, 1);
        }
        m.reset();
        m.restore(&snap).unwrap();
        let mut got: Vec<(EventType, String)> = drain(&mut rx)
            .into_iter()
            .filter_map(|n| match n {
                Notice::Watch {
                    event_type, path, ..
                } => Some((event_type, path)),
                _ => None,
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (EventType::NodeCreated, "/b".to_string()),
                (EventType::NodeDataChanged, "/a".to_string())
            ]
        );
        assert_eq!(lock(&m.0).watches.paths(), vec!["/x".to_string()]);
        assert_eq!(m.last_applied(), Zxid::new(1, 4));
    }

    #[test]
    fn a_snapshot_of_another_zxid_is_refused() {
        let (mut m, _closed) = machine();
        m.apply(&txn(1, 1, ME, 0, open(1)));
        let mut snap = m.take_snapshot();
        snap.zxid = Zxid::new(1, 9);
        assert!(m.restore(&snap).is_err());
    }

    #[test]
    fn recursive_watch_on_root_sees_a_deep_create_once_and_not_the_parents_children_change() {
        let (mut m, _closed) = machine();
        m.apply(&txn(1, 1, ME, 0, open(1)));
        m.apply(&txn(2, 1, ME, 0, create("/a", CreateMode::Persistent)));
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut s = lock(&m.0);
            s.register_sink(2, tx);
            s.watches.add("/", WatchKind::PersistentRecursive, 2);
            s.watches.add("/a", WatchKind::Child, 2);
        }
        m.apply(&txn(3, 1, ME, 0, create("/a/b", CreateMode::Persistent)));
        let events: Vec<(EventType, String)> = drain(&mut rx)
            .into_iter()
            .filter_map(|n| match n {
                Notice::Watch {
                    event_type, path, ..
                } => Some((event_type, path)),
                _ => None,
            })
            .collect();
        assert_eq!(
            events,
            vec![
                (EventType::NodeCreated, "/a/b".to_string()),
                (EventType::NodeChildrenChanged, "/a".to_string())
            ],
            "the child watch fires for /a, the recursive watch only for the create"
        );
    }
}
