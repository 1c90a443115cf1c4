//! [`CoordinationCluster`]: a store whose client sessions can be opened, cut off and expired on
//! demand, and [`MemoryCluster`], its in-memory implementation on one [`MemoryTree`].

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::CoordinationError;
use crate::memory::MemoryTree;
use crate::service::Coordination;
use crate::types::SessionId;

/// A cluster of one coordination store whose clients can be opened, cut off and expired at
/// will: what the conformance suite (feature `testing`) and the cluster demo need from a
/// backend, and what a test of session expiry needs in general.
#[async_trait]
pub trait CoordinationCluster: Send + Sync {
    /// A new client, with a new session, on the store shared by all clients of this harness.
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError>;

    /// Makes session `session` (of a client from [`connect`](Self::connect)) expire, as the
    /// server does when the session times out.
    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError>;

    /// Cuts session `session`'s client off from the service (a connection loss) without
    /// ending the session. Returns `false` when the harness cannot, which makes the conformance cases that
    /// need it skip that step. The default cannot.
    async fn disconnect(&self, session: SessionId) -> Result<bool, CoordinationError> {
        let _ = session;
        Ok(false)
    }

    /// Lets a client cut off by [`disconnect`](Self::disconnect) reconnect.
    async fn reconnect(&self, session: SessionId) -> Result<(), CoordinationError> {
        let _ = session;
        Ok(())
    }
}

/// The [`CoordinationCluster`] of [`MemoryCoordination`](crate::MemoryCoordination): clients on one
/// [`MemoryTree`], expiry through [`MemoryTree::expire`].
#[derive(Debug, Clone, Default)]
pub struct MemoryCluster {
    tree: MemoryTree,
}

impl MemoryCluster {
    /// A cluster on a new tree.
    pub fn new() -> MemoryCluster {
        MemoryCluster::default()
    }
}

#[async_trait]
impl CoordinationCluster for MemoryCluster {
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        Ok(Arc::new(self.tree.connect()))
    }

    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        if self.tree.expire(session) {
            Ok(())
        } else {
            Err(CoordinationError::SessionExpired)
        }
    }

    async fn disconnect(&self, session: SessionId) -> Result<bool, CoordinationError> {
        Ok(self.tree.suspend(session))
    }

    async fn reconnect(&self, session: SessionId) -> Result<(), CoordinationError> {
        self.tree.resume(session);
        Ok(())
    }
}
