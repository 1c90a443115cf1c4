//! The in-memory data tree: nodes, versions and zxids, and all-or-nothing application of a
//! transaction (a list of [`Op`]s) with an undo log. Pure: no locks, no IO, no clock.

use std::collections::{BTreeSet, HashMap};

use crate::error::CoordinationError;
use crate::path::{join, name, parent, validate_path};
use crate::types::{Op, OpResult, SessionId, Stat, ANY_VERSION};

/// One node of the tree.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) data: Vec<u8>,
    pub(super) stat: Stat,
    pub(super) children: BTreeSet<String>,
}

impl Node {
    fn new(data: Vec<u8>, zxid: i64, owner: SessionId) -> Node {
        Node {
            data,
            stat: Stat {
                czxid: zxid,
                mzxid: zxid,
                pzxid: zxid,
                ephemeral_owner: owner,
                ..Stat::default()
            },
            children: BTreeSet::new(),
        }
    }

    /// The node's `Stat` with the derived counters filled in.
    pub(super) fn full_stat(&self) -> Stat {
        Stat {
            data_length: i32::try_from(self.data.len()).unwrap_or(i32::MAX),
            num_children: i32::try_from(self.children.len()).unwrap_or(i32::MAX),
            ..self.stat
        }
    }
}

/// What a committed change means for watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Trigger {
    /// A node was created at this path.
    Created(String),
    /// A node was deleted at this path.
    Deleted(String),
    /// A node's data changed.
    DataChanged(String),
    /// A node's children changed.
    ChildrenChanged(String),
}

/// Undo entries of a transaction in progress.
enum Undo {
    Created(String),
    Deleted(String, Node),
    /// The data and stat the node at the path of the transaction's op `usize` had.
    DataChanged(usize, Vec<u8>, Stat),
    ChildAdded {
        parent: String,
        name: String,
        cversion: i32,
        pzxid: i64,
    },
    ChildRemoved {
        parent: String,
        name: String,
        cversion: i32,
        pzxid: i64,
    },
}

/// The outcome of a committed transaction.
pub(super) struct Committed {
    pub(super) results: Vec<OpResult>,
    pub(super) triggers: Vec<Trigger>,
    /// Ephemeral nodes created, with their owner.
    pub(super) ephemerals_created: Vec<(SessionId, String)>,
    /// Ephemeral nodes deleted, with their owner.
    pub(super) ephemerals_deleted: Vec<(SessionId, String)>,
}

/// The nodes by path (foldhash: paths are hashed on every operation).
type Nodes = HashMap<String, Node, foldhash::fast::RandomState>;

/// The data tree.
pub(super) struct Tree {
    nodes: Nodes,
    zxid: i64,
}

impl Tree {
    /// A tree holding only `/`.
    pub(super) fn new() -> Tree {
        let mut nodes = Nodes::default();
        nodes.insert("/".to_string(), Node::new(Vec::new(), 0, 0));
        Tree { nodes, zxid: 0 }
    }

    /// The zxid of the last committed transaction.
    pub(super) fn last_zxid(&self) -> i64 {
        self.zxid
    }

    /// The node at `path`, if any.
    pub(super) fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Applies `ops` as one transaction by `owner` with one new zxid: all or nothing.
    pub(super) fn apply(
        &mut self,
        ops: &[Op],
        owner: SessionId,
    ) -> Result<Committed, CoordinationError> {
        self.apply_at(ops, owner, self.zxid + 1)
    }

    /// As [`apply`](Self::apply), with the transaction's zxid given (a replicated log's).
    pub(super) fn apply_at(
        &mut self,
        ops: &[Op],
        owner: SessionId,
        zxid: i64,
    ) -> Result<Committed, CoordinationError> {
        self.apply_ops(ops, std::iter::repeat_with(|| None), owner, zxid)
    }

    /// As [`apply`](Self::apply), taking the ops: the nodes take their data without a copy.
    pub(super) fn apply_owned(
        &mut self,
        mut ops: Vec<Op>,
        owner: SessionId,
    ) -> Result<Committed, CoordinationError> {
        let data: Vec<Option<Vec<u8>>> = ops
            .iter_mut()
            .map(|op| match op {
                Op::Create { data, .. } | Op::SetData { data, .. } => Some(std::mem::take(data)),
                _ => None,
            })
            .collect();
        self.apply_ops(&ops, data, owner, self.zxid + 1)
    }

    /// Applies `ops`, all or nothing; `data` gives, op by op, the data of a create or set
    /// taken out of it (`None`: copy the op's own data).
    fn apply_ops(
        &mut self,
        ops: &[Op],
        data: impl IntoIterator<Item = Option<Vec<u8>>>,
        owner: SessionId,
        zxid: i64,
    ) -> Result<Committed, CoordinationError> {
        let mut undo = Vec::new();
        let mut done = Committed {
            results: Vec::with_capacity(ops.len()),
            triggers: Vec::with_capacity(ops.len()),
            ephemerals_created: Vec::new(),
            ephemerals_deleted: Vec::new(),
        };
        for ((index, op), taken) in ops.iter().enumerate().zip(data) {
            match self.apply_op(index, op, taken, owner, zxid, &mut undo, &mut done) {
                Ok(result) => done.results.push(result),
                Err(error) => {
                    self.rollback(undo, ops);
                    return Err(CoordinationError::MultiOpFailed {
                        index,
                        error: Box::new(error),
                    });
                }
            }
        }
        if !ops.is_empty() {
            self.zxid = zxid;
        }
        Ok(done)
    }

