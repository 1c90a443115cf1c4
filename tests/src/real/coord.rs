//! The coordination client a simulated node uses: the real `MemoryCoordination` session of
//! `kafka-controller`, behind a gate the simulator holds. A paused node's store calls wait
//! until it wakes (a GC pause: the call was issued before and lands after); a crashed node's
//! calls never complete (the process is gone). Every write the controller makes under
//! `/brokers/topics` is audited: it must carry the `/controller_epoch` check (K6 fencing),
//! and the epoch it checked must be the current one when it lands. Every write that lands is
//! also logged with the partition states it left ([`WriteLog`]), so the simulator checks its
//! invariants after each store write, not only once per step.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ha_coordination::{
    Coordination, CoordinationError, CreateMode, EventStream, MemoryCoordination, Op, OpResult,
    SessionId, SessionState, Stat,
};
use kafka_controller::zk_data::paths;
use tokio::sync::Notify;

/// Whether a node's process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    /// Running.
    Running,
    /// Stopped the world (a long GC pause): everything waits.
    Paused,
    /// Crashed: nothing it started ever completes.
    Dead,
}

/// A node's [`Life`], shared by everything the node runs. Not a `tokio::sync::watch`: that
/// channel spreads its waiters over shards picked at random, so the order in which a
/// waking node's tasks resume would change from run to run; a [`Notify`] wakes them in the
/// order they began to wait.
#[derive(Debug, Clone)]
pub struct LifeCell {
    inner: Arc<(Mutex<Life>, Notify)>,
}

impl Default for LifeCell {
    fn default() -> Self {
        LifeCell {
            inner: Arc::new((Mutex::new(Life::Running), Notify::new())),
        }
    }
}

impl LifeCell {
    /// A running node's cell.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node's state.
    pub fn get(&self) -> Life {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the state and wakes whoever waits on it.
    pub fn set(&self, life: Life) {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner) = life;
        self.inner.1.notify_waiters();
    }

    /// Waits until the node runs; never returns for a dead node.
    pub async fn wait_running(&self) {
        loop {
            let notified = self.inner.1.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.get() {
                Life::Running => return,
                Life::Paused => notified.await,
                Life::Dead => std::future::pending::<()>().await,
            }
        }
    }
}

/// A controller write under `/brokers/topics` that should not have landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleWrite {
    /// The controller's broker.
    pub broker: i32,
    /// The `/controller_epoch` version it checked, if any.
    pub checked_version: Option<i32>,
    /// The `/controller_epoch` version when it landed.
    pub current_version: i32,
    /// The paths written.
    pub paths: Vec<String>,
}

/// Test-only breakage of the store, to show the audit can fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreBreakage {
    /// The store drops the `/controller_epoch` check of every transaction, so a deposed
    /// controller's writes land (what KAFKA-6082 was about).
    pub ignore_controller_epoch_check: bool,
}

/// The partition states (raw znode data and version, `None` if absent) right after one
/// store write.
pub type StoreSnapshot = Vec<Option<(Vec<u8>, i32)>>;

/// The store writes that landed since the simulator last looked, each with a snapshot of the
/// watched partition-state znodes taken right after it (on the single-threaded runtime no
/// other task runs in between).
#[derive(Clone)]
pub struct WriteLog {
    observer: MemoryCoordination,
    paths: Arc<Vec<String>>,
    snapshots: Arc<Mutex<Vec<StoreSnapshot>>>,
}

impl std::fmt::Debug for WriteLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteLog")
            .field("paths", &self.paths)
            .finish()
    }
}

