//! The conformance suite of the [`Coordination`] trait: ZooKeeper's semantics as the
//! controller relies on them, runnable against any implementation (the in-memory one and the
//! real-ZooKeeper one both pass it; so must yours).
//!
//! Implement [`ConformanceHarness`] (connect a new client; expire a session), then call
//! [`run_all`] or the single cases. Each case works under its own root path `/<case name>`,
//! removed first if it exists, so the cases can share one server.
//!
//! ```
//! use std::sync::Arc;
//! use kafka_controller::coordination::conformance::{self, MemoryHarness};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! conformance::run_all(&MemoryHarness::new()).await.unwrap();
//! # });
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use super::error::CoordinationError;
use super::memory::MemoryTree;
use super::path::join;
use super::service::Coordination;
use super::types::{
    CoordinationEvent, CreateMode, EventStream, Op, OpResult, SessionEvent, SessionId, WatchEvent,
    WatchEventKind, ANY_VERSION,
};

/// How long a case waits for an expected event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a case waits to be sure that no event comes.
const QUIET: Duration = Duration::from_millis(300);

/// What the suite needs from an implementation.
#[async_trait]
pub trait ConformanceHarness: Send + Sync {
    /// A new client, with a new session, on the store shared by all clients of this harness.
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError>;

    /// Makes session `session` (of a client from [`connect`](Self::connect)) expire, as the
    /// server does when the session times out.
    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError>;
}

/// A failed conformance case.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// An operation that should have succeeded failed.
    #[error("{case}: {context}: {error}")]
    Operation {
        /// The case.
        case: &'static str,
        /// What the case was doing.
        context: String,
        /// The error.
        error: CoordinationError,
    },
    /// An expectation did not hold.
    #[error("{case}: {message}")]
    Expectation {
        /// The case.
        case: &'static str,
        /// What was expected and what happened.
        message: String,
    },
}

type CaseResult = Result<(), ConformanceError>;

/// Per-case context: the case name, its root path, and helpers producing good messages.
struct Case {
    name: &'static str,
    root: String,
}

macro_rules! ensure {
    ($case:expr, $cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(ConformanceError::Expectation {
                case: $case.name,
                message: format!($($msg)+),
            });
        }
    };
}

impl Case {
    fn p(&self, rel: &str) -> String {
        join(&self.root, rel)
    }

    fn op<T>(&self, context: &str, r: Result<T, CoordinationError>) -> Result<T, ConformanceError> {
        r.map_err(|error| ConformanceError::Operation {
            case: self.name,
            context: context.to_string(),
            error,
        })
    }

    fn fail<T>(&self, message: String) -> Result<T, ConformanceError> {
        Err(ConformanceError::Expectation {
            case: self.name,
            message,
        })
    }

    /// Asserts `r` failed with an error (its root, for a multi) satisfying `pred`.
    fn expect_err<T: std::fmt::Debug>(
        &self,
        what: &str,
        r: Result<T, CoordinationError>,
        pred: impl Fn(&CoordinationError) -> bool,
    ) -> CaseResult {
        match r {
            Err(e) if pred(e.root()) => Ok(()),
            other => self.fail(format!("{what}: unexpected outcome {other:?}")),
        }
    }

    async fn start(
        name: &'static str,
        client: &dyn Coordination,
    ) -> Result<Case, ConformanceError> {
        let case = Case {
            name,
            root: format!("/{name}"),
        };
        case.op("clean up", delete_recursive(client, &case.root).await)?;
        case.op(
            "create the case root",
            client
                .create(&case.root, b"", CreateMode::Persistent)
                .await
                .map(|_| ()),
        )?;
        Ok(case)
    }

    async fn next_event(
        &self,
        events: &mut EventStream,
    ) -> Result<CoordinationEvent, ConformanceError> {
        match tokio::time::timeout(EVENT_TIMEOUT, events.next()).await {
            Ok(Some(e)) => Ok(e),
            Ok(None) => self.fail("event stream ended".into()),
            Err(_) => self.fail(format!("no event within {EVENT_TIMEOUT:?}")),
        }
    }

