//! Helpers of the multi-process kcat test: `ha-broker` processes stopped on drop, `kcat` and
//! `ha-admin` runs with a time limit, and a parser of `kcat -L` output; [`cluster`]: three
//! brokers on a ZooKeeper ensemble and the steps the kcat tests share.
#![allow(dead_code)]

pub mod cluster;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// True if `kcat` runs.
pub fn kcat_present() -> bool {
    Command::new("kcat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A `ha-broker` process, killed (SIGKILL) and reaped when dropped.
pub struct BrokerProcess {
    /// The broker id.
    pub id: i32,
    /// Where it listens, as it printed on start.
    pub addr: String,
    /// Its log (stderr).
    pub log: PathBuf,
    child: Child,
}

impl BrokerProcess {
    /// Starts `ha-broker` with `args` (its id is `id`), logging to `log`, and waits up to
    /// `timeout` for its `broker <id> listening on <addr>` line.
    pub fn start(id: i32, args: &[String], log: &Path, timeout: Duration) -> Result<Self, String> {
        let err = File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let mut child = Command::new(env!("CARGO_BIN_EXE_ha-broker"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("spawn broker {id}: {e}"))?;
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        let mut process = BrokerProcess {
            id,
            addr: String::new(),
            log: log.to_path_buf(),
            child,
        };
        let prefix = format!("broker {id} listening on ");
        match rx.recv_timeout(timeout) {
            Ok(line) => match line.strip_prefix(&prefix) {
                Some(addr) => process.addr = addr.trim().to_owned(),
                None => return Err(format!("broker {id} printed {line:?}")),
            },
            Err(_) => {
                return Err(format!(
                    "broker {id} did not start:\n{}",
                    tail(&process.log, 40)
                ))
            }
        }
        Ok(process)
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends signal `name` (`STOP`, `CONT`, …); true if it was delivered.
    pub fn signal(&self, name: &str) -> bool {
        Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit; true if it exited successfully.
    pub fn terminate(&mut self, timeout: Duration) -> bool {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if !sent {
            return false;
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => return false,
            }
        }
        false
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What a finished (or killed) command did.
#[derive(Debug)]
pub struct Output {
    /// Exit status was success.
    pub ok: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `program` with `args` and `input` on stdin, killing it after `limit`.
pub fn run(program: &str, args: &[String], input: &str, limit: Duration) -> Output {
    let spawned = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return Output {
                ok: false,
                stdout: String::new(),
                stderr: format!("{program} did not start: {e}"),
            }
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_owned();
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    // Drain both pipes while waiting so a chatty child never blocks.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let mut ok = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                ok = status.success();
                break;
            }
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    Output {
        ok,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Strings from string slices.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// One partition as `kcat -L` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The leader, -1 for none.
    pub leader: i32,
    /// The replicas.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
}

fn id_list(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

/// The partitions of `topic` in `kcat -L` output:
/// `    partition 0, leader 1, replicas: 1,2,3, isrs: 1,2,3`.
pub fn parse_metadata(out: &str, topic: &str) -> BTreeMap<i32, PartitionInfo> {
    let mut partitions = BTreeMap::new();
    let mut in_topic = false;
    for line in out.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("topic \"") {
            in_topic = rest.split('"').next() == Some(topic);
            continue;
        }
        if !in_topic {
            continue;
        }
        let Some(rest) = t.strip_prefix("partition ") else {
            continue;
        };
        let Some((p, rest)) = rest.split_once(", leader ") else {
            continue;
        };
        let Some((leader, rest)) = rest.split_once(", replicas: ") else {
            continue;
        };
        let Some((replicas, rest)) = rest.split_once(", isrs: ") else {
            continue;
        };
        let isr = rest
            .split(',')
            .take_while(|x| !x.contains(' '))
            .collect::<Vec<_>>()
            .join(",");
        let (Ok(p), Ok(leader)) = (p.trim().parse(), leader.trim().parse()) else {
            continue;
        };
        partitions.insert(
            p,
            PartitionInfo {
                leader,
                replicas: id_list(replicas),
                isr: id_list(&isr),
            },
        );
    }
    partitions
}

/// One consumed message, from the format `%p|%o|%k|%s|%h\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// Headers as kcat prints them (`name=value,name=value`).
    pub headers: String,
}

/// The consume format matching [`parse_consumed`].
pub const CONSUME_FORMAT: &str = "%p|%o|%k|%s|%h\n";

/// Parses `kcat -C -f CONSUME_FORMAT` output; a malformed line is an error.
pub fn parse_consumed(out: &str) -> Result<Vec<Consumed>, String> {
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.splitn(5, '|').collect();
            match f.as_slice() {
                [p, o, k, v, h] => Ok(Consumed {
                    partition: p.parse().map_err(|_| format!("bad line {line:?}"))?,
                    offset: o.parse().map_err(|_| format!("bad line {line:?}"))?,
                    key: k.to_string(),
                    value: v.to_string(),
                    headers: h.to_string(),
                }),
                _ => Err(format!("bad line {line:?}")),
            }
        })
        .collect()
}
