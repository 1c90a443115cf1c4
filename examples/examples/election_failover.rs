//! Benchmark: start-up election and failover of `zab-core` peers over TCP on loopback, side by
//! side with real ZooKeeper 3.8 servers in the same run, for 3 and 5 servers.
//!
//! ```text
//! cargo run --release -p ha-examples --example election_failover [-- RUNS [--ours-only]]
//! ```
//!
//! Figures (median, min, max over RUNS runs, default 5; from an HDR histogram of microseconds,
//! so within 0.1 %):
//! - **start-up election**: ours, from spawning every peer to an established leader (a quorum
//!   acknowledged NEWLEADER) that every peer follows; ZooKeeper, the leader's own
//!   `LEADER ELECTION TOOK` log figure (its election proper, without discovery and sync, so
//!   the comparison favours ZooKeeper);
//! - **failover**: kill of the leader (our peer's task aborted and its sockets closed; `kill -9`
//!   of the ZooKeeper process) → a new leader established with quorum acknowledgements (ours:
//!   its status carries the new epoch; ZooKeeper: `srvr` polled every 2 ms on the survivors
//!   until one answers `Mode: leader`, which it does only once serving).
//!
//! Both run with tickTime 2000 ms, initLimit 10, syncLimit 5. Our peers use the default
//! `ElectionConfig` (decide without the 200 ms finalize wait once every connected voter agrees)
//! and a 100 ms start-up connect grace (the first round starts once every other voter is
//! connected, at most 100 ms after start; on loopback that takes about a millisecond).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ha_testkit::{ServerMode, ZkEnsemble};
use hdrhistogram::Histogram;
use tokio::net::TcpListener;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, QuorumPeer};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport};
use zab_core::{ElectionConfig, LearnerType, QuorumMaj, ServerEntry, ServerId, ServerState};

const LIMIT: Duration = Duration::from_secs(60);

