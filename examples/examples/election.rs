//! Five `zab-core` peers in one process: start-up election, two leader crashes with
//! re-elections, then both crashed servers restarting and rejoining as followers. Prints a
//! timeline with timings and a verdict.
//!
//! ```text
//! cargo run -p ha-examples --example election            # in-memory mesh
//! cargo run -p ha-examples --example election -- --tcp   # TCP on loopback (ZooKeeper's wire format)
//! ```
//!
//! What is checked (the exit code is 0 only if all of it holds):
//! - every step ends with one established leader that every live peer follows in the same epoch;
//! - each re-election establishes a strictly higher epoch (Z1, Z8);
//! - with two of five servers down the remaining three still form a quorum and elect;
//! - restarted servers rejoin the current leader's epoch as followers, without an election of
//!   their own winning (they keep their persisted epochs, Z1);
//! - throughout the run, no epoch ever had two different established leaders (Z1), as watched
//!   on every peer's status channel.
//!
//! "Established" means what [`zab_core::peer::PeerStatus::epoch`] means: a leader whose
//! NEWLEADER a quorum acknowledged, a follower that got UPTODATE.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::net::TcpListener;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, QuorumPeer};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::{MemoryNetwork, PeerAddrs, TcpConfig, TcpTransport};
use zab_core::{ElectionConfig, LearnerType, QuorumMaj, ServerEntry, ServerId, ServerState};

const SERVERS: i64 = 5;
const STEP_LIMIT: Duration = Duration::from_secs(10);

/// Which established leaders were seen in which epoch, over the whole run.
type LeadersSeen = Arc<Mutex<BTreeMap<i64, BTreeSet<ServerId>>>>;

enum Network {
    Memory(MemoryNetwork),
    Tcp {
        addrs: HashMap<ServerId, PeerAddrs>,
        quorum: Arc<QuorumMaj>,
    },
}

struct Cluster {
    net: Network,
    stores: BTreeMap<ServerId, MemoryElectionStore>,
    peers: BTreeMap<ServerId, PeerHandle>,
    seen: LeadersSeen,
    t0: Instant,
}

fn timing() -> Timing {
    Timing::new(Duration::from_millis(200), 10, 5)
}

impl Cluster {
    async fn new(tcp: bool) -> Self {
        let ids: Vec<ServerId> = (1..=SERVERS).map(ServerId).collect();
        let net = if tcp {
            let mut addrs = HashMap::new();
            for sid in &ids {
                // Reserve two loopback ports per server; the listeners are bound again at start.
                let e = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let q = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let a = PeerAddrs {
                    election: e.local_addr().expect("local addr"),
                    quorum: q.local_addr().expect("local addr"),
                };
                addrs.insert(*sid, a);
            }
            let members = addrs
                .iter()
                .map(|(sid, a)| {
                    let addr = format!("127.0.0.1:{}:{}", a.quorum.port(), a.election.port());
                    (*sid, ServerEntry::participant(addr))
                })
                .collect();
            Network::Tcp {
                addrs,
                quorum: Arc::new(QuorumMaj::new(members, 0)),
            }
        } else {
            Network::Memory(MemoryNetwork::new())
        };
        let stores = ids
            .iter()
            .map(|s| (*s, MemoryElectionStore::default()))
            .collect();
        Self {
            net,
            stores,
            peers: BTreeMap::new(),
            seen: LeadersSeen::default(),
            t0: Instant::now(),
        }
    }

    fn stamp(&self) -> String {
        format!("[{:>8.1} ms]", self.t0.elapsed().as_secs_f64() * 1000.0)
    }

