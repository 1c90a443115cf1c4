//! Benchmark: a three-server ZooKeeper ensemble of Apache ZooKeeper 3.8 and one of our
//! `ha-zookeeper`, side by side, driven from outside through the same `zookeeper-client`
//! sessions: write and read throughput and latency, and each server's memory per znode and
//! per session.
//!
//! ```text
//! cargo build --release -p zab-coordination --bin ha-zookeeper    # for --program ha|both
//! cargo run --release -p ha-examples --example zookeeper_bench -- \
//!     [--program apache|ha|both] [--seconds N] [--warmup N] [--writers N] [--readers N] \
//!     [--znodes N] [--znode-bytes N] [--sessions N] [--rounds N] [--heap-mb N]
//! ```
//!
//! `--program apache` needs only Debian's `zookeeper` package; `ha` and `both` also need the
//! `ha-zookeeper` binary: `HA_ZOOKEEPER_BIN`, or `target/release/ha-zookeeper` (found by
//! `ha_testkit::ha_zookeeper_binary`, next to this example's binary).
//!
//! Shape, the same for both programs (each round starts fresh ensembles, started by
//! `ha_testkit::ZkEnsemble` from the same `zoo.cfg`: tickTime 2000 ms, `maxClientCnxns=0`):
//! - three servers on 127.0.0.1, each with its data directory in its own temporary directory
//!   on the same file system, fsync before acknowledging (Apache ZooKeeper's default
//!   `forceSync=yes`, one fsync per group commit; ours fsyncs every append);
//! - **memory**, on the fresh ensemble: the resident set size (`VmRSS` of `/proc/<pid>/status`)
//!   of each server process before and after creating `--znodes` persistent znodes of
//!   `--znode-bytes` bytes (pipelined creates from 16 sessions, then waiting until every server
//!   counts them in `srvr`), divided by the number of znodes: bytes per znode on each server
//!   (each server holds every znode); then before and after opening `--sessions` sessions
//!   spread over the servers (waiting until each server counts its connections), divided by
//!   the number of sessions: bytes per session on each server (each server tracks every
//!   session; the one it is connected to holds its connection too). The sessions are closed
//!   again before the load. A JVM's RSS moves with its heap's growth and collections, so the
//!   Apache figures are rough; `--znodes` large enough (the default 50,000) makes them useful;
//! - **writes**: `--writers` (default 64) sessions, writer `i` connected to server `i % 3` only
//!   (two thirds of the writes reach followers, which forward them to the leader), each doing
//!   `setData` of 1 KiB on its own znode with one request in flight, for a warm-up (not
//!   counted, default 2 s) and a measured window (`--seconds`, default 10);
//! - **reads**: then `--readers` (default: as many as writers) sessions, reader `i` on server
//!   `i % 3`, each doing `getData` of its writer's 1 KiB znode, one in flight, same windows;
//! - printed: operations per second and p50 / p99 / p999 latency (HDR histogram of
//!   microseconds, three significant digits, merged over the rounds) for each program, memory
//!   per znode and per session (mean over servers and rounds), and the ratios ours / theirs.
//!
//! `--rounds N` alternates the order of the programs from round to round (apache first in odd
//! rounds, ha first in even ones), to spread the drift of a shared machine over both. The load
//! average is printed at the start and the end.
//!
//! Apache ZooKeeper runs on the JVM's server defaults (its optimising compiler and default
//! collector, `ZkEnsembleBuilder::server_jvm`), not on the quick-start options the tests use,
//! with `-Xmx` from `--heap-mb` (default 1024).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use futures::stream::{self, StreamExt, TryStreamExt};
use ha_testkit::{ServerProgram, ZkEnsemble};
use hdrhistogram::Histogram;
use zookeeper_client::{Acls, Client, CreateMode};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const SERVERS: usize = 3;
/// The value written and read by the load phases.
const PAYLOAD: usize = 1024;
/// A request not answered within this is counted as failed (and the session goes on).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Generous bound for each wait on the servers (znodes counted, connections counted).
const WAIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Sessions creating the memory phase's znodes, and requests in flight over all of them.
const CREATORS: usize = 16;
const CREATES_IN_FLIGHT: usize = 512;

