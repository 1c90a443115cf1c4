//! [`ZabServer`]: one coordination server — a Zab [`QuorumPeer`](zab_core::peer::QuorumPeer)
//! with a transaction log and the znode state machine, serving the clients connected to it.
//! Writes become transactions proposed through the peer (followers forward them to the
//! leader); the result comes back when this server applies the transaction. Reads are local.
//! While the peer leads, the server closes the sessions the leader's tracker expires, through a
//! committed `CloseSession` transaction.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{CoordinationError, SessionId};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, info};
use zab_core::discovery::MAX_PACKET_DATA;
use zab_core::peer::{PeerHandle, PeerStatus};
use zab_core::ServerId;

use super::codec::{CoordTxn, Origin, TxnBody};
use super::state::{Outcome, ServerState, SharedState};

/// Process-wide counter of server incarnations: a restarted server never matches the results
/// of its previous life to new requests.
static INCARNATION: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_incarnation() -> u64 {
    INCARNATION.fetch_add(1, Ordering::Relaxed)
}

/// One running server of a [`ZabEnsemble`](super::ZabEnsemble).
#[derive(Debug)]
pub struct ZabServer {
    sid: ServerId,
    peer: PeerHandle,
    pub(crate) state: SharedState,
    alive: AtomicBool,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl ZabServer {
    pub(crate) fn new(
        peer: PeerHandle,
        state: SharedState,
        closed_rx: mpsc::UnboundedReceiver<SessionId>,
    ) -> Arc<ZabServer> {
        let mut peer = peer;
        let expiries = peer.take_session_expiries();
        let sid = peer.sid();
        let server = Arc::new(ZabServer {
            sid,
            peer,
            state,
            alive: AtomicBool::new(true),
            task: std::sync::Mutex::new(None),
        });
        let task = tokio::spawn(housekeeping(Arc::downgrade(&server), expiries, closed_rx));
        *server.task_slot() = Some(task);
        server
    }

    fn task_slot(&self) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
        self.task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The server's sid.
    pub fn sid(&self) -> ServerId {
        self.sid
    }

    /// The peer's status (LOOKING / LEADING / FOLLOWING, epoch).
    pub fn status(&self) -> PeerStatus {
        self.peer.current()
    }

    /// Whether the server runs (not killed, its peer not stopped).
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed) && !self.peer.is_finished()
    }

    /// Whether the server's peer task has ended (after [`kill`](Self::kill), once it let go
    /// of its log).
    pub(crate) fn is_stopped(&self) -> bool {
        self.peer.is_finished()
    }

    /// Crashes the server: its peer stops, its clients are cut off.
    pub(crate) fn kill(&self) {
        self.alive.store(false, Ordering::Relaxed);
        self.peer.kill();
        if let Some(t) = self.task_slot().take() {
            t.abort();
        }
        self.state.lock().detach_all();
    }

    /// Waits up to `timeout` for the server to serve an established epoch.
    pub(crate) async fn wait_serving(&self, timeout: Duration) -> Result<(), CoordinationError> {
        if !self.is_alive() {
            return Err(CoordinationError::ConnectionLoss);
        }
        self.peer
            .wait_for(timeout, |s| s.epoch.is_some())
            .await
            .map(|_| ())
            .ok_or(CoordinationError::ConnectionLoss)
    }

    /// Runs `f` on the local state (a read), once the server serves.
    pub(crate) async fn read<T>(
        &self,
        timeout: Duration,
        f: impl FnOnce(&mut ServerState) -> T,
    ) -> Result<T, CoordinationError> {
        self.wait_serving(timeout).await?;
        let mut st = self.state.lock();
        if !self.is_alive() {
            return Err(CoordinationError::ConnectionLoss);
        }
        Ok(f(&mut st))
    }

    /// Proposes `body` and waits until this server applied it; returns the outcome and the
    /// transaction's zxid. A write that is not applied within `timeout` (no leader, or the
    /// leader failed before committing it) fails with `ConnectionLoss`: its outcome is unknown.
    pub(crate) async fn write(
        &self,
        body: TxnBody,
        timeout: Duration,
    ) -> Result<(Outcome, i64), CoordinationError> {
        let deadline = tokio::time::Instant::now() + timeout;
        self.wait_serving(timeout).await?;
        let (tx, rx) = oneshot::channel();
        let origin = self.state.lock().new_request(tx);
        let payload = CoordTxn { origin, body }.encode();
        if payload.len() > MAX_PACKET_DATA {
            self.state.lock().waiters.remove(&origin.request);
            return Err(CoordinationError::BadArguments(format!(
                "a transaction of {} bytes exceeds the {MAX_PACKET_DATA}-byte limit",
                payload.len()
            )));
        }
        if !self.peer.propose(payload) {
            self.state.lock().waiters.remove(&origin.request);
            return Err(CoordinationError::ConnectionLoss);
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(r)) => Ok(r),
            _ => {
                self.state.lock().waiters.remove(&origin.request);
                Err(CoordinationError::ConnectionLoss)
            }
        }
    }

    /// Proposes `body` without waiting for it.
    pub(crate) fn write_and_forget(&self, body: TxnBody) -> bool {
        let payload = CoordTxn {
            origin: Origin::NONE,
            body,
        }
        .encode();
        self.peer.propose(payload)
    }

    /// A sign of life of `session` (a request or a heartbeat of its client).
    pub(crate) fn touch(&self, session: SessionId, timeout: Duration) {
        // A touch the peer could not queue (full or stopped) is made up by the client's next
        // request or heartbeat.
        if !self.peer.touch_session(session, timeout) {
            debug!(sid = self.sid.0, session, "session touch not queued");
        }
    }

    /// ZooKeeper's `sync`: this server catches up with everything the leader committed.
    pub(crate) async fn sync(&self, timeout: Duration) -> Result<(), CoordinationError> {
        self.wait_serving(timeout).await?;
        match tokio::time::timeout(timeout, self.peer.sync()).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(CoordinationError::ConnectionLoss),
        }
    }
}

