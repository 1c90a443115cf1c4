//! Three `ha-broker` processes on a ZooKeeper ensemble started by `ha-testkit` (Apache ZooKeeper
//! or `ha-zookeeper`, one server or three), driven by `kcat` and `ha-admin`: the cluster of the
//! kcat tests, and the steps they share (brokers registered, a topic created, keyed messages
//! produced with acks=all and read back, a partition leader killed).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ha_testkit::{require_zookeeper, ZkEnsemble};

use super::{
    args, kcat_present, parse_consumed, parse_metadata, run, tail, BrokerProcess, Consumed, Output,
    PartitionInfo, CONSUME_FORMAT,
};

/// The topic of the tests.
pub const TOPIC: &str = "events";
/// Its partitions.
pub const PARTITIONS: i32 = 3;
/// The brokers' ids.
pub const BROKERS: [i32; 3] = [1, 2, 3];
/// Short enough that a killed broker's registration vanishes within seconds.
const SESSION_TIMEOUT_MS: &str = "4000";
const KCAT_LIMIT: Duration = Duration::from_secs(30);

/// kcat is there: true (run), or false after a notice (skip); a failure under `CI`.
pub fn kcat_ready(test: &str) -> bool {
    if kcat_present() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("kcat is required under CI (Debian package `kcat`)");
    }
    eprintln!("SKIPPED {test}: kcat not found (set CI to make this a failure)");
    false
}

/// kcat and Apache ZooKeeper are there: true (run), or false after a notice (skip); a failure
/// under `CI` when one is missing.
pub fn environment_ready(test: &str) -> bool {
    kcat_ready(test) && require_zookeeper(test).expect("ZooKeeper is required under CI")
}

