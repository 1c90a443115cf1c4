//! One server's state: the replicated part (the znode tree and the open sessions, changed only
//! by committed transactions, identical on every server) and the local part (the watches and
//! event sinks of the clients connected here, and the callers waiting for the result of a
//! write this server proposed). [`ZnodeMachine`] is the Zab state machine that applies
//! committed transactions to it, firing this server's watches as it goes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ha_coordination::{
    CoordinationError, OpResult, SessionId, Stat, WatchEvent, WatchEventKind, ZnodeTree,
};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};
use zab_core::state_machine::{SnapshotError, StateMachine};
use zab_core::txnlog::{Snapshot, Txn};
use zab_core::Zxid;

use super::codec::{CoordTxn, Origin, SnapshotData, TxnBody};

/// What a write's originating server hands its caller once the write is applied.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A session was opened with this id.
    Session(SessionId),
    /// A session was closed.
    Closed,
    /// A multi's results, with the stat of each created node.
    Multi(Result<Vec<(OpResult, Option<Stat>)>, CoordinationError>),
}

/// What a server tells a client connected to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A watch of the client fired, in the transaction `zxid`.
    Watch(WatchEvent, i64),
    /// The client's session was closed (expired or closed by a request).
    SessionClosed,
}

/// A data or child watch registration, as ZooKeeper's client keeps them to re-register after
/// moving to another server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum WatchKind {
    /// `get_data` / `exists` on an existing node.
    Data,
    /// `exists` on a missing node.
    Exist,
    /// `children`.
    Child,
}

/// Everything of one server behind one lock.
#[derive(Debug)]
pub(crate) struct ServerState {
    pub(crate) tree: ZnodeTree,
    /// Open sessions and their timeouts (ms): replicated.
    pub(crate) sessions: BTreeMap<SessionId, i32>,
    pub(crate) last_applied: Zxid,
    /// This incarnation's id in transaction origins.
    pub(crate) incarnation: u64,
    pub(crate) next_request: u64,
    pub(crate) waiters: HashMap<u64, oneshot::Sender<(Outcome, i64)>>,
    data_watches: HashMap<String, BTreeSet<SessionId>>,
    child_watches: HashMap<String, BTreeSet<SessionId>>,
    sinks: HashMap<SessionId, mpsc::UnboundedSender<Notice>>,
    /// Sessions closed by a committed transaction, for the server to stop tracking them.
    closed_tx: mpsc::UnboundedSender<SessionId>,
}

impl ServerState {
    fn fresh(incarnation: u64, closed_tx: mpsc::UnboundedSender<SessionId>) -> Self {
        Self {
            tree: ZnodeTree::new(),
            sessions: BTreeMap::new(),
            last_applied: Zxid::ZERO,
            incarnation,
            next_request: 0,
            waiters: HashMap::new(),
            data_watches: HashMap::new(),
            child_watches: HashMap::new(),
            sinks: HashMap::new(),
            closed_tx,
        }
    }

    /// A new request id and the origin to put in its transaction.
    pub(crate) fn new_request(&mut self, tx: oneshot::Sender<(Outcome, i64)>) -> Origin {
        self.next_request += 1;
        self.waiters.insert(self.next_request, tx);
        Origin {
            server: self.incarnation,
            request: self.next_request,
        }
    }

    /// Registers a watch of `session` here.
    pub(crate) fn watch(&mut self, session: SessionId, kind: WatchKind, path: &str) {
        let map = match kind {
            WatchKind::Data | WatchKind::Exist => &mut self.data_watches,
            WatchKind::Child => &mut self.child_watches,
        };
        map.entry(path.to_string()).or_default().insert(session);
    }

