//! Benchmark: write throughput and latency of a 3-server `zab-core` ensemble, side by side with
//! a real 3-server ZooKeeper 3.8 ensemble, in the same run, on loopback.
//!
//! ```text
//! cargo run --release -p zab-core --example zab_bench [-- --secs N --warmup N --ours-only]
//! ```
//!
//! Shape, the same for both systems:
//! - three servers on 127.0.0.1, each with its transaction log in its own temporary directory
//!   on the same file system, fsync before acknowledging (ours: [`FileTxnLog`] with
//!   [`FsyncPolicy::EveryAppend`], one fsync per appended batch; ZooKeeper: its default
//!   `forceSync=yes`, one fsync per group commit);
//! - 64 concurrent writers, each with one write in flight: a 1 KiB write, then wait until it
//!   is committed and applied by the server it was submitted to, then the next one;
//! - writer `i` always submits to server `i % 3` (round-robin over the servers, so two thirds
//!   of the writes go to followers, which forward them to the leader). ZooKeeper: writer `i`
//!   has its own session on server `i % 3` and does `set_data` of 1 KiB on its own znode;
//!   ours: writer `i` hands the 1 KiB payload (tagged with a request id) to
//!   [`PeerHandle::propose`] of peer `i % 3`, whose state machine wakes the writer when it
//!   applies that request id (as a ZooKeeper server answers once it applied the write);
//! - a warm-up (default 2 s) whose writes are not counted, then a measured window (default
//!   10 s): committed writes per second and the p50 / p99 latency of the writes completed in
//!   the window (from an HDR histogram of microseconds, three significant digits).
//!
//! The target is at least twice ZooKeeper's throughput at a p99 no worse than ZooKeeper's. The
//! machine may be shared: the load average is printed at the start and the end.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use ha_testkit::ZkEnsemble;
use hdrhistogram::Histogram;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, QuorumPeer};
use zab_core::state_machine::{SnapshotError, StateMachine};
use zab_core::store::FileElectionStore;
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport};
use zab_core::txnlog::{FileTxnLog, FsyncPolicy, Snapshot, Txn};
use zab_core::{ElectionConfig, LearnerType, QuorumMaj, ServerEntry, ServerId, Zxid};

const SERVERS: usize = 3;
const WRITERS: usize = 64;
const PAYLOAD: usize = 1024;
/// A write not answered within this is counted as failed (and the writer goes on).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Write throughput and latency of a 3-server `zab-core` ensemble beside a real 3-server
/// ZooKeeper 3.8 ensemble, on loopback, fsync before acknowledging.
#[derive(Debug, Parser)]
#[command(name = "zab_bench")]
struct Args {
    /// Length of the measured window, in seconds.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = positive::<u64>)]
    secs: u64,
    /// Length of the warm-up before it (writes not counted), in seconds.
    #[arg(long, value_name = "N", default_value_t = 2)]
    warmup: u64,
    /// Only the `zab-core` ensemble: do not start ZooKeeper.
    #[arg(long)]
    ours_only: bool,
}

/// Parses a whole number of at least 1.
fn positive<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err("expected a whole number of at least 1".to_string()),
    }
}

struct Options {
    warmup: Duration,
    measure: Duration,
    ours_only: bool,
}

fn options() -> Options {
    let args = Args::parse();
    Options {
        warmup: Duration::from_secs(args.warmup),
        measure: Duration::from_secs(args.secs),
        ours_only: args.ours_only,
    }
}

/// A latency histogram in microseconds, three significant digits, growing to fit any value.
fn latency_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits are supported")
}

/// What one system achieved in the measured window.
#[derive(Debug)]
struct Figures {
    /// Latency of every write completed in the window, in microseconds.
    latencies_us: Histogram<u64>,
    /// Writes that failed or timed out in the window.
    errors: u64,
    window: Duration,
}

impl Figures {
    fn new(window: Duration) -> Self {
        Self {
            latencies_us: latency_histogram(),
            errors: 0,
            window,
        }
    }

    fn throughput(&self) -> f64 {
        self.latencies_us.len() as f64 / self.window.as_secs_f64()
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        self.latencies_us.value_at_quantile(p) as f64 / 1000.0
    }

    fn merge(&mut self, other: WriterFigures) -> Result<(), BoxError> {
        self.latencies_us.add(other.latencies_us)?;
        self.errors += other.errors;
        Ok(())
    }

    fn print(&self, name: &str) {
        println!(
            "{name:<14} {:>10.0} writes/s   p50 {:>7.2} ms   p99 {:>7.2} ms   ({} writes, {} failed)",
            self.throughput(),
            self.percentile_ms(0.50),
            self.percentile_ms(0.99),
            self.latencies_us.len(),
            self.errors
        );
    }
}

#[derive(Debug)]
struct WriterFigures {
    latencies_us: Histogram<u64>,
    errors: u64,
}

impl Default for WriterFigures {
    fn default() -> Self {
        Self {
            latencies_us: latency_histogram(),
            errors: 0,
        }
    }
}