/// The cluster of a test: the ZooKeeper ensemble, the broker processes and their data
/// directories.
pub struct Cluster {
    /// The ensemble the brokers register in.
    pub zk: ZkEnsemble,
    /// The running brokers by id.
    pub brokers: BTreeMap<i32, BrokerProcess>,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts the three brokers (`BROKERS`) on `zk`.
    pub fn start(zk: ZkEnsemble) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("kcat-cluster-")
            .tempdir()
            .expect("temp dir");
        let mut cluster = Cluster {
            zk,
            brokers: BTreeMap::new(),
            dir,
        };
        for id in BROKERS {
            cluster.start_broker(id, "broker");
        }
        cluster
    }

    /// Starts broker `id` on a free port with its data directory (kept across restarts),
    /// logging to `<log_name>-<id>.log`.
    pub fn start_broker(&mut self, id: i32, log_name: &str) {
        let data = self.dir.path().join(format!("broker-{id}"));
        let log = self.dir.path().join(format!("{log_name}-{id}.log"));
        let a = vec![
            "--id".to_owned(),
            id.to_string(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--data-dir".to_owned(),
            data.display().to_string(),
            "--zookeeper".to_owned(),
            self.zk.connect_string(),
            "--zookeeper-session-timeout-ms".to_owned(),
            SESSION_TIMEOUT_MS.to_owned(),
            "--replica-lag-time-max-ms".to_owned(),
            "10000".to_owned(),
        ];
        let broker = BrokerProcess::start(id, &a, &log, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        self.brokers.insert(id, broker);
    }

    /// SIGKILLs broker `id` and forgets it.
    pub fn kill_broker(&mut self, id: i32) {
        let mut broker = self
            .brokers
            .remove(&id)
            .unwrap_or_else(|| panic!("broker {id} is not running"));
        broker.kill();
    }

    /// The live brokers' addresses, comma-separated, for `-b`.
    pub fn bootstrap(&self) -> String {
        self.brokers
            .values()
            .map(|b| b.addr.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs `ha-admin --zookeeper <ensemble> <command>`.
    pub fn admin(&self, command: &[&str]) -> Output {
        let mut a = args(&["--zookeeper", &self.zk.connect_string()]);
        a.extend(args(command));
        run(
            env!("CARGO_BIN_EXE_ha-admin"),
            &a,
            "",
            Duration::from_secs(30),
        )
    }

    /// Runs `kcat -b <live brokers> <extra>` with `input` on stdin.
    pub fn kcat(&self, extra: &[&str], input: &str) -> Output {
        let bootstrap = self.bootstrap();
        let mut a = args(&["-b", &bootstrap]);
        a.extend(args(extra));
        run("kcat", &a, input, KCAT_LIMIT)
    }

    /// Waits until `ha-admin list-brokers` shows every broker registered and a controller.
    pub fn wait_registered(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.admin(&["list-brokers"]);
            let registered = out
                .stdout
                .lines()
                .filter(|l| l.starts_with("Broker: "))
                .count();
            if out.ok && registered == BROKERS.len() && out.stdout.contains("controller (epoch") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "brokers did not register:\n{}\n{}\n{}",
                out.stdout,
                out.stderr,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Creates `TOPIC` with `ha-admin` (replication factor 3) and waits until `kcat -L` shows
    /// every partition led with three replicas, all in sync; returns the partitions.
    pub fn create_topic(&self) -> BTreeMap<i32, PartitionInfo> {
        let out = self.admin(&[
            "create-topic",
            TOPIC,
            "--partitions",
            &PARTITIONS.to_string(),
            "--replication-factor",
            "3",
        ]);
        assert!(out.ok, "admin create-topic: {}\n{}", out.stdout, out.stderr);
        let (meta, listing) = self.wait_metadata("leaders and full ISRs", |m| {
            m.len() == PARTITIONS as usize
                && m.values()
                    .all(|p| p.leader > 0 && p.replicas.len() == 3 && p.isr.len() == 3)
        });
        assert!(listing.contains(&format!("topic \"{TOPIC}\" with {PARTITIONS} partitions")));
        for id in BROKERS {
            assert!(
                listing.contains(&format!("broker {id} at ")),
                "broker {id} missing from:\n{listing}"
            );
        }
        meta
    }

    /// SIGKILLs the leader of `partition` (as `meta` shows it) and waits until every partition
    /// has a leader other than it, out of an ISR without it; returns the victim and the new
    /// partitions.
    pub fn kill_partition_leader(
        &mut self,
        meta: &BTreeMap<i32, PartitionInfo>,
        partition: i32,
    ) -> (i32, BTreeMap<i32, PartitionInfo>) {
        let victim = meta[&partition].leader;
        self.kill_broker(victim);
        let (after, _) =
            self.wait_metadata(&format!("a new leader for partition {partition}"), |m| {
                m.len() == PARTITIONS as usize
                    && m.values().all(|p| {
                        p.leader > 0
                            && p.leader != victim
                            && !p.isr.contains(&victim)
                            && !p.isr.is_empty()
                    })
            });
        assert_ne!(after[&partition].leader, victim);
        (victim, after)
    }

    /// `kcat -L` until `ok` holds of the topic's partitions; returns them and the raw output.
    pub fn wait_metadata(
        &self,
        what: &str,
        ok: impl Fn(&BTreeMap<i32, PartitionInfo>) -> bool,
    ) -> (BTreeMap<i32, PartitionInfo>, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        while Instant::now() < deadline {
            let out = self.kcat(&["-L", "-t", TOPIC, "-m", "5"], "");
            let parts = parse_metadata(&out.stdout, TOPIC);
            if out.ok && ok(&parts) {
                return (parts, out.stdout);
            }
            last = format!("{}\n{}", out.stdout, out.stderr);
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "timed out waiting for {what}; last kcat -L:\n{last}\n{}",
            self.logs()
        );
    }

    /// The tails of the brokers' logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = Vec::new();
        for name in ["broker", "restarted"] {
            for id in BROKERS {
                let log = self.dir.path().join(format!("{name}-{id}.log"));
                if log.exists() {
                    out.push(format!("--- {name} {id} ---\n{}", tail(&log, 25)));
                }
            }
        }
        out.join("\n")
    }

    /// Produces messages `range` with acks=all: key `key-<i>`, value `value-<i>`, headers
    /// `run=<run>` and `source=kcat`.
    pub fn produce(&self, range: std::ops::Range<usize>, run: &str) {
        let input: String = range.map(|i| format!("key-{i}:value-{i}\n")).collect();
        let header = format!("run={run}");
        let out = self.kcat(
            &[
                "-P",
                "-t",
                TOPIC,
                "-K:",
                "-H",
                &header,
                "-H",
                "source=kcat",
                "-X",
                "acks=all",
                "-X",
                "enable.idempotence=true",
            ],
            &input,
        );
        assert!(
            out.ok,
            "kcat -P failed\nstdout:\n{}\nstderr:\n{}\n{}",
            out.stdout,
            out.stderr,
            self.logs()
        );
    }

    /// Every message of the topic, from the beginning of each partition.
    pub fn consume_all(&self) -> Vec<Consumed> {
        let out = self.kcat(
            &[
                "-C",
                "-t",
                TOPIC,
                "-o",
                "beginning",
                "-e",
                "-f",
                CONSUME_FORMAT,
            ],
            "",
        );
        assert!(
            out.ok,
            "kcat -C failed\nstdout:\n{}\nstderr:\n{}\n{}",
            out.stdout,
            out.stderr,
            self.logs()
        );
        parse_consumed(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Every message `0..n` exactly once, key, value and headers intact (messages below
/// `first_run` from the run `first`, the others from `second`); each partition's offsets run
/// 0, 1, 2, … and its messages are in the order they were produced.
pub fn assert_all_read_back(got: &[Consumed], n: usize, first_run: usize) {
    let mut seen = BTreeSet::new();
    let mut by_partition: BTreeMap<i32, Vec<&Consumed>> = BTreeMap::new();
    for m in got {
        let i: usize = m
            .key
            .strip_prefix("key-")
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("unexpected key in {m:?}"));
        assert_eq!(m.value, format!("value-{i}"), "value of {m:?}");
        let run = if i < first_run { "first" } else { "second" };
        assert_eq!(
            m.headers,
            format!("run={run},source=kcat"),
            "headers of {m:?}"
        );
        assert!(seen.insert(i), "message {i} read twice");
        by_partition.entry(m.partition).or_default().push(m);
    }
    let missing: Vec<usize> = (0..n).filter(|i| !seen.contains(i)).collect();
    assert!(missing.is_empty(), "missing messages: {missing:?}");
    assert_eq!(got.len(), n);
    assert!(by_partition.keys().all(|p| (0..PARTITIONS).contains(p)));
    assert!(
        by_partition.len() > 1,
        "keys should spread over the partitions"
    );
    for (p, msgs) in by_partition {
        let offsets: Vec<i64> = msgs.iter().map(|m| m.offset).collect();
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, expected, "offsets of partition {p}");
        let order: Vec<usize> = msgs
            .iter()
            .filter_map(|m| m.key.strip_prefix("key-")?.parse().ok())
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "partition {p} out of produce order: {order:?}"
        );
    }
}
