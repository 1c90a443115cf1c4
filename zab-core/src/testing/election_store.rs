//! The conformance suite of [`ElectionStore`]: what every store of a peer's epochs must do, per
//! the trait's documentation — a new store holds zeros, `save` replaces the whole state, the
//! single-field saves keep the other fields, every save is durable on return (a restart
//! keeps the last one, Z1); for stores on files, a save interrupted by a crash leaves the
//! previous state, and a torn or damaged state file is a typed error, never a wrong value.
//!
//! ```
//! use zab_core::store::{MemoryElectionStore, StoreError};
//! use zab_core::testing::election_store::{self, ElectionStoreBuilder};
//!
//! struct Memory;
//! impl ElectionStoreBuilder for Memory {
//!     type Store = MemoryElectionStore;
//!     fn build(&self) -> Result<MemoryElectionStore, StoreError> {
//!         Ok(MemoryElectionStore::default())
//!     }
//!     fn reopen(&self, store: MemoryElectionStore) -> Result<MemoryElectionStore, StoreError> {
//!         Ok(store)
//!     }
//! }
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! election_store::test_all(&Memory).await?;
//! # Ok::<(), zab_core::testing::ConformanceError>(())
//! # }).unwrap();
//! ```

use super::{Case, ConformanceError};
use crate::store::{ElectionStore, PersistedEpochs, StoreError};

/// Damage done to a closed store's files before it is opened again (see
/// [`ElectionStoreBuilder::reopen_damaged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// A save interrupted by a crash: part of a new state (`next`, cut short) is written
    /// wherever the store writes before the new state replaces the old one.
    InterruptedSave {
        /// The state the interrupted save was writing.
        next: PersistedEpochs,
    },
    /// A torn state file: it loses its last `bytes` bytes.
    TornTail {
        /// How many bytes are cut off.
        bytes: usize,
    },
    /// A flipped byte: the byte `from_end` bytes before the end of the state file is changed.
    FlippedByte {
        /// Its distance from the end of the file (1 is the last byte).
        from_end: usize,
    },
}

/// What the suite needs from an [`ElectionStore`] implementation.
pub trait ElectionStoreBuilder {
    /// The store under test.
    type Store: ElectionStore;

    /// A new store holding all zeros (a new server), independent of every store built before.
    fn build(&self) -> Result<Self::Store, StoreError>;

    /// Closes `store` as a crash does and opens the same storage again.
    fn reopen(&self, store: Self::Store) -> Result<Self::Store, StoreError>;

    /// Closes `store`, applies `damage` to its files and opens them again (the result of that
    /// open, which may be a typed error). `None` for stores without files: the damage cases
    /// ([`interrupted_save_keeps_the_previous_state`], [`torn_state_is_never_a_wrong_value`],
    /// [`flipped_byte_is_never_a_wrong_value`]) then pass without checking anything. The
    /// default is `None`.
    fn reopen_damaged(
        &self,
        store: Self::Store,
        damage: Damage,
    ) -> Option<Result<Self::Store, StoreError>> {
        let _ = (store, damage);
        None
    }
}

/// Runs every case in order and stops at the first failure.
pub async fn test_all<B: ElectionStoreBuilder>(builder: &B) -> Result<(), ConformanceError> {
    a_new_store_holds_zeros(builder).await?;
    save_replaces_the_whole_state(builder).await?;
    single_field_saves_keep_the_other_fields(builder).await?;
    restart_keeps_the_last_save(builder).await?;
    interrupted_save_keeps_the_previous_state(builder).await?;
    torn_state_is_never_a_wrong_value(builder).await?;
    flipped_byte_is_never_a_wrong_value(builder).await?;
    Ok(())
}

fn state(current_epoch: i64, accepted_epoch: i64, last_zxid: i64) -> PersistedEpochs {
    PersistedEpochs {
        current_epoch,
        accepted_epoch,
        last_zxid,
    }
}

/// A new store loads as all zeros.
pub async fn a_new_store_holds_zeros<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_new_store_holds_zeros");
    let store = c.op("build", builder.build())?;
    c.eq(
        "state of a new store",
        c.op("load", store.load().await)?,
        PersistedEpochs::default(),
    )
}

