//! Memory of a leader through a million writes, and of bringing back a learner a million
//! transactions behind, with the leader's bounded in-memory window of committed transactions
//! (ZooKeeper's `committedLog`, `commitLogCount` = 500) and its log reads for learners further
//! behind:
//!
//! ```text
//! cargo run --release -p zab-core --example leader_memory [-- --writes 1000000 --snap-count 100000]
//! ```
//!
//! Three [`PeerCore`]s in one thread, each with a [`FileTxnLog`] in its own temporary directory
//! (no fsync: `FsyncPolicy::OnSync`, one sync per round) and a state machine of bounded size
//! (a table of 4,096 slots of the last 16-byte payload written there, 64 KiB as a snapshot).
//! Their actions are carried out in order, as [`PeerAction`] asks; packets and notifications
//! go through an in-process wire that is drained every round. Server 2 stays down while
//! servers 1 and 3 elect 3 and it commits `--writes` writes of 16 bytes, proposed in rounds of
//! 256; the live heap (a counting global allocator) is printed every 10 % of the writes. Then
//! server 2 starts with nothing: printed are the time until it serves the epoch with every
//! transaction applied, how the leader synced it (log probes, log chunks, SNAP), and the
//! highest live heap seen meanwhile (sampled every round, the whole process: the three
//! servers and the wire).
//!
//! The embedder answers a `ReadLog` only once the wire towards that learner is drained (the
//! contract lets an answer come later), so the DIFF goes one chunk at a time.
//! `--snap-count 0` never snapshots: the learner then gets a DIFF of every transaction from
//! the leader's log.

use std::alloc::System;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use zab_core::peer::{PeerAction, PeerConfig, PeerCore, PeerInput};
use zab_core::state_machine::{SnapshotError, StateMachine};
use zab_core::store::PersistedEpochs;
use zab_core::txnlog::{
    read_committed_window, read_for_sync, FileTxnLog, FsyncPolicy, Snapshot, SnapshotPolicy, Txn,
    TxnLog,
};
use zab_core::{LearnerType, Notification, QuorumMaj, ServerId, Zxid};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[derive(Debug, Parser)]
struct Args {
    /// Writes committed while server 2 is down.
    #[arg(long, default_value_t = 1_000_000)]
    writes: u64,
    /// Snapshot every this many committed transactions (ZooKeeper's `snapCount`); 0: never.
    #[arg(long, default_value_t = 100_000)]
    snap_count: u64,
}

/// Bytes allocated and not freed (`stats_alloc` already counts a realloc's growth in
/// `bytes_allocated` and its shrinking in `bytes_deallocated`).
fn live_bytes() -> usize {
    let s = GLOBAL.stats();
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

const SLOTS: usize = 4096;
const VALUE: usize = 16;

/// A state machine of bounded size: slot `counter % SLOTS` holds the last payload.
struct SlotMachine {
    last: Zxid,
    slots: Vec<[u8; VALUE]>,
}

impl SlotMachine {
    fn new() -> Self {
        Self {
            last: Zxid::ZERO,
            slots: vec![[0; VALUE]; SLOTS],
        }
    }
}

impl StateMachine for SlotMachine {
    fn apply(&mut self, txn: &Txn) {
        let slot = txn.zxid.counter() as usize % SLOTS;
        let n = txn.data.len().min(VALUE);
        self.slots[slot][..n].copy_from_slice(&txn.data[..n]);
        self.last = txn.zxid;
    }

    fn last_applied(&self) -> Zxid {
        self.last
    }

    fn take_snapshot(&self) -> Snapshot {
        let mut out = BytesMut::with_capacity(SLOTS * VALUE);
        for s in &self.slots {
            out.put_slice(s);
        }
        Snapshot {
            zxid: self.last,
            data: out.freeze(),
        }
    }

    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        if snapshot.data.len() != SLOTS * VALUE {
            return Err(SnapshotError {
                zxid: snapshot.zxid,
                reason: "wrong size".into(),
            });
        }
        for (i, c) in snapshot.data.chunks(VALUE).enumerate() {
            self.slots[i].copy_from_slice(c);
        }
        self.last = snapshot.zxid;
        Ok(())
    }

    fn reset(&mut self) {
        *self = Self::new();
    }
}