    fn node_mut(&mut self, path: &str) -> Result<&mut Node, CoordinationError> {
        self.nodes
            .get_mut(path)
            .ok_or_else(|| CoordinationError::NoNode {
                path: path.to_string(),
            })
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_op(
        &mut self,
        index: usize,
        op: &Op,
        taken: Option<Vec<u8>>,
        owner: SessionId,
        zxid: i64,
        undo: &mut Vec<Undo>,
        done: &mut Committed,
    ) -> Result<OpResult, CoordinationError> {
        match op {
            Op::Check { path, version } => {
                validate_path(path, false)?;
                let node = self.node_mut(path)?;
                check_version(path, node, *version)?;
                Ok(OpResult::Check)
            }
            Op::Create { path, data, mode } => {
                validate_path(path, mode.is_sequential())?;
                if path == "/" && !mode.is_sequential() {
                    return Err(CoordinationError::NodeExists { path: path.clone() });
                }
                let parent_path = parent(path).to_string();
                let parent_node =
                    self.nodes
                        .get_mut(&parent_path)
                        .ok_or_else(|| CoordinationError::NoNode {
                            path: path.to_string(),
                        })?;
                if parent_node.stat.ephemeral_owner != 0 {
                    return Err(CoordinationError::NoChildrenForEphemerals { path: path.clone() });
                }
                let created = if mode.is_sequential() {
                    format!("{path}{:010}", parent_node.stat.cversion)
                } else {
                    path.clone()
                };
                let child_name = name(&created).to_string();
                if parent_node.children.contains(&child_name) {
                    return Err(CoordinationError::NodeExists { path: created });
                }
                undo.push(Undo::ChildAdded {
                    parent: parent_path.clone(),
                    name: child_name.clone(),
                    cversion: parent_node.stat.cversion,
                    pzxid: parent_node.stat.pzxid,
                });
                parent_node.children.insert(child_name);
                parent_node.stat.cversion = parent_node.stat.cversion.wrapping_add(1);
                parent_node.stat.pzxid = zxid;
                let ephemeral_owner = if mode.is_ephemeral() { owner } else { 0 };
                let data = taken.unwrap_or_else(|| data.clone());
                self.nodes
                    .insert(created.clone(), Node::new(data, zxid, ephemeral_owner));
                undo.push(Undo::Created(created.clone()));
                if ephemeral_owner != 0 {
                    done.ephemerals_created
                        .push((ephemeral_owner, created.clone()));
                }
                done.triggers.push(Trigger::Created(created.clone()));
                done.triggers.push(Trigger::ChildrenChanged(parent_path));
                Ok(OpResult::Create { path: created })
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                validate_path(path, false)?;
                let node = self.node_mut(path)?;
                check_version(path, node, *version)?;
                let data = taken.unwrap_or_else(|| data.clone());
                let old_data = std::mem::replace(&mut node.data, data);
                let old_stat = node.stat;
                node.stat.version = node.stat.version.wrapping_add(1);
                node.stat.mzxid = zxid;
                let stat = node.full_stat();
                undo.push(Undo::DataChanged(index, old_data, old_stat));
                done.triggers.push(Trigger::DataChanged(path.clone()));
                Ok(OpResult::SetData { stat })
            }
            Op::Delete { path, version } => {
                validate_path(path, false)?;
                if path == "/" {
                    return Err(CoordinationError::BadArguments(
                        "cannot delete the root".into(),
                    ));
                }
                let node = self.node_mut(path)?;
                check_version(path, node, *version)?;
                if !node.children.is_empty() {
                    return Err(CoordinationError::NotEmpty { path: path.clone() });
                }
                let parent_path = parent(path).to_string();
                let removed = self
                    .nodes
                    .remove(path)
                    .ok_or_else(|| CoordinationError::NoNode { path: path.clone() })?;
                if removed.stat.ephemeral_owner != 0 {
                    done.ephemerals_deleted
                        .push((removed.stat.ephemeral_owner, path.clone()));
                }
                undo.push(Undo::Deleted(path.clone(), removed));
                let parent_node = self.node_mut(&parent_path)?;
                let child_name = name(path).to_string();
                undo.push(Undo::ChildRemoved {
                    parent: parent_path.clone(),
                    name: child_name.clone(),
                    cversion: parent_node.stat.cversion,
                    pzxid: parent_node.stat.pzxid,
                });
                parent_node.children.remove(&child_name);
                parent_node.stat.cversion = parent_node.stat.cversion.wrapping_add(1);
                parent_node.stat.pzxid = zxid;
                done.triggers.push(Trigger::Deleted(path.clone()));
                done.triggers.push(Trigger::ChildrenChanged(parent_path));
                Ok(OpResult::Delete)
            }
        }
    }

    fn rollback(&mut self, undo: Vec<Undo>, ops: &[Op]) {
        for entry in undo.into_iter().rev() {
            match entry {
                Undo::Created(path) => {
                    self.nodes.remove(&path);
                }
                Undo::Deleted(path, node) => {
                    self.nodes.insert(path, node);
                }
                Undo::DataChanged(index, data, stat) => {
                    let path = match ops.get(index) {
                        Some(Op::SetData { path, .. }) => path.as_str(),
                        _ => continue,
                    };
                    if let Some(node) = self.nodes.get_mut(path) {
                        node.data = data;
                        node.stat = stat;
                    }
                }
                Undo::ChildAdded {
                    parent,
                    name,
                    cversion,
                    pzxid,
                } => {
                    if let Some(node) = self.nodes.get_mut(&parent) {
                        node.children.remove(&name);
                        node.stat.cversion = cversion;
                        node.stat.pzxid = pzxid;
                    }
                }
                Undo::ChildRemoved {
                    parent,
                    name,
                    cversion,
                    pzxid,
                } => {
                    if let Some(node) = self.nodes.get_mut(&parent) {
                        node.children.insert(name);
                        node.stat.cversion = cversion;
                        node.stat.pzxid = pzxid;
                    }
                }
            }
        }
    }

    /// A tree rebuilt from `(path, data, stat)` entries, parents before children (as
    /// [`subtree`](Self::subtree) lists them), whose last transaction is `zxid`. Fails on an
    /// entry whose parent is missing or whose path is invalid.
    pub(super) fn from_entries(
        entries: Vec<(String, Vec<u8>, Stat)>,
        zxid: i64,
    ) -> Result<Tree, CoordinationError> {
        let mut tree = Tree::new();
        tree.zxid = zxid;
        for (path, data, stat) in entries {
            if path == "/" {
                if let Some(root) = tree.nodes.get_mut("/") {
                    root.data = data;
                    root.stat = stat;
                }
                continue;
            }
            validate_path(&path, false)?;
            let parent_node = tree.node_mut(parent(&path))?;
            parent_node.children.insert(name(&path).to_string());
            let node = Node {
                data,
                stat,
                children: BTreeSet::new(),
            };
            if tree.nodes.insert(path.clone(), node).is_some() {
                return Err(CoordinationError::NodeExists { path });
            }
        }
        Ok(tree)
    }

    /// Paths of all nodes under `path` (inclusive), parents before children.
    pub(super) fn subtree(&self, path: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![path.to_string()];
        while let Some(p) = stack.pop() {
            if let Some(node) = self.nodes.get(&p) {
                for child in node.children.iter().rev() {
                    stack.push(join(&p, child));
                }
                out.push(p);
            }
        }
        out
    }
}

fn check_version(path: &str, node: &Node, version: i32) -> Result<(), CoordinationError> {
    if version != ANY_VERSION && node.stat.version != version {
        return Err(CoordinationError::BadVersion {
            path: path.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::CreateMode;

    #[test]
    fn failed_transaction_leaves_the_tree_unchanged() {
        let mut tree = Tree::new();
        tree.apply(
            &[Op::create("/a", b"x".to_vec(), CreateMode::Persistent)],
            0,
        )
        .expect("create");
        let before = tree.get("/").map(Node::full_stat);
        let err = tree
            .apply(
                &[
                    Op::create("/b", Vec::new(), CreateMode::Persistent),
                    Op::set_data("/a", b"y".to_vec(), 0),
                    Op::delete("/a", 5),
                ],
                0,
            )
            .err()
            .expect("fails");
        assert!(matches!(
            err,
            CoordinationError::MultiOpFailed { index: 2, .. }
        ));
        assert!(tree.get("/b").is_none());
        assert_eq!(tree.get("/a").map(|n| n.data.clone()), Some(b"x".to_vec()));
        assert_eq!(tree.get("/a").map(|n| n.stat.version), Some(0));
        assert_eq!(tree.get("/").map(Node::full_stat), before);
        assert_eq!(tree.last_zxid(), 1);
    }

    #[test]
    fn sequential_names_use_the_parent_cversion() {
        let mut tree = Tree::new();
        tree.apply(&[Op::create("/q", Vec::new(), CreateMode::Persistent)], 0)
            .expect("create");
        tree.apply(&[Op::create("/q/x", Vec::new(), CreateMode::Persistent)], 0)
            .expect("create");
        let done = tree
            .apply(
                &[Op::create(
                    "/q/item-",
                    Vec::new(),
                    CreateMode::PersistentSequential,
                )],
                0,
            )
            .map_err(|e| e.to_string())
            .expect("create");
        assert_eq!(
            done.results,
            vec![OpResult::Create {
                path: "/q/item-0000000001".into()
            }]
        );
        assert_eq!(tree.subtree("/q").len(), 3);
    }
}
