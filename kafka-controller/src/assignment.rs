//! K2.2: Kafka's replica assignment for topic creation (`AdminUtils.assignReplicasToBrokers`).
//!
//! Rack-unaware: the first replica of each partition goes round-robin over the broker list
//! from a start index; the followers follow at a shift that grows by one each time the
//! partition index wraps around the broker list, so that the same replica sequences do not
//! repeat. Rack-aware (every broker has a rack): the same round-robin over a rack-alternated
//! broker list, where followers prefer racks, then brokers, that hold no replica yet.
//!
//! Kafka draws the start index and the shift at random; here they are inputs
//! ([`AssignmentStart`]), so the function is deterministic and gives Kafka's output for the
//! same inputs. A caller wanting Kafka's behaviour draws both uniformly in `0..brokers.len()`.

use std::collections::{BTreeMap, BTreeSet};

use crate::context::BrokerId;

/// A broker as the assignment sees it (`BrokerMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRack {
    /// The broker id.
    pub id: BrokerId,
    /// Its rack, if any.
    pub rack: Option<String>,
}

impl BrokerRack {
    /// A broker with an optional rack.
    pub fn new(id: BrokerId, rack: Option<&str>) -> Self {
        Self {
            id,
            rack: rack.map(str::to_owned),
        }
    }
}

/// The two values Kafka draws at random (`fixedStartIndex`, used for both when given).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssignmentStart {
    /// Index in the (arranged) broker list of partition 0's first replica.
    pub start_index: usize,
    /// The initial follower shift.
    pub replica_shift: usize,
}

impl AssignmentStart {
    /// Kafka's `fixedStartIndex`: the same value for the start index and the shift.
    pub fn fixed(index: usize) -> Self {
        Self {
            start_index: index,
            replica_shift: index,
        }
    }
}

/// Why an assignment cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssignmentError {
    /// The partition count must be positive (`InvalidPartitionsException`).
    #[error("number of partitions must be larger than 0")]
    InvalidPartitions,
    /// The replication factor must be positive and at most the broker count
    /// (`InvalidReplicationFactorException`).
    #[error("replication factor {replication_factor} invalid for {brokers} available brokers")]
    InvalidReplicationFactor {
        /// Requested replication factor.
        replication_factor: i32,
        /// Brokers available.
        brokers: usize,
    },
    /// Some brokers have a rack and some do not (`AdminOperationException`).
    #[error("not all brokers have rack information for rack-aware replica assignment")]
    IncompleteRackInfo,
    /// The same broker id appears twice.
    #[error("broker {0} listed twice")]
    DuplicateBroker(BrokerId),
}

/// K2.2: assigns `partitions` partitions of `replication_factor` replicas over `brokers`,
/// numbering partitions from `start_partition` (Kafka's `startPartitionId`, used when
/// partitions are added to a topic; negative counts as 0). Rack-aware when every broker has a
/// rack, rack-unaware when none has; mixed input is refused. Brokers are taken in the order
/// given: ZooKeeper-mode Kafka passes them sorted by id.
pub fn assign_replicas_to_brokers(
    brokers: &[BrokerRack],
    partitions: i32,
    replication_factor: i32,
    start: AssignmentStart,
    start_partition: i32,
) -> Result<BTreeMap<i32, Vec<BrokerId>>, AssignmentError> {
    if partitions <= 0 {
        return Err(AssignmentError::InvalidPartitions);
    }
    if replication_factor <= 0 || replication_factor as usize > brokers.len() {
        return Err(AssignmentError::InvalidReplicationFactor {
            replication_factor,
            brokers: brokers.len(),
        });
    }
    let mut seen = BTreeSet::new();
    for b in brokers {
        if !seen.insert(b.id) {
            return Err(AssignmentError::DuplicateBroker(b.id));
        }
    }
    let rf = replication_factor as usize;
    let start_partition = start_partition.max(0);
    let with_rack = brokers.iter().filter(|b| b.rack.is_some()).count();
    if with_rack == 0 {
        let ids: Vec<BrokerId> = brokers.iter().map(|b| b.id).collect();
        Ok(rack_unaware(&ids, partitions, rf, start, start_partition))
    } else if with_rack < brokers.len() {
        Err(AssignmentError::IncompleteRackInfo)
    } else {
        Ok(rack_aware(brokers, partitions, rf, start, start_partition))
    }
}

/// The index of the `j`-th follower: `first + 1 + (shift + j) mod (n − 1)`, modulo n.
/// `shift` is already reduced modulo n − 1 (see [`Shift`]); needs n ≥ 2.
fn replica_index(first: usize, shift: usize, j: usize, n: usize) -> usize {
    let m = n - 1;
    let offset = 1 + (shift + j % m) % m;
    (first + offset) % n
}

