//! ZooKeeper's client protocol served by `ZkServer`, op code by op code, through a real
//! ZooKeeper client (the `zookeeper-client` crate) against a three-server ensemble on loopback
//! TCP with file logs, in this process. Each test is named after the op codes and the
//! ZooKeeper rule it proves; the process-level tests (the `ha-zookeeper` binary, zkCli, the
//! conformance suite, brokers) are in the other `zookeeper_*` test files.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zab_coordination::zookeeper::config::ZkConfig;
use zab_coordination::zookeeper::server::ZkServer;
use zookeeper_client as zk;

/// Three in-process servers sharing a temporary directory.
struct Ensemble {
    servers: Vec<Option<ZkServer>>,
    configs: Vec<ZkConfig>,
    _dir: tempfile::TempDir,
}

impl Ensemble {
    async fn start(n: usize, extra: &[(&str, &str)]) -> Ensemble {
        Ensemble::start_with_observers(n, 0, extra).await
    }

    /// `voters` participants, then `observers` observers (the last sids).
    async fn start_with_observers(
        voters: usize,
        observers: usize,
        extra: &[(&str, &str)],
    ) -> Ensemble {
        let n = voters + observers;
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = tempfile::tempdir().expect("temp dir");
        let ports = ha_testkit::free_ports(n * 3).expect("ports");
        let mut members = String::new();
        for i in 0..n {
            if n > 1 {
                let _ = writeln!(
                    members,
                    "server.{}=127.0.0.1:{}:{}{}",
                    i + 1,
                    ports[3 * i + 1],
                    ports[3 * i + 2],
                    if i >= voters { ":observer" } else { "" }
                );
            }
        }
        let mut configs = Vec::new();
        for i in 0..n {
            let data = dir.path().join(format!("server-{}", i + 1));
            std::fs::create_dir_all(&data).expect("data dir");
            std::fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("myid");
            let mut cfg = format!(
                "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\n",
                data.display(),
                ports[3 * i]
            );
            for (k, v) in extra {
                let _ = writeln!(cfg, "{k}={v}");
            }
            if i >= voters {
                cfg.push_str("peerType=observer\n");
            }
            cfg.push_str(&members);
            let path = data.join("zoo.cfg");
            std::fs::write(&path, cfg).expect("zoo.cfg");
            configs.push(ZkConfig::load(&path).expect("config"));
        }
        let mut servers = Vec::new();
        for c in &configs {
            servers.push(Some(
                ZkServer::start(c.clone()).await.expect("server starts"),
            ));
        }
        let e = Ensemble {
            servers,
            configs,
            _dir: dir,
        };
        e.wait_serving(Duration::from_secs(30)).await;
        e
    }