    /// Connects `session`'s client here: the notices for it go to the returned receiver.
    pub(crate) fn attach(&mut self, session: SessionId) -> mpsc::UnboundedReceiver<Notice> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.sinks.insert(session, tx);
        rx
    }

    /// Disconnects `session`'s client; its watches here are dropped (the client re-registers
    /// them wherever it reconnects).
    pub(crate) fn detach(&mut self, session: SessionId) {
        self.sinks.remove(&session);
        self.forget_watches(session);
    }

    /// Disconnects every client (the server is going away).
    pub(crate) fn detach_all(&mut self) {
        self.sinks.clear();
        self.data_watches.clear();
        self.child_watches.clear();
        self.waiters.clear();
    }

    fn forget_watches(&mut self, session: SessionId) {
        for map in [&mut self.data_watches, &mut self.child_watches] {
            for set in map.values_mut() {
                set.remove(&session);
            }
            map.retain(|_, s| !s.is_empty());
        }
    }

    fn notify(&mut self, session: SessionId, notice: Notice) {
        if let Some(tx) = self.sinks.get(&session) {
            if tx.send(notice).is_err() {
                self.sinks.remove(&session);
            }
        }
    }

    /// Fires the watches `events` trigger, in order (as MemoryTree's dispatch does).
    fn fire(&mut self, events: Vec<WatchEvent>, zxid: i64) {
        for ev in events {
            let sessions = match ev.kind {
                WatchEventKind::NodeCreated | WatchEventKind::NodeDataChanged => {
                    self.data_watches.remove(&ev.path).unwrap_or_default()
                }
                WatchEventKind::NodeChildrenChanged => {
                    self.child_watches.remove(&ev.path).unwrap_or_default()
                }
                WatchEventKind::NodeDeleted => {
                    let mut s = self.data_watches.remove(&ev.path).unwrap_or_default();
                    s.extend(self.child_watches.remove(&ev.path).unwrap_or_default());
                    s
                }
            };
            for s in sessions {
                self.notify(s, Notice::Watch(ev.clone(), zxid));
            }
        }
    }

    /// Applies one committed transaction (Z2: in zxid order, on every server alike).
    fn apply_txn(&mut self, zxid: i64, txn: CoordTxn) {
        let outcome = match txn.body {
            TxnBody::CreateSession { timeout_ms } => {
                // The session's id is its creating transaction's zxid: unique and the same on
                // every server.
                self.sessions.insert(zxid, timeout_ms);
                Outcome::Session(zxid)
            }
            TxnBody::CloseSession { session } => {
                if self.sessions.remove(&session).is_some() {
                    let change = self.tree.close_session(zxid, session);
                    self.forget_watches(session);
                    self.fire(change.events, zxid);
                    self.notify(session, Notice::SessionClosed);
                    self.sinks.remove(&session);
                    let _ = self.closed_tx.send(session);
                    debug!(session, zxid, "session closed");
                }
                Outcome::Closed
            }
            TxnBody::Multi { session, ops } => {
                if !self.sessions.contains_key(&session) {
                    Outcome::Multi(Err(CoordinationError::SessionExpired))
                } else {
                    match self.tree.apply(zxid, session, &ops) {
                        Ok(change) => {
                            let results = change
                                .results
                                .into_iter()
                                .map(|r| {
                                    let stat = match &r {
                                        OpResult::Create { path } => self.tree.stat(path),
                                        _ => None,
                                    };
                                    (r, stat)
                                })
                                .collect();
                            self.fire(change.events, zxid);
                            Outcome::Multi(Ok(results))
                        }
                        Err(e) => Outcome::Multi(Err(e)),
                    }
                }
            }
        };
        if txn.origin.server == self.incarnation && txn.origin != Origin::NONE {
            if let Some(tx) = self.waiters.remove(&txn.origin.request) {
                let _ = tx.send((outcome, zxid));
            }
        }
    }
}

/// A server's state, shared by the Zab state machine (inside the peer) and the clients.
#[derive(Debug, Clone)]
pub(crate) struct SharedState(Arc<Mutex<ServerState>>);

impl SharedState {
    pub(crate) fn new(incarnation: u64, closed_tx: mpsc::UnboundedSender<SessionId>) -> Self {
        Self(Arc::new(Mutex::new(ServerState::fresh(
            incarnation,
            closed_tx,
        ))))
    }

    /// The state, locked. Nothing panics while holding it, so a poisoned lock is usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ServerState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The Zab state machine of the coordination store: applies committed transactions to the
/// server's [`ServerState`].
#[derive(Debug, Clone)]
pub(crate) struct ZnodeMachine(pub(crate) SharedState);

impl StateMachine for ZnodeMachine {
    fn apply(&mut self, txn: &Txn) {
        let mut st = self.0.lock();
        st.last_applied = txn.zxid;
        match CoordTxn::decode(&txn.data) {
            Ok(t) => st.apply_txn(txn.zxid.0, t),
            // Only this module writes transactions; a foreign one changes nothing, anywhere.
            Err(e) => warn!(zxid = txn.zxid.0, "undecodable transaction skipped: {e}"),
        }
    }

    fn last_applied(&self) -> Zxid {
        self.0.lock().last_applied
    }

