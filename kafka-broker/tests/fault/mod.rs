//! The real-process fault run: three ZooKeeper 3.8 servers and three `ha-broker` processes,
//! each in its own network namespace (an [`ha_testkit::netns::Lab`]), an idempotent acks=all
//! producer for the whole run, and a seeded nemesis injecting one fault at a time. After it
//! heals, the run checks that every acknowledged record is read back (by `kcat`) at the offset
//! it was acknowledged with and none twice, that every partition gets a leader and a full ISR
//! within 60 s, and that no broker exited on its own.
//!
//! Used by the `fault_netns` test (one seed, about two minutes) and the `fault_netns` example
//! (any seed and duration).
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ha_testkit::netns::{Host, Lab};
use ha_testkit::ZkEnsemble;
use kafka_broker::KafkaConnection;
use kafka_wire::messages::metadata_request::MetadataRequestTopic;
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{InitProducerIdRequest, MetadataRequest, ProduceRequest};
use kafka_wire::records::RecordBatchBuilder;
use kafka_wire::{RequestBody, ResponseBody};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The topic the run produces to.
pub const TOPIC: &str = "faults";
/// Its partitions.
pub const PARTITIONS: i32 = 3;
/// The brokers' ZooKeeper session timeout.
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(6_000);
/// How long every partition has, after healing, to get a leader and a full ISR.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(60);

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Seeds the nemesis.
    pub seed: u64,
    /// How long faults are injected.
    pub duration: Duration,
    /// The `ha-broker` binary.
    pub broker_bin: PathBuf,
    /// The `ha-admin` binary.
    pub admin_bin: PathBuf,
    /// A rolling restart instead of the nemesis: each broker in turn is stopped with SIGTERM
    /// (controlled shutdown), restarted, and given its full ISRs back before the next.
    pub rolling_restart: bool,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// Each fault with the time it started, relative to the run's start.
    pub timeline: Vec<(Duration, String)>,
    /// Records acknowledged to the producer.
    pub acknowledged: usize,
    /// Acknowledged records missing at their offset.
    pub lost: Vec<String>,
    /// Values read back more than once.
    pub duplicated: Vec<String>,
    /// Produce errors by error code (or `io` for a lost connection).
    pub produce_errors: BTreeMap<String, usize>,
    /// The longest time some partition had no leader in the metadata the producer saw.
    pub longest_leaderless: Duration,
    /// The longest time between two acknowledgements of one partition: how long a partition
    /// could not take writes, whatever the metadata said.
    pub longest_without_ack: Duration,
    /// From healing until every partition had a leader and a full ISR.
    pub time_to_full_isr: Option<Duration>,
    /// Brokers whose process exited without the nemesis stopping it.
    pub exited_on_their_own: Vec<String>,
    /// Faults the nemesis could not inject on this machine (e.g. latency without netem).
    pub unavailable: Vec<String>,
}

impl RunReport {
    /// True when nothing was lost or duplicated, recovery was in time and no broker died.
    pub fn passed(&self) -> bool {
        self.lost.is_empty()
            && self.duplicated.is_empty()
            && self.time_to_full_isr.is_some()
            && self.exited_on_their_own.is_empty()
            && self.acknowledged > 0
    }

    /// A human-readable summary.
    pub fn render(&self) -> String {
        let mut s = format!("seed {}\ntimeline:\n", self.seed);
        for (t, what) in &self.timeline {
            s.push_str(&format!("  {:>7.1}s  {what}\n", t.as_secs_f64()));
        }
        s.push_str(&format!(
            "acknowledged {}, lost {}, duplicated {}\nlongest window with a leaderless partition: {:.1}s\nlongest window without an acknowledgement on some partition: {:.1}s\ntime to full ISR after healing: {}\nproduce errors: {:?}\nbrokers that exited on their own: {:?}\nfaults unavailable here: {:?}\n",
            self.acknowledged,
            self.lost.len(),
            self.duplicated.len(),
            self.longest_leaderless.as_secs_f64(),
            self.longest_without_ack.as_secs_f64(),
            self.time_to_full_isr
                .map_or("not reached".to_owned(), |d| format!("{:.1}s", d.as_secs_f64())),
            self.produce_errors,
            self.exited_on_their_own,
            self.unavailable,
        ));
        for l in self.lost.iter().take(10) {
            s.push_str(&format!("  lost: {l}\n"));
        }
        for d in self.duplicated.iter().take(10) {
            s.push_str(&format!("  duplicated: {d}\n"));
        }
        s
    }
}