    /// Starts (or restarts) `sid` with its durable store, and watches its status.
    async fn start(&mut self, sid: ServerId) {
        let store = self.stores[&sid].clone();
        let handle = match &self.net {
            Network::Memory(net) => {
                let voters = (1..=SERVERS).collect::<Vec<_>>();
                let q = Arc::new(QuorumMaj::with_ids(voters, []));
                let peer = QuorumPeer::new(peer_config(sid, q), net.endpoint(sid), store)
                    .await
                    .expect("peer");
                peer.spawn()
            }
            Network::Tcp { addrs, quorum } => {
                let a = addrs[&sid];
                let e = bind_again(a.election).await;
                let q = bind_again(a.quorum).await;
                let cfg = TcpConfig::new(sid, a.election, addrs.clone());
                let t = TcpTransport::start(cfg, e, q).expect("transport");
                let peer = QuorumPeer::new(peer_config(sid, quorum.clone()), t, store)
                    .await
                    .expect("peer");
                peer.spawn()
            }
        };
        let mut rx = handle.status();
        let seen = self.seen.clone();
        tokio::spawn(async move {
            loop {
                let s = *rx.borrow_and_update();
                if let (ServerState::Leading, Some(e)) = (s.state, s.epoch) {
                    seen.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(e)
                        .or_default()
                        .insert(sid);
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        self.peers.insert(sid, handle);
    }

    fn kill(&mut self, sid: ServerId) {
        if let Some(h) = self.peers.remove(&sid) {
            h.kill();
        }
    }

    /// Waits until one live peer leads an established epoch and every live peer follows it.
    async fn settled(&self) -> Option<(ServerId, i64, Duration)> {
        let t = Instant::now();
        loop {
            let st: Vec<_> = self.peers.values().map(|h| h.current()).collect();
            if let Some(l) = st.iter().find(|s| s.is_established_leader()) {
                let all = st.iter().all(|s| {
                    s.leader == l.leader && s.epoch == l.epoch && s.state != ServerState::Looking
                });
                if let (true, Some(leader), Some(epoch)) = (all, l.leader, l.epoch) {
                    return Some((leader, epoch, t.elapsed()));
                }
            }
            if t.elapsed() > STEP_LIMIT {
                println!("             no settled ensemble within {STEP_LIMIT:?}: {st:?}");
                return None;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }

    fn roles(&self) -> String {
        self.peers
            .iter()
            .map(|(sid, h)| {
                let r = match h.current().state {
                    ServerState::Leading => "L",
                    ServerState::Following => "F",
                    ServerState::Observing => "O",
                    ServerState::Looking => "?",
                };
                format!("{}={r}", sid.0)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn peer_config(sid: ServerId, quorum: Arc<QuorumMaj>) -> PeerConfig {
    PeerConfig::new(sid, LearnerType::Participant, quorum)
        .with_election(ElectionConfig::default())
        .with_timing(timing())
        .with_connect_grace(Duration::from_millis(100))
}

/// Binds `addr` again, retrying while a just-killed peer's listener is still being dropped.
async fn bind_again(addr: SocketAddr) -> TcpListener {
    let t = Instant::now();
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) if t.elapsed() > Duration::from_secs(2) => panic!("bind {addr}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Records one check, printing it.
fn check(ok: &mut bool, holds: bool, what: &str) {
    println!(
        "             {} {what}",
        if holds { "ok  " } else { "FAIL" }
    );
    *ok &= holds;
}

async fn run(tcp: bool) -> bool {
    let mut ok = true;
    let mut c = Cluster::new(tcp).await;
    let t = timing();
    println!(
        "zab-core election: {SERVERS} peers over {}; tickTime {} ms, initLimit {}, syncLimit {}",
        if tcp {
            "TCP on loopback"
        } else {
            "the in-memory mesh"
        },
        t.tick_time.as_millis(),
        t.init_limit,
        t.sync_limit
    );

    // 1. Start-up election.
    println!("{} start servers 1..={SERVERS}", c.stamp());
    for sid in 1..=SERVERS {
        c.start(ServerId(sid)).await;
    }
    let Some((l1, e1, d)) = c.settled().await else {
        return false;
    };
    println!(
        "{} server {} leads epoch {e1} ({}), all 5 follow it; elected in {}",
        c.stamp(),
        l1.0,
        c.roles(),
        ms(d)
    );
    check(
        &mut ok,
        e1 >= 1,
        "one established leader, every peer in its epoch",
    );

    // 2. Kill the leader.
    println!("{} kill the leader, server {}", c.stamp(), l1.0);
    c.kill(l1);
    let Some((l2, e2, d)) = c.settled().await else {
        return false;
    };
    println!(
        "{} server {} leads epoch {e2} ({}); re-elected in {}",
        c.stamp(),
        l2.0,
        c.roles(),
        ms(d)
    );
    check(&mut ok, l2 != l1, "a different server leads");
    check(&mut ok, e2 > e1, "the epoch grew");

    // 3. Kill the new leader: three of five remain, still a quorum.
    println!(
        "{} kill the leader, server {} (3 of 5 left: still a quorum)",
        c.stamp(),
        l2.0
    );
    c.kill(l2);
    let Some((l3, e3, d)) = c.settled().await else {
        return false;
    };
    println!(
        "{} server {} leads epoch {e3} ({}); re-elected in {}",
        c.stamp(),
        l3.0,
        c.roles(),
        ms(d)
    );
    check(&mut ok, l3 != l1 && l3 != l2, "a live server leads");
    check(&mut ok, e3 > e2, "the epoch grew");

    // 4. Restart both: they rejoin the current leader as followers.
    println!(
        "{} restart servers {} and {} with their persisted epochs",
        c.stamp(),
        l1.0,
        l2.0
    );
    c.start(l1).await;
    c.start(l2).await;
    let Some((l4, e4, d)) = c.settled().await else {
        return false;
    };
    println!(
        "{} server {} still leads epoch {e4} ({}); rejoined in {}",
        c.stamp(),
        l4.0,
        c.roles(),
        ms(d)
    );
    check(
        &mut ok,
        (l4, e4) == (l3, e3),
        "both rejoined as followers of the same leader and epoch",
    );

    // Z1 over the whole run.
    let seen = c
        .seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let summary = seen
        .iter()
        .map(|(e, ls)| {
            let ls: Vec<String> = ls.iter().map(|s| s.0.to_string()).collect();
            format!("epoch {e}: {}", ls.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ");
    println!("{} leaders seen: {summary}", c.stamp());
    check(
        &mut ok,
        seen.values().all(|ls| ls.len() == 1),
        "never two leaders in one epoch",
    );
    ok
}

/// Five `zab-core` peers in one process: start-up election, two leader crashes with
/// re-elections, both crashed servers rejoining; prints a timeline and a verdict.
#[derive(Debug, Parser)]
#[command(name = "election")]
struct Args {
    /// Connect the peers over TCP on loopback (ZooKeeper's wire format) instead of the
    /// in-memory mesh.
    #[arg(long)]
    tcp: bool,
}

fn main() {
    let Args { tcp } = Args::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let ok = rt.block_on(run(tcp));
    if ok {
        println!("VERDICT: PASS: one leader per epoch, epochs grew, quorum of 3 elected, restarted servers rejoined");
        std::process::exit(0);
    }
    println!("VERDICT: FAIL (see the lines marked FAIL above)");
    std::process::exit(1);
}
