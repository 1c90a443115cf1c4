//! [`ZnodeTree`]: the data tree of [`MemoryTree`](super::MemoryTree) as a deterministic,
//! replicable state: transactions carry their zxid from outside (a replicated log's), and the
//! changes each one makes are returned as the watch events they trigger, for the caller to
//! deliver to whichever clients it serves. No sessions, clients or watches are kept here: a
//! replicated coordination service keeps those per server.

use std::collections::{BTreeMap, BTreeSet};

use super::tree::{Tree, Trigger};
use crate::error::CoordinationError;
use crate::types::{Op, OpResult, SessionId, Stat, WatchEvent, WatchEventKind};

/// The outcome of a transaction applied to a [`ZnodeTree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    /// The results of the operations, in order.
    pub results: Vec<OpResult>,
    /// The watch events the transaction triggers, in the order ZooKeeper's data tree fires
    /// them. `NodeCreated` and `NodeDataChanged` fire data watches (`get_data` / `exists`),
    /// `NodeChildrenChanged` child watches, `NodeDeleted` both.
    pub events: Vec<WatchEvent>,
}

/// The znode tree as a replicated state machine applies it: persistent, ephemeral and
/// sequential nodes, versions, all-or-nothing multi. Every replica applying the same
/// transactions with the same zxids holds the same tree and computes the same results.
#[derive(Debug)]
pub struct ZnodeTree {
    tree: Tree,
    /// Ephemeral paths by owning session.
    ephemerals: BTreeMap<SessionId, BTreeSet<String>>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("last_zxid", &self.last_zxid())
            .finish()
    }
}

impl Default for ZnodeTree {
    fn default() -> Self {
        Self::new()
    }
}

impl ZnodeTree {
    /// A tree holding only `/`.
    pub fn new() -> ZnodeTree {
        ZnodeTree {
            tree: Tree::new(),
            ephemerals: BTreeMap::new(),
        }
    }

    /// The zxid of the last transaction that changed the tree.
    pub fn last_zxid(&self) -> i64 {
        self.tree.last_zxid()
    }

    /// Applies `ops` as one transaction of `session` with zxid `zxid`: all or nothing. On
    /// failure returns [`CoordinationError::MultiOpFailed`] and changes nothing.
    pub fn apply(
        &mut self,
        zxid: i64,
        session: SessionId,
        ops: &[Op],
    ) -> Result<TreeChange, CoordinationError> {
        let done = self.tree.apply_at(ops, session, zxid)?;
        for (owner, path) in done.ephemerals_created {
            self.ephemerals.entry(owner).or_default().insert(path);
        }
        for (owner, path) in done.ephemerals_deleted {
            if let Some(set) = self.ephemerals.get_mut(&owner) {
                set.remove(&path);
                if set.is_empty() {
                    self.ephemerals.remove(&owner);
                }
            }
        }
        Ok(TreeChange {
            results: done.results,
            events: done.triggers.into_iter().map(event).collect(),
        })
    }

    /// Ends `session` in the transaction `zxid`: deletes its ephemerals, all at once.
    pub fn close_session(&mut self, zxid: i64, session: SessionId) -> TreeChange {
        let ops: Vec<Op> = self
            .ephemerals_of(session)
            .into_iter()
            .map(|p| Op::delete(p, crate::ANY_VERSION))
            .collect();
        self.apply(zxid, session, &ops).unwrap_or(TreeChange {
            results: Vec::new(),
            events: Vec::new(),
        })
    }

    /// The ephemeral nodes `session` owns, sorted.
    pub fn ephemerals_of(&self, session: SessionId) -> Vec<String> {
        self.ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The node's data and metadata.
    pub fn get(&self, path: &str) -> Option<(Vec<u8>, Stat)> {
        self.tree.get(path).map(|n| (n.data.clone(), n.full_stat()))
    }

    /// The node's metadata.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.tree.get(path).map(|n| n.full_stat())
    }

    /// The names of the node's children, sorted.
    pub fn children(&self, path: &str) -> Option<Vec<String>> {
        self.tree
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
    }

    /// Every node as `(path, data, stat)`, parents before children: a snapshot.
    pub fn entries(&self) -> Vec<(String, Vec<u8>, Stat)> {
        self.tree
            .subtree("/")
            .into_iter()
            .filter_map(|p| {
                let n = self.tree.get(&p)?;
                Some((p, n.data.clone(), n.stat))
            })
            .collect()
    }

    /// A tree restored from [`entries`](Self::entries) whose last transaction is `zxid`.
    /// Fails on an entry without its parent before it, or with an invalid path.
    pub fn from_entries(
        entries: Vec<(String, Vec<u8>, Stat)>,
        zxid: i64,
    ) -> Result<ZnodeTree, CoordinationError> {
        let mut ephemerals: BTreeMap<SessionId, BTreeSet<String>> = BTreeMap::new();
        for (path, _, stat) in &entries {
            if stat.ephemeral_owner != 0 {
                ephemerals
                    .entry(stat.ephemeral_owner)
                    .or_default()
                    .insert(path.clone());
            }
        }
        Ok(ZnodeTree {
            tree: Tree::from_entries(entries, zxid)?,
            ephemerals,
        })
    }
}

fn event(t: Trigger) -> WatchEvent {
    let (kind, path) = match t {
        Trigger::Created(p) => (WatchEventKind::NodeCreated, p),
        Trigger::Deleted(p) => (WatchEventKind::NodeDeleted, p),
        Trigger::DataChanged(p) => (WatchEventKind::NodeDataChanged, p),
        Trigger::ChildrenChanged(p) => (WatchEventKind::NodeChildrenChanged, p),
    };
    WatchEvent { kind, path }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::CreateMode;

    #[test]
    fn replicas_applying_the_same_zxids_agree_and_snapshots_round_trip() {
        let mut a = ZnodeTree::new();
        let txns: Vec<(i64, SessionId, Vec<Op>)> = vec![
            (
                (1 << 32) | 1,
                5,
                vec![Op::create("/a", b"x".to_vec(), CreateMode::Persistent)],
            ),
            (
                (1 << 32) | 2,
                5,
                vec![Op::create(
                    "/a/e-",
                    Vec::new(),
                    CreateMode::EphemeralSequential,
                )],
            ),
            ((1 << 32) | 3, 6, vec![Op::set_data("/a", b"y".to_vec(), 0)]),
        ];
        for (z, s, ops) in &txns {
            a.apply(*z, *s, ops).expect("applies");
        }
        assert_eq!(
            a.stat("/a/e-0000000000").map(|s| s.czxid),
            Some((1 << 32) | 2)
        );
        assert_eq!(a.ephemerals_of(5), vec!["/a/e-0000000000".to_string()]);
        let mut b = ZnodeTree::from_entries(a.entries(), a.last_zxid()).expect("restores");
        assert_eq!(b.entries(), a.entries());
        assert_eq!(b.get("/a"), a.get("/a"));
        let change = b.close_session((1 << 32) | 4, 5);
        assert_eq!(
            change.events.first().map(|e| e.kind),
            Some(WatchEventKind::NodeDeleted)
        );
        assert_eq!(b.children("/a"), Some(Vec::new()));
        assert!(b.ephemerals_of(5).is_empty());
    }
}