/// One broker process of the run.
struct Broker {
    id: i32,
    host: Host,
    dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Broker {
    fn addr(&self) -> SocketAddr {
        format!("{}:9092", self.host.ip)
            .parse()
            .expect("a lab address is an IPv4 address")
    }

    fn start(&mut self, lab: &Lab, cfg: &RunConfig, zk: &str) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = lab
            .command(&self.host, &cfg.broker_bin)
            .args([
                "--id",
                &self.id.to_string(),
                "--listen",
                &format!("{}:9092", self.host.ip),
                "--data-dir",
                &self.dir.display().to_string(),
                "--zookeeper",
                zk,
                "--zookeeper-session-timeout-ms",
                &SESSION_TIMEOUT.as_millis().to_string(),
                "--replica-lag-time-max-ms",
                "10000",
                "--min-insync-replicas",
                "2",
                "--auto-create-topics",
                "false",
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn broker {}: {e}", self.id))?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, sig: &str) -> bool {
        self.pid().is_some_and(|pid| {
            Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        })
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then up to `timeout` for the exit; SIGKILL after it.
    fn terminate(&mut self, timeout: Duration) -> Result<(), String> {
        self.signal("-TERM");
        let deadline = Instant::now() + timeout;
        while let Some(c) = self.child.as_mut() {
            match c.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return if status.success() {
                        Ok(())
                    } else {
                        Err(format!(
                            "broker {} exited with {status} on SIGTERM",
                            self.id
                        ))
                    };
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    self.kill();
                    return Err(format!(
                        "broker {} did not exit within {timeout:?} of SIGTERM",
                        self.id
                    ));
                }
            }
        }
        Ok(())
    }

    /// Some(status) when the process has exited (and forgets it).
    fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status.to_string())
            }
            _ => None,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.kill();
    }
}

/// What the producer shares with the rest of the run.
#[derive(Default)]
struct Shared {
    /// value → (partition, offset) of every acknowledged record.
    acked: Mutex<HashMap<String, (i32, i64)>>,
    errors: Mutex<BTreeMap<String, usize>>,
    /// Per partition: since when it has had no leader (None: it has one).
    leaderless_since: Mutex<HashMap<i32, Instant>>,
    longest_leaderless: Mutex<Duration>,
    longest_without_ack: Mutex<Duration>,
    stop: AtomicBool,
}

impl Shared {
    fn count_error(&self, what: String) {
        *self
            .errors
            .lock()
            .expect("not poisoned")
            .entry(what)
            .or_default() += 1;
    }

    fn observe_leaders(&self, leaders: &HashMap<i32, i32>, now: Instant) {
        let mut since = self.leaderless_since.lock().expect("not poisoned");
        let mut longest = self.longest_leaderless.lock().expect("not poisoned");
        for p in 0..PARTITIONS {
            match leaders.get(&p) {
                Some(&l) if l >= 0 => {
                    if let Some(t) = since.remove(&p) {
                        *longest = (*longest).max(now - t);
                    }
                }
                _ => {
                    let t = *since.entry(p).or_insert(now);
                    *longest = (*longest).max(now - t);
                }
            }
        }
    }
}

