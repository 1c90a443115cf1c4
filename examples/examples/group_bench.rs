//! The consumer-group figures: the rebalance time of a 100-member group against Kafka's
//! `group.initial.rebalance.delay.ms` (3000 ms, and 0), on the sans-IO core with a simulated
//! clock and over TCP against three in-process brokers; then OffsetCommit throughput and
//! latency with 1,000 partitions per commit against acks=all produce on the same cluster.
//!
//! ```text
//! cargo run --release -p ha-examples --example group_bench [-- --members <n>]
//!     [--spread-ms <ms>] [--heartbeat-ms <ms>] [--commits <n>] [--clients <n>]
//!     [--partitions-per-commit <n>] [--skip-tcp-rebalance]
//! ```
//!
//! Rebalance: `--members` members (default 100) start one after another over `--spread-ms`
//! (default 1000 ms, as a deployment's processes do), each joining with KIP-394's two-step
//! JoinGroup, syncing (the leader assigns), then heartbeating every `--heartbeat-ms` (default
//! 3000, Kafka's `heartbeat.interval.ms`) and rejoining on `REBALANCE_IN_PROGRESS`. Session
//! timeout 10 s, rebalance timeout 300 s (Kafka's consumer defaults). The figure is the time
//! from the first JoinGroup to every member having its assignment of one generation that holds
//! them all. On the core, messages take 1 ms each way and an append commits in 2 ms (simulated).
//! Over TCP, the cluster is three `BrokerNode`s on one in-memory coordination tree, with
//! `__consumer_offsets` of 12 partitions, replication factor 3.
//!
//! Commits: `--clients` connections (default 3, one group each, outside group management:
//! generation -1, as a simple consumer commits), each sending `--commits` (default 300)
//! OffsetCommit requests of `--partitions-per-commit` partitions (default 1000) one after
//! another; each commit is one append of that many records to the group's offsets partition,
//! answered once committed (acks=-1 under the coordinator). The produce path in the same run:
//! as many connections, each sending as many Produce requests (acks=-1) of one batch with as
//! many records of the same size (about 60 bytes) to a topic of replication factor 3. Both
//! topics have `min.insync.replicas=2`.

use std::collections::BTreeMap;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use ha_coordination::MemoryTree;
use hdrhistogram::Histogram;
use kafka_broker::group::GroupConfig;
use kafka_broker::node::{AutoCreateConfig, BrokerNode, LogPlacement, NodeConfig};
use kafka_broker::KafkaConnection;
use kafka_group_coordinator as core;
use kafka_group_coordinator::{partition_for, GroupCoordinator, GroupCoordinatorConfig};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_wire::messages::metadata_request::MetadataRequestTopic;
use kafka_wire::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_wire::messages::{
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, MetadataRequest,
    OffsetCommitRequest, ProduceRequest, SyncGroupRequest,
};
use kafka_wire::records::RecordBatchBuilder;
use kafka_wire::{RequestBody, ResponseBody};

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 300_000;
const OFFSETS_PARTITIONS: i32 = 12;
const PRODUCE_TOPIC: &str = "group-bench-produce";
const COMMIT_TOPIC: &str = "group-bench-commits";

