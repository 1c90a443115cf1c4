//! Consumer groups with a real client: balanced `kcat -G` consumers (librdkafka) against three
//! `ha-broker` processes on a real ZooKeeper.
//!
//! - Two members split the topic's partitions; when one leaves, the other takes them all; a
//!   consumer started later in the same group resumes from the committed offsets (it reads
//!   none of the committed records again).
//! - The broker coordinating the group is SIGKILLed mid-run: another broker becomes leader of
//!   the group's `__consumer_offsets` partition, loads it and coordinates the group, which
//!   rebalances when a member joins; the committed offsets, sampled over the wire all along,
//!   never go backwards, and consumption resumes from the last commit. A timeline is printed.
//!
//! Fails when `CI` is set and `kcat` or ZooKeeper is missing; skips with a notice otherwise.
//! Every process started is killed when the test ends, passing or not.

mod kcat_common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ha_testkit::{require_zookeeper, ZkEnsemble};
use kafka_broker::KafkaConnection;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_wire::messages::{FindCoordinatorRequest, OffsetFetchRequest};
use kafka_wire::{RequestBody, ResponseBody};
use kcat_common::{args, kcat_present, parse_metadata, run, tail, BrokerProcess};

const TOPIC: &str = "events";
const PARTITIONS: i32 = 4;
const BROKERS: [i32; 3] = [1, 2, 3];
/// `offsets.topic.num.partitions` of the test cluster.
const OFFSETS_PARTITIONS: i32 = 10;
const SESSION_TIMEOUT_MS: &str = "4000";
const WAIT: Duration = Duration::from_secs(60);

/// Skips (or fails under CI) without kcat or ZooKeeper.
fn tools_present(name: &str) -> bool {
    if !kcat_present() {
        if std::env::var_os("CI").is_some() {
            panic!("kcat is required under CI (Debian package `kcat`)");
        }
        eprintln!("SKIPPED {name}: kcat not found (set CI to make this a failure)");
        return false;
    }
    require_zookeeper(name).expect("ZooKeeper is required under CI")
}

/// What happened when, since the test started.
struct Timeline {
    start: Instant,
    events: Mutex<Vec<(Duration, String)>>,
}

impl Timeline {
    fn new() -> Arc<Timeline> {
        Arc::new(Timeline {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
        })
    }

    fn note(&self, what: impl Into<String>) {
        let what = what.into();
        let at = self.start.elapsed();
        eprintln!("[{:>7.3} s] {what}", at.as_secs_f64());
        self.events.lock().expect("timeline").push((at, what));
    }

    fn print(&self) {
        eprintln!("---- timeline ----");
        for (at, what) in self.events.lock().expect("timeline").iter() {
            eprintln!("{:>8.3} s  {what}", at.as_secs_f64());
        }
    }
}