    /// Waits for the next watch event (skipping `Connected`/`Disconnected` noise) and checks it.
    async fn expect_watch(
        &self,
        events: &mut EventStream,
        kind: WatchEventKind,
        path: &str,
    ) -> CaseResult {
        loop {
            match self.next_event(events).await? {
                CoordinationEvent::Watch(w) => {
                    let want = WatchEvent {
                        kind,
                        path: path.to_string(),
                    };
                    ensure!(self, w == want, "expected {want:?}, got {w:?}");
                    return Ok(());
                }
                CoordinationEvent::Session(
                    SessionEvent::Connected { .. } | SessionEvent::Disconnected,
                ) => continue,
                other => return self.fail(format!("expected {kind:?} on {path}, got {other:?}")),
            }
        }
    }

    /// Checks that no watch event arrives for a short while.
    async fn expect_quiet(&self, events: &mut EventStream) -> CaseResult {
        match tokio::time::timeout(QUIET, events.next()).await {
            Err(_) => Ok(()),
            Ok(None) => self.fail("event stream ended".into()),
            Ok(Some(e)) => self.fail(format!("unexpected event {e:?}")),
        }
    }
}

/// Deletes `path` and everything below it; a missing node is fine.
pub async fn delete_recursive(
    client: &dyn Coordination,
    path: &str,
) -> Result<(), CoordinationError> {
    let children = match client.children(path, false).await {
        Ok(c) => c,
        Err(e) if e.is_no_node() => return Ok(()),
        Err(e) => return Err(e),
    };
    for child in children {
        Box::pin(delete_recursive(client, &join(path, &child))).await?;
    }
    match client.delete(path, ANY_VERSION).await {
        Err(e) if e.is_no_node() => Ok(()),
        other => other,
    }
}

/// Persistent create, read back with its `Stat`; `exists` and `children` see it.
pub async fn create_and_read(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("create_and_read", "connect"))?;
    let case = Case::start("create_and_read", c.as_ref()).await?;
    let path = case.p("node");
    let (created, stat) = case.op(
        "create",
        c.create(&path, b"hello", CreateMode::Persistent).await,
    )?;
    ensure!(case, created == path, "create returned {created}");
    ensure!(
        case,
        stat.version == 0 && stat.ephemeral_owner == 0,
        "fresh stat {stat:?}"
    );
    let (data, read) = case.op("get_data", c.get_data(&path, false).await)?;
    ensure!(case, data == b"hello", "data {data:?}");
    ensure!(
        case,
        read.version == 0 && read.data_length == 5 && read.num_children == 0,
        "stat {read:?}"
    );
    ensure!(
        case,
        read.czxid > 0 && read.czxid == read.mzxid,
        "zxids {read:?}"
    );
    ensure!(
        case,
        read.czxid == stat.czxid,
        "create stat {stat:?} vs read stat {read:?}"
    );
    let exists = case.op("exists", c.exists(&path, false).await)?;
    ensure!(
        case,
        exists.map(|s| s.czxid) == Some(read.czxid),
        "exists {exists:?}"
    );
    let missing = case.op("exists missing", c.exists(&case.p("missing"), false).await)?;
    ensure!(case, missing.is_none(), "missing node exists: {missing:?}");
    case.op(
        "create b",
        c.create(&case.p("b"), b"", CreateMode::Persistent).await,
    )?;
    case.op(
        "create a",
        c.create(&case.p("a"), b"", CreateMode::Persistent).await,
    )?;
    let children = case.op("children", c.children(&case.root, false).await)?;
    ensure!(
        case,
        children == ["a", "b", "node"],
        "children {children:?} (sorted)"
    );
    let (_, root_stat) = case.op("get root", c.get_data(&case.root, false).await)?;
    ensure!(
        case,
        root_stat.num_children == 3,
        "num_children {root_stat:?}"
    );
    Ok(())
}