impl Drop for ZabServer {
    fn drop(&mut self) {
        if let Some(t) = self.task_slot().take() {
            t.abort();
        }
    }
}

/// The server's background duties: while its peer leads, close the sessions its tracker
/// expires and, on becoming leader, start tracking every open session (ZooKeeper's leader
/// loads them from its database); on every server, stop tracking closed sessions.
async fn housekeeping(
    server: std::sync::Weak<ZabServer>,
    expiries: Option<mpsc::Receiver<SessionId>>,
    mut closed_rx: mpsc::UnboundedReceiver<SessionId>,
) {
    let Some(mut status) = server.upgrade().map(|s| s.peer.status()) else {
        return;
    };
    let mut expiries = expiries;
    let mut led_epoch = None;
    loop {
        // On becoming the established leader: every open session gets a fresh deadline.
        let st = *status.borrow_and_update();
        if st.is_established_leader() && led_epoch != st.epoch {
            led_epoch = st.epoch;
            let Some(s) = server.upgrade() else { return };
            let sessions: Vec<(SessionId, i32)> = s
                .state
                .lock()
                .sessions
                .iter()
                .map(|(k, v)| (*k, *v))
                .collect();
            info!(
                sid = s.sid.0,
                sessions = sessions.len(),
                "leading: tracking sessions"
            );
            for (id, ms) in sessions {
                s.touch(id, Duration::from_millis(ms.max(1).unsigned_abs().into()));
            }
        }
        let expired = async {
            match expiries.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = status.changed() => if changed.is_err() { return },
            e = expired => match e {
                Some(session) => {
                    let Some(s) = server.upgrade() else { return };
                    debug!(sid = s.sid.0, session, "closing expired session");
                    s.write_and_forget(TxnBody::CloseSession { session });
                }
                None => expiries = None,
            },
            c = closed_rx.recv() => match c {
                Some(session) => {
                    let Some(s) = server.upgrade() else { return };
                    // Not taken (the peer is full or stopped): the leader may later report
                    // the session expired, and closing a closed session changes nothing.
                    if !s.peer.end_session(session) {
                        debug!(sid = s.sid.0, session, "session end not queued");
                    }
                }
                None => return,
            },
        }
    }
}