enum Msg {
    Vote(Notification),
    Packet(zab_core::packet::QuorumPacket),
    Down,
    Refused,
}

/// How the leader synced learners.
#[derive(Debug, Default)]
struct SyncStats {
    probes: usize,
    chunks: usize,
    chunk_txns: usize,
    snapshots: usize,
}

struct Server {
    id: ServerId,
    core: PeerCore,
    log: FileTxnLog,
    sm: SlotMachine,
    epochs: PersistedEpochs,
    unsynced: Option<Zxid>,
    /// `ReadLog` requests held until the wire towards their learner is drained.
    held_reads: Vec<PeerAction>,
}

type Wire = VecDeque<(ServerId, ServerId, Msg)>;

impl Server {
    fn new(id: i64, dir: &std::path::Path, snap_count: u64) -> Self {
        let quorum = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
        let cfg = PeerConfig::new(ServerId(id), LearnerType::Participant, quorum)
            .with_connect_grace(Duration::ZERO);
        let log = FileTxnLog::open(dir.join(format!("s{id}")), FsyncPolicy::OnSync).expect("log");
        let mut core =
            PeerCore::new(cfg, PersistedEpochs::default()).with_log(Zxid::ZERO, Zxid::ZERO);
        let every = if snap_count == 0 {
            u64::MAX
        } else {
            snap_count
        };
        core.set_snapshot_policy(SnapshotPolicy::every(every));
        Self {
            id: ServerId(id),
            core,
            log,
            sm: SlotMachine::new(),
            epochs: PersistedEpochs::default(),
            unsynced: None,
            held_reads: Vec::new(),
        }
    }

    /// Carries out every pending action, in order.
    fn drain(&mut self, now: Instant, wire: &mut Wire, stats: &mut SyncStats) {
        while let Some(a) = self.core.poll_action() {
            self.carry_out(now, a, wire, stats);
        }
    }

    fn carry_out(&mut self, now: Instant, a: PeerAction, wire: &mut Wire, stats: &mut SyncStats) {
        let me = self.id;
        match a {
            PeerAction::SendNotification { to, notification } => {
                wire.push_back((me, to, Msg::Vote(notification)))
            }
            PeerAction::Send { to, packet } => wire.push_back((me, to, Msg::Packet(packet))),
            PeerAction::Close(s) => wire.push_back((me, s, Msg::Down)),
            PeerAction::Refuse(s) => wire.push_back((me, s, Msg::Refused)),
            PeerAction::PersistAcceptedEpoch(e) => self.epochs.accepted_epoch = e,
            PeerAction::PersistCurrentEpoch(e) => self.epochs.current_epoch = e,
            PeerAction::Append(txns) => {
                self.log.append_deferred(&txns).expect("append");
                self.unsynced = txns.last().map(|t| t.zxid);
            }
            PeerAction::SyncLog => {
                self.log.sync().expect("sync");
                self.unsynced = None;
            }
            PeerAction::Truncate(z) => {
                self.log.truncate(z).expect("truncate");
                assert!(
                    self.sm.last_applied() <= z,
                    "no applied transaction is cut here"
                );
            }
            PeerAction::RestoreSnapshot(s) => {
                self.log.clear().expect("clear");
                self.sm.restore(&s).expect("restore");
                self.log.save_snapshot(&s).expect("save");
            }
            PeerAction::Apply(t) if t.zxid > self.sm.last_applied() => self.sm.apply(&t),
            PeerAction::CommitLogged(z) => {
                let sm = &mut self.sm;
                let from = sm.last_applied();
                self.log
                    .scan_after(from, &mut |t| {
                        if t.zxid > z {
                            return false;
                        }
                        sm.apply(&t);
                        true
                    })
                    .expect("read");
            }
            PeerAction::TakeSnapshot => {
                let s = self.sm.take_snapshot();
                self.log.save_snapshot(&s).expect("save");
                self.log.purge(s.zxid).expect("purge");
            }
            PeerAction::LoadHistory { max } => {
                let (base, committed) = read_committed_window(&self.log, max).expect("read");
                self.core
                    .handle(now, PeerInput::History { base, committed });
            }
            read @ PeerAction::ReadLog { .. } => self.held_reads.push(read),
            PeerAction::ReadSnapshot(learner) => {
                stats.snapshots += 1;
                let snapshot = self.log.latest_snapshot().expect("read");
                self.core
                    .handle(now, PeerInput::SnapshotRead { learner, snapshot });
            }
            // The in-process wire does not limit what waits on it.
            PeerAction::AwaitDrain(learner) => self.core.handle(now, PeerInput::Drained(learner)),
            _ => {}
        }
    }