/// Create, read and delete report ZooKeeper's errors.
pub async fn typed_errors(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("typed_errors", "connect"))?;
    let case = Case::start("typed_errors", c.as_ref()).await?;
    let path = case.p("x");
    case.op("create", c.create(&path, b"", CreateMode::Persistent).await)?;
    case.expect_err(
        "duplicate create",
        c.create(&path, b"", CreateMode::Persistent).await,
        |e| matches!(e, CoordinationError::NodeExists { .. }),
    )?;
    case.expect_err(
        "create without parent",
        c.create(&case.p("no/child"), b"", CreateMode::Persistent)
            .await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "get missing",
        c.get_data(&case.p("none"), false).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "children of missing",
        c.children(&case.p("none"), false).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "set missing",
        c.set_data(&case.p("none"), b"", ANY_VERSION).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    case.expect_err(
        "delete missing",
        c.delete(&case.p("none"), ANY_VERSION).await,
        |e| matches!(e, CoordinationError::NoNode { .. }),
    )?;
    let eph = case.p("eph");
    case.op(
        "create ephemeral",
        c.create(&eph, b"", CreateMode::Ephemeral).await,
    )?;
    case.expect_err(
        "child of ephemeral",
        c.create(&join(&eph, "child"), b"", CreateMode::Persistent)
            .await,
        |e| matches!(e, CoordinationError::NoChildrenForEphemerals { .. }),
    )?;
    for bad in ["relative", "/trailing/", "/double//slash"] {
        case.expect_err(bad, c.create(bad, b"", CreateMode::Persistent).await, |e| {
            matches!(e, CoordinationError::BadPath { .. })
        })?;
    }
    Ok(())
}

/// Sequential nodes get the parent's 10-digit counter appended, increasing.
pub async fn sequential_nodes(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("sequential_nodes", "connect"))?;
    let case = Case::start("sequential_nodes", c.as_ref()).await?;
    let prefix = case.p("isr_change_");
    let (first, _) = case.op(
        "seq 1",
        c.create(&prefix, b"1", CreateMode::PersistentSequential)
            .await,
    )?;
    let (second, _) = case.op(
        "seq 2",
        c.create(&prefix, b"2", CreateMode::PersistentSequential)
            .await,
    )?;
    let (third, _) = case.op(
        "seq 3 ephemeral",
        c.create(&prefix, b"3", CreateMode::EphemeralSequential)
            .await,
    )?;
    for p in [&first, &second, &third] {
        let suffix = p.strip_prefix(&prefix).unwrap_or("");
        ensure!(
            case,
            suffix.len() == 10 && suffix.bytes().all(|b| b.is_ascii_digit()),
            "sequential path {p}"
        );
    }
    ensure!(
        case,
        first < second && second < third,
        "order {first} {second} {third}"
    );
    ensure!(
        case,
        first == format!("{prefix}0000000000"),
        "first of a fresh parent is {first}"
    );
    let children = case.op("children", c.children(&case.root, false).await)?;
    ensure!(case, children.len() == 3, "children {children:?}");
    Ok(())
}

/// `set_data` and `delete` succeed only with the current version (or any version).
pub async fn conditional_writes(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("conditional_writes", "connect"))?;
    let case = Case::start("conditional_writes", c.as_ref()).await?;
    let path = case.p("state");
    let (_, created) = case.op(
        "create",
        c.create(&path, b"v0", CreateMode::Persistent).await,
    )?;
    let s1 = case.op("set v0", c.set_data(&path, b"v1", 0).await)?;
    ensure!(
        case,
        s1.version == 1 && s1.mzxid > created.czxid && s1.czxid == created.czxid,
        "{s1:?}"
    );
    case.expect_err("stale set", c.set_data(&path, b"stale", 0).await, |e| {
        matches!(e, CoordinationError::BadVersion { .. })
    })?;
    let (data, _) = case.op("get", c.get_data(&path, false).await)?;
    ensure!(
        case,
        data == b"v1",
        "a failed CAS changed the data: {data:?}"
    );
    let s2 = case.op("set any", c.set_data(&path, b"v2", ANY_VERSION).await)?;
    ensure!(case, s2.version == 2, "{s2:?}");
    case.op(
        "child",
        c.create(&join(&path, "c"), b"", CreateMode::Persistent)
            .await,
    )?;
    case.expect_err(
        "delete non-empty",
        c.delete(&path, ANY_VERSION).await,
        |e| matches!(e, CoordinationError::NotEmpty { .. }),
    )?;
    case.op("delete child", c.delete(&join(&path, "c"), 0).await)?;
    case.expect_err("stale delete", c.delete(&path, 1).await, |e| {
        matches!(e, CoordinationError::BadVersion { .. })
    })?;
    case.op("delete", c.delete(&path, 2).await)?;
    let gone = case.op("exists", c.exists(&path, false).await)?;
    ensure!(case, gone.is_none(), "deleted node still exists");
    Ok(())
}

