//! [`RetryUntilConnected`]: a [`Coordination`] that sends an operation lost with the
//! connection again once the client is connected again on the same session — what Kafka's
//! `ZooKeeperClient` does for every request of the controller (`retryRequestsUntilConnected`).
//! Without it, an event handled while the connection is down fails and is dropped: a
//! controller whose first election attempt on a new session meets a disconnection never
//! watches `/controller` again and never campaigns.
//!
//! Once the session has ended (expired or closed) the operation fails with the
//! `ConnectionLoss` it met: the session events (`Expired`, then `Connected` with the new
//! session) take over. As with ZooKeeper, an operation lost with the connection may have been
//! applied; the one sent again then meets the outcome (`NodeExists`, `BadVersion`), which the
//! controller's flows treat as a conflict to re-read.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use ha_coordination::{Coordination, CreateMode, MemoryTree, RetryUntilConnected};
//!
//! let tree = MemoryTree::new();
//! let raw = tree.connect();
//! let coord = RetryUntilConnected::new(Arc::new(raw.clone()));
//! tree.suspend(raw.session_id());
//! let resume = tokio::spawn({
//!     let (tree, session) = (tree.clone(), raw.session_id());
//!     async move {
//!         tokio::time::sleep(std::time::Duration::from_millis(50)).await;
//!         tree.resume(session);
//!     }
//! });
//! // Issued while disconnected, applied once the session is connected again.
//! coord.create("/a", b"x", CreateMode::Persistent).await.unwrap();
//! resume.await.unwrap();
//! # });
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::error::CoordinationError;
use super::service::Coordination;
use super::types::{CreateMode, EventStream, Op, OpResult, SessionId, SessionState, Stat};

/// How often a waiting operation looks at the session state.
const DEFAULT_POLL: Duration = Duration::from_millis(20);

/// Resends operations lost with the connection while their session lives.
pub struct RetryUntilConnected {
    inner: Arc<dyn Coordination>,
    poll: Duration,
}

impl std::fmt::Debug for RetryUntilConnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryUntilConnected")
            .field("session", &self.inner.session_id())
            .finish()
    }
}

impl RetryUntilConnected {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Coordination>) -> Self {
        RetryUntilConnected {
            inner,
            poll: DEFAULT_POLL,
        }
    }

    /// The wrapped client.
    pub fn inner(&self) -> &Arc<dyn Coordination> {
        &self.inner
    }

    /// Runs `op` until it does not fail with `ConnectionLoss`, or the session it began on
    /// has ended.
    async fn retry<T, F, Fut>(&self, mut op: F) -> Result<T, CoordinationError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, CoordinationError>> + Send,
        T: Send,
    {
        let session = self.inner.session_id();
        loop {
            match op().await {
                Err(CoordinationError::ConnectionLoss) => {
                    tokio::time::sleep(self.poll).await;
                    loop {
                        if self.inner.session_id() != session {
                            return Err(CoordinationError::ConnectionLoss);
                        }
                        match self.inner.session_state() {
                            SessionState::Connected => break,
                            SessionState::Expired | SessionState::Closed => {
                                return Err(CoordinationError::ConnectionLoss)
                            }
                            SessionState::Disconnected => tokio::time::sleep(self.poll).await,
                        }
                    }
                    tracing::debug!(
                        session = self.inner.session_id(),
                        "connected again; resending an operation lost with the connection"
                    );
                }
                other => return other,
            }
        }
    }
}

#[async_trait]
impl Coordination for RetryUntilConnected {
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
        self.retry(|| self.inner.create(path, data, mode)).await
    }

    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        self.retry(|| self.inner.get_data(path, watch)).await
    }

    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        self.retry(|| self.inner.exists(path, watch)).await
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        self.retry(|| self.inner.set_data(path, data, version))
            .await
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.retry(|| self.inner.delete(path, version)).await
    }

    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        self.retry(|| self.inner.children(path, watch)).await
    }

    /// Each read that fails with `ConnectionLoss` is sent again, alone, once connected.
    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        let mut results = self.inner.get_data_many(paths).await;
        for (path, result) in paths.iter().zip(results.iter_mut()) {
            if matches!(result, Err(CoordinationError::ConnectionLoss)) {
                *result = self.get_data(path, false).await;
            }
        }
        results
    }

    async fn sync(&self, path: &str) -> Result<(), CoordinationError> {
        self.retry(|| self.inner.sync(path)).await
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        self.retry(|| self.inner.multi(ops.clone())).await
    }
}
