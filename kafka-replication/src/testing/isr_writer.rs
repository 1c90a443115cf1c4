//! The conformance suite of [`IsrWriter`]: the leader's ISR compare-and-set (K1.3, Kafka's
//! `ReplicationUtils.updateLeaderAndIsr`), per the trait's documentation — a proposal based on
//! the stored partition epoch, leader and leader epoch commits and returns the next partition
//! epoch; any other is a conflict reporting the stored state and writes nothing; a missing
//! partition is a conflict without state; the same proposal twice commits once; partitions
//! are independent.
//!
//! The builder plays the controller: it writes a partition's state unconditionally (creating
//! it, or after an election) and reads back what the store holds.
//!
//! ```
//! use async_trait::async_trait;
//! use kafka_replication::isr::{LeaderAndIsr, MemoryIsrWriter, TopicPartition};
//! use kafka_replication::testing::{isr_writer::{self, IsrWriterBuilder}, BuilderError};
//!
//! struct Memory;
//! #[async_trait]
//! impl IsrWriterBuilder for Memory {
//!     type Writer = MemoryIsrWriter;
//!     async fn build(&self) -> Result<MemoryIsrWriter, BuilderError> {
//!         Ok(MemoryIsrWriter::new())
//!     }
//!     async fn controller_write(&self, w: &mut MemoryIsrWriter, tp: &TopicPartition,
//!                               state: &LeaderAndIsr) -> Result<LeaderAndIsr, BuilderError> {
//!         let epoch = w.get(tp).map_or(0, |s| s.partition_epoch + 1);
//!         let stored = LeaderAndIsr { partition_epoch: epoch, ..state.clone() };
//!         w.set(tp.clone(), stored.clone());
//!         Ok(stored)
//!     }
//!     async fn stored(&self, w: &mut MemoryIsrWriter, tp: &TopicPartition)
//!         -> Result<Option<LeaderAndIsr>, BuilderError> {
//!         Ok(w.get(tp).cloned())
//!     }
//! }
//! # futures::executor::block_on(async {
//! isr_writer::test_all(&Memory).await?;
//! # Ok::<(), kafka_replication::testing::ConformanceError>(())
//! # }).unwrap();
//! ```

use async_trait::async_trait;

use super::{BuilderError, Case, ConformanceError};
use crate::isr::{BrokerId, IsrProposal, IsrResult, IsrWriter, LeaderAndIsr, TopicPartition};

/// What the suite needs from an [`IsrWriter`] implementation and its store.
#[async_trait]
pub trait IsrWriterBuilder: Sync {
    /// The writer under test.
    type Writer: IsrWriter;

    /// A writer on its store. Cases use partitions of their own topic, named after the case,
    /// so that several cases may share one store.
    async fn build(&self) -> Result<Self::Writer, BuilderError>;

    /// Writes `state` for `tp` as the controller does — creating the partition, or
    /// overwriting it whatever its partition epoch (an election) — and returns the stored
    /// state, with the partition epoch the store gave it (`state.partition_epoch` is ignored).
    async fn controller_write(
        &self,
        writer: &mut Self::Writer,
        tp: &TopicPartition,
        state: &LeaderAndIsr,
    ) -> Result<LeaderAndIsr, BuilderError>;

    /// The state the store holds for `tp`, if any.
    async fn stored(
        &self,
        writer: &mut Self::Writer,
        tp: &TopicPartition,
    ) -> Result<Option<LeaderAndIsr>, BuilderError>;
}

/// Runs every case in order and stops at the first failure.
pub async fn test_all<B: IsrWriterBuilder>(builder: &B) -> Result<(), ConformanceError> {
    a_proposal_at_the_stored_epoch_commits_the_next_epoch(builder).await?;
    a_stale_partition_epoch_is_a_conflict_with_the_stored_state(builder).await?;
    another_leader_or_leader_epoch_is_a_conflict(builder).await?;
    a_missing_partition_is_a_conflict_without_state(builder).await?;
    the_same_proposal_twice_commits_once(builder).await?;
    partitions_are_independent(builder).await?;
    Ok(())
}

