//! The coordination conformance suite against `MemoryCoordination`, one test per case, plus
//! the in-memory service's test controls (suspend/resume) and deterministic event order.

use futures::StreamExt;
use ha_coordination::{conformance, MemoryCluster};
use ha_coordination::{
    Coordination, CoordinationError, CoordinationEvent, CreateMode, MemoryTree, Op, SessionEvent,
    WatchEvent, WatchEventKind, ANY_VERSION,
};

macro_rules! conformance_case {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                if let Err(e) = conformance::$name(&MemoryCluster::new()).await {
                    panic!("{e}");
                }
            }
        )*
    };
}

conformance_case!(
    create_and_read,
    typed_errors,
    sequential_nodes,
    conditional_writes,
    multi_is_atomic,
    multi_reports_the_first_bad_version,
    bulk_read,
    data_watch_is_one_shot,
    exists_watch_sees_creation,
    child_watch,
    session_expiry,
    connection_loss_keeps_the_session,
    close_removes_ephemerals,
);

#[tokio::test]
async fn whole_suite_runs_on_one_shared_tree() {
    if let Err(e) = conformance::test_all(&MemoryCluster::new()).await {
        panic!("{e}");
    }
}

fn watch(kind: WatchEventKind, path: &str) -> Option<CoordinationEvent> {
    Some(CoordinationEvent::Watch(WatchEvent {
        kind,
        path: path.into(),
    }))
}

#[tokio::test]
async fn suspended_session_keeps_ephemerals_and_gets_held_events_on_resume(
) -> Result<(), CoordinationError> {
    let tree = MemoryTree::new();
    let a = tree.connect();
    let b = tree.connect();
    let mut events = a.events();
    a.create("/e", b"", CreateMode::Ephemeral).await?;
    a.create("/w", b"", CreateMode::Persistent).await?;
    a.get_data("/w", true).await?;
    assert!(tree.suspend(a.session_id()));
    assert_eq!(
        events.next().await,
        Some(CoordinationEvent::Session(SessionEvent::Disconnected))
    );
    assert_eq!(
        a.get_data("/w", false).await.unwrap_err(),
        CoordinationError::ConnectionLoss
    );
    b.set_data("/w", b"x", ANY_VERSION).await?;
    assert!(
        b.exists("/e", false).await?.is_some(),
        "session still alive"
    );
    assert!(tree.resume(a.session_id()));
    assert_eq!(
        events.next().await,
        Some(CoordinationEvent::Session(SessionEvent::Connected {
            session_id: a.session_id()
        }))
    );
    assert_eq!(
        events.next().await,
        watch(WatchEventKind::NodeDataChanged, "/w")
    );
    Ok(())
}

#[tokio::test]
async fn events_of_one_transaction_arrive_in_operation_order() -> Result<(), CoordinationError> {
    let tree = MemoryTree::new();
    let c = tree.connect();
    let mut events = c.events();
    c.create("/t", b"", CreateMode::Persistent).await?;
    c.create("/t/a", b"", CreateMode::Persistent).await?;
    c.children("/t", true).await?;
    c.get_data("/t/a", true).await?;
    c.exists("/t/b", true).await?;
    c.multi(vec![
        Op::set_data("/t/a", b"1".to_vec(), 0),
        Op::create("/t/b", Vec::new(), CreateMode::Persistent),
    ])
    .await?;
    assert_eq!(
        events.next().await,
        watch(WatchEventKind::NodeDataChanged, "/t/a")
    );
    assert_eq!(
        events.next().await,
        watch(WatchEventKind::NodeCreated, "/t/b")
    );
    assert_eq!(
        events.next().await,
        watch(WatchEventKind::NodeChildrenChanged, "/t")
    );
    Ok(())
}

#[tokio::test]
async fn zxids_increase_by_one_per_transaction() -> Result<(), CoordinationError> {
    let tree = MemoryTree::new();
    let c = tree.connect();
    let (_, a) = c.create("/a", b"", CreateMode::Persistent).await?;
    let (_, b) = c.create("/b", b"", CreateMode::Persistent).await?;
    assert_eq!(b.czxid, a.czxid + 1);
    let failed = c.set_data("/a", b"", 7).await;
    assert!(failed.is_err());
    assert_eq!(tree.last_zxid(), b.czxid, "a failed write takes no zxid");
    Ok(())
}
