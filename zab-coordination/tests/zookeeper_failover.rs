//! A ZooKeeper server's leader killed under write load (Z8), seen from outside through real
//! client sessions (the `zookeeper-client` crate): three servers (tickTime 2000 ms), 16 sessions
//! spread evenly over them, each holding an ephemeral node and creating persistent sequential
//! nodes one after another. Once every writer has had creates acknowledged, the leader's
//! process is SIGKILLed; the sessions on it reconnect to the other two servers (each client has
//! the full connect string) and every writer carries on. Then, on each surviving server after a
//! `sync`: every acknowledged create exists, every session is still connected, never saw
//! `Expired`, and its ephemeral node still exists and is owned by it.
//!
//! The same body runs against Apache ZooKeeper 3.8 (Debian's `zookeeper`) and against our
//! `ha-zookeeper` binary (`ServerProgram::HaZookeeper`, found by
//! `ha_testkit::ha_zookeeper_binary`). Fails under `CI` when ZooKeeper is missing, skips with a
//! notice otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ha_testkit::{require_zookeeper, ServerProgram, ZkEnsemble};
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, SessionState};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const SERVERS: usize = 3;
const WRITERS: usize = 16;
/// With tickTime 2000 ms the server allows 4 s to 40 s (2 to 20 ticks): 20 s is granted as
/// asked, far longer than an election and the clients' reconnection take.
const TICK: Duration = Duration::from_millis(2000);
const SESSION_TIMEOUT: Duration = Duration::from_secs(20);
/// Creates every writer must have acknowledged before the kill, and again after it.
const ACKS_PER_PHASE: usize = 20;
/// Generous bounds for each phase on a shared machine.
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);
const ROOT: &str = "/failover";

/// What one writer did: the paths the server acknowledged, in order, and its errors by kind.
#[derive(Debug, Default)]
struct WriterLog {
    acked: Vec<String>,
    errors: BTreeMap<String, usize>,
    expired: bool,
}

/// One writer's session: its client, the server it started on, its ephemeral node, and every
/// session state it went through.
struct Writer {
    client: Client,
    first_server: u64,
    ephemeral: String,
    states: Arc<Mutex<Vec<SessionState>>>,
    log: Arc<Mutex<WriterLog>>,
}

/// Connects with the full connect string `servers` (so the client can move to any server) but
/// makes it start on `servers[first]`. The client shuffles its server list with `fastrand`'s
/// thread-local generator, synchronously when `connect` is first polled; seeding that generator
/// just before chooses the order. Which server the session really landed on is checked from the
/// servers' own connection counts afterwards.
async fn connect_first_to(servers: &[String], first: usize) -> Result<Client, ZkError> {
    let seed = (0u64..)
        .find(|&seed| {
            fastrand::seed(seed);
            let mut order: Vec<usize> = (0..servers.len()).collect();
            fastrand::shuffle(&mut order);
            order[0] == first
        })
        .expect("some seed puts any server first");
    fastrand::seed(seed);
    Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(&servers.join(","))
        .await
}

/// Number of client connections each running server reports in `srvr` (the probe's own
/// connection included, the same on every server).
fn connections(
    zk: &ZkEnsemble,
    sids: &[u64],
) -> Result<BTreeMap<u64, u64>, ha_testkit::TestkitError> {
    sids.iter()
        .map(|&sid| Ok((sid, zk.srvr(sid)?.connections)))
        .collect()
}

/// Waits until `done` holds, polling every 50 ms, or fails naming `what`.
async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> TestResult {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Creates persistent sequential nodes under `ROOT/w<k>/n-` until `stop`, recording each
/// acknowledged one. After an error it retries after a short pause; an expired session ends it.
async fn write_loop(client: Client, k: usize, log: Arc<Mutex<WriterLog>>, stop: Arc<AtomicBool>) {
    let prefix = format!("{ROOT}/w{k}/n-");
    let opts = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let value = vec![b'x'; 100];
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(
            Duration::from_secs(30),
            client.create(&prefix, &value, &opts),
        )
        .await
        {
            Ok(Ok((_, seq))) => log
                .lock()
                .expect("not poisoned")
                .acked
                .push(format!("{prefix}{seq}")),
            Ok(Err(e)) => {
                let expired = e == ZkError::SessionExpired;
                {
                    let mut l = log.lock().expect("not poisoned");
                    *l.errors.entry(format!("{e:?}")).or_default() += 1;
                    l.expired |= expired;
                }
                if expired {
                    return;
                }
                // Connection lost: the client is reconnecting; do not spin meanwhile.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(_) => {
                *log.lock()
                    .expect("not poisoned")
                    .errors
                    .entry("timeout".into())
                    .or_default() += 1;
            }
        }
    }
}

