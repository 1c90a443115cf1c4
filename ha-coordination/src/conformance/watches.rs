//! Conformance cases on watches and sessions: one-shot data, exists and child watches; session
//! expiry and close.

use super::case::{Case, CaseResult};
use super::{op_err, CoordinationCluster};
use crate::path::join;
use crate::types::{CoordinationEvent, CreateMode, SessionEvent, WatchEventKind, ANY_VERSION};

/// Data watches are one-shot: one event for two changes, none after, again once re-registered.
pub async fn data_watch_is_one_shot(h: &dyn CoordinationCluster) -> CaseResult {
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
    case.op("sync", writer.sync(&path).await)?;
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
pub async fn exists_watch_sees_creation(h: &dyn CoordinationCluster) -> CaseResult {
    let c = h
        .connect()
        .await
        .map_err(op_err("exists_watch_sees_creation", "connect"))?;
    let writer = h
        .connect()
        .await
        .map_err(op_err("exists_watch_sees_creation", "connect"))?;
    let case = Case::start("exists_watch_sees_creation", c.as_ref()).await?;
    case.op("sync", writer.sync(&case.root).await)?;
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
pub async fn child_watch(h: &dyn CoordinationCluster) -> CaseResult {
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
    case.op("sync", writer.sync(&ids).await)?;
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
pub async fn session_expiry(h: &dyn CoordinationCluster) -> CaseResult {
    let broker = h
        .connect()
        .await
        .map_err(op_err("session_expiry", "connect"))?;
    let controller = h
        .connect()
        .await
        .map_err(op_err("session_expiry", "connect"))?;
    let case = Case::start("session_expiry", controller.as_ref()).await?;
    case.op("sync", broker.sync(&case.root).await)?;
    let node = case.p("broker-1");
    let old = broker.session_id();
    let (_, stat) = case.op(
        "register",
        broker.create(&node, b"{}", CreateMode::Ephemeral).await,
    )?;
    case.op("sync", controller.sync(&node).await)?;
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

/// A connection loss is not an expiry: the client reports `Disconnected`, then `Connected`
/// with the *same* session; its ephemerals stay; a watch that fired meanwhile is delivered
/// after the reconnection.
pub async fn connection_loss_keeps_the_session(h: &dyn CoordinationCluster) -> CaseResult {
    let name = "connection_loss_keeps_the_session";
    let client = h.connect().await.map_err(op_err(name, "connect"))?;
    let other = h.connect().await.map_err(op_err(name, "connect"))?;
    let case = Case::start(name, other.as_ref()).await?;
    case.op("sync", client.sync(&case.root).await)?;
    let eph = case.p("eph");
    let watched = case.p("watched");
    let session = client.session_id();
    case.op(
        "create eph",
        client.create(&eph, b"", CreateMode::Ephemeral).await,
    )?;
    case.op(
        "create watched",
        client.create(&watched, b"0", CreateMode::Persistent).await,
    )?;
    case.op("get+watch", client.get_data(&watched, true).await)?;
    case.op("sync", other.sync(&watched).await)?;
    let mut events = client.events();
    if !case.op("disconnect", h.disconnect(session).await)? {
        return Ok(()); // the harness cannot cut a client off
    }
    match case.next_event(&mut events).await? {
        CoordinationEvent::Session(SessionEvent::Disconnected) => {}
        other => return case.fail(format!("expected Disconnected, got {other:?}")),
    }
    case.op(
        "set while disconnected",
        other.set_data(&watched, b"1", ANY_VERSION).await,
    )?;
    let still = case.op("exists", other.exists(&eph, false).await)?;
    ensure!(
        case,
        still.map(|s| s.ephemeral_owner) == Some(session),
        "ephemeral lost: {still:?}"
    );
    case.op("reconnect", h.reconnect(session).await)?;
    loop {
        match case.next_event(&mut events).await? {
            CoordinationEvent::Session(SessionEvent::Connected { session_id }) => {
                ensure!(
                    case,
                    session_id == session,
                    "reconnected with {session_id}, not {session}"
                );
                break;
            }
            CoordinationEvent::Session(SessionEvent::Disconnected) => {}
            other => return case.fail(format!("expected Connected, got {other:?}")),
        }
    }
    case.expect_watch(&mut events, WatchEventKind::NodeDataChanged, &watched)
        .await?;
    let (_, stat) = case.op("get eph", client.get_data(&eph, false).await)?;
    ensure!(
        case,
        stat.ephemeral_owner == session,
        "owner {}",
        stat.ephemeral_owner
    );
    Ok(())
}

/// Dropping the last handle of a client closes its session: its ephemerals vanish.
pub async fn close_removes_ephemerals(h: &dyn CoordinationCluster) -> CaseResult {
    let owner = h
        .connect()
        .await
        .map_err(op_err("close_removes_ephemerals", "connect"))?;
    let watcher = h
        .connect()
        .await
        .map_err(op_err("close_removes_ephemerals", "connect"))?;
    let case = Case::start("close_removes_ephemerals", watcher.as_ref()).await?;
    case.op("sync", owner.sync(&case.root).await)?;
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
    case.op("sync", watcher.sync(&node).await)?;
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