fn state(leader: BrokerId, leader_epoch: i32, isr: &[BrokerId]) -> LeaderAndIsr {
    LeaderAndIsr {
        leader,
        leader_epoch,
        isr: isr.to_vec(),
        partition_epoch: 0,
    }
}

fn proposal(tp: &TopicPartition, based_on: &LeaderAndIsr, isr: &[BrokerId]) -> IsrProposal {
    IsrProposal {
        topic_partition: tp.clone(),
        proposed: LeaderAndIsr {
            isr: isr.to_vec(),
            ..based_on.clone()
        },
    }
}

async fn stored<B: IsrWriterBuilder>(
    c: Case,
    builder: &B,
    w: &mut B::Writer,
    tp: &TopicPartition,
) -> Result<Option<LeaderAndIsr>, ConformanceError> {
    c.setup("read the stored state", builder.stored(w, tp).await)
}

async fn created<B: IsrWriterBuilder>(
    c: Case,
    builder: &B,
    w: &mut B::Writer,
    tp: &TopicPartition,
    s: &LeaderAndIsr,
) -> Result<LeaderAndIsr, ConformanceError> {
    c.setup(
        "write the state as the controller",
        builder.controller_write(w, tp, s).await,
    )
}

/// A proposal based on the stored state commits, returns the next partition epoch and is
/// what the store then holds; the next proposal is based on that epoch (shrink, then expand).
pub async fn a_proposal_at_the_stored_epoch_commits_the_next_epoch<B: IsrWriterBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_proposal_at_the_stored_epoch_commits_the_next_epoch");
    let tp = TopicPartition::new(c.0, 0);
    let mut w = c.setup("build", builder.build().await)?;
    let mut current = created(c, builder, &mut w, &tp, &state(1, 3, &[1, 2, 3])).await?;
    for isr in [&[1, 2][..], &[1], &[1, 3], &[1, 2, 3]] {
        let r = w.propose(&proposal(&tp, &current, isr)).await;
        let next = current.partition_epoch + 1;
        c.eq(
            &format!("proposing ISR {isr:?}"),
            r,
            IsrResult::Committed {
                partition_epoch: next,
            },
        )?;
        current = LeaderAndIsr {
            isr: isr.to_vec(),
            partition_epoch: next,
            ..current
        };
        c.eq(
            "stored state",
            stored(c, builder, &mut w, &tp).await?,
            Some(current.clone()),
        )?;
    }
    Ok(())
}

/// The controller wrote the state meanwhile: a proposal at the old partition epoch is a
/// conflict reporting the stored state, and changes nothing.
pub async fn a_stale_partition_epoch_is_a_conflict_with_the_stored_state<B: IsrWriterBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_stale_partition_epoch_is_a_conflict_with_the_stored_state");
    let tp = TopicPartition::new(c.0, 0);
    let mut w = c.setup("build", builder.build().await)?;
    let old = created(c, builder, &mut w, &tp, &state(1, 3, &[1, 2, 3])).await?;
    // The same leader kept by a controller write that only bumps the epoch, then a new one.
    for s in [state(1, 3, &[1, 2, 3]), state(2, 4, &[2, 3])] {
        let now = created(c, builder, &mut w, &tp, &s).await?;
        c.ensure(now.partition_epoch != old.partition_epoch, || {
            format!(
                "a controller write kept the partition epoch {}",
                now.partition_epoch
            )
        })?;
        let r = w.propose(&proposal(&tp, &old, &[1])).await;
        c.eq(
            "a proposal at the old partition epoch",
            r,
            IsrResult::Conflict {
                current: Some(now.clone()),
            },
        )?;
        c.eq(
            "stored state after the conflict",
            stored(c, builder, &mut w, &tp).await?,
            Some(now),
        )?;
    }
    Ok(())
}

