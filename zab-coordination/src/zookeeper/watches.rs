//! ZooKeeper 3.8's watch manager (`watch/WatchManager`), for the sessions connected to this
//! server. As ZooKeeper, it keeps two tables: the data table (`getData` and `exists`
//! watches) and the child table (`getChildren` watches); a persistent or persistent-recursive
//! watch (`addWatch`) goes in both. One session has at most one watch per path and table,
//! with one mode: a later registration replaces the mode (ZooKeeper 3.8's
//! `WatcherModeManager`; so a `getData` watch on a path with a persistent watch makes it
//! one-shot again, the behaviour ZOOKEEPER-4466 changed in 3.9).
//!
//! Firing ([`WatchManager::trigger`], ZooKeeper's `triggerWatch`): `NodeCreated` and
//! `NodeDataChanged` fire the data table, `NodeChildrenChanged` the child table, and
//! `NodeDeleted` the data table then the child table, a session fired by the first not again
//! by the second. On the node itself every watch fires and a one-shot watch is removed; on
//! every ancestor only the persistent-recursive watches fire, and those never for
//! `NodeChildrenChanged`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::tree::DataTree;
use super::types::{EventType, WatcherType};

/// What a watch was registered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// `getData` (data table).
    Data,
    /// `exists` (data table).
    Exist,
    /// `getChildren` (child table).
    Child,
    /// `addWatch` mode 0 (both tables).
    Persistent,
    /// `addWatch` mode 1 (both tables, fires for the whole subtree).
    PersistentRecursive,
}

/// ZooKeeper's `WatcherMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    Standard,
    Persistent,
    Recursive,
}

#[derive(Debug, Default, Clone)]
struct Table {
    by_path: HashMap<String, HashMap<i64, Mode>>,
    by_session: HashMap<i64, HashSet<String>>,
    recursive: usize,
}

impl Table {
    fn add(&mut self, path: &str, session: i64, mode: Mode) {
        let old = self
            .by_path
            .entry(path.to_string())
            .or_default()
            .insert(session, mode);
        self.by_session
            .entry(session)
            .or_default()
            .insert(path.to_string());
        self.adjust(old, Some(mode));
    }

    fn adjust(&mut self, old: Option<Mode>, new: Option<Mode>) {
        let was = old == Some(Mode::Recursive);
        let is = new == Some(Mode::Recursive);
        if was && !is {
            self.recursive -= 1;
        } else if is && !was {
            self.recursive += 1;
        }
    }

    fn mode(&self, path: &str, session: i64) -> Option<Mode> {
        self.by_path.get(path)?.get(&session).copied()
    }

    fn remove(&mut self, path: &str, session: i64) -> bool {
        let Some(map) = self.by_path.get_mut(path) else {
            return false;
        };
        let Some(old) = map.remove(&session) else {
            return false;
        };
        if map.is_empty() {
            self.by_path.remove(path);
        }
        if let Some(paths) = self.by_session.get_mut(&session) {
            paths.remove(path);
            if paths.is_empty() {
                self.by_session.remove(&session);
            }
        }
        self.adjust(Some(old), None);
        true
    }

    fn remove_session(&mut self, session: i64) {
        let Some(paths) = self.by_session.remove(&session) else {
            return;
        };
        for p in paths {
            if let Some(map) = self.by_path.get_mut(&p) {
                let old = map.remove(&session);
                if map.is_empty() {
                    self.by_path.remove(&p);
                }
                self.adjust(old, None);
            }
        }
    }

