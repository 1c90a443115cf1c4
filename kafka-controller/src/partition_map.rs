//! `PartitionMap`: a map keyed by topic partition, held per topic (topic name, then partition
//! index), iterated in the same order as a `BTreeMap<TopicPartition, _>`.
//!
//! The controller's per-partition maps hold up to millions of entries and are searched for
//! every partition of every pass. One ordered map over all partitions makes each search walk a
//! tall tree whose nodes are spread over the whole heap; here a search compares the name
//! hashes the topic name once to find the topic's small map of partition index to slot
//! number; the entries themselves (request states are large) sit in one vector and are moved
//! only when they are taken out.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::context::TopicPartition;

/// Partition indexes below this are held in a vector indexed by partition (topics have
/// partitions 0..n); others (never written by Kafka) in an ordered map.
const DENSE_LIMIT: i32 = 1 << 16;

/// No entry (in [`PerTopic::dense`]).
const NONE: usize = usize::MAX;

/// One topic's partition index → slot number.
#[derive(Clone, Debug, Default)]
struct PerTopic {
    /// Slot of partition `p` at `dense[p]`, or [`NONE`], for `0 <= p < DENSE_LIMIT`.
    dense: Vec<usize>,
    /// Slots of the other partitions.
    sparse: BTreeMap<i32, usize>,
    /// Entries held.
    len: usize,
}

impl PerTopic {
    fn get(&self, p: i32) -> Option<usize> {
        if (0..DENSE_LIMIT).contains(&p) {
            let i = *self.dense.get(usize::try_from(p).ok()?)?;
            (i != NONE).then_some(i)
        } else {
            self.sparse.get(&p).copied()
        }
    }

    /// Sets (or adds) the slot of `p`.
    fn set(&mut self, p: i32, slot: usize) {
        match usize::try_from(p) {
            Ok(d) if p < DENSE_LIMIT => {
                if self.dense.len() <= d {
                    self.dense.resize(d + 1, NONE);
                }
                if self.dense[d] == NONE {
                    self.len += 1;
                }
                self.dense[d] = slot;
            }
            _ => {
                if self.sparse.insert(p, slot).is_none() {
                    self.len += 1;
                }
            }
        }
    }

    fn remove(&mut self, p: i32) -> Option<usize> {
        let i = match usize::try_from(p) {
            Ok(d) if p < DENSE_LIMIT => {
                let cell = self.dense.get_mut(d)?;
                if *cell == NONE {
                    return None;
                }
                std::mem::replace(cell, NONE)
            }
            _ => self.sparse.remove(&p)?,
        };
        self.len -= 1;
        Some(i)
    }

    /// The slots, in partition order.
    fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.sparse
            .range(..0)
            .map(|(_, i)| *i)
            .chain(self.dense.iter().copied().filter(|i| *i != NONE))
            .chain(self.sparse.range(DENSE_LIMIT..).map(|(_, i)| *i))
    }
}

/// A map from topic partition to `V`, iterated in the order of topic name, then partition
/// index.
#[derive(Clone, Debug)]
pub(crate) struct PartitionMap<V> {
    /// The topics with entries, in no particular order (iteration sorts them by name).
    topics: Vec<(Arc<str>, PerTopic)>,
    /// Topic name → position in `topics`.
    index: HashMap<Arc<str>, usize, foldhash::fast::RandomState>,
    /// The entries (key and value), in no particular order.
    slots: Vec<(TopicPartition, V)>,
}

impl<V> Default for PartitionMap<V> {
    fn default() -> Self {
        Self {
            topics: Vec::new(),
            index: HashMap::default(),
            slots: Vec::new(),
        }
    }
}