/// The follower shift, kept modulo n − 1: it is only ever used modulo n − 1, so this is
/// exact and cannot overflow whatever the caller passes.
#[derive(Clone, Copy)]
struct Shift {
    value: usize,
    modulus: usize,
}

impl Shift {
    fn new(initial: usize, n: usize) -> Self {
        let modulus = n.saturating_sub(1).max(1);
        Self {
            value: initial % modulus,
            modulus,
        }
    }

    fn bump(&mut self) {
        self.value = (self.value + 1) % self.modulus;
    }

    /// `shift * factor`, modulo n − 1.
    fn times(self, factor: usize) -> usize {
        let m = self.modulus as u128;
        ((self.value as u128 * (factor as u128 % m)) % m) as usize
    }
}

fn rack_unaware(
    brokers: &[BrokerId],
    partitions: i32,
    rf: usize,
    start: AssignmentStart,
    start_partition: i32,
) -> BTreeMap<i32, Vec<BrokerId>> {
    let n = brokers.len();
    let start_index = start.start_index % n;
    let mut shift = Shift::new(start.replica_shift, n);
    let mut out = BTreeMap::new();
    for p in start_partition..start_partition.saturating_add(partitions) {
        let pu = p as usize;
        if pu > 0 && pu.is_multiple_of(n) {
            shift.bump();
        }
        let first = (pu + start_index) % n;
        let mut replicas = Vec::with_capacity(rf);
        replicas.push(brokers[first]);
        for j in 0..rf - 1 {
            replicas.push(brokers[replica_index(first, shift.times(1), j, n)]);
        }
        out.insert(p, replicas);
    }
    out
}

/// Brokers alternated by rack: racks sorted by name, brokers of a rack sorted by id, then
/// one broker from each rack in turn (`getRackAlternatedBrokerList`).
pub fn rack_alternated_broker_list(brokers: &[BrokerRack]) -> Vec<BrokerId> {
    let mut by_rack: BTreeMap<&str, Vec<BrokerId>> = BTreeMap::new();
    for b in brokers {
        by_rack
            .entry(b.rack.as_deref().unwrap_or(""))
            .or_default()
            .push(b.id);
    }
    let mut queues: Vec<std::vec::IntoIter<BrokerId>> = by_rack
        .into_values()
        .map(|mut ids| {
            ids.sort_unstable();
            ids.into_iter()
        })
        .collect();
    let mut out = Vec::with_capacity(brokers.len());
    while out.len() < brokers.len() {
        let before = out.len();
        for q in queues.iter_mut() {
            if let Some(id) = q.next() {
                out.push(id);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

fn rack_aware(
    brokers: &[BrokerRack],
    partitions: i32,
    rf: usize,
    start: AssignmentStart,
    start_partition: i32,
) -> BTreeMap<i32, Vec<BrokerId>> {
    let rack_of: BTreeMap<BrokerId, &str> = brokers
        .iter()
        .map(|b| (b.id, b.rack.as_deref().unwrap_or("")))
        .collect();
    let num_racks = rack_of.values().collect::<BTreeSet<_>>().len();
    let arranged = rack_alternated_broker_list(brokers);
    let n = arranged.len();
    let start_index = start.start_index % n;
    let mut shift = Shift::new(start.replica_shift, n);
    let mut out = BTreeMap::new();
    for p in start_partition..start_partition.saturating_add(partitions) {
        let pu = p as usize;
        if pu > 0 && pu.is_multiple_of(n) {
            shift.bump();
        }
        let first = (pu + start_index) % n;
        let leader = arranged[first];
        let mut replicas = vec![leader];
        let mut racks: BTreeSet<&str> = BTreeSet::new();
        racks.insert(rack_of.get(&leader).copied().unwrap_or(""));
        let mut used: BTreeSet<BrokerId> = BTreeSet::from([leader]);
        let mut k = 0usize;
        for _ in 0..rf - 1 {
            // Each candidate sweep visits every other broker within n − 1 steps, and an
            // acceptable one always exists, so this bound is never reached.
            let limit = k.saturating_add(n.saturating_mul(n));
            while k < limit {
                let broker = arranged[replica_index(first, shift.times(num_racks), k, n)];
                let rack = rack_of.get(&broker).copied().unwrap_or("");
                k += 1;
                if (!racks.contains(rack) || racks.len() == num_racks)
                    && (!used.contains(&broker) || used.len() == n)
                {
                    replicas.push(broker);
                    racks.insert(rack);
                    used.insert(broker);
                    break;
                }
            }
        }
        out.insert(p, replicas);
    }
    out
}