    /// `triggerWatch`: the sessions to notify, in id order.
    fn trigger(&mut self, path: &str, event: EventType) -> BTreeSet<i64> {
        let mut fired = BTreeSet::new();
        if let Some(map) = self.by_path.get_mut(path) {
            let mut removed = Vec::new();
            for (&session, &mode) in map.iter() {
                if mode == Mode::Recursive {
                    if event != EventType::NodeChildrenChanged {
                        fired.insert(session);
                    }
                } else {
                    fired.insert(session);
                    if mode == Mode::Standard {
                        removed.push(session);
                    }
                }
            }
            for s in &removed {
                map.remove(s);
            }
            if map.is_empty() {
                self.by_path.remove(path);
            }
            for s in removed {
                if let Some(paths) = self.by_session.get_mut(&s) {
                    paths.remove(path);
                    if paths.is_empty() {
                        self.by_session.remove(&s);
                    }
                }
            }
        }
        if self.recursive > 0 && event != EventType::NodeChildrenChanged {
            let mut p = path;
            while let Some(slash) = p.rfind('/') {
                let parent = if slash == 0 { "/" } else { &p[..slash] };
                if parent == p {
                    break;
                }
                if let Some(map) = self.by_path.get(parent) {
                    fired.extend(
                        map.iter()
                            .filter(|(_, m)| **m == Mode::Recursive)
                            .map(|(s, _)| *s),
                    );
                }
                p = parent;
            }
        }
        fired
    }

    fn size(&self) -> usize {
        self.by_path.values().map(HashMap::len).sum()
    }
}

/// A summary of the data table as ZooKeeper's `wchs` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchSummary {
    /// Sessions with a watch.
    pub sessions: usize,
    /// Watched paths.
    pub paths: usize,
    /// Watches.
    pub watches: usize,
}

/// The watches of the sessions connected to this server.
#[derive(Debug, Default, Clone)]
pub struct WatchManager {
    data: Table,
    child: Table,
}

impl WatchManager {
    /// No watch.
    pub fn new() -> WatchManager {
        WatchManager::default()
    }

    /// Registers `session`'s watch on `path` (replacing the mode of its watch on `path` in the
    /// same table, as ZooKeeper 3.8).
    pub fn add(&mut self, path: &str, kind: WatchKind, session: i64) {
        match kind {
            WatchKind::Data | WatchKind::Exist => self.data.add(path, session, Mode::Standard),
            WatchKind::Child => self.child.add(path, session, Mode::Standard),
            WatchKind::Persistent => {
                self.child.add(path, session, Mode::Persistent);
                self.data.add(path, session, Mode::Persistent);
            }
            WatchKind::PersistentRecursive => {
                self.child.add(path, session, Mode::Recursive);
                self.data.add(path, session, Mode::Recursive);
            }
        }
    }