/// Asks any reachable broker for the topic's metadata: partition → (leader, isr).
async fn metadata(bootstrap: &[SocketAddr]) -> Option<HashMap<i32, (i32, Vec<i32>)>> {
    for addr in bootstrap {
        let Ok(Ok(mut c)) = tokio::time::timeout(
            Duration::from_secs(2),
            KafkaConnection::connect(*addr, "fault-run"),
        )
        .await
        else {
            continue;
        };
        let request = RequestBody::Metadata(MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(TOPIC.into()),
                ..Default::default()
            }]),
            allow_auto_topic_creation: false,
            ..Default::default()
        });
        let Ok(Ok(ResponseBody::Metadata(r))) =
            tokio::time::timeout(Duration::from_secs(3), c.send(9, &request)).await
        else {
            continue;
        };
        let mut out = HashMap::new();
        for t in &r.topics {
            if t.name.as_deref() != Some(TOPIC) || t.error_code != 0 {
                continue;
            }
            for p in &t.partitions {
                out.insert(
                    p.partition_index,
                    (p.leader_id, p.isr_nodes.iter().copied().collect()),
                );
            }
        }
        if !out.is_empty() {
            return Some(out);
        }
    }
    None
}

/// Gets a producer id from any broker, trying for up to a minute.
async fn init_producer_id(bootstrap: &[SocketAddr], shared: &Shared) -> Result<(i64, i16), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        for addr in bootstrap {
            let Ok(Ok(mut c)) = tokio::time::timeout(
                Duration::from_secs(2),
                KafkaConnection::connect(*addr, "fault-run"),
            )
            .await
            else {
                continue;
            };
            let request = RequestBody::InitProducerId(InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            });
            match tokio::time::timeout(Duration::from_secs(5), c.send(1, &request)).await {
                Ok(Ok(ResponseBody::InitProducerId(r))) if r.error_code == 0 => {
                    return Ok((r.producer_id, r.producer_epoch));
                }
                Ok(Ok(ResponseBody::InitProducerId(r))) => {
                    last = format!("error code {}", r.error_code);
                    shared.count_error(format!("init_producer_id {}", r.error_code))
                }
                other => {
                    last = format!("{other:?}");
                    shared.count_error("init_producer_id io".to_owned())
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "no producer id within a minute; last answer: {last}"
    ))
}