/// `save` replaces every field, extremes included, and `load` returns it.
pub async fn save_replaces_the_whole_state<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("save_replaces_the_whole_state");
    let store = c.op("build", builder.build())?;
    for s in [
        state(3, 4, (3 << 32) | 2),
        state(i64::MAX, i64::MAX, i64::MAX),
        state(-1, 0, i64::MIN),
        state(0, 0, 0),
    ] {
        c.op("save", store.save(s).await)?;
        c.eq("state after save", c.op("load", store.load().await)?, s)?;
    }
    Ok(())
}

/// `save_accepted_epoch` and `save_current_epoch` change one field each.
pub async fn single_field_saves_keep_the_other_fields<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("single_field_saves_keep_the_other_fields");
    let store = c.op("build", builder.build())?;
    c.op("save", store.save(state(1, 2, (1 << 32) | 9)).await)?;
    c.op("save_accepted_epoch", store.save_accepted_epoch(5).await)?;
    c.eq(
        "after save_accepted_epoch(5)",
        c.op("load", store.load().await)?,
        state(1, 5, (1 << 32) | 9),
    )?;
    c.op("save_current_epoch", store.save_current_epoch(5).await)?;
    c.eq(
        "after save_current_epoch(5)",
        c.op("load", store.load().await)?,
        state(5, 5, (1 << 32) | 9),
    )
}

/// Every save is durable on return: a restart loads the last one.
pub async fn restart_keeps_the_last_save<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restart_keeps_the_last_save");
    let store = c.op("build", builder.build())?;
    c.op("save", store.save(state(2, 3, (2 << 32) | 7)).await)?;
    c.op("save_accepted_epoch", store.save_accepted_epoch(4).await)?;
    let store = c.op("reopen", builder.reopen(store))?;
    c.eq(
        "state after the restart",
        c.op("load", store.load().await)?,
        state(2, 4, (2 << 32) | 7),
    )?;
    c.op("save_current_epoch", store.save_current_epoch(4).await)?;
    let store = c.op("reopen", builder.reopen(store))?;
    c.eq(
        "state after a second restart",
        c.op("load", store.load().await)?,
        state(4, 4, (2 << 32) | 7),
    )
}

/// A save interrupted by a crash leaves the previous state, readable. Passes without
/// checking when the builder has no files.
pub async fn interrupted_save_keeps_the_previous_state<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("interrupted_save_keeps_the_previous_state");
    let store = c.op("build", builder.build())?;
    let before = state(2, 3, (2 << 32) | 7);
    c.op("save", store.save(before).await)?;
    let damage = Damage::InterruptedSave {
        next: state(3, 3, (3 << 32) | 1),
    };
    let Some(reopened) = builder.reopen_damaged(store, damage) else {
        return Ok(());
    };
    let store = c.op("reopen after the interrupted save", reopened)?;
    c.eq(
        "state after the interrupted save",
        c.op("load", store.load().await)?,
        before,
    )?;
    // The store still takes saves.
    c.op("save", store.save(state(3, 3, 0)).await)?;
    c.eq(
        "state after the next save",
        c.op("load", store.load().await)?,
        state(3, 3, 0),
    )
}

/// Reopens after `damage` and checks the outcome is a typed error or the last saved state.
async fn never_a_wrong_value<B: ElectionStoreBuilder>(
    c: Case,
    builder: &B,
    damage: Damage,
) -> Result<(), ConformanceError> {
    let store = c.op("build", builder.build())?;
    let saved = state(7, 8, (7 << 32) | 123_456);
    c.op("save", store.save(saved).await)?;
    let Some(reopened) = builder.reopen_damaged(store, damage) else {
        return Ok(());
    };
    let Ok(store) = reopened else {
        return Ok(()); // a typed error is a detection
    };
    match store.load().await {
        Err(_) => Ok(()),
        Ok(got) => c.eq("state read from a damaged file", got, saved),
    }
}

/// A torn state file is a typed error (on open or load), never another state. Passes without
/// checking when the builder has no files.
pub async fn torn_state_is_never_a_wrong_value<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("torn_state_is_never_a_wrong_value");
    for bytes in [1, 2, 10] {
        never_a_wrong_value(c, builder, Damage::TornTail { bytes }).await?;
    }
    Ok(())
}

/// A flipped byte anywhere in the state file is a typed error (on open or load), never another
/// state. Passes without checking when the builder has no files.
pub async fn flipped_byte_is_never_a_wrong_value<B: ElectionStoreBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("flipped_byte_is_never_a_wrong_value");
    for from_end in [2, 12, 20, 40, 60] {
        never_a_wrong_value(c, builder, Damage::FlippedByte { from_end }).await?;
    }
    Ok(())
}
