//! Broker registration on the coordination store: the ephemeral `/brokers/ids/<id>` (v4/v5
//! JSON with endpoints and rack), the broker epoch it yields (its czxid, KIP-380), and a task
//! that registers again after the session expired (the client reports `Expired`, then
//! `Connected` with a new session), publishing the new, larger epoch.
//!
//! A broker restarted before its previous process's session expired finds `/brokers/ids/<id>`
//! still held by that older session. It does not give up: it waits, watching the node, until
//! the old session's registration is gone (the server expires it after the session timeout)
//! and registers then. [`BrokerRegistrar::register`] alone gives up when the node outlives the
//! configured wait (the session timeout plus a margin), with
//! [`KafkaZkError::BrokerIdStillTaken`]; [`BrokerRegistrar::start`] never does: a session can
//! outlive its timeout when the ZooKeeper ensemble itself is disturbed (a new ZooKeeper leader
//! tracks every session afresh), so it logs an error every wait period — naming the holder,
//! and asking whether another broker runs with this id — and goes on waiting, through lost
//! connections too.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ha_coordination::{
    Coordination, CoordinationError, CoordinationEvent, SessionEvent, WatchEventKind,
};
use kafka_controller::zk_data::{paths, BrokerRegistration, KafkaZkClient, KafkaZkError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a registration waits by default for an older session's `/brokers/ids/<id>` to
/// vanish: Kafka's default `zookeeper.session.timeout.ms` (18 s) plus
/// [`HOLDER_WAIT_MARGIN`].
pub const DEFAULT_HOLDER_WAIT: Duration = Duration::from_secs(18 + 5);

/// What a registration waits beyond the session timeout for an older session's registration
/// to vanish (the server notices the expiry on its next session tick, then deletes).
pub const HOLDER_WAIT_MARGIN: Duration = Duration::from_secs(5);

/// While waiting for an older session's registration to vanish, the node is read again this
/// often besides the watch.
const HOLDER_RECHECK: Duration = Duration::from_millis(500);

/// Registers one broker and keeps it registered.
#[derive(Debug, Clone)]
pub struct BrokerRegistrar {
    zk: KafkaZkClient,
    id: i32,
    registration: BrokerRegistration,
    attempts: u32,
    backoff: Duration,
    holder_wait: Duration,
}

impl BrokerRegistrar {
    /// A registrar of broker `id` with `registration` on `coord`. A failed re-registration is
    /// tried 30 times, starting 100 ms apart and doubling up to 2 s; a registration held by
    /// another session is waited for up to [`DEFAULT_HOLDER_WAIT`].
    pub fn new(coord: Arc<dyn Coordination>, id: i32, registration: BrokerRegistration) -> Self {
        BrokerRegistrar {
            zk: KafkaZkClient::new(coord),
            id,
            registration,
            attempts: 30,
            backoff: Duration::from_millis(100),
            holder_wait: DEFAULT_HOLDER_WAIT,
        }
    }

    /// Sets how long a registration found held by another session waits for that session's
    /// node to vanish: the session timeout plus a margin ([`holder_wait_for`]).
    pub fn with_holder_wait(mut self, wait: Duration) -> Self {
        self.holder_wait = wait;
        self
    }

    /// Sets how often and from which first pause a failed re-registration is tried again.
    pub fn with_retries(mut self, attempts: u32, first_backoff: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.backoff = first_backoff;
        self
    }

    /// The broker id.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// KIP-380: creates Kafka's persistent paths if missing, then `/brokers/ids/<id>`; returns
    /// the broker epoch (the znode's czxid). A registration held by another session (a
    /// previous process of this broker whose session has not expired yet) is waited for,
    /// watching the node, until it vanishes, then registered again; one still held after the
    /// holder wait is [`KafkaZkError::BrokerIdStillTaken`].
    pub async fn register(&self) -> Result<i64, KafkaZkError> {
        self.zk.create_persistent_paths().await?;
        let started = Instant::now();
        let deadline = started + self.holder_wait;
        let coord = self.zk.coordination();
        let path = paths::broker(self.id);
        let mut waiting_for = None;
        loop {
            // Subscribed before the attempt: a deletion right after it must not be missed.
            let mut events = coord.events();
            let owner = match self.zk.register_broker(self.id, &self.registration).await {
                Err(KafkaZkError::BrokerIdTaken { owner, .. }) => owner,
                done => {
                    if let (Ok(epoch), Some(holder)) = (&done, waiting_for) {
                        tracing::info!(
                            broker = self.id,
                            holder_session_id = %format_args!("{holder:#x}"),
                            waited_ms = started.elapsed().as_millis() as u64,
                            broker_epoch = *epoch,
                            "the older session's registration is gone; broker registered"
                        );
                    }
                    return done;
                }
            };
            if waiting_for != Some(owner) {
                tracing::warn!(
                    broker = self.id,
                    holder_session_id = %format_args!("{owner:#x}"),
                    wait_ms = self.holder_wait.as_millis() as u64,
                    "broker id registered by another session; waiting for that session to end"
                );
                waiting_for = Some(owner);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(KafkaZkError::BrokerIdStillTaken {
                    id: self.id,
                    owner,
                    waited_ms: (now - started).as_millis() as u64,
                });
            }
            if coord.exists(&path, true).await?.is_none() {
                continue;
            }
            let recheck = deadline.min(now + HOLDER_RECHECK);
            let deleted = async {
                while let Some(event) = events.next().await {
                    match event {
                        CoordinationEvent::Watch(w)
                            if w.path == path && w.kind == WatchEventKind::NodeDeleted =>
                        {
                            return;
                        }
                        _ => {}
                    }
                }
            };
            let _ = tokio::time::timeout_at(recheck, deleted).await;
        }
    }

    /// [`register`](Self::register), tried again while the store cannot be reached (a lost
    /// connection, or a session that expired meanwhile: the client opens a new one), as
    /// Kafka's `ZooKeeperClient` waits until connected, and while another session still holds
    /// the registration (logged as an error at every holder wait); other errors, and a store
    /// still unreachable after twice the holder wait plus 30 s, end it.
    async fn register_through_disconnections(&self) -> Result<i64, KafkaZkError> {
        let unreachable_for = self.holder_wait * 2 + Duration::from_secs(30);
        let mut deadline = Instant::now() + unreachable_for;
        let mut pause = self.backoff.max(Duration::from_millis(50));
        loop {
            match self.register().await {
                Err(KafkaZkError::BrokerIdStillTaken {
                    id,
                    owner,
                    waited_ms,
                }) => {
                    tracing::error!(
                        broker = id,
                        holder_session_id = %format_args!("{owner:#x}"),
                        waited_ms,
                        "broker id still registered by another session; is another broker running with this id? still waiting"
                    );
                    // The store answered: a later disconnection gets its full allowance.
                    deadline = Instant::now() + unreachable_for;
                }
                Err(KafkaZkError::Coordination(e))
                    if e.is_session_problem()
                        && !matches!(e.root(), CoordinationError::Closed)
                        && Instant::now() < deadline =>
                {
                    tracing::warn!(broker = self.id, error = %e, "the store is unreachable; registering again once connected");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                done => return done,
            }
        }
    }

    async fn register_with_retries(&self) -> Result<i64, KafkaZkError> {
        let mut pause = self.backoff;
        let mut attempt = 1;
        loop {
            match self.register().await {
                Ok(epoch) => return Ok(epoch),
                Err(e) if attempt >= self.attempts => return Err(e),
                // Held by another session for longer than a session can outlive its process.
                Err(e @ KafkaZkError::BrokerIdStillTaken { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(broker = self.id, error = %e, attempt, "broker registration failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                    attempt += 1;
                }
            }
        }
    }

    /// Registers now (waiting for an older session's registration to vanish, failing if that
    /// fails) and spawns the task that registers again
    /// whenever the client reconnects, in particular with a new session after expiry.
    pub async fn start(self) -> Result<RegisteredBroker, KafkaZkError> {
        // Subscribe first: an expiry right after the registration must not be missed.
        let mut events = self.zk.coordination().events();
        let epoch = self.register_through_disconnections().await?;
        // The session the current registration belongs to: a reconnection within it (after a
        // plain connection loss) finds the registration still in place.
        let mut registered_in = Some(self.zk.coordination().session_id());
        let (tx, rx) = watch::channel(Some(epoch));
        let task = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                match event {
                    CoordinationEvent::Session(SessionEvent::Connected { session_id })
                        if registered_in == Some(session_id) => {}
                    CoordinationEvent::Session(SessionEvent::Expired { session_id }) => {
                        registered_in = None;
                        tracing::warn!(
                            broker = self.id,
                            session_id,
                            "session expired; registration lost"
                        );
                        tx.send_replace(None);
                    }
                    CoordinationEvent::Session(SessionEvent::Connected { session_id }) => {
                        match self.register_with_retries().await {
                            Ok(epoch) => {
                                registered_in = Some(session_id);
                                tracing::info!(
                                    broker = self.id,
                                    session_id,
                                    broker_epoch = epoch,
                                    "broker registered"
                                );
                                tx.send_if_modified(|cur| {
                                    let changed = *cur != Some(epoch);
                                    *cur = Some(epoch);
                                    changed
                                });
                            }
                            Err(error) => {
                                tracing::error!(broker = self.id, %error, "broker re-registration failed");
                                tx.send_replace(None);
                            }
                        }
                    }
                    CoordinationEvent::Session(SessionEvent::Closed) => break,
                    _ => {}
                }
            }
            tx.send_replace(None);
        });
        Ok(RegisteredBroker { epoch: rx, task })
    }
}

/// How long to wait for an older session's registration to vanish when sessions time out
/// after `session_timeout`: the timeout plus [`HOLDER_WAIT_MARGIN`].
pub fn holder_wait_for(session_timeout: Duration) -> Duration {
    session_timeout + HOLDER_WAIT_MARGIN
}

/// A registered broker: its current broker epoch, kept up to date across session expiries.
/// Dropping it stops re-registering (the ephemeral node lives as long as the session).
#[derive(Debug)]
pub struct RegisteredBroker {
    epoch: watch::Receiver<Option<i64>>,
    task: JoinHandle<()>,
}

impl RegisteredBroker {
    /// The current broker epoch, `None` while not registered (between expiry and
    /// re-registration).
    pub fn broker_epoch(&self) -> Option<i64> {
        *self.epoch.borrow()
    }

    /// A receiver of every change of the broker epoch.
    pub fn subscribe(&self) -> watch::Receiver<Option<i64>> {
        self.epoch.clone()
    }

    /// Waits up to `timeout` for a broker epoch greater than `previous` (a re-registration)
    /// and returns it; `None` on timeout or when the task ended.
    pub async fn wait_for_epoch_above(&self, previous: i64, timeout: Duration) -> Option<i64> {
        let mut rx = self.epoch.clone();
        let wait = rx.wait_for(|e| e.is_some_and(|e| e > previous));
        let result = match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(epoch)) => *epoch,
            _ => None,
        };
        result
    }
}

impl Drop for RegisteredBroker {
    fn drop(&mut self) {
        self.task.abort();
    }
}