    fn take_snapshot(&self) -> Snapshot {
        let st = self.0.lock();
        let data = SnapshotData {
            sessions: st.sessions.iter().map(|(s, t)| (*s, *t)).collect(),
            nodes: st.tree.entries(),
        };
        Snapshot {
            zxid: st.last_applied,
            data: data.encode(),
        }
    }

    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let bad = |reason: String| SnapshotError {
            zxid: snapshot.zxid,
            reason,
        };
        let data = SnapshotData::decode(&snapshot.data).map_err(|e| bad(e.to_string()))?;
        let tree =
            ZnodeTree::from_entries(data.nodes, snapshot.zxid.0).map_err(|e| bad(e.to_string()))?;
        let mut st = self.0.lock();
        st.tree = tree;
        st.sessions = data.sessions.into_iter().collect();
        st.last_applied = snapshot.zxid;
        Ok(())
    }

    fn reset(&mut self) {
        let mut st = self.0.lock();
        st.tree = ZnodeTree::new();
        st.sessions.clear();
        st.last_applied = Zxid::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ha_coordination::{CreateMode, Op};

    fn txn(zxid: i64, body: TxnBody) -> Txn {
        Txn::new(
            Zxid(zxid),
            CoordTxn {
                origin: Origin::NONE,
                body,
            }
            .encode(),
        )
    }

    #[test]
    fn a_restored_snapshot_is_the_same_state_and_a_garbage_one_is_refused() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut a = ZnodeMachine(SharedState::new(1, tx.clone()));
        a.apply(&txn(1, TxnBody::CreateSession { timeout_ms: 500 }));
        a.apply(&txn(
            2,
            TxnBody::Multi {
                session: 1,
                ops: vec![
                    Op::create("/p", b"x".to_vec(), CreateMode::Persistent),
                    Op::create("/p/e", Vec::new(), CreateMode::Ephemeral),
                ],
            },
        ));
        // A foreign payload is skipped, not applied, and nothing panics.
        a.apply(&Txn::new(Zxid(3), Bytes::from_static(b"\xff\x00")));
        let snap = a.take_snapshot();
        let mut b = ZnodeMachine(SharedState::new(2, tx));
        b.restore(&snap).expect("restores");
        assert_eq!(b.last_applied(), Zxid(3));
        let (sa, sb) = (a.0.lock(), b.0.lock());
        assert_eq!(sa.tree.entries(), sb.tree.entries());
        assert_eq!(sa.sessions, sb.sessions);
        assert_eq!(sb.tree.ephemerals_of(1), vec!["/p/e".to_string()]);
        drop((sa, sb));
        let bad = Snapshot {
            zxid: Zxid(9),
            data: Bytes::from_static(b"\x00\x00\x00\x05"),
        };
        assert!(b.restore(&bad).is_err());
        assert_eq!(b.last_applied(), Zxid(3));
    }

    /// Znode machines for `zab_core::testing::state_machine`: transaction 1 opens a session,
    /// the next ones create persistent and (every other one) ephemeral nodes in it.
    struct Znodes;

    impl zab_core::testing::state_machine::StateMachineBuilder for Znodes {
        type Machine = ZnodeMachine;
        /// The snapshot's bytes: sessions and nodes in a fixed order.
        type State = Bytes;

        fn build(&self) -> ZnodeMachine {
            let (tx, _rx) = mpsc::unbounded_channel();
            ZnodeMachine(SharedState::new(1, tx))
        }

        fn payload(&self, i: u32) -> Bytes {
            let body = if i == 1 {
                TxnBody::CreateSession { timeout_ms: 4000 }
            } else {
                let mode = if i.is_multiple_of(2) {
                    CreateMode::Ephemeral
                } else {
                    CreateMode::Persistent
                };
                TxnBody::Multi {
                    session: Zxid::new(1, 1).0,
                    ops: vec![Op::create(
                        format!("/n{i}"),
                        format!("{i}").into_bytes(),
                        mode,
                    )],
                }
            };
            CoordTxn {
                origin: Origin::NONE,
                body,
            }
            .encode()
        }

        fn state(&self, m: &ZnodeMachine) -> Bytes {
            m.take_snapshot().data
        }
    }

    #[test]
    fn znode_machine_passes_the_state_machine_suite(
    ) -> Result<(), zab_core::testing::ConformanceError> {
        zab_core::testing::state_machine::test_all(&Znodes)
    }
}
