//! ISR changes and the [`IsrWriter`] trait through which a leader proposes them.
//!
//! A leader never changes its ISR on its own authority: it proposes the new ISR at the
//! partition epoch it knows (the version of the partition's state in the coordination store)
//! and the store accepts it — returning the next partition epoch — or reports a conflict with
//! the state it holds, which the leader adopts before trying again (Kafka's `ReplicationUtils.updateLeaderAndIsr`). This
//! crate never knows the coordination store; the composition implements the trait on it.

use std::collections::HashMap;

use async_trait::async_trait;

/// A broker id.
pub type BrokerId = i32;

/// A partition's leadership state as the coordination store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAndIsr {
    /// The leader, or -1 for none.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// The version of this state in the store (ZooKeeper mode: the state znode's version).
    pub partition_epoch: i32,
}

/// A topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// An ISR change a leader wants written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The proposed state: same leader and leader epoch, new ISR, and the partition epoch the
    /// proposal is based on.
    pub proposed: LeaderAndIsr,
}

/// The store's answer to an [`IsrProposal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrResult {
    /// Written; the state now has this partition epoch.
    Committed {
        /// The new partition epoch.
        partition_epoch: i32,
    },
    /// The stored state moved on (another writer, a new leader); this is what it holds now.
    Conflict {
        /// The current state, if the partition exists.
        current: Option<LeaderAndIsr>,
    },
}

/// Writes ISR changes with fencing: a proposal only succeeds if the stored partition epoch is
/// still the one it was based on.
#[async_trait]
pub trait IsrWriter: Send {
    /// Proposes `proposal`; see [`IsrResult`].
    async fn propose(&mut self, proposal: &IsrProposal) -> IsrResult;
}

/// An in-memory coordination store for partition states, for tests and simulations.
#[derive(Debug, Clone, Default)]
pub struct MemoryIsrWriter {
    states: HashMap<TopicPartition, LeaderAndIsr>,
}

impl MemoryIsrWriter {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the state of `tp` as a controller would (election, creation).
    pub fn set(&mut self, tp: TopicPartition, state: LeaderAndIsr) {
        self.states.insert(tp, state);
    }

    /// The state of `tp`.
    pub fn get(&self, tp: &TopicPartition) -> Option<&LeaderAndIsr> {
        self.states.get(tp)
    }

    /// The synchronous form of [`IsrWriter::propose`].
    #[must_use = "the partition waits for this answer (`on_isr_result`)"]
    pub fn propose_now(&mut self, proposal: &IsrProposal) -> IsrResult {
        let Some(current) = self.states.get_mut(&proposal.topic_partition) else {
            return IsrResult::Conflict { current: None };
        };
        let p = &proposal.proposed;
        if current.partition_epoch != p.partition_epoch
            || current.leader != p.leader
            || current.leader_epoch != p.leader_epoch
        {
            return IsrResult::Conflict {
                current: Some(current.clone()),
            };
        }
        current.isr = p.isr.clone();
        current.partition_epoch += 1;
        IsrResult::Committed {
            partition_epoch: current.partition_epoch,
        }
    }
}

#[async_trait]
impl IsrWriter for MemoryIsrWriter {
    async fn propose(&mut self, proposal: &IsrProposal) -> IsrResult {
        self.propose_now(proposal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k1_3_isr_write_is_conditional_on_the_partition_epoch() {
        let tp = TopicPartition::new("t", 0);
        let mut w = MemoryIsrWriter::new();
        w.set(
            tp.clone(),
            LeaderAndIsr {
                leader: 1,
                leader_epoch: 3,
                isr: vec![1, 2, 3],
                partition_epoch: 7,
            },
        );
        let mut proposal = IsrProposal {
            topic_partition: tp.clone(),
            proposed: LeaderAndIsr {
                leader: 1,
                leader_epoch: 3,
                isr: vec![1, 2],
                partition_epoch: 7,
            },
        };
        let r = futures::executor::block_on(w.propose(&proposal));
        assert_eq!(r, IsrResult::Committed { partition_epoch: 8 });
        // The same proposal again is based on a stale epoch.
        proposal.proposed.isr = vec![1];
        let IsrResult::Conflict { current: Some(cur) } = w.propose_now(&proposal) else {
            panic!("expected a conflict");
        };
        assert_eq!(cur.isr, vec![1, 2]);
        assert_eq!(cur.partition_epoch, 8);
    }
}