/// `multi` is all or nothing; a failing op is reported by index; results come in op order.
pub async fn multi_is_atomic(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("multi_is_atomic", "connect"))?;
    let case = Case::start("multi_is_atomic", c.as_ref()).await?;
    let epoch = case.p("controller_epoch");
    case.op(
        "create epoch",
        c.create(&epoch, b"0", CreateMode::Persistent).await,
    )?;
    let results = case.op(
        "multi",
        c.multi(vec![
            Op::create(case.p("controller"), b"1".to_vec(), CreateMode::Ephemeral),
            Op::set_data(&epoch, b"1".to_vec(), 0),
            Op::create(case.p("seq-"), Vec::new(), CreateMode::PersistentSequential),
            Op::check(&epoch, 1),
        ])
        .await,
    )?;
    ensure!(case, results.len() == 4, "results {results:?}");
    ensure!(
        case,
        results[0]
            == OpResult::Create {
                path: case.p("controller")
            },
        "result 0 {:?}",
        results[0]
    );
    ensure!(
        case,
        matches!(results[1], OpResult::SetData { stat } if stat.version == 1),
        "result 1 {:?}",
        results[1]
    );
    ensure!(
        case,
        matches!(&results[2], OpResult::Create { path } if path.starts_with(&case.p("seq-"))),
        "result 2 {:?}",
        results[2]
    );
    ensure!(
        case,
        results[3] == OpResult::Check,
        "result 3 {:?}",
        results[3]
    );
    let (_, controller) = case.op(
        "get controller",
        c.get_data(&case.p("controller"), false).await,
    )?;
    let (_, epoch_stat) = case.op("get epoch", c.get_data(&epoch, false).await)?;
    ensure!(
        case,
        controller.czxid == epoch_stat.mzxid,
        "one transaction, one zxid"
    );

    // A fenced write: the check on the old epoch version fails, nothing is applied.
    let before = case.op("children", c.children(&case.root, false).await)?;
    let fenced = c
        .multi(vec![
            Op::check(&epoch, 0),
            Op::create(case.p("partition"), Vec::new(), CreateMode::Persistent),
        ])
        .await;
    match &fenced {
        Err(CoordinationError::MultiOpFailed { index: 0, error })
            if matches!(**error, CoordinationError::BadVersion { .. }) => {}
        other => return case.fail(format!("fenced multi: {other:?}")),
    }
    // A failure in the middle rolls back the earlier ops.
    let failed = c
        .multi(vec![
            Op::create(case.p("first"), Vec::new(), CreateMode::Persistent),
            Op::set_data(&epoch, b"2".to_vec(), 1),
            Op::delete(case.p("missing"), ANY_VERSION),
            Op::create(case.p("last"), Vec::new(), CreateMode::Persistent),
        ])
        .await;
    match &failed {
        Err(CoordinationError::MultiOpFailed { index: 2, error })
            if matches!(**error, CoordinationError::NoNode { .. }) => {}
        other => return case.fail(format!("failing multi: {other:?}")),
    }
    let after = case.op("children", c.children(&case.root, false).await)?;
    ensure!(
        case,
        before == after,
        "failed multis changed children: {before:?} -> {after:?}"
    );
    let (data, s) = case.op("get epoch", c.get_data(&epoch, false).await)?;
    ensure!(
        case,
        data == b"1" && s.version == 1,
        "epoch changed by a failed multi: {s:?}"
    );
    let empty = case.op("empty multi", c.multi(Vec::new()).await)?;
    ensure!(case, empty.is_empty(), "empty multi results {empty:?}");
    Ok(())
}

/// Data watches are one-shot: one event for two changes, none after, again once re-registered.
pub async fn data_watch_is_one_shot(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("data_watch_is_one_shot", "connect"))?;
    let writer = h
        .connect()
        .await
        .map_err(op_err("data_watch_is_one_shot", "connect"))?;
    let case = Case::start("data_watch_is_one_shot", c.as_ref()).await?;
    let path = case.p("watched");
    case.op(
        "create",
        c.create(&path, b"0", CreateMode::Persistent).await,
    )?;
    let mut events = c.events();
    case.op("get+watch", c.get_data(&path, true).await)?;
    case.op("get+watch again", c.get_data(&path, true).await)?;
    case.op("set 1", writer.set_data(&path, b"1", ANY_VERSION).await)?;
    case.op("set 2", writer.set_data(&path, b"2", ANY_VERSION).await)?;
    case.expect_watch(&mut events, WatchEventKind::NodeDataChanged, &path)
        .await?;
    case.expect_quiet(&mut events).await?;
    case.op("exists+watch", c.exists(&path, true).await)?;
    case.op("delete", writer.delete(&path, ANY_VERSION).await)?;
    case.expect_watch(&mut events, WatchEventKind::NodeDeleted, &path)
        .await?;
    case.expect_quiet(&mut events).await?;
    Ok(())
}