/// Start-up election and failover of `zab-core` peers over loopback TCP beside real
/// ZooKeeper 3.8 servers, for 3 and 5 servers: median, min and max over RUNS runs.
#[derive(Debug, Parser)]
#[command(name = "election_failover")]
struct Args {
    /// Runs per figure.
    #[arg(default_value_t = 5, value_parser = positive::<usize>)]
    runs: usize,
    /// Only our peers: do not start ZooKeeper servers.
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

fn main() {
    let Args { runs, ours_only } = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let zk_ok = !ours_only && ha_testkit::zookeeper_available();
    if !zk_ok && !ours_only {
        println!("ZooKeeper is not installed: printing our figures only");
    }
    println!("runs per figure: {runs}; times in ms (median / min / max)");
    let mut failed_runs = 0usize;
    for n in [3usize, 5] {
        let mut ours_start = Vec::new();
        let mut ours_fail = Vec::new();
        for _ in 0..runs {
            let (s, f) = rt.block_on(ours_run(n));
            ours_start.push(s);
            ours_fail.push(f);
        }
        let mut zk_start = Vec::new();
        let mut zk_fail = Vec::new();
        let mut zk_errors = 0usize;
        if zk_ok {
            for run in 1..=runs {
                match zk_run(n) {
                    Ok((s, f)) => {
                        zk_start.push(s);
                        zk_fail.push(f);
                    }
                    Err(e) => {
                        zk_errors += 1;
                        println!("{n} servers: ZooKeeper run {run} of {runs} failed: {e}");
                    }
                }
            }
        }
        report(n, "start-up election", &ours_start, &zk_start);
        report(n, "failover", &ours_fail, &zk_fail);
        if zk_errors > 0 {
            println!(
                "{n} servers: {zk_errors} of {runs} ZooKeeper runs failed; its figures are over \
                 the other {}",
                runs - zk_errors
            );
            failed_runs += zk_errors;
        }
    }
    if failed_runs > 0 {
        println!("{failed_runs} ZooKeeper runs failed in all");
        std::process::exit(1);
    }
}

/// Median, min and max of `v` in milliseconds (`None` when empty).
fn stats(v: &[Duration]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    // Microseconds, three significant digits; the histogram grows to fit each value (only a
    // value beyond what a resize can hold is clamped to the largest one it holds).
    let mut h = Histogram::<u64>::new(3).expect("3 significant digits are supported");
    for d in v {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        if h.record(us).is_err() {
            h.saturating_record(us);
        }
    }
    // Each figure as the middle of its histogram bucket, so that one run shows one value.
    let ms = |us: u64| h.median_equivalent(us) as f64 / 1000.0;
    Some((ms(h.value_at_quantile(0.5)), ms(h.min()), ms(h.max())))
}

fn report(n: usize, what: &str, ours: &[Duration], zk: &[Duration]) {
    let fmt = |s: Option<(f64, f64, f64)>| match s {
        Some((m, lo, hi)) => format!("{m:8.1} / {lo:8.1} / {hi:8.1}"),
        None => "       n/a".to_string(),
    };
    let (o, z) = (stats(ours), stats(zk));
    let ratio = match (o, z) {
        (Some((om, ..)), Some((zm, ..))) if zm > 0.0 => format!("{:.3}", om / zm),
        _ => "n/a".into(),
    };
    println!(
        "{n} servers, {what:<18} zab-core {}   ZooKeeper 3.8 {}   ratio (ours/zk median) {ratio}",
        fmt(o),
        fmt(z)
    );
}

/// One run of ours: start-up election, then failover of the leader.
async fn ours_run(n: usize) -> (Duration, Duration) {
    let mut listeners = Vec::new();
    let mut addrs = HashMap::new();
    for sid in 1..=n as i64 {
        let e = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let q = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = PeerAddrs {
            election: e.local_addr().expect("addr"),
            quorum: q.local_addr().expect("addr"),
        };
        addrs.insert(ServerId(sid), a);
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
    let mut peers = Vec::new();
    for (sid, e, q) in listeners {
        let cfg = TcpConfig::new(ServerId(sid), addrs[&ServerId(sid)].election, addrs.clone());
        let t = TcpTransport::start(cfg, e, q).expect("transport");
        let pc = PeerConfig::new(ServerId(sid), LearnerType::Participant, qv.clone())
            .with_election(ElectionConfig::default())
            .with_timing(Timing::default())
            .with_connect_grace(Duration::from_millis(100));
        let peer = QuorumPeer::new(pc, t, MemoryElectionStore::default())
            .await
            .expect("peer");
        peers.push(peer);
    }
    let t0 = Instant::now();
    let handles: Vec<PeerHandle> = peers.into_iter().map(QuorumPeer::spawn).collect();
    let leader = wait_settled(&handles).await;
    let startup = t0.elapsed();

    let t1 = Instant::now();
    let idx = handles
        .iter()
        .position(|h| h.sid() == leader)
        .expect("leader handle");
    handles[idx].kill();
    loop {
        let done = handles
            .iter()
            .any(|h| h.sid() != leader && h.current().is_established_leader());
        if done {
            break;
        }
        assert!(t1.elapsed() < LIMIT, "no new leader");
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    (startup, t1.elapsed())
}

async fn wait_settled(handles: &[PeerHandle]) -> ServerId {
    let t0 = Instant::now();
    loop {
        let st: Vec<_> = handles.iter().map(|h| h.current()).collect();
        if let Some(l) = st.iter().find(|s| s.is_established_leader()) {
            let all = st.iter().all(|s| {
                s.leader == l.leader && s.epoch == l.epoch && s.state != ServerState::Looking
            });
            if all {
                return l.leader.expect("leader");
            }
        }
        assert!(t0.elapsed() < LIMIT, "no leader: {st:?}");
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// One run of ZooKeeper: the leader's own start-up election figure, then failover.
fn zk_run(n: usize) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let mut zk = ZkEnsemble::builder().servers(n).start()?;
    let leader = zk.wait_for_leader(LIMIT)?;
    let startup = election_took(&zk.log(leader))
        .ok_or_else(|| format!("no `LEADER ELECTION TOOK` line in server {leader}'s log"))?;
    let t1 = Instant::now();
    zk.kill(leader)?;
    let survivors: Vec<u64> = zk.sids().into_iter().filter(|s| *s != leader).collect();
    loop {
        let led = survivors.iter().any(|s| {
            zk.srvr(*s)
                .map(|x| x.mode == ServerMode::Leader)
                .unwrap_or(false)
        });
        if led {
            break;
        }
        if t1.elapsed() > LIMIT {
            return Err(ha_testkit::TestkitError::Timeout {
                what: "a new ZooKeeper leader".into(),
                waited: LIMIT,
            }
            .into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok((startup, t1.elapsed()))
}

/// The last `LEADER ELECTION TOOK - <n> MS` figure in a ZooKeeper log.
fn election_took(log: &str) -> Option<Duration> {
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find("LEADER ELECTION TOOK - ")? + "LEADER ELECTION TOOK - ".len()..];
            let ms: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some(Duration::from_millis(ms))
        })
        .next_back()
}
