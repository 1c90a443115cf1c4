//! Durable election state: the `ElectionStore` trait (ZooKeeper's `currentEpoch`,
//! `acceptedEpoch` and the last logged zxid) with an in-memory and a file implementation.
//!
//! Values are raw `i64`, exactly as ZooKeeper keeps them (`zxid = epoch << 32 | counter`).

mod error;
mod file;
mod memory;

pub use error::StoreError;
pub use file::FileElectionStore;
pub use memory::MemoryElectionStore;

use async_trait::async_trait;

/// The durable state a peer needs to take part in elections and discovery (Z1, Z4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PersistedEpochs {
    /// Epoch of the last leader this server completed synchronisation with (ZooKeeper's
    /// `currentEpoch`). It is the `peerEpoch` of this server's own vote.
    pub current_epoch: i64,
    /// Last epoch this server accepted in a LEADERINFO, or proposed as leader (ZooKeeper's
    /// `acceptedEpoch`). Never decreases; a learner refuses any epoch below it (Z1).
    pub accepted_epoch: i64,
    /// The last logged zxid (`epoch << 32 | counter`), the `zxid` of this server's own vote (Z4).
    pub last_zxid: i64,
}

/// Where a peer keeps its epochs and last zxid across restarts.
///
/// Implementations must make each `save_*` durable before returning: the driver persists an
/// accepted epoch *before* it acknowledges it (Z1).
#[async_trait]
pub trait ElectionStore: Send + Sync {
    /// Reads the current durable state.
    async fn load(&self) -> Result<PersistedEpochs, StoreError>;

    /// Durably replaces the whole state.
    async fn save(&self, state: PersistedEpochs) -> Result<(), StoreError>;

    /// Durably sets `acceptedEpoch`, keeping the other fields.
    async fn save_accepted_epoch(&self, epoch: i64) -> Result<(), StoreError> {
        let mut s = self.load().await?;
        s.accepted_epoch = epoch;
        self.save(s).await
    }

    /// Durably sets `currentEpoch`, keeping the other fields.
    async fn save_current_epoch(&self, epoch: i64) -> Result<(), StoreError> {
        let mut s = self.load().await?;
        s.current_epoch = epoch;
        self.save(s).await
    }
}
