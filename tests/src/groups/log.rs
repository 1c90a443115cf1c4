//! The replicated `__consumer_offsets` partitions, modelled explicitly: every broker holds a
//! replica of every partition (a log of entries, each stamped with the leader epoch it was
//! written at), the leader's high watermark is the smallest log end over the ISR as the leader
//! knows it and only moves forward, followers copy from the leader they believe in after
//! truncating to the longest prefix whose epochs match the leader's (what truncation by leader
//! epoch, KIP-101 / KIP-279, achieves), and ISR changes are compare-and-set on the leader and
//! leader epoch at the controller (a deposed leader cannot shrink the ISR to commit alone).
//!
//! This is a model of `kafka-replication`'s partition core, not that core itself: the point of
//! the group simulation is the coordinator on top, and the model keeps the properties the
//! coordinator relies on (an append is committed only once the high watermark passes it, a
//! committed entry is on every ISR member, a deposed leader's appends never commit).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::net::NodeId;

/// One entry of a replica's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The leader epoch it was appended at.
    pub epoch: i32,
    /// The record key.
    pub key: Bytes,
    /// The record value; `None` for a tombstone.
    pub value: Option<Bytes>,
}

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The follower's log end at its last fetch.
    pub leo: i64,
    /// When the follower last fetched up to the leader's log end.
    pub caught_up_at: u64,
}

/// One broker's replica of one offsets partition.
#[derive(Debug, Clone, Default)]
pub struct Replica {
    /// The log.
    pub log: Vec<Entry>,
    /// The high watermark as this broker knows it.
    pub hw: i64,
    /// The newest leader epoch this broker applied.
    pub epoch: i32,
    /// The leader this broker believes in.
    pub leader: Option<NodeId>,
    /// The ISR (the leader's view).
    pub isr: Vec<NodeId>,
    /// The followers (leader side).
    pub remotes: BTreeMap<NodeId, Remote>,
}

impl Replica {
    /// The log end offset.
    pub fn leo(&self) -> i64 {
        self.log.len() as i64
    }

    /// Whether `me` leads this replica in its own view.
    pub fn is_leader(&self, me: NodeId) -> bool {
        self.leader == Some(me)
    }

    /// Raises the high watermark to the smallest log end over the ISR (leader side).
    pub fn update_hw(&mut self, me: NodeId) {
        if !self.is_leader(me) {
            return;
        }
        let mut min = self.leo();
        for id in &self.isr {
            if *id == me {
                continue;
            }
            match self.remotes.get(id) {
                Some(r) => min = min.min(r.leo),
                None => return,
            }
        }
        if min > self.hw {
            self.hw = min;
        }
    }

    /// How long the longest prefix whose epochs match `leader`'s is, capped at both log ends.
    pub fn common_prefix(&self, leader: &Replica) -> usize {
        let n = self.log.len().min(leader.log.len());
        (0..n)
            .find(|&i| self.log[i].epoch != leader.log[i].epoch)
            .unwrap_or(n)
    }
}

/// The controller's record of one partition (the state znode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The leader, `None` while offline.
    pub leader: Option<NodeId>,
    /// The leader epoch.
    pub epoch: i32,
    /// The ISR.
    pub isr: Vec<NodeId>,
}

/// The controller: it never fails here (controller failover shows as leadership changes and as
/// held-back LeaderAndIsr requests), and it elects only from the ISR (no unclean election).
#[derive(Debug, Clone, Default)]
pub struct Controller {
    /// Every offsets partition.
    pub partitions: BTreeMap<i32, PartitionState>,
}

impl Controller {
    /// `AlterIsr` as a compare-and-set on the leader and its epoch.
    pub fn alter_isr(
        &mut self,
        partition: i32,
        leader: NodeId,
        epoch: i32,
        isr: &[NodeId],
    ) -> bool {
        match self.partitions.get_mut(&partition) {
            Some(s) if s.leader == Some(leader) && s.epoch == epoch => {
                s.isr = isr.to_vec();
                true
            }
            _ => false,
        }
    }
}