/// `exists` on a missing node watches its creation.
pub async fn exists_watch_sees_creation(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("exists_watch_sees_creation", "connect"))?;
    let writer = h
        .connect()
        .await
        .map_err(op_err("exists_watch_sees_creation", "connect"))?;
    let case = Case::start("exists_watch_sees_creation", c.as_ref()).await?;
    let path = case.p("controller");
    let mut events = c.events();
    let none = case.op("exists+watch", c.exists(&path, true).await)?;
    ensure!(case, none.is_none(), "node exists early");
    case.op(
        "create",
        writer.create(&path, b"1", CreateMode::Ephemeral).await,
    )?;
    case.expect_watch(&mut events, WatchEventKind::NodeCreated, &path)
        .await?;
    Ok(())
}

/// Child watches fire on a child's creation and deletion, not on its data; a deleted node
/// with both a data and a child watch fires one `NodeDeleted`.
pub async fn child_watch(h: &dyn ConformanceHarness) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("child_watch", "connect"))?;
    let writer = h
        .connect()
        .await
        .map_err(op_err("child_watch", "connect"))?;
    let case = Case::start("child_watch", c.as_ref()).await?;
    let ids = case.p("ids");
    case.op(
        "create ids",
        c.create(&ids, b"", CreateMode::Persistent).await,
    )?;
    let mut events = c.events();
    case.op("children+watch", c.children(&ids, true).await)?;
    case.op(
        "create child",
        writer
            .create(&join(&ids, "1"), b"", CreateMode::Ephemeral)
            .await,
    )?;
    case.expect_watch(&mut events, WatchEventKind::NodeChildrenChanged, &ids)
        .await?;
    case.op("children+watch", c.children(&ids, true).await)?;
    case.op(
        "set child",
        writer.set_data(&join(&ids, "1"), b"x", ANY_VERSION).await,
    )?;
    case.expect_quiet(&mut events).await?;
    case.op(
        "delete child",
        writer.delete(&join(&ids, "1"), ANY_VERSION).await,
    )?;
    case.expect_watch(&mut events, WatchEventKind::NodeChildrenChanged, &ids)
        .await?;
    case.op("children+watch", c.children(&ids, true).await)?;
    case.op("get+watch", c.get_data(&ids, true).await)?;
    case.op("delete ids", writer.delete(&ids, ANY_VERSION).await)?;
    case.expect_watch(&mut events, WatchEventKind::NodeDeleted, &ids)
        .await?;
    case.expect_quiet(&mut events).await?;
    Ok(())
}