/// The measured window, shared by every writer.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn after_warmup(o: &Options) -> Self {
        let start = Instant::now() + o.warmup;
        Self {
            start,
            end: start + o.measure,
        }
    }

    /// Records a write that started at `t0` and ended now.
    fn record(&self, f: &mut WriterFigures, t0: Instant, ok: bool) {
        let now = Instant::now();
        if t0 < self.start || now > self.end {
            return;
        }
        if ok {
            let us = u64::try_from(now.duration_since(t0).as_micros()).unwrap_or(u64::MAX);
            // The histogram grows to fit; only a value beyond what a resize can hold is
            // clamped to the largest one it holds.
            if f.latencies_us.record(us).is_err() {
                f.latencies_us.saturating_record(us);
            }
        } else {
            f.errors += 1;
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "n/a".into())
}

fn main() -> Result<(), BoxError> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let o = options();
    // Four workers, more than the two cores this was measured on: the ZooKeeper clients
    // (which run here too) do better with them than with two, while our figures are about the
    // same either way (each peer's fsyncs run on tokio's blocking threads, as ZooKeeper's sync
    // thread, so they do not hold a worker).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?;
    println!("load average at start: {}", loadavg());
    println!(
        "shape: {SERVERS} servers on loopback, {WRITERS} writers with one {PAYLOAD}-byte write in \
         flight each, writer i submits to server i % {SERVERS} (followers forward to the leader), \
         fsync before ack; warm-up {} s, measured {} s",
        o.warmup.as_secs(),
        o.measure.as_secs()
    );
    let ours = rt.block_on(ours_run(&o))?;
    ours.print("zab-core");
    let zk = if o.ours_only {
        None
    } else if !ha_testkit::zookeeper_available() {
        println!("ZooKeeper is not installed: zab-core figures only");
        None
    } else {
        let zk = rt.block_on(zk_run(&o))?;
        zk.print("ZooKeeper 3.8");
        Some(zk)
    };
    if let Some(zk) = zk {
        let ratio = ours.throughput() / zk.throughput();
        let (op99, zp99) = (ours.percentile_ms(0.99), zk.percentile_ms(0.99));
        let met = ratio >= 2.0 && op99 <= zp99;
        println!(
            "throughput ratio zab-core / ZooKeeper: {ratio:.2}  (p99 {op99:.2} ms vs {zp99:.2} ms)"
        );
        println!(
            "target: >= 2x ZooKeeper's throughput at no worse p99: {}",
            if met { "met" } else { "not met" }
        );
    }
    println!("load average at end: {}", loadavg());
    Ok(())
}

// ---------------------------------------------------------------- zab-core

/// Writers waiting for their request id to be applied on one server.
type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>>;

/// The benchmark's state machine: one 1 KiB value per writer (as the znodes of the ZooKeeper
/// side), and the writers waiting on this server to be told their write was applied.
struct BenchStateMachine {
    last: Zxid,
    values: HashMap<u32, Bytes>,
    waiters: Waiters,
}

/// Payload: `u64 request id` (writer << 32 | sequence), then the value.
fn request_id(data: &[u8]) -> Option<u64> {
    let b: [u8; 8] = data.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

impl StateMachine for BenchStateMachine {
    fn apply(&mut self, txn: &Txn) {
        self.last = txn.zxid;
        let Some(id) = request_id(&txn.data) else {
            return;
        };
        self.values.insert((id >> 32) as u32, txn.data.slice(8..));
        let waiter = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(w) = waiter {
            let _ = w.send(());
        }
    }

    fn last_applied(&self) -> Zxid {
        self.last
    }

    fn take_snapshot(&self) -> Snapshot {
        let mut out = BytesMut::new();
        for (w, v) in &self.values {
            out.put_u32(*w);
            out.put_u32(v.len() as u32);
            out.put_slice(v);
        }
        Snapshot {
            zxid: self.last,
            data: out.freeze(),
        }
    }

    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let bad = || SnapshotError {
            zxid: snapshot.zxid,
            reason: "truncated".into(),
        };
        let mut values = HashMap::new();
        let mut rest = snapshot.data.clone();
        while !rest.is_empty() {
            let head = rest.get(..8).ok_or_else(bad)?;
            let w = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]) as usize;
            if rest.len() < 8 + len {
                return Err(bad());
            }
            values.insert(w, rest.slice(8..8 + len));
            rest = rest.slice(8 + len..);
        }
        self.values = values;
        self.last = snapshot.zxid;
        Ok(())
    }

    fn reset(&mut self) {
        self.values.clear();
        self.last = Zxid::ZERO;
    }
}

