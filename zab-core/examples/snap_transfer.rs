//! Time and memory of bringing a learner back over loopback TCP between two of our peers:
//!
//! ```text
//! cargo run --release -p zab-core --features tokio --example snap_transfer -- --snap-mib 200
//! cargo run --release -p zab-core --features tokio --example snap_transfer -- --behind 1000000
//! ```
//!
//! `--snap-mib N`: the leader sends a snapshot of N MiB (`leader_sync_packets`: a SNAP header
//! and 1 MiB chunks, then NEWLEADER); the learner's `LearnerBroadcast` assembles it and asks
//! for its restore. `--behind N`: the leader committed N transactions of 16 bytes and
//! snapshotted its `RecordingStateMachine` 1,000 before the end; a learner with nothing gets
//! what `choose_sync` picks (a SNAP and the 1,000 after it, by the `snapshotSizeFactor` rule)
//! and restores and logs it. Printed: the plan, the wall time from the first send to the
//! learner's NEWLEADER acknowledgement, and the heap: live bytes before the transfer and the
//! highest live bytes seen (sampled at every packet and action, by a counting allocator), and
//! the process's peak resident size (`VmHWM`).

use std::alloc::System;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use clap::Parser;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use tokio::net::TcpListener;
use zab_core::broadcast::{choose_sync, leader_sync_packets, BroadcastAction, LearnerBroadcast};
use zab_core::discovery::{packet_type, LearnerInfo, QuorumPacket};
use zab_core::state_machine::{RecordingStateMachine, StateMachine};
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport, Transport, TransportEvent};
use zab_core::txnlog::{Snapshot, Txn};
use zab_core::{ServerId, Zxid};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[derive(Debug, Parser)]
struct Args {
    /// Send a snapshot of this many MiB.
    #[arg(long)]
    snap_mib: Option<usize>,
    /// Bring back a learner this many transactions behind.
    #[arg(long)]
    behind: Option<u32>,
}

/// Bytes allocated and not freed (`stats_alloc` already counts a realloc's growth in
/// `bytes_allocated` and its shrinking in `bytes_deallocated`).
fn live_bytes() -> usize {
    let s = GLOBAL.stats();
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.expect("bind")
}

/// A leader (sid 3) and a learner (sid 1) connected on the quorum port.
async fn pair() -> (TcpTransport, TcpTransport) {
    let (e3, q3) = (listener().await, listener().await);
    let (e3_addr, q3_addr) = (e3.local_addr().unwrap(), q3.local_addr().unwrap());
    let mut leader =
        TcpTransport::start(TcpConfig::new(ServerId(3), e3_addr, HashMap::new()), e3, q3).unwrap();
    let (e1, q1) = (listener().await, listener().await);
    let e1_addr = e1.local_addr().unwrap();
    let peers = HashMap::from([(
        ServerId(3),
        PeerAddrs {
            election: e3_addr,
            quorum: q3_addr,
        },
    )]);
    let mut learner =
        TcpTransport::start(TcpConfig::new(ServerId(1), e1_addr, peers), e1, q1).unwrap();
    let info = LearnerInfo {
        sid: 1,
        protocol_version: 0x10000,
        config_version: 0,
    }
    .encode();
    learner.send_quorum(
        ServerId(3),
        QuorumPacket::with_data(packet_type::FOLLOWERINFO, 1 << 32, info),
    );
    loop {
        if let Some(TransportEvent::Quorum { .. }) = leader.recv().await {
            return (leader, learner);
        }
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (mut leader, mut learner) = pair().await;
    let (snapshot, log, expected) = if let Some(mib) = args.snap_mib {
        let data: Vec<u8> = (0..mib << 20).map(|i| (i % 253) as u8).collect();
        let s = Snapshot {
            zxid: Zxid::new(1, 1),
            data: data.into(),
        };
        (s, Vec::new(), None)
    } else {
        let n = args.behind.unwrap_or(1_000_000).max(1_001);
        let log: Vec<Txn> = (1..=n)
            .map(|c| Txn::new(Zxid::new(1, c), c.to_be_bytes().repeat(4)))
            .collect();
        let mut state = RecordingStateMachine::default();
        for t in &log[..(n - 1_000) as usize] {
            state.apply(t);
        }
        let s = state.take_snapshot();
        for t in &log[(n - 1_000) as usize..] {
            state.apply(t);
        }
        (s, log, Some(state))
    };
    let base = if log.is_empty() {
        snapshot.zxid
    } else {
        Zxid::ZERO
    };
    let plan = choose_sync(Zxid::ZERO, base, &log, Some(&snapshot)).expect("a plan");
    let packets = leader_sync_packets(&plan, 2);
    let kind = match &plan {
        zab_core::broadcast::SyncPlan::Snap { txns, .. } => {
            format!(
                "SNAP of {} bytes + {} transactions",
                snapshot.data.len(),
                txns.len()
            )
        }
        zab_core::broadcast::SyncPlan::Diff { txns, .. } => format!("DIFF of {}", txns.len()),
        zab_core::broadcast::SyncPlan::Trunc { .. } => "TRUNC".to_string(),
    };
    drop(plan);
    println!("plan: {kind}, {} packets", packets.len());
    let before = live_bytes();
    let mut peak = before;
    let started = Instant::now();
    for p in packets {
        leader.send_quorum(ServerId(1), p);
    }
    peak = peak.max(live_bytes());
    let mut core = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    let mut replica = RecordingStateMachine::default();
    let mut restored_bytes = 0;
    let mut acked = false;
    while !acked {
        let ev = tokio::time::timeout(Duration::from_secs(120), learner.recv())
            .await
            .expect("the transfer stalled")
            .expect("transport closed");
        let TransportEvent::Quorum { packet, .. } = ev else {
            panic!("the connection went down: {ev:?}");
        };
        core.handle_packet(packet);
        peak = peak.max(live_bytes());
        while let Some(a) = core.poll_action() {
            match a {
                BroadcastAction::RestoreSnapshot(s) => {
                    restored_bytes = s.data.len();
                    if expected.is_some() {
                        replica.restore(&s).expect("restore");
                    }
                }
                BroadcastAction::Log(txns) => txns.iter().for_each(|t| replica.apply(t)),
                BroadcastAction::Send { packet, .. } if packet.kind == packet_type::ACK => {
                    acked = true;
                }
                _ => {}
            }
            peak = peak.max(live_bytes());
        }
    }
    let took = started.elapsed();
    if let Some(state) = expected {
        assert_eq!(replica, state, "the learner did not catch up");
    }
    println!(
        "restored {restored_bytes} bytes; NEWLEADER acknowledged after {:.2} s",
        took.as_secs_f64()
    );
    println!(
        "heap live before the transfer {:.1} MiB, highest during it {:.1} MiB (+{:.1} MiB); peak RSS {:.1} MiB",
        before as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        peak.saturating_sub(before) as f64 / 1048576.0,
        vm_hwm_kib().unwrap_or(0) as f64 / 1024.0,
    );
}