    /// Answers the held reads whose learner has nothing left on the wire.
    fn answer_reads(&mut self, now: Instant, wire: &Wire, stats: &mut SyncStats) -> bool {
        let mut answered = false;
        for a in std::mem::take(&mut self.held_reads) {
            let PeerAction::ReadLog {
                learner,
                after,
                upto,
                max_bytes,
                max_txns,
            } = a
            else {
                continue;
            };
            if wire.iter().any(|(f, t, _)| *f == self.id && *t == learner) {
                self.held_reads.push(a);
                continue;
            }
            let read = read_for_sync(&self.log, after, upto, max_bytes, max_txns).expect("read");
            if max_bytes == 0 {
                stats.probes += 1;
            } else {
                stats.chunks += 1;
                stats.chunk_txns += read.txns.len();
            }
            self.core.handle(now, PeerInput::LogRead { learner, read });
            answered = true;
        }
        answered
    }

    /// One group commit: the appends so far are made durable and reported.
    fn flush(&mut self, now: Instant) {
        if let Some(z) = self.unsynced.take() {
            self.log.sync().expect("sync");
            self.core.handle(now, PeerInput::LogDurable(z));
        }
    }
}

struct Ensemble {
    servers: BTreeMap<ServerId, Server>,
    up: BTreeMap<ServerId, bool>,
    wire: Wire,
    stats: SyncStats,
    /// The most messages on the wire at once.
    wire_peak: usize,
}

impl Ensemble {
    fn start(&mut self, id: ServerId) {
        let now = Instant::now();
        self.up.insert(id, true);
        let others: Vec<ServerId> = self
            .up
            .iter()
            .filter(|(s, up)| **s != id && **up)
            .map(|(s, _)| *s)
            .collect();
        for o in &others {
            self.servers
                .get_mut(o)
                .unwrap()
                .core
                .handle(now, PeerInput::ElectionConnected(id));
            let s = self.servers.get_mut(&id).unwrap();
            s.core.handle(now, PeerInput::ElectionConnected(*o));
        }
        self.servers
            .get_mut(&id)
            .unwrap()
            .core
            .handle(now, PeerInput::Start);
    }

    /// Runs every server's actions and delivers the wire until quiet; then one group commit
    /// per server, and again until nothing moves.
    fn settle(&mut self) {
        loop {
            let now = Instant::now();
            let mut moved = false;
            for s in self.servers.values_mut() {
                if self.up[&s.id] {
                    if s.core.next_deadline().is_some_and(|d| d <= now) {
                        s.core.handle(now, PeerInput::Tick);
                    }
                    s.drain(now, &mut self.wire, &mut self.stats);
                }
            }
            self.wire_peak = self.wire_peak.max(self.wire.len());
            while let Some((from, to, msg)) = self.wire.pop_front() {
                moved = true;
                if !self.up[&to] {
                    continue;
                }
                let s = self.servers.get_mut(&to).unwrap();
                let input = match msg {
                    Msg::Vote(notification) => PeerInput::Notification { from, notification },
                    Msg::Packet(packet) => PeerInput::Packet { from, packet },
                    Msg::Down => PeerInput::QuorumDown(from),
                    Msg::Refused => PeerInput::QuorumRefused(from),
                };
                s.core.handle(now, input);
                s.drain(now, &mut self.wire, &mut self.stats);
            }
            for s in self.servers.values_mut() {
                if self.up[&s.id] {
                    if s.answer_reads(now, &self.wire, &mut self.stats) {
                        moved = true;
                    }
                    if s.unsynced.is_some() {
                        s.flush(now);
                        moved = true;
                    }
                    s.drain(now, &mut self.wire, &mut self.stats);
                }
            }
            if !moved && self.wire.is_empty() {
                return;
            }
        }
    }

