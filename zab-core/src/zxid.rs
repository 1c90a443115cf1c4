//! [`Zxid`]: ZooKeeper's transaction id, epoch in the high 32 bits and counter in the low 32
//! (Z4).

use std::fmt;

/// A ZooKeeper transaction id (Z4): `(epoch << 32) | counter`. Larger is newer. Kept as an
/// `i64` like ZooKeeper's `long`, because the election compares it signed and uses `-1` and
/// `i64::MIN` as markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Zxid(pub i64);

impl Zxid {
    /// The zxid of a server with no history at all (`0`).
    pub const ZERO: Zxid = Zxid(0);
    /// `-1`: ZooKeeper's "no valid zxid" marker; the election ignores LOOKING votes carrying it.
    pub const INVALID: Zxid = Zxid(-1);
    /// `Long.MIN_VALUE`: the zxid an observer puts in its initial vote.
    pub const OBSERVER: Zxid = Zxid(i64::MIN);

    /// Builds a zxid from an epoch and a counter (ZooKeeper's `ZxidUtils.makeZxid`): the epoch
    /// is shifted into the high 32 bits (its own high bits are lost, as in ZooKeeper).
    pub const fn new(epoch: i64, counter: u32) -> Self {
        Zxid(epoch.wrapping_shl(32) | counter as i64)
    }

    /// The raw value.
    pub const fn get(self) -> i64 {
        self.0
    }

    /// The epoch: the high 32 bits, arithmetic shift (`ZxidUtils.getEpochFromZxid`).
    pub const fn epoch(self) -> i64 {
        self.0 >> 32
    }

    /// The counter: the low 32 bits.
    pub const fn counter(self) -> u32 {
        self.0 as u32
    }

    /// The next zxid in the same epoch, or `None` when the counter would roll over (ZooKeeper
    /// forces a new election then, ZOOKEEPER-1277).
    pub const fn next(self) -> Option<Self> {
        match self.counter().checked_add(1) {
            Some(c) => Some(Zxid::new(self.epoch(), c)),
            None => None,
        }
    }
}

impl From<i64> for Zxid {
    fn from(v: i64) -> Self {
        Zxid(v)
    }
}

impl fmt::Display for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z4_zxid_epoch_high_counter_low() {
        let z = Zxid::new(3, 7);
        assert_eq!(z.get(), (3 << 32) | 7);
        assert_eq!(z.epoch(), 3);
        assert_eq!(z.counter(), 7);
        assert!(Zxid::new(3, 0) > Zxid::new(2, u32::MAX));
        assert_eq!(Zxid::new(1, u32::MAX).next(), None);
        assert_eq!(Zxid::new(1, 1).next(), Some(Zxid::new(1, 2)));
        assert_eq!(Zxid::INVALID.epoch(), -1);
        assert_eq!(format!("{}", Zxid::new(1, 0)), "0x100000000");
    }
}