/// ZooKeeper, three broker processes and their data directories.
struct Cluster {
    zk: ZkEnsemble,
    brokers: BTreeMap<i32, BrokerProcess>,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let zk = ZkEnsemble::builder()
            .servers(1)
            .tick_time(Duration::from_millis(200))
            .start()
            .expect("ZooKeeper starts");
        let dir = tempfile::Builder::new()
            .prefix("kcat-groups-")
            .tempdir()
            .expect("temp dir");
        let mut cluster = Cluster {
            zk,
            brokers: BTreeMap::new(),
            dir,
        };
        for id in BROKERS {
            let data = cluster.dir.path().join(format!("broker-{id}"));
            let log = cluster.dir.path().join(format!("broker-{id}.log"));
            let mut a = args(&[
                "--id",
                &id.to_string(),
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                &data.display().to_string(),
                "--zookeeper",
                &cluster.zk.connect_string(),
                "--zookeeper-session-timeout-ms",
                SESSION_TIMEOUT_MS,
                "--replica-lag-time-max-ms",
                "10000",
            ]);
            for o in [
                format!("offsets.topic.num.partitions={OFFSETS_PARTITIONS}"),
                "offsets.topic.replication.factor=3".to_owned(),
                "group.initial.rebalance.delay.ms=500".to_owned(),
            ] {
                a.push("--override".to_owned());
                a.push(o);
            }
            let broker = BrokerProcess::start(id, &a, &log, Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("{e}"));
            cluster.brokers.insert(id, broker);
        }
        cluster.create_topic();
        cluster
    }

    fn bootstrap(&self) -> String {
        self.brokers
            .values()
            .map(|b| b.addr.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn admin(&self, command: &[&str]) -> kcat_common::Output {
        let mut a = args(&["--zookeeper", &self.zk.connect_string()]);
        a.extend(args(command));
        run(
            env!("CARGO_BIN_EXE_ha-admin"),
            &a,
            "",
            Duration::from_secs(30),
        )
    }

    fn kcat(&self, extra: &[&str], input: &str) -> kcat_common::Output {
        let mut a = args(&["-b", &self.bootstrap()]);
        a.extend(args(extra));
        run("kcat", &a, input, Duration::from_secs(60))
    }

    fn logs(&self) -> String {
        BROKERS
            .iter()
            .map(|id| {
                let log = self.dir.path().join(format!("broker-{id}.log"));
                format!("--- broker {id} ---\n{}", tail(&log, 30))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits for the registrations and the controller, creates the topic (RF 3) and waits for
    /// full ISRs.
    fn create_topic(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let out = self.admin(&["list-brokers"]);
            let registered = out
                .stdout
                .lines()
                .filter(|l| l.starts_with("Broker: "))
                .count();
            if out.ok && registered == BROKERS.len() && out.stdout.contains("controller (epoch") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "brokers did not register\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = self.admin(&[
            "create-topic",
            TOPIC,
            "--partitions",
            &PARTITIONS.to_string(),
            "--replication-factor",
            "3",
        ]);
        assert!(out.ok, "create-topic: {}\n{}", out.stdout, out.stderr);
        self.wait_metadata(TOPIC, "full ISRs", |m| {
            m.len() == PARTITIONS as usize && m.values().all(|p| p.leader > 0 && p.isr.len() == 3)
        });
    }

    /// `kcat -L -t topic` until `ok` holds; the partitions.
    fn wait_metadata(
        &self,
        topic: &str,
        what: &str,
        ok: impl Fn(&BTreeMap<i32, kcat_common::PartitionInfo>) -> bool,
    ) -> BTreeMap<i32, kcat_common::PartitionInfo> {
        let deadline = Instant::now() + WAIT;
        loop {
            let out = self.kcat(&["-L", "-t", topic, "-m", "5"], "");
            let parts = parse_metadata(&out.stdout, topic);
            if out.ok && ok(&parts) {
                return parts;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} of {topic}:\n{}\n{}\n{}",
                out.stdout,
                out.stderr,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Produces `value-<i>` for `range` with acks=all, keyed to spread over the partitions.
    fn produce(&self, range: std::ops::Range<usize>) {
        let input: String = range.map(|i| format!("key-{i}:value-{i}\n")).collect();
        let out = self.kcat(&["-P", "-t", TOPIC, "-K:", "-X", "acks=all"], &input);
        assert!(
            out.ok,
            "kcat -P failed\n{}\n{}\n{}",
            out.stdout,
            out.stderr,
            self.logs()
        );
    }

    /// The broker leading the group's `__consumer_offsets` partition.
    fn coordinator_of(&self, group: &str) -> i32 {
        let partition = kafka_group_coordinator::partition_for(group, OFFSETS_PARTITIONS);
        let parts = self.wait_metadata("__consumer_offsets", "a leader", |m| {
            m.get(&partition).is_some_and(|p| p.leader > 0)
        });
        parts[&partition].leader
    }
}

/// What a `kcat -G` member printed so far.
#[derive(Default)]
struct Seen {
    /// `(partition, offset, value)` of each message, in order.
    messages: Vec<(i32, i64, String)>,
    /// The partitions of the latest assignment.
    assigned: BTreeSet<i32>,
    /// How many assignments it got.
    rebalances: usize,
    /// Its stderr, for failure messages.
    stderr: Vec<String>,
}

/// A balanced consumer, `kcat -G group topic`, killed when dropped.
struct Member {
    name: String,
    child: Child,
    seen: Arc<Mutex<Seen>>,
}

/// The partitions named in `... assigned: events [0], events [3]`.
fn parse_partitions(list: &str) -> BTreeSet<i32> {
    list.split(',')
        .filter_map(|e| {
            let e = e.trim();
            let rest = e.strip_prefix(TOPIC)?.trim();
            rest.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

impl Member {
    fn start(cluster: &Cluster, group: &str, name: &str, timeline: &Arc<Timeline>) -> Member {
        let mut child = Command::new("kcat")
            .args([
                "-b",
                &cluster.bootstrap(),
                "-G",
                group,
                TOPIC,
                // Unbuffered: each message reaches the pipe as it is consumed.
                "-u",
                "-f",
                "%p|%o|%s\n",
                "-X",
                &format!("client.id={name}"),
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "auto.commit.interval.ms=200",
                "-X",
                "session.timeout.ms=6000",
                "-X",
                "heartbeat.interval.ms=500",
                "-X",
                "topic.metadata.refresh.interval.ms=1000",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kcat starts");
        let seen = Arc::new(Mutex::new(Seen::default()));
        if let Some(out) = child.stdout.take() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let f: Vec<&str> = line.splitn(3, '|').collect();
                    if let [p, o, v] = f.as_slice() {
                        if let (Ok(p), Ok(o)) = (p.parse(), o.parse()) {
                            seen.lock()
                                .expect("seen")
                                .messages
                                .push((p, o, v.to_string()));
                        }
                    }
                }
            });
        }
        if let Some(err) = child.stderr.take() {
            let seen = seen.clone();
            let timeline = timeline.clone();
            let who = name.to_owned();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut s = seen.lock().expect("seen");
                    if let Some((_, list)) = line.split_once("assigned:") {
                        s.assigned = parse_partitions(list);
                        s.rebalances += 1;
                        timeline.note(format!("{who} assigned {:?}", s.assigned));
                    } else if line.contains("revoked:") {
                        s.assigned.clear();
                    }
                    s.stderr.push(line);
                }
            });
        }
        timeline.note(format!("{name} started (kcat -G {group})"));
        Member {
            name: name.to_owned(),
            child,
            seen,
        }
    }

    fn assigned(&self) -> BTreeSet<i32> {
        self.seen.lock().expect("seen").assigned.clone()
    }

    fn rebalances(&self) -> usize {
        self.seen.lock().expect("seen").rebalances
    }

    fn values(&self) -> Vec<usize> {
        self.seen
            .lock()
            .expect("seen")
            .messages
            .iter()
            .filter_map(|(_, _, v)| v.strip_prefix("value-")?.parse().ok())
            .collect()
    }

    fn stderr(&self) -> String {
        let s = self.seen.lock().expect("seen");
        s.stderr[s.stderr.len().saturating_sub(30)..].join("\n")
    }

    /// SIGTERM: kcat closes the consumer (commits its offsets and leaves the group).
    fn stop(&mut self, timeline: &Timeline) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                timeline.note(format!("{} stopped (SIGTERM: commit and leave)", self.name));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} did not stop on SIGTERM:\n{}", self.name, self.stderr());
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `ok`, failing with `what` and `context()` after [`WAIT`].
fn wait_for(what: &str, mut ok: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + WAIT;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The distinct values `0..n` all seen among `members`, each by someone.
fn all_consumed(members: &[&Member], n: std::ops::Range<usize>) -> bool {
    let seen: BTreeSet<usize> = members.iter().flat_map(|m| m.values()).collect();
    n.clone().all(|i| seen.contains(&i))
}

/// The committed offsets of `group` for the topic's partitions, read over the wire
/// (FindCoordinator through any of `brokers`, then OffsetFetch v5 at the coordinator);
/// `None` while no coordinator answers.
fn committed(brokers: &[String], group: &str) -> Option<BTreeMap<i32, i64>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        for b in brokers {
            let Ok(addr) = b.parse() else { continue };
            let Ok(Ok(mut conn)) = tokio::time::timeout(
                Duration::from_secs(2),
                KafkaConnection::connect(addr, "offset-watcher"),
            )
            .await
            else {
                continue;
            };
            let find = RequestBody::FindCoordinator(FindCoordinatorRequest {
                key: group.into(),
                ..Default::default()
            });
            let Ok(Ok(ResponseBody::FindCoordinator(f))) =
                tokio::time::timeout(Duration::from_secs(2), conn.send(2, &find)).await
            else {
                continue;
            };
            if f.error_code != 0 {
                continue;
            }
            let Ok(addr) = format!("{}:{}", f.host, f.port).parse() else {
                continue;
            };
            let Ok(Ok(mut conn)) = tokio::time::timeout(
                Duration::from_secs(2),
                KafkaConnection::connect(addr, "offset-watcher"),
            )
            .await
            else {
                continue;
            };
            let fetch = RequestBody::OffsetFetch(OffsetFetchRequest {
                group_id: group.into(),
                topics: Some(vec![OffsetFetchRequestTopic {
                    name: TOPIC.into(),
                    partition_indexes: (0..PARTITIONS).collect::<Vec<_>>().into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            let Ok(Ok(ResponseBody::OffsetFetch(r))) =
                tokio::time::timeout(Duration::from_secs(2), conn.send(5, &fetch)).await
            else {
                continue;
            };
            if r.error_code != ErrorCode::None.code() {
                continue;
            }
            return Some(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .filter(|p| p.error_code == 0)
                    .map(|p| (p.partition_index, p.committed_offset))
                    .collect(),
            );
        }
        None
    })
}

/// Samples the committed offsets every 100 ms in a thread, recording any that moves back.
struct OffsetWatcher {
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<BTreeMap<i32, i64>>>,
    backwards: Arc<Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OffsetWatcher {
    fn start(brokers: Vec<String>, group: &str, timeline: Arc<Timeline>) -> OffsetWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let latest = Arc::new(Mutex::new(BTreeMap::new()));
        let backwards = Arc::new(Mutex::new(Vec::new()));
        let (s, l, b, g) = (
            stop.clone(),
            latest.clone(),
            backwards.clone(),
            group.to_owned(),
        );
        let thread = std::thread::spawn(move || {
            let mut answering = true;
            while !s.load(Ordering::Relaxed) {
                match committed(&brokers, &g) {
                    Some(now) => {
                        if !answering {
                            timeline.note(format!("committed offsets readable again: {now:?}"));
                            answering = true;
                        }
                        let mut last = l.lock().expect("latest");
                        for (p, o) in &now {
                            let before = last.get(p).copied().unwrap_or(-1);
                            if *o < before {
                                b.lock()
                                    .expect("backwards")
                                    .push(format!("partition {p}: {before} -> {o}"));
                            }
                            // A partition the group has not committed (-1) yet keeps its
                            // last value; a missing one (a coordinator without it) would
                            // have shown as -1 and counts as going back.
                            if *o >= before {
                                last.insert(*p, *o);
                            }
                        }
                        for p in last.keys().copied().collect::<Vec<_>>() {
                            if !now.contains_key(&p) {
                                b.lock()
                                    .expect("backwards")
                                    .push(format!("partition {p}: lost"));
                            }
                        }
                    }
                    None => {
                        if answering {
                            timeline.note("committed offsets not readable (no coordinator)");
                            answering = false;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        OffsetWatcher {
            stop,
            latest,
            backwards,
            thread: Some(thread),
        }
    }

    fn latest(&self) -> BTreeMap<i32, i64> {
        self.latest.lock().expect("latest").clone()
    }

    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.backwards.lock().expect("backwards").clone()
    }
}

#[test]
fn kcat_balanced_consumers_split_partitions_rebalance_on_leave_and_resume_from_committed_offsets() {
    let name = "kcat_balanced_consumers_split_partitions_rebalance_on_leave_and_resume_from_committed_offsets";
    if !tools_present(name) {
        return;
    }
    let timeline = Timeline::new();
    let cluster = Cluster::start();
    timeline.note("cluster up, topic created");
    const GROUP: &str = "balanced";
    cluster.produce(0..200);
    timeline.note("produced 0..200");

    let mut a = Member::start(&cluster, GROUP, "member-a", &timeline);
    let mut b = Member::start(&cluster, GROUP, "member-b", &timeline);
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    wait_for(
        "the two members to split the partitions",
        || {
            let (x, y) = (a.assigned(), b.assigned());
            !x.is_empty()
                && !y.is_empty()
                && x.is_disjoint(&y)
                && x.union(&y).copied().collect::<BTreeSet<_>>() == all
        },
        || format!("a:\n{}\nb:\n{}\n{}", a.stderr(), b.stderr(), cluster.logs()),
    );
    timeline.note(format!(
        "split: member-a {:?}, member-b {:?}",
        a.assigned(),
        b.assigned()
    ));
    wait_for(
        "messages 0..200 consumed by the two",
        || all_consumed(&[&a, &b], 0..200),
        || format!("a:\n{}\nb:\n{}", a.stderr(), b.stderr()),
    );
    timeline.note("0..200 consumed between the two members");

    b.stop(&timeline);
    wait_for(
        "member-a to take every partition",
        || a.assigned() == all,
        || format!("a:\n{}\n{}", a.stderr(), cluster.logs()),
    );
    timeline.note("member-a has every partition");
    cluster.produce(200..300);
    wait_for(
        "member-a to consume 200..300",
        || all_consumed(&[&a], 200..300),
        || a.stderr(),
    );
    timeline.note("member-a consumed 200..300");
    a.stop(&timeline);

    // A new member resumes from the committed offsets: only what came after.
    cluster.produce(300..340);
    let mut c = Member::start(&cluster, GROUP, "member-c", &timeline);
    wait_for(
        "member-c to consume 300..340",
        || all_consumed(&[&c], 300..340),
        || format!("c:\n{}\n{}", c.stderr(), cluster.logs()),
    );
    c.stop(&timeline);
    let reread: Vec<usize> = c.values().into_iter().filter(|v| *v < 300).collect();
    timeline.print();
    assert!(
        reread.is_empty(),
        "member-c re-read committed records: {reread:?}"
    );
    assert_eq!(c.values().len(), 40, "each new record once");
}

#[test]
fn kcat_group_survives_sigkill_of_its_coordinator_without_losing_or_rewinding_committed_offsets() {
    let name = "kcat_group_survives_sigkill_of_its_coordinator_without_losing_or_rewinding_committed_offsets";
    if !tools_present(name) {
        return;
    }
    let timeline = Timeline::new();
    let mut cluster = Cluster::start();
    timeline.note("cluster up, topic created");
    const GROUP: &str = "failover";
    cluster.produce(0..100);
    timeline.note("produced 0..100");

    let mut a = Member::start(&cluster, GROUP, "member-a", &timeline);
    wait_for(
        "member-a to consume 0..100",
        || all_consumed(&[&a], 0..100),
        || format!("a:\n{}\n{}", a.stderr(), cluster.logs()),
    );
    timeline.note("member-a consumed 0..100");
    let coordinator = cluster.coordinator_of(GROUP);
    timeline.note(format!(
        "broker {coordinator} coordinates {GROUP} (leader of __consumer_offsets-{})",
        kafka_group_coordinator::partition_for(GROUP, OFFSETS_PARTITIONS)
    ));
    let addrs: Vec<String> = cluster.brokers.values().map(|b| b.addr.clone()).collect();
    let watcher = OffsetWatcher::start(addrs, GROUP, timeline.clone());
    // Wait until the commits cover the 100 records (the sum of the committed offsets).
    wait_for(
        "the commits of 0..100",
        || watcher.latest().values().map(|o| (*o).max(0)).sum::<i64>() == 100,
        || format!("committed {:?}\n{}", watcher.latest(), a.stderr()),
    );
    let before = watcher.latest();
    timeline.note(format!("committed before the kill: {before:?}"));

    cluster
        .brokers
        .get_mut(&coordinator)
        .expect("coordinator")
        .kill();
    timeline.note(format!("broker {coordinator} SIGKILLed"));
    cluster.brokers.remove(&coordinator);
    cluster.produce(100..200);
    timeline.note("produced 100..200");
    wait_for(
        "member-a to consume 100..200 after the failover",
        || all_consumed(&[&a], 100..200),
        || format!("a:\n{}\n{}", a.stderr(), cluster.logs()),
    );
    timeline.note("member-a consumed 100..200");
    let next = cluster.coordinator_of(GROUP);
    assert_ne!(next, coordinator);
    timeline.note(format!("broker {next} coordinates {GROUP} now"));

    // The new coordinator runs a rebalance with the loaded group: a second member joins.
    let rebalances = a.rebalances();
    let mut b = Member::start(&cluster, GROUP, "member-b", &timeline);
    wait_for(
        "a rebalance that splits the partitions",
        || a.rebalances() > rebalances && !b.assigned().is_empty() && !a.assigned().is_empty(),
        || format!("a:\n{}\nb:\n{}\n{}", a.stderr(), b.stderr(), cluster.logs()),
    );
    timeline.note(format!(
        "rebalanced: member-a {:?}, member-b {:?}",
        a.assigned(),
        b.assigned()
    ));
    b.stop(&timeline);
    a.stop(&timeline);
    wait_for(
        "the commits of 0..200",
        || watcher.latest().values().map(|o| (*o).max(0)).sum::<i64>() == 200,
        || format!("committed {:?}", watcher.latest()),
    );
    let after = watcher.latest();
    timeline.note(format!("committed after the failover: {after:?}"));

    // Consumption resumes from the last commit: a new member reads only what follows.
    cluster.produce(200..220);
    let mut c = Member::start(&cluster, GROUP, "member-c", &timeline);
    wait_for(
        "member-c to consume 200..220",
        || all_consumed(&[&c], 200..220),
        || format!("c:\n{}\n{}", c.stderr(), cluster.logs()),
    );
    c.stop(&timeline);
    let backwards = watcher.finish();
    timeline.print();
    assert!(
        backwards.is_empty(),
        "committed offsets went back: {backwards:?}"
    );
    for (p, o) in &before {
        assert!(
            after.get(p).is_some_and(|a| a >= o),
            "partition {p}: {o} then {after:?}"
        );
    }
    let reread: Vec<usize> = c.values().into_iter().filter(|v| *v < 200).collect();
    assert!(
        reread.is_empty(),
        "member-c re-read committed records: {reread:?}"
    );
}