/// Apache ZooKeeper and `ha-zookeeper` side by side: throughput, latency and memory of a
/// three-server ensemble, through the same client sessions.
#[derive(Debug, Parser)]
#[command(name = "zookeeper_bench")]
struct Args {
    /// Which programs to measure.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    program: Which,
    /// Length of each measured window (writes, then reads), in seconds.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = positive::<u64>)]
    seconds: u64,
    /// Length of the warm-up before each window (not counted), in seconds.
    #[arg(long, value_name = "N", default_value_t = 2)]
    warmup: u64,
    /// Writer sessions, one request in flight each.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = positive::<usize>)]
    writers: usize,
    /// Reader sessions, one request in flight each (default: as many as writers).
    #[arg(long, value_name = "N", value_parser = positive::<usize>)]
    readers: Option<usize>,
    /// Znodes created for the memory-per-znode figure.
    #[arg(long, value_name = "N", default_value_t = 50_000, value_parser = positive::<usize>)]
    znodes: usize,
    /// Data bytes of each of those znodes.
    #[arg(long, value_name = "N", default_value_t = 100)]
    znode_bytes: usize,
    /// Sessions opened for the memory-per-session figure.
    #[arg(long, value_name = "N", default_value_t = 1_000, value_parser = positive::<usize>)]
    sessions: usize,
    /// Rounds, each on fresh ensembles, alternating the order of the programs.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = positive::<usize>)]
    rounds: usize,
    /// Maximum Java heap of each Apache ZooKeeper server, in MiB.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = positive::<u32>)]
    heap_mb: u32,
}

/// The programs a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    /// Apache ZooKeeper 3.8 only.
    Apache,
    /// `ha-zookeeper` only.
    Ha,
    /// Both, side by side, with the ratios.
    Both,
}

/// One of the two programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Program {
    Apache,
    Ha,
}

impl Program {
    fn name(self) -> &'static str {
        match self {
            Program::Apache => "ZooKeeper 3.8",
            Program::Ha => "ha-zookeeper",
        }
    }
}

/// Parses a whole number of at least 1.
fn positive<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err("expected a whole number of at least 1".to_string()),
    }
}

/// A latency histogram in microseconds, three significant digits, growing to fit any value.
fn latency_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits are supported")
}

/// Latencies and failures of one load phase (writes or reads).
#[derive(Debug)]
struct Load {
    latencies_us: Histogram<u64>,
    errors: u64,
    /// Total measured time (one window per round).
    measured: Duration,
}

impl Load {
    fn new() -> Self {
        Load {
            latencies_us: latency_histogram(),
            errors: 0,
            measured: Duration::ZERO,
        }
    }

    fn merge(&mut self, other: &Load) -> Result<(), BoxError> {
        self.latencies_us.add(&other.latencies_us)?;
        self.errors += other.errors;
        self.measured += other.measured;
        Ok(())
    }

    fn ops_per_sec(&self) -> f64 {
        self.latencies_us.len() as f64 / self.measured.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    fn percentile_ms(&self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        self.latencies_us.value_at_quantile(q) as f64 / 1000.0
    }

    fn line(&self, what: &str) -> String {
        format!(
            "{what:<7} {:>9.0} ops/s   p50 {:>7.2} ms   p99 {:>7.2} ms   p999 {:>7.2} ms   ({} ops, {} failed)",
            self.ops_per_sec(),
            self.percentile_ms(0.50),
            self.percentile_ms(0.99),
            self.percentile_ms(0.999),
            self.latencies_us.len(),
            self.errors
        )
    }
}

/// Everything measured of one program (merged over rounds).
#[derive(Debug)]
struct Figures {
    writes: Load,
    reads: Load,
    /// Bytes of RSS per znode, one sample per server and round.
    per_znode: Vec<f64>,
    /// Bytes of RSS per session, one sample per server and round.
    per_session: Vec<f64>,
}

impl Figures {
    fn new() -> Self {
        Figures {
            writes: Load::new(),
            reads: Load::new(),
            per_znode: Vec::new(),
            per_session: Vec::new(),
        }
    }