/// Session expiry: the expired client's ephemerals vanish, other clients' watches see it, the
/// client reports `Expired` then `Connected` with a new session and works again.
pub async fn session_expiry(h: &dyn ConformanceHarness) -> CaseResult {
    let broker = h
        .connect()
        .await
        .map_err(op_err("session_expiry", "connect"))?;
    let controller = h
        .connect()
        .await
        .map_err(op_err("session_expiry", "connect"))?;
    let case = Case::start("session_expiry", controller.as_ref()).await?;
    let node = case.p("broker-1");
    let old = broker.session_id();
    let (_, stat) = case.op(
        "register",
        broker.create(&node, b"{}", CreateMode::Ephemeral).await,
    )?;
    ensure!(
        case,
        stat.ephemeral_owner == old,
        "owner {} != session {old}",
        stat.ephemeral_owner
    );
    let mut broker_events = broker.events();
    let mut events = controller.events();
    case.op(
        "children+watch",
        controller.children(&case.root, true).await,
    )?;
    case.op("exists+watch", controller.exists(&node, true).await)?;
    case.op("expire", h.expire(old).await)?;
    // Deletion of the ephemeral fires the data watch, then the parent's child watch.
    case.expect_watch(&mut events, WatchEventKind::NodeDeleted, &node)
        .await?;
    case.expect_watch(&mut events, WatchEventKind::NodeChildrenChanged, &case.root)
        .await?;
    let gone = case.op("exists", controller.exists(&node, false).await)?;
    ensure!(case, gone.is_none(), "ephemeral survived its session");
    let mut saw_expired = false;
    let new = loop {
        match case.next_event(&mut broker_events).await? {
            CoordinationEvent::Session(SessionEvent::Expired { session_id }) => {
                ensure!(
                    case,
                    session_id == old,
                    "expired {session_id}, expected {old}"
                );
                saw_expired = true;
            }
            CoordinationEvent::Session(SessionEvent::Connected { session_id }) if saw_expired => {
                break session_id
            }
            CoordinationEvent::Session(
                SessionEvent::Disconnected | SessionEvent::Connected { .. },
            ) => {}
            other => return case.fail(format!("broker saw {other:?} before expiry")),
        }
    };
    ensure!(
        case,
        new != old && new == broker.session_id(),
        "new session {new}"
    );
    let (_, again) = case.op(
        "re-register",
        broker.create(&node, b"{}", CreateMode::Ephemeral).await,
    )?;
    ensure!(
        case,
        again.ephemeral_owner == new,
        "re-registered under {}",
        again.ephemeral_owner
    );
    ensure!(
        case,
        again.czxid > stat.czxid,
        "broker epoch (czxid) grows: {} -> {}",
        stat.czxid,
        again.czxid
    );
    Ok(())
}

/// Dropping the last handle of a client closes its session: its ephemerals vanish.
pub async fn close_removes_ephemerals(h: &dyn ConformanceHarness) -> CaseResult {
    let owner = h
        .connect()
        .await
        .map_err(op_err("close_removes_ephemerals", "connect"))?;
    let watcher = h
        .connect()
        .await
        .map_err(op_err("close_removes_ephemerals", "connect"))?;
    let case = Case::start("close_removes_ephemerals", watcher.as_ref()).await?;
    let node = case.p("eph");
    case.op(
        "create",
        owner.create(&node, b"", CreateMode::Ephemeral).await,
    )?;
    let persistent = case.p("keep");
    case.op(
        "create",
        owner.create(&persistent, b"", CreateMode::Persistent).await,
    )?;
    let mut events = watcher.events();
    case.op("exists+watch", watcher.exists(&node, true).await)?;
    drop(owner);
    case.expect_watch(&mut events, WatchEventKind::NodeDeleted, &node)
        .await?;
    let kept = case.op("exists", watcher.exists(&persistent, false).await)?;
    ensure!(
        case,
        kept.is_some(),
        "persistent node vanished with its creator"
    );
    Ok(())
}

fn op_err(
    case: &'static str,
    context: &'static str,
) -> impl Fn(CoordinationError) -> ConformanceError {
    move |error| ConformanceError::Operation {
        case,
        context: context.to_string(),
        error,
    }
}

/// Runs every case in order and stops at the first failure.
pub async fn run_all(h: &dyn ConformanceHarness) -> CaseResult {
    create_and_read(h).await?;
    typed_errors(h).await?;
    sequential_nodes(h).await?;
    conditional_writes(h).await?;
    multi_is_atomic(h).await?;
    data_watch_is_one_shot(h).await?;
    exists_watch_sees_creation(h).await?;
    child_watch(h).await?;
    session_expiry(h).await?;
    close_removes_ephemerals(h).await?;
    Ok(())
}

/// The harness for [`MemoryCoordination`](super::MemoryCoordination): clients on one
/// [`MemoryTree`], expiry through [`MemoryTree::expire`].
#[derive(Debug, Clone, Default)]
pub struct MemoryHarness {
    tree: MemoryTree,
}

impl MemoryHarness {
    /// A harness on a new tree.
    pub fn new() -> MemoryHarness {
        MemoryHarness::default()
    }
}

#[async_trait]
impl ConformanceHarness for MemoryHarness {
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        Ok(Arc::new(self.tree.connect()))
    }

    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        if self.tree.expire(session) {
            Ok(())
        } else {
            Err(CoordinationError::SessionExpired)
        }
    }
}