async fn start_peers(dir: &Path) -> Result<(Vec<PeerHandle>, Vec<Waiters>), BoxError> {
    let mut listeners = Vec::new();
    let mut addrs = HashMap::new();
    for sid in 1..=SERVERS as i64 {
        let e = TcpListener::bind("127.0.0.1:0").await?;
        let q = TcpListener::bind("127.0.0.1:0").await?;
        addrs.insert(
            ServerId(sid),
            PeerAddrs {
                election: e.local_addr()?,
                quorum: q.local_addr()?,
            },
        );
        listeners.push((sid, e, q));
    }
    let members = addrs
        .iter()
        .map(|(sid, a)| {
            let addr = format!("127.0.0.1:{}:{}", a.quorum.port(), a.election.port());
            (*sid, ServerEntry::participant(addr))
        })
        .collect();
    let qv = Arc::new(QuorumMaj::new(members, 0));
    let mut handles = Vec::new();
    let mut waiters = Vec::new();
    for (sid, e, q) in listeners {
        let me = ServerId(sid);
        let t = TcpTransport::start(TcpConfig::new(me, addrs[&me].election, addrs.clone()), e, q)?;
        let pc = PeerConfig::new(me, LearnerType::Participant, qv.clone())
            .with_election(ElectionConfig::default())
            .with_timing(Timing::default())
            .with_connect_grace(Duration::from_millis(100));
        let data = dir.join(format!("server-{sid}"));
        let store = FileElectionStore::create_fresh(data.join("epochs"))?;
        let log = FileTxnLog::open(data.join("log"), FsyncPolicy::EveryAppend)?;
        let w: Waiters = Arc::default();
        let sm = BenchStateMachine {
            last: Zxid::ZERO,
            values: HashMap::new(),
            waiters: w.clone(),
        };
        let peer = QuorumPeer::new(pc, t, store)
            .await?
            .with_replication(Box::new(log), Box::new(sm))?;
        handles.push(peer.spawn());
        waiters.push(w);
    }
    Ok((handles, waiters))
}

/// Waits until one peer leads an established epoch and every other one follows it in that
/// epoch (a follower forwards writes only once established).
async fn wait_established(handles: &[PeerHandle]) -> Result<(), BoxError> {
    let t0 = Instant::now();
    loop {
        let st: Vec<_> = handles.iter().map(PeerHandle::current).collect();
        if let Some(l) = st.iter().find(|s| s.is_established_leader()) {
            if st
                .iter()
                .all(|s| s.leader == l.leader && s.epoch == l.epoch)
            {
                return Ok(());
            }
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(format!("no established ensemble: {st:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn ours_run(o: &Options) -> Result<Figures, BoxError> {
    let dir = tempfile::Builder::new().prefix("zab-bench-").tempdir()?;
    let (handles, waiters) = start_peers(dir.path()).await?;
    wait_established(&handles).await?;
    let handles = Arc::new(handles);
    let window = Window::after_warmup(o);
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let handles = handles.clone();
        let waiters = waiters[w % SERVERS].clone();
        tasks.push(tokio::spawn(async move {
            let peer = &handles[w % SERVERS];
            let mut f = WriterFigures::default();
            let mut value = vec![0u8; PAYLOAD];
            for seq in 0u64.. {
                let t0 = Instant::now();
                if t0 >= window.end {
                    break;
                }
                let id = (w as u64) << 32 | (seq & 0xffff_ffff);
                value[..8].copy_from_slice(&seq.to_be_bytes());
                let mut data = BytesMut::with_capacity(8 + PAYLOAD);
                data.put_u64(id);
                data.put_slice(&value);
                let (tx, rx) = oneshot::channel();
                waiters
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, tx);
                let ok = peer.propose(data.freeze())
                    && matches!(tokio::time::timeout(WRITE_TIMEOUT, rx).await, Ok(Ok(())));
                if !ok {
                    waiters
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&id);
                    // A dropped write (no established leader for a moment): do not spin.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                window.record(&mut f, t0, ok);
            }
            f
        }));
    }
    let mut figures = Figures::new(o.measure);
    for t in tasks {
        figures.merge(t.await?)?;
    }
    for h in handles.iter() {
        h.kill();
    }
    Ok(figures)
}

// ---------------------------------------------------------------- ZooKeeper

async fn zk_run(o: &Options) -> Result<Figures, BoxError> {
    let ensemble =
        tokio::task::spawn_blocking(|| ZkEnsemble::builder().servers(SERVERS).heap_mb(512).start())
            .await??;
    let mut clients = Vec::new();
    for sid in ensemble.sids() {
        clients.push(format!("127.0.0.1:{}", ensemble.client_port(sid)?));
    }
    let value = vec![7u8; PAYLOAD];
    let mut sessions = Vec::new();
    for w in 0..WRITERS {
        let c = zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .connect(&clients[w % SERVERS])
            .await?;
        let path = format!("/bench-w{w}");
        let opts = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        c.create(&path, &value, &opts).await?;
        sessions.push((c, path));
    }
    let window = Window::after_warmup(o);
    let mut tasks = Vec::new();
    for (c, path) in sessions {
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut f = WriterFigures::default();
            loop {
                let t0 = Instant::now();
                if t0 >= window.end {
                    break;
                }
                let r = tokio::time::timeout(WRITE_TIMEOUT, c.set_data(&path, &value, None)).await;
                window.record(&mut f, t0, matches!(r, Ok(Ok(_))));
            }
            f
        }));
    }
    let mut figures = Figures::new(o.measure);
    for t in tasks {
        figures.merge(t.await?)?;
    }
    drop(ensemble);
    Ok(figures)
}