    fn print(&self, name: &str) {
        println!("{name}");
        println!("  {}", self.writes.line("setData"));
        println!("  {}", self.reads.line("getData"));
        println!(
            "  memory  {:>9.0} B/znode (servers: {})   {:>9.0} B/session (servers: {})",
            mean(&self.per_znode),
            samples(&self.per_znode),
            mean(&self.per_session),
            samples(&self.per_session)
        );
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

fn samples(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The measured window of a load phase, shared by its sessions.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn after(warmup: Duration, measure: Duration) -> Self {
        let start = Instant::now() + warmup;
        Window {
            start,
            end: start + measure,
        }
    }

    /// Records a request that started at `t0` and ended now.
    fn record(&self, load: &mut Load, t0: Instant, ok: bool) {
        let now = Instant::now();
        if t0 < self.start || now > self.end {
            return;
        }
        if !ok {
            load.errors += 1;
            return;
        }
        let us = u64::try_from(now.duration_since(t0).as_micros()).unwrap_or(u64::MAX);
        if load.latencies_us.record(us).is_err() {
            load.latencies_us.saturating_record(us);
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "n/a".into())
}

/// `VmRSS` of process `pid`, in bytes.
fn rss_bytes(pid: u32) -> Result<u64, BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))?;
    Ok(kb * 1024)
}

/// RSS of every server of the ensemble, by sid.
fn rss_all(zk: &ZkEnsemble) -> Result<BTreeMap<u64, u64>, BoxError> {
    zk.sids()
        .into_iter()
        .map(|sid| {
            let pid = zk
                .pid(sid)
                .ok_or_else(|| format!("server {sid} not running"))?;
            Ok((sid, rss_bytes(pid)?))
        })
        .collect()
}

/// Polls every server's `srvr` until `ok` holds of each, or fails naming `what`.
async fn wait_servers(
    zk: &ZkEnsemble,
    what: &str,
    ok: impl Fn(&ha_testkit::SrvrStats) -> bool,
) -> Result<(), BoxError> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        let mut all = true;
        for sid in zk.sids() {
            all &= zk.srvr(sid).is_ok_and(|s| ok(&s));
        }
        if all {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Client connections each server reports in `srvr`, by sid.
fn connections(zk: &ZkEnsemble) -> Result<BTreeMap<u64, u64>, BoxError> {
    zk.sids()
        .into_iter()
        .map(|sid| Ok((sid, zk.srvr(sid)?.connections)))
        .collect()
}

/// Waits until no server counts more connections than in `baseline` (closed sessions gone).
async fn wait_connections_at_most(
    zk: &ZkEnsemble,
    baseline: &BTreeMap<u64, u64>,
) -> Result<(), BoxError> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        let now = connections(zk)?;
        if now.iter().all(|(sid, n)| *n <= baseline[sid]) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("sessions not closed: {baseline:?} -> {now:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn connect(server: &str) -> Result<Client, BoxError> {
    Ok(Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(server)
        .await?)
}

/// The client addresses of the servers, in sid order.
fn servers(zk: &ZkEnsemble) -> Result<Vec<String>, BoxError> {
    zk.sids()
        .into_iter()
        .map(|sid| Ok(format!("127.0.0.1:{}", zk.client_port(sid)?)))
        .collect()
}

/// Bytes per znode on each server: RSS before and after creating `n` znodes.
async fn memory_per_znode(zk: &ZkEnsemble, args: &Args) -> Result<Vec<f64>, BoxError> {
    let servers = servers(zk)?;
    let idle = connections(zk)?;
    let mut creators = Vec::new();
    for i in 0..CREATORS {
        creators.push(connect(&servers[i % SERVERS]).await?);
    }
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    creators[0].create("/mem", b"", &opts).await?;
    // The server the creator is on has applied it; wait for the others too.
    let base: u64 = zk.srvr(zk.sids()[0])?.node_count;
    wait_servers(zk, "/mem on every server", |s| s.node_count >= base).await?;
    let before = rss_all(zk)?;
    let value = vec![b'z'; args.znode_bytes];
    stream::iter(0..args.znodes)
        .map(|i| {
            let c = &creators[i % CREATORS];
            let path = format!("/mem/z{i:08}");
            let value = &value;
            let opts = &opts;
            async move { c.create(&path, value, opts).await.map(|_| ()) }
        })
        .buffer_unordered(CREATES_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    let want = base + args.znodes as u64;
    wait_servers(zk, "every znode on every server", |s| s.node_count >= want).await?;
    let after = rss_all(zk)?;
    drop(creators);
    wait_connections_at_most(zk, &idle).await?;
    Ok(before
        .iter()
        .map(|(sid, b)| (after[sid] as f64 - *b as f64) / args.znodes as f64)
        .collect())
}

/// Bytes per session on each server: RSS before and after opening `m` sessions spread over
/// the servers. The sessions are closed before it returns.
async fn memory_per_session(zk: &ZkEnsemble, args: &Args) -> Result<Vec<f64>, BoxError> {
    let servers = servers(zk)?;
    let sids = zk.sids();
    let start = connections(zk)?;
    let before = rss_all(zk)?;
    let sessions: Vec<Client> = stream::iter(0..args.sessions)
        .map(|i| connect(&servers[i % SERVERS]))
        .buffer_unordered(64)
        .try_collect()
        .await?;
    let share = |sid_index: usize| {
        (0..args.sessions)
            .filter(|i| i % SERVERS == sid_index)
            .count()
    };
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        let now = connections(zk)?;
        let all = sids
            .iter()
            .enumerate()
            .all(|(i, sid)| now[sid] >= start[sid] + share(i) as u64);
        if all {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!("connections not counted: {start:?} -> {now:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = rss_all(zk)?;
    // Dropping a client closes its session; the load phases run without them.
    drop(sessions);
    wait_connections_at_most(zk, &start).await?;
    Ok(before
        .iter()
        .map(|(sid, b)| (after[sid] as f64 - *b as f64) / args.sessions as f64)
        .collect())
}

/// `n` sessions, session `i` on server `i % 3`, each running `op` with one request in flight
/// through a warm-up and the measured window that follows (both start once every session is
/// connected).
async fn load<F, Fut>(
    servers: &[String],
    n: usize,
    warmup: Duration,
    measure: Duration,
    op: F,
) -> Result<Load, BoxError>
where
    F: Fn(Arc<Client>, usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let mut clients = Vec::new();
    for i in 0..n {
        clients.push(Arc::new(connect(&servers[i % SERVERS]).await?));
    }
    let window = Window::after(warmup, measure);
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut l = Load::new();
                loop {
                    let t0 = Instant::now();
                    if t0 >= window.end {
                        break;
                    }
                    let ok = tokio::time::timeout(REQUEST_TIMEOUT, op(c.clone(), i))
                        .await
                        .unwrap_or(false);
                    window.record(&mut l, t0, ok);
                }
                l
            })
        })
        .collect();
    let mut total = Load::new();
    for t in tasks {
        total.merge(&t.await?)?;
    }
    total.measured = measure;
    Ok(total)
}

/// One round of one program on a fresh ensemble.
async fn round(program: Program, args: &Args, figures: &mut Figures) -> Result<(), BoxError> {
    let server_program = match program {
        Program::Apache => ServerProgram::ApacheZooKeeper,
        Program::Ha => ServerProgram::HaZookeeper(ha_zookeeper()?),
    };
    let heap = args.heap_mb;
    let zk = tokio::task::spawn_blocking(move || {
        ZkEnsemble::builder()
            .servers(SERVERS)
            .program(server_program)
            .heap_mb(heap)
            .server_jvm(true)
            .config("maxClientCnxns", "0")
            .start()
    })
    .await??;
    let per_znode = memory_per_znode(&zk, args).await?;
    let per_session = memory_per_session(&zk, args).await?;
    println!(
        "  {}: {} B/znode, {} B/session (per server)",
        program.name(),
        samples(&per_znode),
        samples(&per_session)
    );
    figures.per_znode.extend(per_znode);
    figures.per_session.extend(per_session);

    let servers = servers(&zk)?;
    let writers = args.writers;
    let readers = args.readers.unwrap_or(writers);
    let value = Arc::new(vec![7u8; PAYLOAD]);
    {
        let setup = connect(&servers[0]).await?;
        let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
        setup.create("/bench", b"", &opts).await?;
        for w in 0..writers.max(readers) {
            setup.create(&format!("/bench/w{w}"), &value, &opts).await?;
        }
    }
    let measure = Duration::from_secs(args.seconds);
    let warmup = Duration::from_secs(args.warmup);
    let v = value.clone();
    let writes = load(&servers, writers, warmup, measure, move |c, i| {
        let v = v.clone();
        async move { c.set_data(&format!("/bench/w{i}"), &v, None).await.is_ok() }
    })
    .await?;
    println!("  {}: {}", program.name(), writes.line("setData"));
    let reads = load(&servers, readers, warmup, measure, |c, i| async move {
        c.get_data(&format!("/bench/w{i}"))
            .await
            .is_ok_and(|(data, _)| data.len() == PAYLOAD)
    })
    .await?;
    println!("  {}: {}", program.name(), reads.line("getData"));
    figures.writes.merge(&writes)?;
    figures.reads.merge(&reads)?;
    tokio::task::spawn_blocking(move || drop(zk)).await?;
    Ok(())
}

fn ha_zookeeper() -> Result<PathBuf, BoxError> {
    Ok(ha_testkit::ha_zookeeper_binary()?)
}

fn main() -> Result<(), BoxError> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let args = Args::parse();
    let programs: Vec<Program> = match args.program {
        Which::Apache => vec![Program::Apache],
        Which::Ha => vec![Program::Ha],
        Which::Both => vec![Program::Apache, Program::Ha],
    };
    // Check up front that what the run needs is there, rather than after a first round.
    if programs.contains(&Program::Ha) {
        let bin = ha_zookeeper()?;
        println!("ha-zookeeper: {}", bin.display());
    }
    if programs.contains(&Program::Apache) {
        ha_testkit::Installation::locate()?;
    }
    // Four workers, more than the two cores this was measured on: the client sessions run
    // here, beside the servers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?;
    println!("load average at start: {}", loadavg());
    println!(
        "shape: {SERVERS} servers on loopback, fsync before ack; memory: {} znodes of {} bytes, \
         {} sessions; load: {} writers (setData {PAYLOAD} B), then {} readers (getData), \
         session i on server i % {SERVERS}, one request in flight each; warm-up {} s, measured \
         {} s; {} round(s)",
        args.znodes,
        args.znode_bytes,
        args.sessions,
        args.writers,
        args.readers.unwrap_or(args.writers),
        args.warmup,
        args.seconds,
        args.rounds
    );
    let mut figures: BTreeMap<Program, Figures> =
        programs.iter().map(|&p| (p, Figures::new())).collect();
    for r in 0..args.rounds {
        let mut order = programs.clone();
        if r % 2 == 1 {
            order.reverse();
        }
        println!("round {}:", r + 1);
        for p in order {
            let f = figures.get_mut(&p).expect("one entry per program");
            rt.block_on(round(p, &args, f))?;
        }
    }
    println!();
    for (p, f) in &figures {
        f.print(p.name());
    }
    if let (Some(theirs), Some(ours)) = (figures.get(&Program::Apache), figures.get(&Program::Ha)) {
        println!("ratio ha-zookeeper / ZooKeeper 3.8");
        for (what, o, t) in [
            ("setData", &ours.writes, &theirs.writes),
            ("getData", &ours.reads, &theirs.reads),
        ] {
            println!(
                "  {what:<7} throughput {:.2}   p50 {:.2}   p99 {:.2}   p999 {:.2}",
                o.ops_per_sec() / t.ops_per_sec(),
                o.percentile_ms(0.50) / t.percentile_ms(0.50),
                o.percentile_ms(0.99) / t.percentile_ms(0.99),
                o.percentile_ms(0.999) / t.percentile_ms(0.999)
            );
        }
        println!(
            "  memory  per znode {:.2}   per session {:.2}",
            mean(&ours.per_znode) / mean(&theirs.per_znode),
            mean(&ours.per_session) / mean(&theirs.per_session)
        );
    }
    println!("load average at end: {}", loadavg());
    Ok(())
}