    fn leader(&self) -> Option<ServerId> {
        self.servers
            .values()
            .find(|s| self.up[&s.id] && s.core.status().is_established_leader())
            .map(|s| s.id)
    }

    fn wait(&mut self, what: &str, mut done: impl FnMut(&Ensemble) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: not within 120 s");
            self.settle();
            if !done(self) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut e = Ensemble {
        servers: (1..=3)
            .map(|id| (ServerId(id), Server::new(id, dir.path(), args.snap_count)))
            .collect(),
        up: (1..=3).map(|id| (ServerId(id), false)).collect(),
        wire: VecDeque::new(),
        stats: SyncStats::default(),
        wire_peak: 0,
    };
    e.start(ServerId(1));
    e.start(ServerId(3));
    e.wait("an established leader", |e| e.leader().is_some());
    let leader = e.leader().expect("leader");
    println!(
        "leader {} established with server 2 down; {} writes of {VALUE} bytes, snapCount {}",
        leader.0, args.writes, args.snap_count
    );
    let payload = Bytes::from_static(&[7u8; VALUE]);
    let started = Instant::now();
    let base_heap = live_bytes();
    println!("{:>10} {:>12} {:>10}", "committed", "live heap", "elapsed");
    println!("{:>10} {:>8.2} MiB {:>8.1} s", 0, mib(base_heap), 0.0);
    let step = (args.writes / 10).max(1);
    let mut proposed = 0u64;
    let mut next_report = step;
    let mut heaps = Vec::new();
    while proposed < args.writes {
        let now = Instant::now();
        let n = 256.min(args.writes - proposed);
        let l = e.servers.get_mut(&leader).unwrap();
        for _ in 0..n {
            l.core.handle(now, PeerInput::Write(payload.clone()));
        }
        proposed += n;
        e.settle();
        let committed = e.servers[&leader].sm.last_applied().counter() as u64;
        if committed >= next_report {
            let h = live_bytes();
            heaps.push(h);
            println!(
                "{committed:>10} {:>8.2} MiB {:>8.1} s",
                mib(h),
                started.elapsed().as_secs_f64()
            );
            next_report += step;
        }
    }
    let last = e.servers[&leader].sm.last_applied();
    if let (Some(min), Some(max)) = (heaps.iter().min(), heaps.iter().max()) {
        println!(
            "live heap over the writes: {:.2} .. {:.2} MiB (start {:.2} MiB); the leader's window holds {:?}",
            mib(*min),
            mib(*max),
            mib(base_heap),
            e.servers[&leader]
                .core
                .leader_discovery()
                .and_then(|d| d.committed_window())
        );
    }

    // Server 2 comes back with nothing.
    let before = live_bytes();
    let mut peak = before;
    e.wire_peak = 0;
    let t0 = Instant::now();
    e.start(ServerId(2));
    let deadline = t0 + Duration::from_secs(600);
    loop {
        e.settle();
        peak = peak.max(live_bytes());
        let s2 = &e.servers[&ServerId(2)];
        if s2.core.status().epoch.is_some() && s2.sm.last_applied() >= last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server 2 did not catch up within 600 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = t0.elapsed();
    println!(
        "learner {} transactions behind caught up in {:.2} s: {} log probe(s), {} log chunk(s) of {} transactions, {} SNAP(s)",
        last.counter(),
        took.as_secs_f64(),
        e.stats.probes,
        e.stats.chunks,
        e.stats.chunk_txns,
        e.stats.snapshots
    );
    println!(
        "live heap during the catch-up: {:.2} MiB before, {:.2} MiB at most (whole process: three servers and the wire); at most {} messages on the wire at once",
        mib(before),
        mib(peak),
        e.wire_peak
    );
    println!(
        "(the learner holds what it is synced until NEWLEADER, as ZooKeeper's packetsNotCommitted: the rest of that peak is the learner's)"
    );
}