/// The consumer-group figures.
#[derive(Debug, Clone, Copy, Parser)]
#[command(name = "group_bench")]
struct Settings {
    /// Members of the rebalancing group.
    #[arg(long, value_name = "N", default_value_t = 100)]
    members: usize,
    /// Members start one after another over this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    spread_ms: u64,
    /// `heartbeat.interval.ms` of the members.
    #[arg(long, value_name = "MS", default_value_t = 3_000)]
    heartbeat_ms: u64,
    /// OffsetCommit (and Produce) requests per client.
    #[arg(long, value_name = "N", default_value_t = 300)]
    commits: usize,
    /// Client connections of the commit and produce runs.
    #[arg(long, value_name = "N", default_value_t = 3)]
    clients: usize,
    /// Partitions per OffsetCommit (records per produce batch).
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    partitions_per_commit: usize,
    /// Skip the rebalances over TCP (they take real seconds).
    #[arg(long)]
    skip_tcp_rebalance: bool,
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits are supported")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

fn ms_at(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

// ---------------------------------------------------------------------------------------
// Rebalance on the core, simulated clock
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Waiting,
    Stable,
}

struct SimMember {
    member_id: String,
    generation: i32,
    phase: Phase,
    next_heartbeat: u64,
}

enum SimEvent {
    ToCoordinator(usize, core::Request),
    ToMember(usize, core::Response),
    Appended(u64),
}

fn join_request(group: &str, member_id: &str, i: usize) -> core::Request {
    core::Request::JoinGroup(core::JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![core::JoinGroupProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"topic"),
        }],
        require_known_member_id: true,
        client_id: format!("member-{i}"),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    })
}

/// The time from the first JoinGroup to every member Stable in one generation, and that
/// generation, on the core with a simulated clock.
fn core_rebalance(s: &Settings, delay_ms: i32) -> (u64, i32) {
    const NET_MS: u64 = 1;
    const APPEND_MS: u64 = 2;
    let group = "rebalance";
    let mut c = GroupCoordinator::new(
        GroupCoordinatorConfig::new()
            .with_offsets_topic_num_partitions(OFFSETS_PARTITIONS)
            .with_initial_rebalance_delay_ms(delay_ms),
    );
    let partition = c.partition_for(group);
    c.handle(
        0,
        core::Input::Load {
            partition,
            leader_epoch: 0,
            records: vec![],
        },
    );
    let n = s.members.max(1);
    let mut members: Vec<SimMember> = (0..n)
        .map(|_| SimMember {
            member_id: String::new(),
            generation: -1,
            phase: Phase::NotStarted,
            next_heartbeat: u64::MAX,
        })
        .collect();
    let start_at = |i: usize| s.spread_ms * i as u64 / n as u64;
    let mut events: BTreeMap<(u64, u64), SimEvent> = BTreeMap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BTreeMap<(u64, u64), SimEvent>, at: u64, e: SimEvent| {
        seq += 1;
        events.insert((at, seq), e);
    };
    let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
    let mut next_rid = 0u64;
    for now in 0..3_600_000u64 {
        for (i, m) in members.iter_mut().enumerate() {
            if m.phase == Phase::NotStarted && start_at(i) <= now {
                m.phase = Phase::Waiting;
                push(
                    &mut events,
                    now + NET_MS,
                    SimEvent::ToCoordinator(i, join_request(group, "", i)),
                );
            } else if m.phase == Phase::Stable && m.next_heartbeat <= now {
                m.phase = Phase::Waiting;
                let hb = core::Request::Heartbeat(core::HeartbeatRequest {
                    group_id: group.into(),
                    generation_id: m.generation,
                    member_id: m.member_id.clone(),
                    group_instance_id: None,
                });
                push(&mut events, now + NET_MS, SimEvent::ToCoordinator(i, hb));
            }
        }
        while let Some((&key, _)) = events.iter().next() {
            if key.0 > now {
                break;
            }
            let Some(e) = events.remove(&key) else { break };
            match e {
                SimEvent::ToCoordinator(i, request) => {
                    next_rid += 1;
                    owner.insert(next_rid, i);
                    c.handle(
                        now,
                        core::Input::Request {
                            request_id: next_rid,
                            request,
                        },
                    );
                }
                SimEvent::Appended(append_id) => c.handle(
                    now,
                    core::Input::AppendCompleted {
                        append_id,
                        result: Ok(0),
                    },
                ),
                SimEvent::ToMember(i, response) => {
                    let m = &mut members[i];
                    let mut rejoin = false;
                    match response {
                        core::Response::JoinGroup(r) => match r.error {
                            ErrorCode::MemberIdRequired => {
                                m.member_id = r.member_id;
                                rejoin = true;
                            }
                            ErrorCode::None => {
                                m.generation = r.generation_id;
                                let assignments = if r.leader == m.member_id {
                                    r.members
                                        .iter()
                                        .map(|x| core::SyncGroupAssignment {
                                            member_id: x.member_id.clone(),
                                            assignment: Bytes::from_static(b"partitions"),
                                        })
                                        .collect()
                                } else {
                                    Vec::new()
                                };
                                let sync = core::Request::SyncGroup(core::SyncGroupRequest {
                                    group_id: group.into(),
                                    generation_id: m.generation,
                                    member_id: m.member_id.clone(),
                                    assignments,
                                    ..Default::default()
                                });
                                push(&mut events, now + NET_MS, SimEvent::ToCoordinator(i, sync));
                            }
                            _ => rejoin = true,
                        },
                        core::Response::SyncGroup(r) => {
                            if r.error == ErrorCode::None {
                                m.phase = Phase::Stable;
                                m.next_heartbeat = now + s.heartbeat_ms;
                            } else {
                                rejoin = true;
                            }
                        }
                        core::Response::Heartbeat(r) => {
                            if r.error == ErrorCode::None {
                                m.phase = Phase::Stable;
                                m.next_heartbeat = now + s.heartbeat_ms;
                            } else {
                                rejoin = true;
                            }
                        }
                        _ => {}
                    }
                    if rejoin {
                        m.phase = Phase::Waiting;
                        let j = join_request(group, &m.member_id, i);
                        push(&mut events, now + NET_MS, SimEvent::ToCoordinator(i, j));
                    }
                }
            }
            drain_core(
                &mut c,
                &mut owner,
                &mut events,
                now,
                NET_MS,
                APPEND_MS,
                &mut push,
            );
        }
        if c.next_deadline().is_some_and(|d| d <= now) {
            c.handle(now, core::Input::Tick);
        }
        drain_core(
            &mut c,
            &mut owner,
            &mut events,
            now,
            NET_MS,
            APPEND_MS,
            &mut push,
        );
        let generation = c.group_generation(group).unwrap_or(-1);
        if c.group_state(group) == Some(core::GroupState::Stable)
            && members
                .iter()
                .all(|m| m.generation == generation && m.phase != Phase::NotStarted)
            && members.iter().all(|m| m.next_heartbeat != u64::MAX)
            && c.pending_appends() == 0
        {
            return (now - start_at(0), generation);
        }
    }
    (u64::MAX, -1)
}