impl WriteLog {
    /// A log reading `paths` through `observer` after every write.
    pub fn new(observer: MemoryCoordination, paths: Vec<String>) -> Self {
        WriteLog {
            observer,
            paths: Arc::new(paths),
            snapshots: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Records the state left by a write that just landed.
    pub async fn record(&self) {
        let snapshot = self
            .observer
            .get_data_many(&self.paths)
            .await
            .into_iter()
            .map(|r| r.ok().map(|(data, stat)| (data, stat.version)))
            .collect();
        self.snapshots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(snapshot);
    }

    /// The snapshots recorded since the last call, oldest first.
    pub fn take(&self) -> Vec<StoreSnapshot> {
        std::mem::take(
            &mut *self
                .snapshots
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

/// Who a client is, for the audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The controller of this broker.
    Controller(i32),
    /// The broker's own data path (registration, ISR writes).
    Broker(i32),
}

/// A node's coordination client.
#[derive(Clone)]
pub struct SimCoord {
    inner: MemoryCoordination,
    life: LifeCell,
    role: Role,
    breakage: StoreBreakage,
    audit: Arc<Mutex<Vec<StaleWrite>>>,
    writes: WriteLog,
}

impl std::fmt::Debug for SimCoord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCoord")
            .field("role", &self.role)
            .finish()
    }
}

fn under_topics(op: &Op) -> Option<&str> {
    let path = match op {
        Op::Check { .. } => return None,
        Op::Create { path, .. } | Op::SetData { path, .. } | Op::Delete { path, .. } => path,
    };
    path.starts_with("/brokers/topics/")
        .then_some(path.as_str())
}

impl SimCoord {
    /// A client on `inner`'s session, gated by `life`, auditing into `audit` and logging
    /// every write that lands into `writes`.
    pub fn new(
        inner: MemoryCoordination,
        life: LifeCell,
        role: Role,
        breakage: StoreBreakage,
        audit: Arc<Mutex<Vec<StaleWrite>>>,
        writes: WriteLog,
    ) -> Self {
        SimCoord {
            inner,
            life,
            role,
            breakage,
            audit,
            writes,
        }
    }

    async fn gate(&self) {
        self.life.wait_running().await;
    }

    fn record(&self, stale: StaleWrite) {
        self.audit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(stale);
    }

    /// A controller's plain (unfenced) write under `/brokers/topics` is a violation by itself.
    fn audit_plain(&self, path: &str) {
        if let Role::Controller(broker) = self.role {
            if path.starts_with("/brokers/topics/") {
                self.record(StaleWrite {
                    broker,
                    checked_version: None,
                    current_version: -1,
                    paths: vec![path.to_string()],
                });
            }
        }
    }
}

#[async_trait]
impl Coordination for SimCoord {
    fn session_id(&self) -> SessionId {
        self.inner.session_id()
    }

    fn session_state(&self) -> SessionState {
        self.inner.session_state()
    }

    fn events(&self) -> EventStream {
        self.inner.events()
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        self.gate().await;
        let r = self.inner.create(path, data, mode).await;
        if r.is_ok() {
            self.audit_plain(path);
            self.writes.record().await;
        }
        r
    }

    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        self.gate().await;
        self.inner.get_data(path, watch).await
    }

    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        self.gate().await;
        self.inner.exists(path, watch).await
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        self.gate().await;
        let r = self.inner.set_data(path, data, version).await;
        if r.is_ok() {
            self.audit_plain(path);
            self.writes.record().await;
        }
        r
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.gate().await;
        let r = self.inner.delete(path, version).await;
        if r.is_ok() {
            self.audit_plain(path);
            self.writes.record().await;
        }
        r
    }

    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        self.gate().await;
        self.inner.children(path, watch).await
    }

    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        self.gate().await;
        self.inner.get_data_many(paths).await
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        self.gate().await;
        let checked = ops.iter().find_map(|op| match op {
            Op::Check { path, version } if path == paths::CONTROLLER_EPOCH => Some(*version),
            _ => None,
        });
        let written: Vec<String> = ops
            .iter()
            .filter_map(under_topics)
            .map(str::to_string)
            .collect();
        let mut ops = ops;
        let mut stripped = false;
        if self.breakage.ignore_controller_epoch_check {
            // Keep the results aligned: the check becomes an always-true check of `/`.
            for op in &mut ops {
                if matches!(op, Op::Check { path, .. } if path == paths::CONTROLLER_EPOCH) {
                    *op = Op::check("/", ha_coordination::ANY_VERSION);
                    stripped = true;
                }
            }
        }
        let r = self.inner.multi(ops).await;
        if r.is_ok() && !written.is_empty() {
            if let Role::Controller(broker) = self.role {
                let current = self
                    .inner
                    .exists(paths::CONTROLLER_EPOCH, false)
                    .await
                    .ok()
                    .flatten()
                    .map_or(-1, |s| s.version);
                if checked != Some(current) || (stripped && checked.is_none()) {
                    self.record(StaleWrite {
                        broker,
                        checked_version: checked,
                        current_version: current,
                        paths: written,
                    });
                }
            }
        }
        if r.is_ok() {
            self.writes.record().await;
        }
        r
    }
}