/// One partition's producer: one single-record batch in flight, retried with the same
/// sequence number until acknowledged (as an idempotent librdkafka producer retries), so a
/// retry of a batch that was written is answered with its original offset, never appended
/// again.
async fn produce_partition(
    partition: i32,
    bootstrap: Vec<SocketAddr>,
    addresses: Arc<Mutex<HashMap<i32, SocketAddr>>>,
    shared: Arc<Shared>,
    producer: (i64, i16),
) {
    let mut seq: i32 = 0;
    let mut conn: Option<(i32, KafkaConnection)> = None;
    let mut last_ack = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        let value = format!("p{partition}-{seq}");
        let leader = match metadata(&bootstrap).await {
            Some(m) => {
                let leaders = m.iter().map(|(p, (l, _))| (*p, *l)).collect();
                shared.observe_leaders(&leaders, Instant::now());
                m.get(&partition).map_or(-1, |(l, _)| *l)
            }
            None => {
                // No broker answered Metadata in time (one stopping, the others slow).
                shared.count_error("metadata unavailable".to_owned());
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if leader < 0 {
            shared.count_error("no leader".to_owned());
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let Some(addr) = addresses
            .lock()
            .expect("not poisoned")
            .get(&leader)
            .copied()
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if conn.as_ref().is_none_or(|(l, _)| *l != leader) {
            conn = match tokio::time::timeout(
                Duration::from_secs(2),
                KafkaConnection::connect(addr, "fault-run"),
            )
            .await
            {
                Ok(Ok(c)) => Some((leader, c)),
                _ => {
                    shared.count_error("connect".to_owned());
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
        }
        let Some((_, c)) = conn.as_mut() else {
            continue;
        };
        // Several tries on this leader before the metadata is read again.
        let mut b = RecordBatchBuilder::new(0).producer(producer.0, producer.1, seq);
        b.append(0, None, Some(value.as_bytes()), &[])
            .expect("one small record appends");
        let request = RequestBody::Produce(ProduceRequest {
            acks: -1,
            timeout_ms: 5_000,
            topic_data: vec![TopicProduceData {
                name: TOPIC.into(),
                partition_data: vec![PartitionProduceData {
                    index: partition,
                    records: Some(b.build().expect("the batch builds")),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        match tokio::time::timeout(Duration::from_secs(8), c.send(9, &request)).await {
            Ok(Ok(ResponseBody::Produce(r))) => {
                let answer = r
                    .responses
                    .first()
                    .and_then(|t| t.partition_responses.first());
                match answer {
                    Some(p) if p.error_code == 0 => {
                        shared
                            .acked
                            .lock()
                            .expect("not poisoned")
                            .insert(value, (partition, p.base_offset));
                        seq += 1;
                        let mut longest = shared.longest_without_ack.lock().expect("not poisoned");
                        *longest = (*longest).max(last_ack.elapsed());
                        last_ack = Instant::now();
                    }
                    Some(p) => {
                        shared.count_error(format!("produce {}", p.error_code));
                        conn = None;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    None => {
                        shared.count_error("produce: empty answer".to_owned());
                        conn = None;
                    }
                }
            }
            Ok(Ok(_)) => {
                shared.count_error("produce: another answer".to_owned());
                conn = None;
            }
            Ok(Err(_)) => {
                // The connection broke (a broker stopping or cut off): a transport error,
                // which an idempotent client retries, as librdkafka does.
                shared.count_error("produce io".to_owned());
                conn = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => {
                shared.count_error("produce timeout".to_owned());
                conn = None;
            }
        }
    }
}

/// Reads partition `p` from the beginning with `kcat`: offset → value.
fn read_back(bootstrap: &str, p: i32) -> Result<Vec<(i64, String)>, String> {
    let out = Command::new("kcat")
        .args([
            "-C",
            "-b",
            bootstrap,
            "-t",
            TOPIC,
            "-p",
            &p.to_string(),
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %s\\n",
            "-X",
            "topic.metadata.refresh.interval.ms=1000",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run kcat: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kcat -C partition {p}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut records = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((o, v)) = line.split_once(' ') {
            if let Ok(o) = o.parse() {
                records.push((o, v.to_owned()));
            }
        }
    }
    Ok(records)
}

fn tail(path: &Path, n: usize) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One fault of the nemesis.
#[derive(Debug, Clone, Copy)]
enum Fault {
    KillBroker,
    PauseBroker,
    TerminateBroker,
    IsolateBroker,
    IsolateZkLeader,
    KillZkLeader,
    Latency,
}

const FAULTS: [Fault; 7] = [
    Fault::KillBroker,
    Fault::PauseBroker,
    Fault::TerminateBroker,
    Fault::IsolateBroker,
    Fault::IsolateZkLeader,
    Fault::KillZkLeader,
    Fault::Latency,
];

/// Runs the whole thing; see the [module](self) docs. An `Err` is a failure of the harness
/// (could not start), not of the system under test, which the report judges.
pub fn run(cfg: &RunConfig) -> Result<RunReport, String> {
    let mut report = RunReport {
        seed: cfg.seed,
        ..RunReport::default()
    };
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let dir = tempfile::Builder::new()
        .prefix("ha-fault-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut lab = Lab::new("hf").map_err(|e| e.to_string())?;
    let zk_hosts: Vec<Host> = (1..=3)
        .map(|i| lab.host(&format!("zk{i}")))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let broker_hosts: Vec<Host> = (1..=3)
        .map(|i| lab.host(&format!("b{i}")))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut zk = ZkEnsemble::builder()
        .servers(3)
        .tick_time(Duration::from_millis(500))
        .init_limit(10)
        .sync_limit(5)
        .in_namespaces(zk_hosts.clone())
        .start()
        .map_err(|e| format!("start ZooKeeper: {e}"))?;
    let zk_connect = zk.connect_string();
    let mut brokers: Vec<Broker> = broker_hosts
        .iter()
        .enumerate()
        .map(|(i, h)| Broker {
            id: i as i32 + 1,
            host: h.clone(),
            dir: dir.path().join(format!("broker-{}", i + 1)),
            log: dir.path().join(format!("broker-{}.log", i + 1)),
            child: None,
        })
        .collect();
    for b in &mut brokers {
        b.start(&lab, cfg, &zk_connect)?;
    }
    let bootstrap: Vec<SocketAddr> = brokers.iter().map(Broker::addr).collect();
    let bootstrap_str = bootstrap
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let addresses: Arc<Mutex<HashMap<i32, SocketAddr>>> = Arc::new(Mutex::new(
        brokers.iter().map(|b| (b.id, b.addr())).collect(),
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // All three brokers registered, then the topic.
    let registered = wait_until(Duration::from_secs(60), || {
        admin(cfg, &zk_connect, &["list-brokers"]).is_ok_and(|out| {
            (1..=3).all(|id| {
                out.lines()
                    .any(|l| l.starts_with(&format!("Broker: {id}\t")))
            })
        })
    });
    if !registered {
        return Err(format!(
            "the brokers did not register:\n{}",
            brokers
                .iter()
                .map(|b| tail(&b.log, 20))
                .collect::<Vec<_>>()
                .join("\n---\n")
        ));
    }
    admin(
        cfg,
        &zk_connect,
        &[
            "create-topic",
            TOPIC,
            "--partitions",
            &PARTITIONS.to_string(),
            "--replication-factor",
            "3",
        ],
    )?;
    let full = |m: &HashMap<i32, (i32, Vec<i32>)>| {
        (0..PARTITIONS).all(|p| m.get(&p).is_some_and(|(l, isr)| *l >= 0 && isr.len() == 3))
    };
    let ready = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if metadata(&bootstrap).await.is_some_and(|m| full(&m)) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    });
    eprintln!("fault run: topic ready: {ready}");
    if !ready {
        return Err("the topic did not get leaders and full ISRs".to_owned());
    }
    let shared = Arc::new(Shared::default());
    let producer = runtime.block_on(init_producer_id(&bootstrap, &shared))?;
    eprintln!(
        "fault run: producer id {producer:?}; faults for {:?}",
        cfg.duration
    );
    let tasks: Vec<_> = (0..PARTITIONS)
        .map(|p| {
            runtime.spawn(produce_partition(
                p,
                bootstrap.clone(),
                addresses.clone(),
                shared.clone(),
                producer,
            ))
        })
        .collect();
    let start = Instant::now();
    let exited = |brokers: &mut Vec<Broker>, report: &mut RunReport| {
        for b in brokers.iter_mut() {
            if let Some(status) = b.exited() {
                report.exited_on_their_own.push(format!(
                    "broker {} ({status}) at {:.1}s:\n{}",
                    b.id,
                    start.elapsed().as_secs_f64(),
                    tail(&b.log, 15)
                ));
            }
        }
    };
    let latency = lab.set_latency(&broker_hosts[0], None).is_ok();
    if !latency {
        report
            .unavailable
            .push("added latency: this kernel has no netem qdisc (partitions instead)".to_owned());
    }
    std::thread::sleep(Duration::from_secs(3));
    if cfg.rolling_restart {
        for b in 0..brokers.len() {
            let at = start.elapsed();
            let what = inject(
                Fault::TerminateBroker,
                b,
                &mut brokers,
                &mut zk,
                &lab,
                &zk_hosts,
                cfg,
                &zk_connect,
                &mut rng,
            );
            eprintln!("fault run: {:>6.1}s {what}", at.as_secs_f64());
            report.timeline.push((at, what));
            // As an operator does between two restarts: every broker's metadata shows full
            // ISRs again (one broker's cache alone may still be the one from before).
            let back = runtime.block_on(async {
                let deadline = Instant::now() + RECOVERY_BOUND;
                while Instant::now() < deadline {
                    let mut all = true;
                    for addr in &bootstrap {
                        all &= metadata(std::slice::from_ref(addr))
                            .await
                            .is_some_and(|m| full(&m));
                    }
                    if all {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                false
            });
            report
                .timeline
                .push((start.elapsed(), format!("full ISRs again: {back}")));
            exited(&mut brokers, &mut report);
        }
    }
    while !cfg.rolling_restart && start.elapsed() < cfg.duration {
        let mut fault = FAULTS[rng.random_range(0..FAULTS.len())];
        if matches!(fault, Fault::Latency) && !latency {
            fault = Fault::IsolateBroker;
        }
        let b = rng.random_range(0..brokers.len());
        let at = start.elapsed();
        let what = inject(
            fault,
            b,
            &mut brokers,
            &mut zk,
            &lab,
            &zk_hosts,
            cfg,
            &zk_connect,
            &mut rng,
        );
        eprintln!("fault run: {:>6.1}s {what}", at.as_secs_f64());
        report.timeline.push((at, what));
        exited(&mut brokers, &mut report);
        // Calm between faults.
        std::thread::sleep(Duration::from_millis(rng.random_range(2_000..5_000)));
        exited(&mut brokers, &mut report);
    }
    // Heal: every host reachable, every process running.
    for h in lab.hosts() {
        let _ = lab.heal(h);
    }
    for b in &mut brokers {
        b.signal("-CONT");
        if b.child.is_none() {
            b.start(&lab, cfg, &zk_connect)?;
        }
    }
    let healed = Instant::now();
    report.timeline.push((start.elapsed(), "healed".to_owned()));
    report.time_to_full_isr = runtime.block_on(async {
        while healed.elapsed() < RECOVERY_BOUND {
            if metadata(&bootstrap).await.is_some_and(|m| full(&m)) {
                return Some(healed.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    });
    // A few more acknowledged records after the recovery, then stop producing.
    std::thread::sleep(Duration::from_secs(2));
    shared.stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
        }
    });
    exited(&mut brokers, &mut report);
    // Read everything back.
    let acked = shared.acked.lock().expect("not poisoned").clone();
    report.acknowledged = acked.len();
    let mut seen: HashMap<String, Vec<(i32, i64)>> = HashMap::new();
    let mut logs: HashMap<i32, HashMap<i64, String>> = HashMap::new();
    for p in 0..PARTITIONS {
        let records = read_back(&bootstrap_str, p)?;
        for (o, v) in &records {
            seen.entry(v.clone()).or_default().push((p, *o));
        }
        logs.insert(p, records.into_iter().collect());
    }
    let mut lost: Vec<String> = acked
        .iter()
        .filter(|(v, (p, o))| logs.get(p).and_then(|l| l.get(o)) != Some(*v))
        .map(|(v, (p, o))| {
            format!(
                "{v} acknowledged at {p}:{o}, read {:?}",
                logs.get(p).and_then(|l| l.get(o))
            )
        })
        .collect();
    lost.sort();
    report.lost = lost;
    let mut dup: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(v, at)| format!("{v} at {at:?}"))
        .collect();
    dup.sort();
    report.duplicated = dup;
    report.produce_errors = shared.errors.lock().expect("not poisoned").clone();
    report.longest_leaderless = *shared.longest_leaderless.lock().expect("not poisoned");
    report.longest_without_ack = *shared.longest_without_ack.lock().expect("not poisoned");
    for b in &mut brokers {
        let _ = b.terminate(Duration::from_secs(20));
    }
    drop(zk);
    drop(lab);
    Ok(report)
}

/// Injects `fault` (on broker `b` where it names one) and returns what it did.
#[allow(clippy::too_many_arguments)]
fn inject(
    fault: Fault,
    b: usize,
    brokers: &mut [Broker],
    zk: &mut ZkEnsemble,
    lab: &Lab,
    zk_hosts: &[Host],
    cfg: &RunConfig,
    zk_connect: &str,
    rng: &mut StdRng,
) -> String {
    let broker = &mut brokers[b];
    let id = broker.id;
    match fault {
        Fault::KillBroker => {
            broker.kill();
            match broker.start(lab, cfg, zk_connect) {
                Ok(()) => format!("kill -9 broker {id}, restarted at once"),
                Err(e) => format!("kill -9 broker {id}; restart failed: {e}"),
            }
        }
        Fault::PauseBroker => {
            let pause = SESSION_TIMEOUT + Duration::from_millis(rng.random_range(1_000..4_000));
            broker.signal("-STOP");
            std::thread::sleep(pause);
            broker.signal("-CONT");
            format!(
                "SIGSTOP broker {id} for {:.1}s (past its session)",
                pause.as_secs_f64()
            )
        }
        Fault::TerminateBroker => {
            let t = Instant::now();
            let outcome = broker.terminate(Duration::from_secs(60));
            let restarted = broker.start(lab, cfg, zk_connect);
            format!(
                "SIGTERM broker {id} (controlled shutdown: {}, {:.1}s), restarted{}",
                outcome.err().unwrap_or_else(|| "exited 0".to_owned()),
                t.elapsed().as_secs_f64(),
                restarted
                    .err()
                    .map_or(String::new(), |e| format!(" failed: {e}"))
            )
        }
        Fault::IsolateBroker => {
            let d = Duration::from_millis(rng.random_range(3_000..10_000));
            let _ = lab.isolate(&broker.host);
            std::thread::sleep(d);
            let _ = lab.heal(&broker.host);
            format!(
                "partition: broker {id} isolated for {:.1}s",
                d.as_secs_f64()
            )
        }
        Fault::Latency => {
            let d = Duration::from_millis(rng.random_range(3_000..10_000));
            let ms = rng.random_range(20..200);
            let set = lab.set_latency(&broker.host, Some(Duration::from_millis(ms)));
            std::thread::sleep(d);
            let _ = lab.set_latency(&broker.host, None);
            match set {
                Ok(()) => format!(
                    "latency: {ms} ms on broker {id} for {:.1}s",
                    d.as_secs_f64()
                ),
                Err(e) => format!("latency on broker {id} failed: {e}"),
            }
        }
        Fault::IsolateZkLeader | Fault::KillZkLeader => {
            let Ok(leader) = zk.wait_for_leader(Duration::from_secs(30)) else {
                return "no ZooKeeper leader to disturb".to_owned();
            };
            let host = &zk_hosts[(leader - 1) as usize];
            if matches!(fault, Fault::IsolateZkLeader) {
                let d = Duration::from_millis(rng.random_range(3_000..10_000));
                let _ = lab.isolate(host);
                std::thread::sleep(d);
                let _ = lab.heal(host);
                format!(
                    "partition: ZooKeeper leader {leader} isolated for {:.1}s",
                    d.as_secs_f64()
                )
            } else {
                let _ = zk.kill(leader);
                let restarted = zk.restart(leader);
                format!(
                    "kill -9 ZooKeeper leader {leader}, restarted{}",
                    restarted
                        .err()
                        .map_or(String::new(), |e| format!(" failed: {e}"))
                )
            }
        }
    }
}

fn admin(cfg: &RunConfig, zk: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(&cfg.admin_bin)
        .arg("--zookeeper")
        .arg(zk)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run ha-admin: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ha-admin {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}