impl<V> PartitionMap<V> {
    /// True if there are no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn per_topic(&self, topic: &str) -> Option<&PerTopic> {
        let t = *self.index.get(topic)?;
        self.topics.get(t).map(|(_, m)| m)
    }

    fn per_topic_mut(&mut self, topic: &str) -> Option<&mut PerTopic> {
        let t = *self.index.get(topic)?;
        self.topics.get_mut(t).map(|(_, m)| m)
    }

    fn slot(&self, tp: &TopicPartition) -> Option<usize> {
        self.per_topic(&tp.topic)?.get(tp.partition)
    }

    /// Records that `tp` is in slot `i`, adding its topic if new.
    fn index_slot(&mut self, tp: &TopicPartition, i: usize) {
        if let Some(per_topic) = self.per_topic_mut(&tp.topic) {
            per_topic.set(tp.partition, i);
            return;
        }
        self.index.insert(tp.topic.clone(), self.topics.len());
        let mut per_topic = PerTopic::default();
        per_topic.set(tp.partition, i);
        self.topics.push((tp.topic.clone(), per_topic));
    }

    /// The value of `tp`.
    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<&V> {
        let i = self.slot(tp)?;
        self.slots.get(i).map(|(_, v)| v)
    }

    /// The value of `tp`, mutably.
    pub(crate) fn get_mut(&mut self, tp: &TopicPartition) -> Option<&mut V> {
        let i = self.slot(tp)?;
        self.slots.get_mut(i).map(|(_, v)| v)
    }

    /// Makes room for `additional` more entries.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.slots.reserve(additional);
    }

    /// Sets the value of `tp`, returning the one it replaced.
    pub(crate) fn insert(&mut self, tp: TopicPartition, value: V) -> Option<V> {
        if let Some(slot) = self.slot(&tp).and_then(|i| self.slots.get_mut(i)) {
            return Some(std::mem::replace(&mut slot.1, value));
        }
        let i = self.slots.len();
        self.index_slot(&tp, i);
        self.slots.push((tp, value));
        None
    }

    /// The value of `tp`, inserting `make()` first if there is none.
    pub(crate) fn get_or_insert_with(
        &mut self,
        tp: &TopicPartition,
        make: impl FnOnce() -> V,
    ) -> &mut V {
        let i = match self.slot(tp) {
            Some(i) => i,
            None => {
                let i = self.slots.len();
                self.index_slot(tp, i);
                self.slots.push((tp.clone(), make()));
                i
            }
        };
        &mut self.slots[i].1
    }

    /// Removes the topic at position `t` of `topics` (its slots stay).
    fn forget_topic(&mut self, t: usize) {
        let (name, _) = self.topics.swap_remove(t);
        self.index.remove(&name);
        if let Some((moved, _)) = self.topics.get(t) {
            if let Some(position) = self.index.get_mut(moved) {
                *position = t;
            }
        }
    }

    /// Removes the value of `tp`.
    pub(crate) fn remove(&mut self, tp: &TopicPartition) -> Option<V> {
        let t = *self.index.get(&*tp.topic)?;
        let per_topic = &mut self.topics.get_mut(t)?.1;
        let i = per_topic.remove(tp.partition)?;
        if per_topic.len == 0 {
            self.forget_topic(t);
        }
        let (_, v) = self.slots.swap_remove(i);
        // The last entry moved into slot `i`.
        if let Some((moved, _)) = self.slots.get(i) {
            let moved = moved.clone();
            if let Some(per_topic) = self.per_topic_mut(&moved.topic) {
                per_topic.set(moved.partition, i);
            }
        }
        Some(v)
    }

    /// Removes every partition of `topic`.
    pub(crate) fn remove_topic(&mut self, topic: &str) {
        let Some(&t) = self.index.get(topic) else {
            return;
        };
        self.forget_topic(t);
        self.slots.retain(|(tp, _)| &*tp.topic != topic);
        for i in 0..self.slots.len() {
            let tp = self.slots[i].0.clone();
            if let Some(per_topic) = self.per_topic_mut(&tp.topic) {
                per_topic.set(tp.partition, i);
            }
        }
    }

    /// The topics, ordered by name.
    fn sorted_topics(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.topics.len()).collect();
        order.sort_by(|a, b| self.topics[*a].0.cmp(&self.topics[*b].0));
        order
    }

    /// Every entry, ordered by topic name, then partition.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&TopicPartition, &V)> {
        self.sorted_topics()
            .into_iter()
            .filter_map(|t| self.topics.get(t))
            .flat_map(|(_, per_topic)| per_topic.slots())
            .filter_map(|i| self.slots.get(i).map(|(tp, v)| (tp, v)))
    }

    /// Every value, ordered by topic name, then partition, consuming the map. Entries
    /// inserted in that order (a pass over sorted partitions) are moved out once, in place.
    pub(crate) fn into_values(self) -> std::vec::IntoIter<V> {
        let order = self.sorted_topics();
        let slot_order: Vec<usize> = order
            .into_iter()
            .filter_map(|t| self.topics.get(t))
            .flat_map(|(_, per_topic)| per_topic.slots())
            .collect();
        let in_order = slot_order.len() == self.slots.len()
            && slot_order.iter().enumerate().all(|(i, s)| i == *s);
        if in_order {
            let values: Vec<V> = self.slots.into_iter().map(|(_, v)| v).collect();
            return values.into_iter();
        }
        let mut slots: Vec<Option<V>> = self.slots.into_iter().map(|(_, v)| Some(v)).collect();
        let mut values = Vec::with_capacity(slot_order.len());
        for i in slot_order {
            if let Some(v) = slots.get_mut(i).and_then(Option::take) {
                values.push(v);
            }
        }
        values.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts, replacements and removals in any order leave the same entries, in the same
    /// order, as a `BTreeMap` keyed by partition.
    #[test]
    fn partition_map_agrees_with_an_ordered_map() {
        let topics: Vec<Arc<str>> = ["b", "a", "c"].into_iter().map(Arc::from).collect();
        let mut map = PartitionMap::default();
        let mut reference = BTreeMap::new();
        let mut x: u32 = 7;
        for step in 0..3000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            // Mostly dense partition indexes, some outside the dense range.
            let partition = match (x >> 12) % 44 {
                40 => -3,
                41 => DENSE_LIMIT + 5,
                42 => i32::MIN,
                43 => i32::MAX,
                n => n as i32,
            };
            let tp = TopicPartition::new(topics[(x >> 8) as usize % 3].clone(), partition);
            match (x >> 20) % 4 {
                0 => assert_eq!(map.remove(&tp), reference.remove(&tp)),
                1 => *map.get_or_insert_with(&tp, || 0) += step,
                _ => assert_eq!(
                    map.insert(tp.clone(), step),
                    reference.insert(tp.clone(), step)
                ),
            }
            if (x >> 20) % 4 == 1 {
                *reference.entry(tp.clone()).or_insert(0) += step;
            }
            assert_eq!(map.get(&tp), reference.get(&tp));
            if step % 1000 == 999 {
                map.remove_topic("a");
                reference.retain(|k: &TopicPartition, _| &*k.topic != "a");
            }
            assert_eq!(map.is_empty(), reference.is_empty());
        }
        let entries: Vec<_> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let expected: Vec<_> = reference.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(entries, expected);
        let values: Vec<u32> = map.into_values().collect();
        assert_eq!(values, reference.into_values().collect::<Vec<_>>());
    }

    /// Entries inserted in topic-name, partition order (the values are moved out as they
    /// lie) and entries inserted out of order come out in the same order as from a
    /// `BTreeMap`.
    #[test]
    fn partition_map_values_come_out_ordered_whatever_the_insertion_order() {
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let sorted: Vec<TopicPartition> = [(&a, 0), (&a, 1), (&a, 7), (&b, 0), (&b, 2)]
            .into_iter()
            .map(|(t, p)| TopicPartition::new(t.clone(), p))
            .collect();
        for order in [
            vec![0, 1, 2, 3, 4],
            vec![3, 0, 4, 1, 2],
            vec![0, 1, 2, 4, 3],
        ] {
            let mut map = PartitionMap::default();
            let mut reference = BTreeMap::new();
            for (n, i) in order.iter().enumerate() {
                map.insert(sorted[*i].clone(), n);
                reference.insert(sorted[*i].clone(), n);
            }
            // A replaced value keeps its slot.
            map.insert(sorted[1].clone(), 99);
            reference.insert(sorted[1].clone(), 99);
            let values: Vec<usize> = map.into_values().collect();
            assert_eq!(
                values,
                reference.into_values().collect::<Vec<_>>(),
                "{order:?}"
            );
        }
    }
}
