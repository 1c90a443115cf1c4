//! `MemoryElectionStore`: an election store kept in memory, for tests and simulations.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::{ElectionStore, PersistedEpochs, StoreError};

/// An [`ElectionStore`] held in memory. Clones share the same state, so a test can "crash" a
/// peer and restart it with the state it had persisted.
#[derive(Debug, Clone, Default)]
pub struct MemoryElectionStore {
    state: Arc<Mutex<PersistedEpochs>>,
}

impl MemoryElectionStore {
    /// A store holding `state`.
    pub fn new(state: PersistedEpochs) -> Self {
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The state currently held (synchronous, for assertions).
    pub fn snapshot(&self) -> PersistedEpochs {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl ElectionStore for MemoryElectionStore {
    async fn load(&self) -> Result<PersistedEpochs, StoreError> {
        Ok(self.snapshot())
    }

    async fn save(&self, state: PersistedEpochs) -> Result<(), StoreError> {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        Ok(())
    }
}