fn drain_core(
    c: &mut GroupCoordinator,
    owner: &mut BTreeMap<u64, usize>,
    events: &mut BTreeMap<(u64, u64), SimEvent>,
    now: u64,
    net_ms: u64,
    append_ms: u64,
    push: &mut impl FnMut(&mut BTreeMap<(u64, u64), SimEvent>, u64, SimEvent),
) {
    while let Some(a) = c.poll_action() {
        match a {
            core::Action::Respond {
                request_id,
                response,
            } => {
                if let Some(i) = owner.remove(&request_id) {
                    push(events, now + net_ms, SimEvent::ToMember(i, response));
                }
            }
            core::Action::Append { append_id, .. } => {
                push(events, now + append_ms, SimEvent::Appended(append_id));
            }
            core::Action::Loaded { .. } => {}
        }
    }
}

// ---------------------------------------------------------------------------------------
// The three-broker cluster over TCP
// ---------------------------------------------------------------------------------------

struct Cluster {
    nodes: Vec<BrokerNode>,
}

impl Cluster {
    async fn start(delay_ms: i32) -> BenchResult<Cluster> {
        let tree = MemoryTree::new();
        let mut nodes = Vec::new();
        for id in 1..=3 {
            let mut c = NodeConfig::new(id, "127.0.0.1:0".parse()?);
            c.logs = LogPlacement::Memory;
            // min.insync.replicas=2 for both the offsets topic and the produce topic.
            let partition = c.broker.partition.with_min_insync_replicas(2);
            c.broker = c.broker.with_partition(partition);
            c.auto_create_topics = Some(
                AutoCreateConfig::default()
                    .with_partitions(3)
                    .with_replication_factor(3),
            );
            c.groups = GroupConfig::new()
                .with_coordinator(
                    GroupCoordinatorConfig::new()
                        .with_offsets_topic_num_partitions(OFFSETS_PARTITIONS)
                        .with_initial_rebalance_delay_ms(delay_ms),
                )
                .with_offsets_topic_replication_factor(3);
            nodes.push(BrokerNode::start(c, Arc::new(tree.connect())).await?);
        }
        // Every broker sees the three before the first FindCoordinator: the shell creates
        // `__consumer_offsets` with min(offsets.topic.replication.factor, brokers) replicas
        // (Kafka refuses with COORDINATOR_NOT_AVAILABLE instead).
        for n in &nodes {
            let mut conn = KafkaConnection::connect(n.local_addr(), "metadata").await?;
            let started = Instant::now();
            loop {
                let body = RequestBody::Metadata(MetadataRequest {
                    topics: Some(vec![]),
                    ..Default::default()
                });
                if let ResponseBody::Metadata(m) = send(&mut conn, 9, &body).await? {
                    if m.brokers.len() == 3 {
                        break;
                    }
                }
                if started.elapsed() > Duration::from_secs(60) {
                    return Err("the brokers did not see each other in 60 s".into());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(Cluster { nodes })
    }

    async fn shutdown(self) {
        for n in self.nodes {
            n.shutdown().await;
        }
    }

    fn any(&self) -> SocketAddr {
        self.nodes[0].local_addr()
    }
}

async fn send(
    conn: &mut KafkaConnection,
    version: i16,
    body: &RequestBody,
) -> BenchResult<ResponseBody> {
    Ok(conn.send(version, body).await?)
}

/// FindCoordinator until the group's coordinator is named, then a connection to it.
async fn coordinator_connection(
    via: SocketAddr,
    group: &str,
    client: &str,
) -> BenchResult<KafkaConnection> {
    let mut conn = KafkaConnection::connect(via, client).await?;
    let started = Instant::now();
    loop {
        let body = RequestBody::FindCoordinator(FindCoordinatorRequest {
            key: group.into(),
            key_type: 0,
            ..Default::default()
        });
        if let ResponseBody::FindCoordinator(r) = send(&mut conn, 3, &body).await? {
            if r.error_code == ErrorCode::None.code() {
                let addr: SocketAddr = format!("{}:{}", r.host, r.port).parse()?;
                return Ok(KafkaConnection::connect(addr, client).await?);
            }
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!("no coordinator for {group} after 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Default)]
struct Progress {
    first_join: Option<Instant>,
    synced: Vec<Option<i32>>,
    members_at: BTreeMap<i32, usize>,
}

fn wire_join(group: &str, member_id: &str) -> RequestBody {
    RequestBody::JoinGroup(JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"topic"),
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// One member: join, sync, heartbeat, rejoin on a rebalance; forever (the driver stops it).
async fn tcp_member(
    i: usize,
    via: SocketAddr,
    group: String,
    heartbeat: Duration,
    progress: Arc<Mutex<Progress>>,
) -> BenchResult<()> {
    let mut conn = coordinator_connection(via, &group, &format!("member-{i}")).await?;
    let mut member_id = String::new();
    loop {
        {
            let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
            p.first_join.get_or_insert_with(Instant::now);
        }
        let ResponseBody::JoinGroup(j) = send(&mut conn, 5, &wire_join(&group, &member_id)).await?
        else {
            return Err("not a JoinGroup response".into());
        };
        match ErrorCode::from_code(j.error_code) {
            ErrorCode::MemberIdRequired => {
                member_id = j.member_id.to_string();
                continue;
            }
            ErrorCode::None => {}
            ErrorCode::CoordinatorLoadInProgress | ErrorCode::RebalanceInProgress => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            e => return Err(format!("JoinGroup failed: {e:?}").into()),
        }
        let generation = j.generation_id;
        let assignments = if j.leader == j.member_id {
            progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .members_at
                .insert(generation, j.members.len());
            j.members
                .iter()
                .map(|m| SyncGroupRequestAssignment {
                    member_id: m.member_id.clone(),
                    assignment: Bytes::from_static(b"partitions"),
                    ..Default::default()
                })
                .collect()
        } else {
            Vec::new()
        };
        let sync = RequestBody::SyncGroup(SyncGroupRequest {
            group_id: group.as_str().into(),
            generation_id: generation,
            member_id: member_id.as_str().into(),
            assignments,
            ..Default::default()
        });
        let ResponseBody::SyncGroup(r) = send(&mut conn, 3, &sync).await? else {
            return Err("not a SyncGroup response".into());
        };
        if r.error_code != ErrorCode::None.code() {
            continue;
        }
        progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .synced[i] = Some(generation);
        loop {
            tokio::time::sleep(heartbeat).await;
            let hb = RequestBody::Heartbeat(HeartbeatRequest {
                group_id: group.as_str().into(),
                generation_id: generation,
                member_id: member_id.as_str().into(),
                ..Default::default()
            });
            let ResponseBody::Heartbeat(h) = send(&mut conn, 3, &hb).await? else {
                return Err("not a Heartbeat response".into());
            };
            if h.error_code != ErrorCode::None.code() {
                break;
            }
        }
    }
}

/// The time from the first JoinGroup to every member Stable in one generation over TCP.
async fn tcp_rebalance(s: &Settings, delay_ms: i32) -> BenchResult<(Duration, i32)> {
    let cluster = Cluster::start(delay_ms).await?;
    let group = format!("rebalance-{delay_ms}");
    let n = s.members.max(1);
    // Load the group's offsets partition first, so that loading is not in the figure.
    drop(coordinator_connection(cluster.any(), &group, "probe").await?);
    let progress = Arc::new(Mutex::new(Progress {
        synced: vec![None; n],
        ..Progress::default()
    }));
    let mut tasks = Vec::new();
    let spread = Duration::from_millis(s.spread_ms);
    for i in 0..n {
        let via = cluster.nodes[i % cluster.nodes.len()].local_addr();
        let (group, progress) = (group.clone(), progress.clone());
        let heartbeat = Duration::from_millis(s.heartbeat_ms);
        let start = spread.mul_f64(i as f64 / n as f64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(start).await;
            tcp_member(i, via, group, heartbeat, progress).await
        }));
    }
    let started = Instant::now();
    let result = loop {
        {
            let p = progress.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(Some(g)) = p.synced.first() {
                if p.synced.iter().all(|x| *x == Some(*g)) && p.members_at.get(g) == Some(&n) {
                    let first = p.first_join.unwrap_or(started);
                    break Ok((first.elapsed(), *g));
                }
            }
        }
        if let Some(t) = tasks.iter().find(|t| t.is_finished()) {
            let _ = t;
            break Err("a member stopped".into());
        }
        if started.elapsed() > Duration::from_secs(120) {
            break Err("the group did not settle in 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    for t in &tasks {
        t.abort();
    }
    cluster.shutdown().await;
    result
}

// ---------------------------------------------------------------------------------------
// OffsetCommit against produce
// ---------------------------------------------------------------------------------------

struct Rate {
    per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Groups whose offsets partitions differ, one per client.
fn commit_groups(n: usize) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    (0..)
        .map(|k| format!("commit-bench-{k}"))
        .filter(|g| {
            seen.insert(partition_for(g, OFFSETS_PARTITIONS))
                || seen.len() >= OFFSETS_PARTITIONS as usize
        })
        .take(n)
        .collect()
}

fn commit_request(group: &str, partitions: usize, offset: i64) -> RequestBody {
    RequestBody::OffsetCommit(OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        member_id: "".into(),
        topics: vec![OffsetCommitRequestTopic {
            name: COMMIT_TOPIC.into(),
            partitions: (0..partitions as i32)
                .map(|p| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: offset,
                    committed_metadata: Some("".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn commit_error(r: &ResponseBody) -> Option<i16> {
    match r {
        ResponseBody::OffsetCommit(c) => c
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|e| *e != 0),
        _ => Some(-1),
    }
}

async fn commit_run(cluster: &Cluster, s: &Settings) -> BenchResult<Rate> {
    let mut conns = Vec::new();
    for (i, g) in commit_groups(s.clients.max(1)).into_iter().enumerate() {
        let mut conn = coordinator_connection(cluster.any(), &g, &format!("committer-{i}")).await?;
        // Until the partition is loaded.
        let started = Instant::now();
        while let Some(e) = commit_error(
            &send(
                &mut conn,
                7,
                &commit_request(&g, s.partitions_per_commit, 0),
            )
            .await?,
        ) {
            if started.elapsed() > Duration::from_secs(60) {
                return Err(format!("OffsetCommit keeps failing with {e}").into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        conns.push((g, conn));
    }
    let t = Instant::now();
    let mut tasks = Vec::new();
    for (g, mut conn) in conns {
        let (commits, partitions) = (s.commits, s.partitions_per_commit);
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            for k in 0..commits {
                let body = commit_request(&g, partitions, k as i64 + 1);
                let sent = Instant::now();
                let r = send(&mut conn, 7, &body).await?;
                record(&mut h, sent.elapsed());
                if let Some(e) = commit_error(&r) {
                    return Err::<_, Box<dyn Error + Send + Sync>>(
                        format!("OffsetCommit failed with {e}").into(),
                    );
                }
            }
            Ok(h)
        }));
    }
    let mut all = histogram();
    for task in tasks {
        all.add(task.await??)?;
    }
    let elapsed = t.elapsed();
    Ok(Rate {
        per_s: all.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: ms_at(&all, 0.5),
        p99_ms: ms_at(&all, 0.99),
    })
}

/// The leaders of the produce topic's partitions (creating it on the first Metadata).
async fn produce_leaders(cluster: &Cluster) -> BenchResult<Vec<(i32, SocketAddr)>> {
    let mut conn = KafkaConnection::connect(cluster.any(), "metadata").await?;
    let started = Instant::now();
    loop {
        let body = RequestBody::Metadata(MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(PRODUCE_TOPIC.into()),
                ..Default::default()
            }]),
            allow_auto_topic_creation: true,
            ..Default::default()
        });
        if let ResponseBody::Metadata(m) = send(&mut conn, 9, &body).await? {
            let addrs: BTreeMap<i32, String> = m
                .brokers
                .iter()
                .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
                .collect();
            if let Some(t) = m.topics.iter().find(|t| t.error_code == 0) {
                let ready: Option<Vec<(i32, SocketAddr)>> = t
                    .partitions
                    .iter()
                    .map(|p| {
                        (p.error_code == 0 && p.isr_nodes.len() == 3)
                            .then(|| addrs.get(&p.leader_id))
                            .flatten()
                            .and_then(|a| a.parse().ok())
                            .map(|a| (p.partition_index, a))
                    })
                    .collect();
                if let Some(r) = ready.filter(|r| !r.is_empty()) {
                    return Ok(r);
                }
            }
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the produce topic never came online".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn produce_request(partition: i32, records: usize) -> BenchResult<RequestBody> {
    // Records about the size of an offset commit's: a ~30-byte key, a ~30-byte value.
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..records {
        let key = format!("{COMMIT_TOPIC}-key-{i:08}");
        b.append(i as i64, Some(key.as_bytes()), Some(&[7u8; 28]), &[])?;
    }
    Ok(RequestBody::Produce(ProduceRequest {
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: PRODUCE_TOPIC.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(b.build()?),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }))
}

fn produce_error(r: &ResponseBody) -> Option<i16> {
    match r {
        ResponseBody::Produce(p) => p
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .map(|p| p.error_code)
            .find(|e| *e != 0),
        _ => Some(-1),
    }
}

async fn produce_run(cluster: &Cluster, s: &Settings) -> BenchResult<Rate> {
    let leaders = produce_leaders(cluster).await?;
    let mut clients = Vec::new();
    for i in 0..s.clients.max(1) {
        let (partition, addr) = leaders[i % leaders.len()];
        let mut conn = KafkaConnection::connect(addr, &format!("producer-{i}")).await?;
        let body = produce_request(partition, s.partitions_per_commit)?;
        // One warm-up request (and the check that the path works).
        if let Some(e) = produce_error(&send(&mut conn, 9, &body).await?) {
            return Err(format!("produce failed with {e}").into());
        }
        clients.push((conn, body));
    }
    let t = Instant::now();
    let mut tasks = Vec::new();
    for (mut conn, body) in clients {
        let n = s.commits;
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            for _ in 0..n {
                let sent = Instant::now();
                let r = send(&mut conn, 9, &body).await?;
                record(&mut h, sent.elapsed());
                if let Some(e) = produce_error(&r) {
                    return Err::<_, Box<dyn Error + Send + Sync>>(
                        format!("produce failed with {e}").into(),
                    );
                }
            }
            Ok(h)
        }));
    }
    let mut all = histogram();
    for task in tasks {
        all.add(task.await??)?;
    }
    let elapsed = t.elapsed();
    Ok(Rate {
        per_s: all.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: ms_at(&all, 0.5),
        p99_ms: ms_at(&all, 0.99),
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> BenchResult<()> {
    let s = Settings::parse();
    println!(
        "rebalance of {} members starting over {} ms, heartbeat {} ms, session {} ms, rebalance timeout {} ms",
        s.members, s.spread_ms, s.heartbeat_ms, SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS
    );
    let mut core_times = BTreeMap::new();
    for delay in [3_000, 0] {
        let (ms, generation) = core_rebalance(&s, delay);
        core_times.insert(delay, ms);
        println!(
            "  core (sans-IO, simulated clock), group.initial.rebalance.delay.ms={delay:>4}: first JoinGroup -> all Stable {ms} ms (generation {generation})"
        );
    }
    if s.skip_tcp_rebalance {
        println!("  TCP rebalance skipped (--skip-tcp-rebalance)");
    } else {
        for delay in [3_000, 0] {
            let (d, generation) = tcp_rebalance(&s, delay).await?;
            println!(
                "  TCP, 3 brokers, group.initial.rebalance.delay.ms={delay:>4}: first JoinGroup -> all Stable {} ms (generation {generation}; core figure {} ms)",
                d.as_millis(),
                core_times[&delay]
            );
        }
    }
    let cluster = Cluster::start(0).await?;
    println!(
        "OffsetCommit of {} partitions vs produce of {} records (acks=-1), {} clients x {} requests, 3 brokers, RF 3:",
        s.partitions_per_commit, s.partitions_per_commit, s.clients, s.commits
    );
    let commits = commit_run(&cluster, &s).await?;
    let produce = produce_run(&cluster, &s).await?;
    cluster.shutdown().await;
    println!(
        "  OffsetCommit: {:>8.1} commits/s ({:.0} partition offsets/s), p50 {:.2} ms, p99 {:.2} ms",
        commits.per_s,
        commits.per_s * s.partitions_per_commit as f64,
        commits.p50_ms,
        commits.p99_ms
    );
    println!(
        "  Produce:      {:>8.1} requests/s ({:.0} records/s), p50 {:.2} ms, p99 {:.2} ms",
        produce.per_s,
        produce.per_s * s.partitions_per_commit as f64,
        produce.p50_ms,
        produce.p99_ms
    );
    println!(
        "  ratio commits/s : produce requests/s = {:.2}",
        commits.per_s / produce.per_s.max(1e-9)
    );
    Ok(())
}