fn acked_counts(writers: &[Writer]) -> Vec<usize> {
    writers
        .iter()
        .map(|w| w.log.lock().expect("not poisoned").acked.len())
        .collect()
}

fn leader_killed_under_load(program: ServerProgram) -> TestResult {
    let mut zk = ZkEnsemble::builder()
        .servers(SERVERS)
        .tick_time(TICK)
        .program(program)
        .heap_mb(256)
        .start()?;
    let sids = zk.sids();
    let servers: Vec<String> = sids
        .iter()
        .map(|&sid| Ok(format!("127.0.0.1:{}", zk.client_port(sid)?)))
        .collect::<Result<_, ha_testkit::TestkitError>>()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // Sessions spread evenly over the servers, each with its ephemeral node.
    let setup = rt.block_on(async {
        let admin = Client::connector()
            .with_session_timeout(SESSION_TIMEOUT)
            .connect(&servers.join(","))
            .await?;
        let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
        admin.create(ROOT, b"", &opts).await?;
        admin
            .create(&format!("{ROOT}/sessions"), b"", &opts)
            .await?;
        for k in 0..WRITERS {
            admin.create(&format!("{ROOT}/w{k}"), b"", &opts).await?;
        }
        Ok::<_, ZkError>(admin)
    })?;
    let admin = setup;
    let before = connections(&zk, &sids)?;
    let mut writers = Vec::new();
    for k in 0..WRITERS {
        let first = k % SERVERS;
        let client = rt.block_on(connect_first_to(&servers, first))?;
        let ephemeral = format!("{ROOT}/sessions/s{k}");
        rt.block_on(client.create(
            &ephemeral,
            &k.to_be_bytes(),
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        ))?;
        let states = Arc::new(Mutex::new(Vec::new()));
        let mut watcher = client.state_watcher();
        let seen = states.clone();
        rt.spawn(async move {
            loop {
                let state = watcher.changed().await;
                seen.lock().expect("not poisoned").push(state);
            }
        });
        writers.push(Writer {
            client,
            first_server: sids[first],
            ephemeral,
            states,
            log: Arc::default(),
        });
    }
    // The servers' own view: each holds its share of the sessions.
    let after = connections(&zk, &sids)?;
    for &sid in &sids {
        let expected = writers.iter().filter(|w| w.first_server == sid).count() as u64;
        assert_eq!(
            after[&sid].checked_sub(before[&sid]),
            Some(expected),
            "server {sid} should hold {expected} of the writers' sessions (srvr connections \
             before {before:?}, after {after:?})"
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = writers
        .iter()
        .enumerate()
        .map(|(k, w)| rt.spawn(write_loop(w.client.clone(), k, w.log.clone(), stop.clone())))
        .collect();
    rt.block_on(wait_until(
        "every writer's first acknowledged creates",
        PHASE_TIMEOUT,
        || acked_counts(&writers).iter().all(|&n| n >= ACKS_PER_PHASE),
    ))?;

    // Kill the leader under load.
    let leader = zk.wait_for_leader(Duration::from_secs(30))?;
    // The sessions on the leader must move to another server (those on the followers
    // reconnect too: a follower that loses its leader drops its clients until it follows again).
    let on_leader = writers.iter().filter(|w| w.first_server == leader).count();
    assert!(on_leader > 0, "some sessions must be on the leader");
    let at_kill = acked_counts(&writers);
    let killed_at = Instant::now();
    zk.kill(leader)?;
    let survivors: Vec<u64> = sids.iter().copied().filter(|&s| s != leader).collect();
    let new_leader = zk.wait_for_leader(Duration::from_secs(60))?;
    let elected_after = killed_at.elapsed();
    assert_ne!(new_leader, leader);

    // Every writer, the ones whose server died included, carries on.
    rt.block_on(wait_until(
        "every writer's acknowledged creates after the kill",
        PHASE_TIMEOUT,
        || {
            acked_counts(&writers)
                .iter()
                .zip(&at_kill)
                .all(|(now, then)| *now >= then + ACKS_PER_PHASE)
        },
    ))?;
    let resumed_after = killed_at.elapsed();
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for t in tasks {
            t.await?;
        }
        Ok::<_, tokio::task::JoinError>(())
    })?;

    // Every acknowledged create is on every surviving server; every session and its ephemeral
    // survived.
    for &sid in &survivors {
        let at = format!("127.0.0.1:{}", zk.client_port(sid)?);
        rt.block_on(async {
            let reader = Client::connector()
                .with_session_timeout(SESSION_TIMEOUT)
                .connect(&at)
                .await?;
            reader.sync("/").await?;
            for (k, w) in writers.iter().enumerate() {
                // The writers have stopped: a copy of what each had acknowledged.
                let acked = w.log.lock().expect("not poisoned").acked.clone();
                let children: BTreeSet<String> = reader
                    .list_children(&format!("{ROOT}/w{k}"))
                    .await?
                    .into_iter()
                    .map(|c| format!("{ROOT}/w{k}/{c}"))
                    .collect();
                let missing: Vec<&String> =
                    acked.iter().filter(|p| !children.contains(*p)).collect();
                assert!(
                    missing.is_empty(),
                    "server {sid} lacks writer {k}'s acknowledged creates {missing:?}"
                );
                let sorted = acked.windows(2).all(|p| p[0] < p[1]);
                assert!(sorted, "writer {k}'s sequence numbers must increase");
                let stat = reader.check_stat(&w.ephemeral).await?;
                let owner = stat.map(|s| s.ephemeral_owner);
                assert_eq!(
                    owner,
                    Some(w.client.session_id().0),
                    "server {sid}: writer {k}'s ephemeral {} must exist, owned by its session",
                    w.ephemeral
                );
            }
            Ok::<_, ZkError>(())
        })?;
    }
    for (k, w) in writers.iter().enumerate() {
        let log = w.log.lock().expect("not poisoned");
        let states = w.states.lock().expect("not poisoned");
        assert!(
            !log.expired,
            "writer {k}'s session expired: {:?}",
            log.errors
        );
        assert!(
            !states.contains(&SessionState::Expired),
            "writer {k} saw its session expire: {states:?}"
        );
        assert_eq!(w.client.state(), SessionState::SyncConnected, "writer {k}");
    }
    let total: usize = acked_counts(&writers).iter().sum();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for w in &writers {
        for (e, n) in &w.log.lock().expect("not poisoned").errors {
            *errors.entry(e.clone()).or_default() += n;
        }
    }
    eprintln!(
        "killed leader {leader}: {on_leader} sessions moved, new leader {new_leader} after \
         {elected_after:.1?}, every writer {ACKS_PER_PHASE} more acks after {resumed_after:.1?}; \
         {total} acknowledged creates checked on servers {survivors:?}; errors retried: \
         {errors:?}"
    );
    drop(admin);
    Ok(())
}

#[test]
fn z8_leader_killed_under_load_loses_no_acknowledged_create_and_no_session_on_apache_zookeeper(
) -> TestResult {
    if !require_zookeeper(
        "z8_leader_killed_under_load_loses_no_acknowledged_create_and_no_session_on_apache_zookeeper",
    )? {
        return Ok(());
    }
    leader_killed_under_load(ServerProgram::ApacheZooKeeper)
}

#[test]
fn ha_zookeeper_z8_leader_killed_under_load_loses_no_acknowledged_create_and_no_session(
) -> TestResult {
    leader_killed_under_load(ServerProgram::HaZookeeper(
        ha_testkit::ha_zookeeper_binary()?
    ))
}