    fn matches(mode: Option<Mode>, want: Option<Mode>) -> bool {
        match (mode, want) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(m), Some(w)) => m == w,
        }
    }

    /// The tables and modes a [`WatcherType`] selects: (data, child, required mode).
    fn select(kind: WatcherType) -> (bool, bool, Option<Mode>) {
        match kind {
            WatcherType::Children => (false, true, None),
            WatcherType::Data => (true, false, None),
            WatcherType::Any => (true, true, None),
            WatcherType::Persistent => (true, true, Some(Mode::Persistent)),
            WatcherType::PersistentRecursive => (true, true, Some(Mode::Recursive)),
        }
    }

    /// `removeWatches`: removes `session`'s watches on `path` of `kind` (`Children`: the
    /// child table, `Data`: the data table, `Any`: both, whatever their mode; `Persistent` /
    /// `PersistentRecursive`, which ZooKeeper 3.8's server does not know, those of that mode
    /// in both tables). `false` (ZooKeeper's `NoWatcher`) when none was there.
    pub fn remove(&mut self, path: &str, kind: WatcherType, session: i64) -> bool {
        let (data, child, want) = Self::select(kind);
        let mut removed = false;
        if child && Self::matches(self.child.mode(path, session), want) {
            removed |= self.child.remove(path, session);
        }
        if data && Self::matches(self.data.mode(path, session), want) {
            removed |= self.data.remove(path, session);
        }
        removed
    }

    /// `checkWatches`: whether `session` has a watch on `path` of `kind` (as
    /// [`remove`](Self::remove) selects them). ZooKeeper 3.8's `WatchManager.containsWatcher`
    /// answers true when any session watches the path; this answers for `session` only, as
    /// ZooKeeper's later `containsWatcher` (3.9) does.
    pub fn contains(&self, path: &str, kind: WatcherType, session: i64) -> bool {
        let (data, child, want) = Self::select(kind);
        (child && Self::matches(self.child.mode(path, session), want))
            || (data && Self::matches(self.data.mode(path, session), want))
    }

    /// Drops every watch of `session` (its connection went away or it closed).
    pub fn remove_session(&mut self, session: i64) {
        self.data.remove_session(session);
        self.child.remove_session(session);
    }

    /// Fires the watches for `event` on `path` (see the module's header): the sessions to
    /// notify, in session order, each with the event and the path.
    pub fn trigger(&mut self, path: &str, event: EventType) -> Vec<(i64, EventType, String)> {
        let sessions: Vec<i64> = match event {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.data.trigger(path, event).into_iter().collect()
            }
            EventType::NodeChildrenChanged => self.child.trigger(path, event).into_iter().collect(),
            EventType::NodeDeleted => {
                let first = self.data.trigger(path, event);
                let second = self.child.trigger(path, event);
                let mut all: Vec<i64> = first.iter().copied().collect();
                all.extend(second.into_iter().filter(|s| !first.contains(s)));
                all
            }
            _ => Vec::new(),
        };
        sessions
            .into_iter()
            .map(|s| (s, event, path.to_string()))
            .collect()
    }

    /// The number of watches in both tables (`getWatchCount`; a persistent watch counts
    /// twice).
    pub fn count(&self) -> usize {
        self.data.size() + self.child.size()
    }

    /// Every watched path, in either table, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut all: BTreeSet<&String> = self.data.by_path.keys().collect();
        all.extend(self.child.by_path.keys());
        all.into_iter().cloned().collect()
    }

    /// Every session with a watch, in either table, sorted.
    pub fn sessions_with_watches(&self) -> Vec<i64> {
        let mut all: BTreeSet<i64> = self.data.by_session.keys().copied().collect();
        all.extend(self.child.by_session.keys());
        all.into_iter().collect()
    }

    /// `wchs`: the data table's summary (ZooKeeper's `wchs`, `wchc` and `wchp` show only the
    /// data table).
    pub fn summary(&self) -> WatchSummary {
        WatchSummary {
            sessions: self.data.by_session.len(),
            paths: self.data.by_path.len(),
            watches: self.data.by_session.values().map(HashSet::len).sum(),
        }
    }

    /// `wchc`: the data table's watched paths by session.
    pub fn by_session(&self) -> BTreeMap<i64, BTreeSet<String>> {
        self.data
            .by_session
            .iter()
            .map(|(s, p)| (*s, p.iter().cloned().collect()))
            .collect()
    }

    /// `wchp`: the data table's watching sessions by path.
    pub fn by_path(&self) -> BTreeMap<String, BTreeSet<i64>> {
        self.data
            .by_path
            .iter()
            .map(|(p, m)| (p.clone(), m.keys().copied().collect()))
            .collect()
    }

    /// `DataTree.setWatches`: re-registers the watches a reconnecting client held, against
    /// `tree`, and answers the events to deliver at once instead. A data watch: `NodeDeleted`
    /// if the node is gone, `NodeDataChanged` if its `mzxid` is after `relative_zxid`, else
    /// registered; an exist watch: `NodeCreated` if the node exists, else registered; a child
    /// watch: `NodeDeleted` if gone, `NodeChildrenChanged` if its `pzxid` is after
    /// `relative_zxid`, else registered; persistent and recursive watches are registered.
    #[allow(clippy::too_many_arguments)]
    pub fn set_watches(
        &mut self,
        tree: &DataTree,
        relative_zxid: i64,
        data_watches: &[String],
        exist_watches: &[String],
        child_watches: &[String],
        persistent_watches: &[String],
        persistent_recursive_watches: &[String],
        session: i64,
    ) -> Vec<(EventType, String)> {
        let mut fire = Vec::new();
        for path in data_watches {
            match tree.stat(path) {
                None => fire.push((EventType::NodeDeleted, path.clone())),
                Some(s) if s.mzxid > relative_zxid => {
                    fire.push((EventType::NodeDataChanged, path.clone()))
                }
                Some(_) => self.add(path, WatchKind::Data, session),
            }
        }
        for path in exist_watches {
            if tree.stat(path).is_some() {
                fire.push((EventType::NodeCreated, path.clone()));
            } else {
                self.add(path, WatchKind::Exist, session);
            }
        }
        for path in child_watches {
            match tree.stat(path) {
                None => fire.push((EventType::NodeDeleted, path.clone())),
                Some(s) if s.pzxid > relative_zxid => {
                    fire.push((EventType::NodeChildrenChanged, path.clone()))
                }
                Some(_) => self.add(path, WatchKind::Child, session),
            }
        }
        for path in persistent_watches {
            self.add(path, WatchKind::Persistent, session);
        }
        for path in persistent_recursive_watches {
            self.add(path, WatchKind::PersistentRecursive, session);
        }
        fire
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(v: Vec<(i64, EventType, String)>) -> Vec<i64> {
        v.into_iter().map(|(s, _, _)| s).collect()
    }

    #[test]
    fn one_shot_data_watch_fires_once_and_is_removed() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Data, 1);
        assert_eq!(
            w.trigger("/a", EventType::NodeDataChanged),
            vec![(1, EventType::NodeDataChanged, "/a".to_string())]
        );
        assert!(w.trigger("/a", EventType::NodeDataChanged).is_empty());
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn persistent_watch_stays_after_firing_and_sees_children_changed() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Persistent, 1);
        for _ in 0..2 {
            assert_eq!(fired(w.trigger("/a", EventType::NodeDataChanged)), vec![1]);
            assert_eq!(
                fired(w.trigger("/a", EventType::NodeChildrenChanged)),
                vec![1]
            );
        }
        // Not for a child's own events.
        assert!(w.trigger("/a/b", EventType::NodeCreated).is_empty());
        assert_eq!(w.count(), 2);
    }

    #[test]
    fn recursive_watch_fires_for_descendant_but_not_for_children_changed() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::PersistentRecursive, 7);
        assert_eq!(fired(w.trigger("/a/b/c", EventType::NodeCreated)), vec![7]);
        assert_eq!(
            fired(w.trigger("/a/b", EventType::NodeDataChanged)),
            vec![7]
        );
        assert_eq!(fired(w.trigger("/a/b", EventType::NodeDeleted)), vec![7]);
        assert_eq!(fired(w.trigger("/a", EventType::NodeDataChanged)), vec![7]);
        assert!(w.trigger("/a", EventType::NodeChildrenChanged).is_empty());
        assert!(w.trigger("/a/b", EventType::NodeChildrenChanged).is_empty());
        assert!(w.trigger("/ab", EventType::NodeCreated).is_empty());
        // A recursive watch on / sees everything.
        w.add("/", WatchKind::PersistentRecursive, 8);
        assert_eq!(fired(w.trigger("/x", EventType::NodeCreated)), vec![8]);
    }

    #[test]
    fn node_deleted_fires_data_and_child_watches_once_per_session() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Data, 1);
        w.add("/a", WatchKind::Child, 1);
        w.add("/a", WatchKind::Child, 2);
        assert_eq!(fired(w.trigger("/a", EventType::NodeDeleted)), vec![1, 2]);
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn child_watch_is_not_fired_by_data_change_nor_data_watch_by_children_change() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Child, 1);
        w.add("/b", WatchKind::Exist, 2);
        assert!(w.trigger("/a", EventType::NodeDataChanged).is_empty());
        assert!(w.trigger("/b", EventType::NodeChildrenChanged).is_empty());
        assert_eq!(fired(w.trigger("/b", EventType::NodeCreated)), vec![2]);
        assert_eq!(
            fired(w.trigger("/a", EventType::NodeChildrenChanged)),
            vec![1]
        );
    }

    #[test]
    fn a_later_one_shot_registration_replaces_a_persistent_mode_as_zookeeper_3_8() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Persistent, 1);
        w.add("/a", WatchKind::Data, 1);
        assert_eq!(fired(w.trigger("/a", EventType::NodeDataChanged)), vec![1]);
        assert!(w.trigger("/a", EventType::NodeDataChanged).is_empty());
        // The child table keeps its persistent mode.
        assert_eq!(
            fired(w.trigger("/a", EventType::NodeChildrenChanged)),
            vec![1]
        );
    }

    #[test]
    fn remove_watches_by_type_answers_no_watcher_when_none() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Data, 1);
        w.add("/a", WatchKind::Child, 1);
        assert!(!w.contains("/a", WatcherType::Data, 2));
        assert!(w.contains("/a", WatcherType::Children, 1));
        assert!(!w.contains("/a", WatcherType::Persistent, 1));
        assert!(w.remove("/a", WatcherType::Children, 1));
        assert!(!w.remove("/a", WatcherType::Children, 1));
        assert!(w.contains("/a", WatcherType::Any, 1));
        assert!(w.remove("/a", WatcherType::Any, 1));
        assert!(!w.contains("/a", WatcherType::Any, 1));
        w.add("/r", WatchKind::PersistentRecursive, 3);
        assert!(!w.remove("/r", WatcherType::Persistent, 3));
        assert!(w.remove("/r", WatcherType::PersistentRecursive, 3));
        assert_eq!(w.count(), 0);
        assert!(w.trigger("/r/x", EventType::NodeCreated).is_empty());
    }

    #[test]
    fn remove_session_drops_every_watch_of_it() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Data, 1);
        w.add("/a", WatchKind::PersistentRecursive, 1);
        w.add("/b", WatchKind::Child, 2);
        w.remove_session(1);
        assert_eq!(w.sessions_with_watches(), vec![2]);
        assert_eq!(w.paths(), vec!["/b".to_string()]);
        assert!(w.trigger("/a/x", EventType::NodeCreated).is_empty());
    }

    #[test]
    fn wchs_counts_the_data_table_only() {
        let mut w = WatchManager::new();
        w.add("/a", WatchKind::Data, 1);
        w.add("/b", WatchKind::Child, 1);
        w.add("/c", WatchKind::Exist, 2);
        assert_eq!(
            w.summary(),
            WatchSummary {
                sessions: 2,
                paths: 2,
                watches: 2
            }
        );
        assert_eq!(w.count(), 3);
        assert_eq!(w.by_path().len(), 2);
        assert_eq!(w.by_session()[&1].len(), 1);
    }

    #[test]
    fn set_watches_fires_for_changes_after_the_relative_zxid_and_registers_the_rest() {
        use crate::zookeeper::txn::TxnOp;
        use crate::zookeeper::types::{Acl, CreateMode};
        let mut tree = DataTree::new();
        let mut ev = Vec::new();
        for (zxid, p) in [(1, "/old"), (5, "/new")] {
            tree.apply_op(
                zxid,
                0,
                1,
                &[],
                &TxnOp::Create {
                    path: p.into(),
                    data: vec![],
                    acl: Acl::open_unsafe(),
                    mode: CreateMode::Persistent,
                    ttl: -1,
                },
                &mut ev,
            )
            .unwrap();
        }
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut w = WatchManager::new();
        let fire = w.set_watches(
            &tree,
            3,
            &s(&["/old", "/new", "/gone"]),
            &s(&["/old", "/missing"]),
            &s(&["/", "/old"]),
            &s(&["/p"]),
            &s(&["/r"]),
            9,
        );
        assert_eq!(
            fire,
            vec![
                (EventType::NodeDataChanged, "/new".to_string()),
                (EventType::NodeDeleted, "/gone".to_string()),
                (EventType::NodeCreated, "/old".to_string()),
                (EventType::NodeChildrenChanged, "/".to_string()),
            ]
        );
        assert!(w.contains("/old", WatcherType::Data, 9));
        assert!(w.contains("/missing", WatcherType::Data, 9));
        assert!(w.contains("/old", WatcherType::Children, 9));
        assert!(w.contains("/p", WatcherType::Persistent, 9));
        assert!(w.contains("/r", WatcherType::PersistentRecursive, 9));
    }
}