/// At the stored partition epoch, a proposal from another leader or another leader epoch is
/// a conflict reporting the stored state, and changes nothing.
pub async fn another_leader_or_leader_epoch_is_a_conflict<B: IsrWriterBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("another_leader_or_leader_epoch_is_a_conflict");
    let tp = TopicPartition::new(c.0, 0);
    let mut w = c.setup("build", builder.build().await)?;
    let now = created(c, builder, &mut w, &tp, &state(1, 3, &[1, 2, 3])).await?;
    for (what, based_on) in [
        (
            "an older leader epoch",
            LeaderAndIsr {
                leader_epoch: 2,
                ..now.clone()
            },
        ),
        (
            "a newer leader epoch",
            LeaderAndIsr {
                leader_epoch: 4,
                ..now.clone()
            },
        ),
        (
            "another leader",
            LeaderAndIsr {
                leader: 2,
                ..now.clone()
            },
        ),
    ] {
        let r = w.propose(&proposal(&tp, &based_on, &[1])).await;
        c.eq(
            what,
            r,
            IsrResult::Conflict {
                current: Some(now.clone()),
            },
        )?;
    }
    c.eq(
        "stored state after the conflicts",
        stored(c, builder, &mut w, &tp).await?,
        Some(now),
    )
}

/// A proposal for a partition the store does not hold is a conflict without state.
pub async fn a_missing_partition_is_a_conflict_without_state<B: IsrWriterBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_missing_partition_is_a_conflict_without_state");
    let tp = TopicPartition::new(c.0, 0);
    let mut w = c.setup("build", builder.build().await)?;
    let r = w.propose(&proposal(&tp, &state(1, 0, &[1]), &[1])).await;
    c.eq(
        "a proposal for a missing partition",
        r,
        IsrResult::Conflict { current: None },
    )?;
    c.eq("stored state", stored(c, builder, &mut w, &tp).await?, None)
}

/// The same proposal sent twice commits the first time and conflicts the second, reporting
/// the state the first one wrote (the partition epoch fences it).
pub async fn the_same_proposal_twice_commits_once<B: IsrWriterBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("the_same_proposal_twice_commits_once");
    let tp = TopicPartition::new(c.0, 0);
    let mut w = c.setup("build", builder.build().await)?;
    let now = created(c, builder, &mut w, &tp, &state(1, 3, &[1, 2, 3])).await?;
    let p = proposal(&tp, &now, &[1, 2]);
    let next = now.partition_epoch + 1;
    c.eq(
        "the first proposal",
        w.propose(&p).await,
        IsrResult::Committed {
            partition_epoch: next,
        },
    )?;
    let written = LeaderAndIsr {
        isr: vec![1, 2],
        partition_epoch: next,
        ..now
    };
    c.eq(
        "the same proposal again",
        w.propose(&p).await,
        IsrResult::Conflict {
            current: Some(written.clone()),
        },
    )?;
    c.eq(
        "stored state",
        stored(c, builder, &mut w, &tp).await?,
        Some(written),
    )
}

/// A proposal changes only its own partition.
pub async fn partitions_are_independent<B: IsrWriterBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("partitions_are_independent");
    let (p0, p1) = (TopicPartition::new(c.0, 0), TopicPartition::new(c.0, 1));
    let mut w = c.setup("build", builder.build().await)?;
    let s0 = created(c, builder, &mut w, &p0, &state(1, 3, &[1, 2, 3])).await?;
    let s1 = created(c, builder, &mut w, &p1, &state(1, 3, &[1, 2, 3])).await?;
    let r = w.propose(&proposal(&p0, &s0, &[1])).await;
    c.eq(
        "proposal on partition 0",
        r,
        IsrResult::Committed {
            partition_epoch: s0.partition_epoch + 1,
        },
    )?;
    c.eq(
        "partition 1",
        stored(c, builder, &mut w, &p1).await?,
        Some(s1.clone()),
    )?;
    let r = w.propose(&proposal(&p1, &s1, &[1, 3])).await;
    c.eq(
        "proposal on partition 1",
        r,
        IsrResult::Committed {
            partition_epoch: s1.partition_epoch + 1,
        },
    )
}
