//! Broker registration on the coordination store: the ephemeral `/brokers/ids/<id>` (v4/v5
//! JSON with endpoints and rack), the broker epoch it yields (its czxid, KIP-380), and a task
//! that registers again after the session expired (the client reports `Expired`, then
//! `Connected` with a new session), publishing the new, larger epoch.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ha_coordination::{Coordination, CoordinationEvent, SessionEvent};
use kafka_controller::zk_data::{BrokerRegistration, KafkaZkClient, KafkaZkError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Registers one broker and keeps it registered.
#[derive(Debug, Clone)]
pub struct BrokerRegistrar {
    zk: KafkaZkClient,
    id: i32,
    registration: BrokerRegistration,
    attempts: u32,
    backoff: Duration,
}

impl BrokerRegistrar {
    /// A registrar of broker `id` with `registration` on `coord`. A failed re-registration is
    /// tried 30 times, starting 100 ms apart and doubling up to 2 s.
    pub fn new(coord: Arc<dyn Coordination>, id: i32, registration: BrokerRegistration) -> Self {
        BrokerRegistrar {
            zk: KafkaZkClient::new(coord),
            id,
            registration,
            attempts: 30,
            backoff: Duration::from_millis(100),
        }
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
    /// the broker epoch (the znode's czxid). A registration held by another session is
    /// [`KafkaZkError::BrokerIdTaken`].
    pub async fn register(&self) -> Result<i64, KafkaZkError> {
        self.zk.create_persistent_paths().await?;
        self.zk.register_broker(self.id, &self.registration).await
    }

    async fn register_with_retries(&self) -> Result<i64, KafkaZkError> {
        let mut pause = self.backoff;
        let mut attempt = 1;
        loop {
            match self.register().await {
                Ok(epoch) => return Ok(epoch),
                Err(e) if attempt >= self.attempts => return Err(e),
                Err(e) => {
                    tracing::warn!(broker = self.id, error = %e, attempt, "broker registration failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                    attempt += 1;
                }
            }
        }
    }

    /// Registers now (failing at once if that fails) and spawns the task that registers again
    /// whenever the client reconnects, in particular with a new session after expiry.
    pub async fn start(self) -> Result<RegisteredBroker, KafkaZkError> {
        // Subscribe first: an expiry right after the registration must not be missed.
        let mut events = self.zk.coordination().events();
        let epoch = self.register().await?;
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