    async fn wait_serving(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.servers.iter().flatten().all(|s| s.ctx().serving()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the servers do not serve within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn addr(&self, i: usize) -> String {
        format!(
            "127.0.0.1:{}",
            self.configs[i].client_port.expect("clientPort")
        )
    }

    fn connect_string(&self) -> String {
        (0..self.configs.len())
            .map(|i| self.addr(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn leader(&self) -> Option<usize> {
        self.servers.iter().position(|s| {
            s.as_ref()
                .is_some_and(|s| s.ctx().status.borrow().is_established_leader())
        })
    }

    fn kill(&mut self, i: usize) {
        self.servers[i] = None;
    }

    /// Crashes server `i` and starts it again on its data directory.
    async fn restart(&mut self, i: usize) {
        if let Some(s) = self.servers[i].take() {
            s.crash().await;
        }
        self.servers[i] = Some(
            ZkServer::start(self.configs[i].clone())
                .await
                .expect("server restarts"),
        );
    }
}

async fn client(at: &str) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(6))
        .connect(at)
        .await
        .expect("client connects")
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create2_create_sequential_and_ephemeral_give_zookeepers_stat_and_names() {
    let e = Ensemble::start(3, &[]).await;
    let c = client(&e.addr(0)).await;
    let (stat, _) = c.create("/a", b"hello", &persistent()).await.unwrap();
    assert_eq!(stat.czxid, stat.mzxid);
    assert_eq!(stat.czxid, stat.pzxid);
    assert_eq!((stat.version, stat.cversion, stat.aversion), (0, 0, 0));
    assert_eq!(stat.data_length, 5);
    assert_eq!(stat.num_children, 0);
    assert_eq!(stat.ephemeral_owner, 0);
    assert!(stat.ctime > 1_600_000_000_000 && stat.ctime == stat.mtime);
    let seq = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
    let (_, s0) = c.create("/a/s-", b"", &seq).await.unwrap();
    let (_, s1) = c.create("/a/s-", b"", &seq).await.unwrap();
    assert_eq!((s0.into_i64(), s1.into_i64()), (0, 1));
    let children = c.list_children("/a").await.unwrap();
    assert!(
        children.contains(&"s-0000000000".to_string()),
        "{children:?}"
    );
    assert!(
        children.contains(&"s-0000000001".to_string()),
        "{children:?}"
    );
    let (stat, _) = c.create("/a/e", b"", &ephemeral()).await.unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id().0);
    assert_eq!(
        c.create("/a/e/child", b"", &persistent())
            .await
            .unwrap_err(),
        zk::Error::NoChildrenForEphemerals
    );
    assert_eq!(
        c.create("/a", b"", &persistent()).await.unwrap_err(),
        zk::Error::NodeExists
    );
    assert_eq!(
        c.create("/missing/x", b"", &persistent())
            .await
            .unwrap_err(),
        zk::Error::NoNode
    );
    let (_, parent) = c.get_data("/a").await.unwrap();
    assert_eq!(parent.cversion, 3);
    assert_eq!(parent.num_children, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_exists_get_data_set_data_follow_versions_and_watches_fire_before_the_data() {
    let e = Ensemble::start(3, &[]).await;
    let writer = client(&e.addr(0)).await;
    let reader = client(&e.addr(1)).await;
    writer.create("/v", b"0", &persistent()).await.unwrap();
    reader.sync("/v").await.unwrap();
    let (data, stat, watch) = reader.get_and_watch_data("/v").await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"0"[..], 0));
    let stat = writer.set_data("/v", b"1", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(
        writer.set_data("/v", b"x", Some(0)).await.unwrap_err(),
        zk::Error::BadVersion
    );
    let event = watch.changed().await;
    assert_eq!(event.event_type, zk::EventType::NodeDataChanged);
    // The event came first: the read after it sees the new data.
    let (data, _) = reader.get_data("/v").await.unwrap();
    assert_eq!(data, b"1");
    // exists on a missing node leaves a watch that fires on creation.
    let (none, watch) = reader.check_and_watch_stat("/w").await.unwrap();
    assert!(none.is_none());
    writer.create("/w", b"", &persistent()).await.unwrap();
    assert_eq!(watch.changed().await.event_type, zk::EventType::NodeCreated);
    assert_eq!(
        writer.delete("/v", Some(0)).await.unwrap_err(),
        zk::Error::BadVersion
    );
    writer.create("/v/c", b"", &persistent()).await.unwrap();
    assert_eq!(
        writer.delete("/v", None).await.unwrap_err(),
        zk::Error::NotEmpty
    );
    writer.delete("/v/c", None).await.unwrap();
    writer.delete("/v", Some(1)).await.unwrap();
    assert_eq!(
        writer.delete("/v", None).await.unwrap_err(),
        zk::Error::NoNode
    );
    assert!(writer.check_stat("/v").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_children_and_get_children2_watch_the_children() {
    let e = Ensemble::start(3, &[]).await;
    let a = client(&e.addr(0)).await;
    let b = client(&e.addr(2)).await;
    a.create("/p", b"", &persistent()).await.unwrap();
    b.sync("/p").await.unwrap();
    let (children, stat, watch) = b.get_and_watch_children("/p").await.unwrap();
    assert!(children.is_empty());
    assert_eq!(stat.num_children, 0);
    a.create("/p/x", b"", &persistent()).await.unwrap();
    assert_eq!(
        watch.changed().await.event_type,
        zk::EventType::NodeChildrenChanged
    );
    let (children, stat) = b.get_children("/p").await.unwrap();
    assert_eq!(children, vec!["x".to_string()]);
    assert_eq!((stat.num_children, stat.cversion), (1, 1));
    let (_, watch) = b.list_and_watch_children("/p").await.unwrap();
    a.delete("/p/x", None).await.unwrap();
    assert_eq!(
        watch.changed().await.event_type,
        zk::EventType::NodeChildrenChanged
    );
    assert_eq!(
        b.list_children("/nope").await.unwrap_err(),
        zk::Error::NoNode
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_and_check_are_atomic_and_multi_read_reads_each_op() {
    let e = Ensemble::start(3, &[]).await;
    let c = client(&e.addr(1)).await;
    c.create("/m", b"", &persistent()).await.unwrap();
    let mut w = c.new_multi_writer();
    w.add_create("/m/1", b"one", &persistent()).unwrap();
    w.add_set_data("/m", b"top", Some(0)).unwrap();
    w.add_check_version("/m", 1).unwrap();
    let results = w.commit().await.unwrap();
    assert_eq!(results.len(), 3);
    // As ZooKeeper: a multi's persistent create is answered with its path only.
    match &results[0] {
        zk::MultiWriteResult::Create { path, stat } => {
            assert_eq!(path, "/m/1");
            assert!(stat.is_invalid(), "{stat:?}");
        }
        other => panic!("expected a create result: {other:?}"),
    }
    // A failing check: nothing of the multi is applied.
    let mut w = c.new_multi_writer();
    w.add_create("/m/2", b"two", &persistent()).unwrap();
    w.add_check_version("/m", 7).unwrap();
    match w.commit().await {
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            assert_eq!((index, source), (1, zk::Error::BadVersion));
        }
        other => panic!("expected the check to fail the multi: {other:?}"),
    }
    assert!(c.check_stat("/m/2").await.unwrap().is_none());
    let mut r = c.new_multi_reader();
    r.add_get_data("/m").unwrap();
    r.add_get_children("/m").unwrap();
    r.add_get_data("/m/none").unwrap();
    let results = r.commit().await.unwrap();
    match &results[..] {
        [zk::MultiReadResult::Data { data, .. }, zk::MultiReadResult::Children { children }, zk::MultiReadResult::Error { err }] =>
        {
            assert_eq!(data, b"top");
            assert_eq!(children, &vec!["1".to_string()]);
            assert_eq!(*err, zk::Error::NoNode);
        }
        other => panic!("unexpected multiRead results {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_digest_auth_get_acl_set_acl_and_who_am_i() {
    let e = Ensemble::start(3, &[]).await;
    let owner = client(&e.addr(0)).await;
    owner.auth("digest", b"alice:secret").await.unwrap();
    let users = owner.list_auth_users().await.unwrap();
    assert!(
        users
            .iter()
            .any(|u| u.scheme() == "digest" && u.user() == "alice"),
        "{users:?}"
    );
    let creator = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    owner.create("/secret", b"s", &creator).await.unwrap();
    let (acl, stat) = owner.get_acl("/secret").await.unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].scheme(), "digest");
    assert!(acl[0].id().starts_with("alice:"));
    assert_eq!(stat.aversion, 0);
    let stranger = client(&e.addr(1)).await;
    stranger.sync("/secret").await.unwrap();
    assert_eq!(
        stranger.get_data("/secret").await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        stranger.set_data("/secret", b"x", None).await.unwrap_err(),
        zk::Error::NoAuth
    );
    let open = zk::Acls::anyone_all();
    let stat = owner.set_acl("/secret", &open, Some(0)).await.unwrap();
    assert_eq!(stat.aversion, 1);
    stranger.sync("/secret").await.unwrap();
    assert_eq!(stranger.get_data("/secret").await.unwrap().0, b"s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_ephemerals_get_all_children_number_and_sync() {
    let e = Ensemble::start(3, &[]).await;
    let c = client(&e.addr(2)).await;
    c.create("/t", b"", &persistent()).await.unwrap();
    c.create("/t/e1", b"", &ephemeral()).await.unwrap();
    c.create("/t/p", b"", &persistent()).await.unwrap();
    c.create("/t/p/e2", b"", &ephemeral()).await.unwrap();
    let mut eph = c.list_ephemerals("/t").await.unwrap();
    eph.sort();
    assert_eq!(eph, vec!["/t/e1".to_string(), "/t/p/e2".to_string()]);
    assert_eq!(c.count_descendants_number("/t").await.unwrap(), 3);
    let other = client(&e.addr(0)).await;
    other.sync("/t").await.unwrap();
    assert_eq!(other.count_descendants_number("/t").await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_watch_persistent_and_recursive_and_remove_watches() {
    let e = Ensemble::start(3, &[]).await;
    let w = client(&e.addr(0)).await;
    let c = client(&e.addr(1)).await;
    w.create("/r", b"", &persistent()).await.unwrap();
    w.create("/q", b"", &persistent()).await.unwrap();
    // One watch mode per path and connection, as ZooKeeper's WatcherModeManager keeps them.
    let mut recursive = w
        .watch("/r", zk::AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let mut node = w.watch("/q", zk::AddWatchMode::Persistent).await.unwrap();
    c.create("/r/a", b"", &persistent()).await.unwrap();
    let ev = recursive.changed().await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeCreated, "/r/a")
    );
    c.set_data("/r/a", b"1", None).await.unwrap();
    let ev = recursive.changed().await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDataChanged, "/r/a")
    );
    // A persistent watch fires for the node's data and its children, and stays.
    c.create("/q/x", b"", &persistent()).await.unwrap();
    assert_eq!(
        node.changed().await.event_type,
        zk::EventType::NodeChildrenChanged
    );
    c.set_data("/q", b"2", None).await.unwrap();
    assert_eq!(
        node.changed().await.event_type,
        zk::EventType::NodeDataChanged
    );
    c.set_data("/q", b"3", None).await.unwrap();
    assert_eq!(
        node.changed().await.event_type,
        zk::EventType::NodeDataChanged
    );
    // removeWatches for each (the client also removes them on drop).
    #[allow(deprecated)]
    {
        node.remove().await.unwrap();
        recursive.remove().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_moves_between_servers_keeping_its_ephemerals_and_set_watches_reregisters() {
    let mut e = Ensemble::start(3, &[]).await;
    let leader = e.leader().expect("a leader");
    let on = (leader + 1) % 3;
    let connect = format!("{},{}", e.addr(on), e.addr((on + 1) % 3));
    let c = client(&connect).await;
    c.create("/s", b"", &ephemeral()).await.unwrap();
    c.create("/d", b"", &persistent()).await.unwrap();
    let (_, _, watch) = c.get_and_watch_data("/d").await.unwrap();
    let id = c.session_id();
    // The client's server dies: it moves to the other one with its session.
    e.kill(on);
    let other = client(&e.addr(leader)).await;
    other.set_data("/d", b"changed", None).await.unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(20), watch.changed())
        .await
        .expect("the watch fires after the move");
    assert_eq!(ev.event_type, zk::EventType::NodeDataChanged);
    assert_eq!(c.session_id(), id);
    c.sync("/s").await.unwrap();
    let stat = c.check_stat("/s").await.unwrap().expect("ephemeral kept");
    assert_eq!(stat.ephemeral_owner, id.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_session_deletes_ephemerals_and_an_expired_session_is_closed_by_the_leader() {
    let e = Ensemble::start(3, &[]).await;
    let watcher = client(&e.addr(0)).await;
    let closing = client(&e.addr(1)).await;
    closing.create("/gone", b"", &ephemeral()).await.unwrap();
    watcher.sync("/gone").await.unwrap();
    let (_, watch) = watcher.check_and_watch_stat("/gone").await.unwrap();
    drop(closing); // closeSession
    assert_eq!(watch.changed().await.event_type, zk::EventType::NodeDeleted);
    // A detached client never closes its session and stops pinging when dropped: the leader
    // expires it after its timeout.
    let silent = zk::Client::connector()
        .with_session_timeout(Duration::from_millis(800))
        .with_detached()
        .connect(&e.addr(2))
        .await
        .unwrap();
    silent.create("/expiring", b"", &ephemeral()).await.unwrap();
    watcher.sync("/expiring").await.unwrap();
    let (_, watch) = watcher.check_and_watch_stat("/expiring").await.unwrap();
    drop(silent);
    let ev = tokio::time::timeout(Duration::from_secs(20), watch.changed())
        .await
        .expect("the session expires");
    assert_eq!(ev.event_type, zk::EventType::NodeDeleted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_container_and_create_ttl_are_reaped_by_the_leader() {
    let e = Ensemble::start(3, &[("znode.container.checkIntervalMs", "100")]).await;
    let c = client(&e.addr(0)).await;
    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    c.create("/box", b"", &container).await.unwrap();
    c.create("/box/item", b"", &persistent()).await.unwrap();
    let ttl = zk::CreateMode::Persistent
        .with_acls(zk::Acls::anyone_all())
        .with_ttl(Duration::from_millis(300));
    c.create("/ttl", b"", &ttl).await.unwrap();
    let (_, watch) = c.check_and_watch_stat("/ttl").await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(20), watch.changed())
            .await
            .expect("the TTL node is reaped")
            .event_type,
        zk::EventType::NodeDeleted
    );
    let (_, _, watch) = c.get_and_watch_data("/box").await.unwrap();
    c.delete("/box/item", None).await.unwrap();
    // The container outlives its last child only until the next check.
    let ev = tokio::time::timeout(Duration::from_secs(20), watch.changed())
        .await
        .expect("the empty container is reaped");
    assert_eq!(ev.event_type, zk::EventType::NodeDeleted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_writes_and_reads_of_one_session_are_answered_in_order() {
    let e = Ensemble::start(3, &[]).await;
    let c = Arc::new(client(&e.connect_string()).await);
    c.create("/fifo", b"", &persistent()).await.unwrap();
    // Issue many requests without awaiting each: a read after a write sees it.
    let mut futures = Vec::new();
    for i in 0..200u32 {
        let c = c.clone();
        futures.push(tokio::spawn(async move {
            let data = i.to_string();
            c.set_data("/fifo", data.as_bytes(), None).await.unwrap();
        }));
    }
    for f in futures {
        f.await.unwrap();
    }
    let (_, stat) = c.get_data("/fifo").await.unwrap();
    assert_eq!(stat.version, 200);
}

/// Raw bytes on the client port.
async fn raw(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_packets_close_only_their_connection() {
    let e = Ensemble::start(1, &[]).await;
    let c = client(&e.addr(0)).await;
    c.create("/keep", b"", &persistent()).await.unwrap();
    // A frame claiming 2 GiB: the connection is closed, nothing is allocated.
    let out = raw(&e.addr(0), &0x7fff_ffffu32.to_be_bytes()).await;
    assert!(out.is_empty());
    // A connect request cut short.
    let out = raw(&e.addr(0), &[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]).await;
    assert!(out.is_empty());
    // The other client did not notice.
    assert!(c.check_stat("/keep").await.unwrap().is_some());
    let answer = raw(&e.addr(0), b"ruok").await;
    assert_eq!(answer, b"imok");
    let srvr = String::from_utf8(raw(&e.addr(0), b"srvr").await).unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_or_a_wrong_password_is_expired() {
    let e = Ensemble::start(1, &[]).await;
    let c = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(4))
        .with_detached()
        .connect(&e.addr(0))
        .await
        .unwrap();
    let info = c.into_session();
    let id = info.id();
    // Reattaching with the right password works, on any server...
    let again = zk::Client::connector()
        .with_session(info.clone())
        .connect(&e.addr(0))
        .await
        .unwrap();
    assert_eq!(again.session_id(), id);
    drop(again); // closes the session
    let watcher = client(&e.addr(0)).await;
    watcher.sync("/").await.unwrap();
    // ... and once it is closed the same id is refused as expired.
    let refused = zk::Client::connector()
        .with_session(info)
        .connect(&e.addr(0))
        .await;
    assert!(
        matches!(refused, Err(zk::Error::SessionExpired)),
        "{:?}",
        refused.map(|c| c.session_id())
    );
}

/// A client speaking the jute protocol by hand, for the op codes the `zookeeper-client` crate
/// does not send (old `setWatches`, `checkWatches`, `reconfig`, …).
struct RawClient {
    stream: tokio::net::TcpStream,
    session: i64,
}

impl RawClient {
    async fn connect(addr: &str) -> RawClient {
        use zab_coordination::zookeeper::proto::{ConnectRequest, ConnectResponse};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: 10_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
            omits_read_only: false,
        };
        stream.write_all(&req.encode_frame()).await.unwrap();
        let body = read_frame(&mut stream).await;
        let resp = ConnectResponse::decode(&body).unwrap();
        assert_ne!(resp.session_id, 0);
        RawClient {
            stream,
            session: resp.session_id,
        }
    }

    async fn send(&mut self, xid: i32, req: &zab_coordination::zookeeper::proto::Request) {
        self.stream.write_all(&req.encode_frame(xid)).await.unwrap();
    }

    /// The next frame: its reply header and record bytes.
    async fn next(&mut self) -> (zab_coordination::zookeeper::proto::ReplyHeader, Vec<u8>) {
        let body = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut self.stream))
            .await
            .expect("a reply in time");
        let (h, rest) = zab_coordination::zookeeper::proto::split_reply(&body).unwrap();
        (h, rest.to_vec())
    }

    /// Sends `req` and returns its reply (skipping notifications).
    async fn call(
        &mut self,
        xid: i32,
        req: &zab_coordination::zookeeper::proto::Request,
    ) -> (zab_coordination::zookeeper::proto::ReplyHeader, Vec<u8>) {
        self.send(xid, req).await;
        loop {
            let (h, body) = self.next().await;
            if h.xid == xid {
                return (h, body);
            }
        }
    }
}

async fn read_frame(s: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.unwrap();
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_watches_check_watches_remove_watches_and_unsupported_ops_on_the_wire() {
    use zab_coordination::zookeeper::proto::{CreateRequest, Request, WatcherEvent};
    use zab_coordination::zookeeper::types::{ErrorCode, EventType, WatcherType};
    let e = Ensemble::start(1, &[]).await;
    let mut c = RawClient::connect(&e.addr(0)).await;
    assert!(c.session != 0);
    let create = |path: &str| {
        Request::Create(CreateRequest {
            path: path.into(),
            data: Some(b"x".to_vec()),
            acl: zab_coordination::zookeeper::types::Acl::open_unsafe(),
            flags: 0,
            ttl: -1,
        })
    };
    let (h, _) = c.call(1, &create("/old")).await;
    assert_eq!(h.err, ErrorCode::Ok);
    let created_at = h.zxid;
    // checkWatches / removeWatches without a watch: NoWatcher.
    let check = Request::CheckWatches {
        path: "/old".into(),
        watcher_type: WatcherType::Data,
    };
    assert_eq!(c.call(2, &check).await.0.err, ErrorCode::NoWatcher);
    let (h, _) = c
        .call(
            3,
            &Request::GetData {
                path: "/old".into(),
                watch: true,
            },
        )
        .await;
    assert_eq!(h.err, ErrorCode::Ok);
    assert_eq!(c.call(4, &check).await.0.err, ErrorCode::Ok);
    let remove = Request::RemoveWatches {
        path: "/old".into(),
        watcher_type: WatcherType::Data,
    };
    assert_eq!(c.call(5, &remove).await.0.err, ErrorCode::Ok);
    assert_eq!(c.call(6, &remove).await.0.err, ErrorCode::NoWatcher);
    // Another session changes the node; the old-style setWatches (op 101) with a relative zxid
    // before the change fires the data watch at once.
    let other = client(&e.addr(0)).await;
    other.set_data("/old", b"y", None).await.unwrap();
    c.send(
        -8,
        &Request::SetWatches {
            relative_zxid: created_at,
            data: vec!["/old".into()],
            exist: vec!["/never".into()],
            child: vec![],
        },
    )
    .await;
    let mut fired = None;
    let mut answered = false;
    while fired.is_none() || !answered {
        let (h, body) = c.next().await;
        match h.xid {
            -1 => fired = Some(WatcherEvent::decode(&body).unwrap()),
            -8 => {
                assert_eq!(h.err, ErrorCode::Ok);
                answered = true;
            }
            x => panic!("unexpected xid {x}"),
        }
    }
    let fired = fired.unwrap();
    assert_eq!(
        (fired.event_type, fired.path.as_str()),
        (EventType::NodeDataChanged, "/old")
    );
    // The exist watch from setWatches fires on creation.
    other.create("/never", b"", &persistent()).await.unwrap();
    let (h, body) = c.next().await;
    assert_eq!(h.xid, -1);
    let ev = WatcherEvent::decode(&body).unwrap();
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (EventType::NodeCreated, "/never")
    );
    // A create with an unknown mode flag is refused before the leader, with its own xid.
    let mut bad = match create("/bad-flags") {
        Request::Create(c) => c,
        _ => unreachable!(),
    };
    bad.flags = 9;
    let (h, _) = c.call(8, &Request::Create(bad)).await;
    assert_eq!((h.xid, h.err), (8, ErrorCode::BadArguments));
    // reconfig and SASL are not supported: Unimplemented.
    let (h, _) = c.call(7, &Request::Unsupported { op: 16 }).await;
    assert_eq!(h.err, ErrorCode::Unimplemented);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_recovers_its_tree_and_sessions_from_its_log_and_snapshots() {
    // snapCount 10: snapshots (and log purges) every few transactions.
    let mut e = Ensemble::start(3, &[("snapCount", "10")]).await;
    let c = client(&e.connect_string()).await;
    c.create("/kept", b"", &persistent()).await.unwrap();
    for i in 0..50 {
        c.create(
            &format!("/kept/n{i}"),
            i.to_string().as_bytes(),
            &persistent(),
        )
        .await
        .unwrap();
    }
    let owner = client(&e.addr(0)).await;
    owner.create("/kept/eph", b"", &ephemeral()).await.unwrap();
    c.sync("/").await.unwrap();
    let log_dir = e.configs[0].data_log_dir.join("ha-zab").join("log");
    let snapshots = std::fs::read_dir(&log_dir)
        .unwrap()
        .filter(|f| {
            f.as_ref()
                .is_ok_and(|f| f.file_name().to_string_lossy().starts_with("snapshot."))
        })
        .count();
    assert!(snapshots > 0, "no snapshot in {}", log_dir.display());
    // Every server crashes and comes back on its files.
    for i in 0..3 {
        e.restart(i).await;
    }
    e.wait_serving(Duration::from_secs(30)).await;
    for i in 0..3 {
        let r = client(&e.addr(i)).await;
        r.sync("/kept").await.unwrap();
        let (children, stat) = r.get_children("/kept").await.unwrap();
        assert_eq!(children.len(), 51, "server {i}: {children:?}");
        assert_eq!(stat.num_children, 51);
        assert_eq!(r.get_data("/kept/n49").await.unwrap().0, b"49");
        // The session survived the restarts: its ephemeral is still there.
        let eph = r
            .check_stat("/kept/eph")
            .await
            .unwrap()
            .expect("ephemeral kept");
        assert_eq!(eph.ephemeral_owner, owner.session_id().0);
    }
    owner.sync("/").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_serves_reads_forwards_writes_and_says_observer_in_srvr() {
    let e = Ensemble::start_with_observers(3, 1, &[]).await;
    let observer = e.addr(3);
    let c = client(&observer).await;
    c.create("/via-observer", b"o", &persistent())
        .await
        .unwrap();
    let voter = client(&e.addr(0)).await;
    voter.sync("/via-observer").await.unwrap();
    assert_eq!(voter.get_data("/via-observer").await.unwrap().0, b"o");
    voter.set_data("/via-observer", b"v", None).await.unwrap();
    c.sync("/via-observer").await.unwrap();
    assert_eq!(c.get_data("/via-observer").await.unwrap().0, b"v");
    let srvr = String::from_utf8(raw(&observer, b"srvr").await).unwrap();
    assert!(srvr.contains("Mode: observer"), "{srvr}");
}
