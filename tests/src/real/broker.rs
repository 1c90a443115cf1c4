//! One simulated Kafka broker on the real cores: `kafka-replication`'s [`ReplicaManager`] with
//! one [`ReplicaFetcher`] per leader it follows, `kafka-controller`'s [`Controller`]
//! campaigning on the broker's own coordination session, the broker's registration in
//! `/brokers/ids` (its broker epoch, KIP-380) and the ISR writes of `kafka-broker`'s
//! [`ZkIsrWriter`]. The simulator hands it messages and time; it answers over the simulated
//! network. It can crash (its logs stay on its disk), restart, and pause.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ha_coordination::{Coordination, MemoryCoordination, MemoryTree, SessionId};
use kafka_broker::glue::{IsrChangeQueue, ZkIsrWriter};
use kafka_controller::broker_channel::ChannelConfig;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::topic_id_source::TopicIdGenerator;
use kafka_controller::zk_data::{BrokerRegistration, KafkaZkClient, TopicPartitionEntry};
use kafka_replication::isr::{BrokerId, IsrProposal, IsrResult, TopicPartition};
use kafka_replication::log::MemoryLog;
use kafka_replication::replica_fetcher::{FetcherConfig, FetcherRequest, ReplicaFetcher};
use kafka_replication::replica_manager::{
    stop_replica_targets, FetchOutcome, ProduceOutcome, ReplicaAction, ReplicaManager,
};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_wire::messages::{
    LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse, UpdateMetadataResponse,
};
use kafka_wire::{RequestBody, ResponseBody, Uuid};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;

use super::channel::{Outgoing, SimChannel};
use super::coord::{Life, LifeCell, Role, SimCoord, StaleWrite, StoreBreakage, WriteLog};
use super::{Msg, RealConfig};
use crate::net::NodeId;

/// What a broker keeps on disk: its partitions' logs while it is down.
pub type Disk = Arc<Mutex<BTreeMap<TopicPartition, MemoryLog>>>;

/// Locks a disk.
pub fn lock(disk: &Disk) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, MemoryLog>> {
    disk.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Fetcher {
    core: ReplicaFetcher,
    in_flight: Option<(u64, u64)>,
}

/// Everything a running broker process holds.
pub struct Process {
    life: LifeCell,
    coord: MemoryCoordination,
    zk: Arc<KafkaZkClient>,
    /// Its controller.
    pub controller: ControllerHandle,
    /// Its replica manager.
    pub rm: ReplicaManager<MemoryLog>,
    fetchers: BTreeMap<BrokerId, Fetcher>,
    isr_writer: Arc<ZkIsrWriter>,
    isr_tx: mpsc::UnboundedSender<(IsrProposal, IsrResult)>,
    isr_rx: mpsc::UnboundedReceiver<(IsrProposal, IsrResult)>,
    registration: Arc<Mutex<Option<(SessionId, i64)>>>,
    registering: Arc<Mutex<bool>>,
    broker_epoch: i64,
    replies: mpsc::UnboundedSender<(NodeId, NodeId, Msg)>,
    stopping: Option<Stopping>,
    delayed_fetch: BTreeMap<u64, (NodeId, u64)>,
    delayed_produce: BTreeMap<u64, (NodeId, u64)>,
    checkpointing: bool,
    last_checkpoint: u64,
    paused_until: Option<u64>,
}

/// A broker: its disk, and its process while it runs.
pub struct SimBroker {
    /// The broker id.
    pub id: BrokerId,
    /// Restarts so far.
    pub incarnation: u64,
    /// Its disk.
    pub disk: Disk,
    /// Its process, unless crashed.
    pub process: Option<Process>,
    next_id: u64,
    /// LeaderAndIsr / UpdateMetadata / StopReplica requests refused as stale (controller
    /// epoch, leader epoch or broker epoch).
    pub refused_stale: u64,
}

impl std::fmt::Debug for SimBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBroker")
            .field("id", &self.id)
            .field("incarnation", &self.incarnation)
            .field("up", &self.process.is_some())
            .finish()
    }
}

/// What the simulator gives a broker to start with.
pub struct Env<'a> {
    /// The coordination store.
    pub tree: &'a MemoryTree,
    /// Where controllers put their requests.
    pub outbox: &'a mpsc::UnboundedSender<Outgoing>,
    /// The store audit.
    pub audit: &'a Arc<Mutex<Vec<StaleWrite>>>,
    /// The log of store writes, checked one by one.
    pub writes: &'a WriteLog,
    /// Store breakage.
    pub breakage: StoreBreakage,
    /// Where answers computed off the step (a controller's ControlledShutdown reply) go.
    pub replies: &'a mpsc::UnboundedSender<(NodeId, NodeId, Msg)>,
    /// The run's seed; each controller draws its topic ids from a generator seeded from it,
    /// its broker id and its incarnation, so that one seed gives the same ids.
    pub seed: u64,
}

/// A clean stop in progress: ControlledShutdown requests to the controller.
#[derive(Debug, Clone, Copy)]
struct Stopping {
    since: u64,
    attempts: u32,
    in_flight: Option<(u64, u64)>,
    done: bool,
}

/// `controlled.shutdown.max.retries`.
const CONTROLLED_SHUTDOWN_ATTEMPTS: u32 = 3;

fn fetcher_config(cfg: &RealConfig) -> FetcherConfig {
    FetcherConfig::default()
        .with_max_wait_ms(cfg.fetch_max_wait_ms)
        .with_backoff_ms(cfg.fetch_backoff_ms)
}

impl SimBroker {
    /// Broker `id`, started with an empty disk.
    pub fn new(id: BrokerId, cfg: &RealConfig, env: &Env<'_>) -> Self {
        let mut b = SimBroker {
            id,
            incarnation: 0,
            disk: Arc::new(Mutex::new(BTreeMap::new())),
            process: None,
            next_id: 0,
            refused_stale: 0,
        };
        b.start(cfg, env);
        b
    }

    /// Whether the process runs (possibly paused).
    pub fn is_up(&self) -> bool {
        self.process.is_some()
    }

    /// Whether it is in a pause at `now`.
    pub fn is_paused(&self, now: u64) -> bool {
        self.process
            .as_ref()
            .and_then(|p| p.paused_until)
            .is_some_and(|u| u > now)
    }

    /// When the pause it is in ends, if it is in one at `now`.
    pub fn paused_until(&self, now: u64) -> Option<u64> {
        self.process
            .as_ref()
            .and_then(|p| p.paused_until)
            .filter(|u| *u > now)
    }

    /// The coordination session of the running process.
    pub fn session(&self) -> Option<SessionId> {
        self.process.as_ref().map(|p| p.coord.session_id())
    }

    /// The controller epoch this broker's controller holds, if it runs and is active.
    pub fn active_controller_epoch(&self) -> Option<i32> {
        self.process
            .as_ref()
            .and_then(|p| p.controller.status().active_epoch)
    }

    /// The replica manager, while up.
    pub fn rm(&self) -> Option<&ReplicaManager<MemoryLog>> {
        self.process.as_ref().map(|p| &p.rm)
    }

    fn start(&mut self, cfg: &RealConfig, env: &Env<'_>) {
        let life = LifeCell::new();
        let life_rx = life.clone();
        let coord = env.tree.connect();
        let controller_coord = SimCoord::new(
            coord.clone(),
            life_rx.clone(),
            Role::Controller(self.id),
            env.breakage,
            env.audit.clone(),
            env.writes.clone(),
        );
        let broker_coord: Arc<dyn Coordination> = Arc::new(SimCoord::new(
            coord.clone(),
            life_rx.clone(),
            Role::Broker(self.id),
            env.breakage,
            env.audit.clone(),
            env.writes.clone(),
        ));
        let channel = SimChannel::new(
            self.id,
            life_rx,
            env.outbox.clone(),
            Duration::from_millis(cfg.control_timeout_ms),
        );
        let mut ids = StdRng::seed_from_u64(
            env.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ (u64::from(self.id.unsigned_abs()) << 48)
                ^ self.incarnation,
        );
        let config = ControllerConfig::new(self.id)
            .with_channel(
                ChannelConfig::new()
                    .with_retry_backoff(Duration::from_millis(cfg.control_backoff_ms)),
            )
            .with_leader_imbalance_check_interval(Duration::from_millis(cfg.rebalance_interval_ms))
            .with_topic_ids(TopicIdGenerator::new(move || {
                Uuid::from_u128(ids.random::<u128>())
            }));
        let controller = Controller::start(config, Arc::new(controller_coord), Arc::new(channel));
        let disk = self.disk.clone();
        let rm = ReplicaManager::new(
            self.id,
            cfg.partition_config(),
            0,
            Box::new(move |tp: &TopicPartition| Ok(lock(&disk).remove(tp).unwrap_or_default())),
        );
        let mut rm = rm;
        if let Some(hook) = cfg.brokers_ignore_epochs {
            hook(&mut rm);
        }
        // Kafka's defaults: a write lost with the connection is resent while the session
        // lives.
        let isr_writer = Arc::new(ZkIsrWriter::new(
            broker_coord.clone(),
            IsrChangeQueue::new(tokio::time::Instant::now()),
        ));
        let (isr_tx, isr_rx) = mpsc::unbounded_channel();
        self.process = Some(Process {
            life,
            coord,
            zk: Arc::new(KafkaZkClient::new(broker_coord)),
            controller,
            rm,
            fetchers: BTreeMap::new(),
            isr_writer,
            isr_tx,
            isr_rx,
            registration: Arc::new(Mutex::new(None)),
            registering: Arc::new(Mutex::new(false)),
            broker_epoch: -1,
            replies: env.replies.clone(),
            stopping: None,
            delayed_fetch: BTreeMap::new(),
            delayed_produce: BTreeMap::new(),
            checkpointing: false,
            last_checkpoint: 0,
            paused_until: None,
        });
    }

    /// The process dies: nothing it started completes; its logs stay on disk (all of them:
    /// the simulated disk loses nothing that was written).
    pub fn crash(&mut self) -> Option<SessionId> {
        let p = self.process.take()?;
        let session = p.coord.session_id();
        p.life.set(Life::Dead);
        p.controller.shutdown();
        let mut disk = lock(&self.disk);
        for (tp, log) in p.rm.into_logs() {
            disk.insert(tp, log);
        }
        Some(session)
    }

    /// The process starts again from its disk, with a new session (and so a new broker
    /// epoch once registered).
    pub fn restart(&mut self, cfg: &RealConfig, env: &Env<'_>) {
        if self.process.is_none() {
            self.incarnation += 1;
            self.start(cfg, env);
        }
    }

    /// Begins a clean stop (K6): ControlledShutdown to the controller until it has moved
    /// every leadership, or after `CONTROLLED_SHUTDOWN_ATTEMPTS` answers.
    pub fn begin_controlled_shutdown(&mut self, now: u64) -> bool {
        match self.process.as_mut() {
            Some(p) if p.stopping.is_none() && p.paused_until.is_none() => {
                p.stopping = Some(Stopping {
                    since: now,
                    attempts: 0,
                    in_flight: None,
                    done: false,
                });
                true
            }
            _ => false,
        }
    }

    /// When the clean stop in progress began, if one is.
    pub fn stopping_since(&self) -> Option<u64> {
        self.process
            .as_ref()
            .and_then(|p| p.stopping)
            .map(|s| s.since)
    }

    /// Whether the clean stop is through its ControlledShutdown requests: the process can go.
    pub fn ready_to_stop(&self) -> bool {
        self.process
            .as_ref()
            .and_then(|p| p.stopping)
            .is_some_and(|s| s.done)
    }

    /// Stops the world until `until`.
    pub fn pause(&mut self, until: u64) {
        if let Some(p) = self.process.as_mut() {
            p.paused_until = Some(until);
            p.life.set(Life::Paused);
        }
    }

    /// Ends a pause that is over at `now`.
    fn maybe_wake(&mut self, now: u64) {
        if let Some(p) = self.process.as_mut() {
            if p.paused_until.is_some_and(|u| u <= now) {
                p.paused_until = None;
                p.life.set(Life::Running);
            }
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        (self.next_id << 8) | (self.id as u64 & 0xff)
    }

    /// One step of the process: wake from a pause, register on a new session, apply ISR
    /// answers, run the manager's timers and perform its actions, send fetcher requests.
    pub fn step(&mut self, now: u64, cfg: &RealConfig, out: &mut Vec<(NodeId, Msg)>) {
        self.maybe_wake(now);
        if self.is_paused(now) {
            return;
        }
        let id = self.id;
        let Some(p) = self.process.as_mut() else {
            return;
        };
        // Registration (K5): on start and on every new session.
        let session = p.coord.session_id();
        let registered = *p
            .registration
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, epoch)) = registered {
            p.broker_epoch = p.broker_epoch.max(epoch);
        }
        let mut registering = p.registering.lock().unwrap_or_else(PoisonError::into_inner);
        if registered.is_none_or(|(s, _)| s != session) && !*registering {
            *registering = true;
            let zk = p.zk.clone();
            let slot = p.registration.clone();
            let flag = p.registering.clone();
            tokio::spawn(async move {
                let registration = BrokerRegistration::plaintext(&format!("b{id}"), 9092, None, 0);
                if let Ok(epoch) = zk.register_broker(id, &registration).await {
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some((session, epoch));
                }
                *flag.lock().unwrap_or_else(PoisonError::into_inner) = false;
            });
        }
        drop(registering);
        while let Ok((proposal, result)) = p.isr_rx.try_recv() {
            p.rm.on_isr_result(&proposal, result);
        }
        p.rm.tick(now);
        if p.checkpointing && now >= p.last_checkpoint + 100 {
            p.last_checkpoint = now;
            let _ = p.rm.checkpoint_high_watermarks();
        }
        self.drain_actions(cfg, out);
        self.poll_fetchers(now, cfg, out);
        self.poll_controlled_shutdown(now, out);
    }

    /// Sends the next ControlledShutdown, to the controller this broker's metadata names.
    fn poll_controlled_shutdown(&mut self, now: u64, out: &mut Vec<(NodeId, Msg)>) {
        let id = self.next_id();
        let Some(p) = self.process.as_mut() else {
            return;
        };
        let Some(s) = p.stopping.as_mut().filter(|s| !s.done) else {
            return;
        };
        if s.in_flight.is_some_and(|(_, sent)| now < sent + 300) || p.broker_epoch < 0 {
            return;
        }
        let Some(controller) = p.rm.metadata().controller_id() else {
            return;
        };
        s.in_flight = Some((id, now));
        out.push((
            controller,
            Msg::ControlledShutdown {
                id,
                broker_epoch: p.broker_epoch,
            },
        ));
    }

    fn drain_actions(&mut self, cfg: &RealConfig, out: &mut Vec<(NodeId, Msg)>) {
        let Some(p) = self.process.as_mut() else {
            return;
        };
        while let Some(action) = p.rm.poll_action() {
            match action {
                ReplicaAction::StartHighWatermarkCheckpoint => p.checkpointing = true,
                // The ISR writer's controller epochs are set where the LeaderAndIsr is
                // handled (`control`), with the request's controller epoch.
                ReplicaAction::BecameLeader { .. } | ReplicaAction::BecameFollower { .. } => {}
                ReplicaAction::AddFetcherPartitions { leader, partitions } => {
                    p.fetchers
                        .entry(leader)
                        .or_insert_with(|| Fetcher {
                            core: ReplicaFetcher::new(self.id, leader, fetcher_config(cfg)),
                            in_flight: None,
                        })
                        .core
                        .add_partitions(partitions);
                }
                ReplicaAction::RemoveFetcherPartitions { partitions } => {
                    for f in p.fetchers.values_mut() {
                        f.core.remove_partitions(partitions.iter());
                    }
                }
                ReplicaAction::ShutdownIdleFetcher { leader } => {
                    if p.fetchers.get(&leader).is_some_and(|f| f.core.is_idle()) {
                        p.fetchers.remove(&leader);
                    }
                }
                ReplicaAction::AlterIsr(proposal) => {
                    let writer = p.isr_writer.clone();
                    let zk = p.zk.clone();
                    let tx = p.isr_tx.clone();
                    tokio::spawn(async move {
                        let tp = proposal.topic_partition.clone();
                        let result = match writer.try_propose(&proposal).await {
                            Ok(r) => r,
                            Err(_) => IsrResult::Conflict { current: None },
                        };
                        if matches!(result, IsrResult::Committed { .. }) {
                            let entry = TopicPartitionEntry {
                                topic: tp.topic.to_string(),
                                partition: tp.partition,
                                extra: Default::default(),
                            };
                            let _ = zk.create_isr_change_notification(vec![entry]).await;
                        }
                        let _ = tx.send((proposal, result));
                    });
                }
                ReplicaAction::ProduceResponse {
                    request_id,
                    response,
                } => {
                    if let Some((to, id)) = p.delayed_produce.remove(&request_id) {
                        out.push((to, Msg::ProduceResp { id, response }));
                    }
                }
                ReplicaAction::FetchResponse {
                    request_id,
                    response,
                } => {
                    if let Some((to, id)) = p.delayed_fetch.remove(&request_id) {
                        out.push((to, Msg::FetchResp { id, response }));
                    }
                }
            }
        }
    }

    fn poll_fetchers(&mut self, now: u64, cfg: &RealConfig, out: &mut Vec<(NodeId, Msg)>) {
        let leaders: Vec<BrokerId> = match self.process.as_ref() {
            Some(p) => p.fetchers.keys().copied().collect(),
            None => return,
        };
        for leader in leaders {
            let id = self.next_id();
            let Some(p) = self.process.as_mut() else {
                return;
            };
            let Some(f) = p.fetchers.get_mut(&leader) else {
                continue;
            };
            if let Some((_, sent)) = f.in_flight {
                if now < sent + cfg.fetch_timeout_ms {
                    continue;
                }
                f.in_flight = None;
                f.core.on_link_error(now);
            }
            let msg = match f.core.poll_request(now, &mut p.rm) {
                Some(FetcherRequest::Fetch(request)) => Msg::Fetch { id, request },
                Some(FetcherRequest::OffsetForLeaderEpoch(request)) => {
                    Msg::EpochQuery { id, request }
                }
                None => continue,
            };
            f.in_flight = Some((id, now));
            out.push((leader, msg));
        }
    }

    /// Handles a message delivered to this broker.
    pub fn handle(
        &mut self,
        now: u64,
        from: NodeId,
        msg: Msg,
        cfg: &RealConfig,
        out: &mut Vec<(NodeId, Msg)>,
    ) {
        let Some(p) = self.process.as_mut() else {
            return;
        };
        match msg {
            Msg::Control { id, version, body } => {
                // A broker serves the controller only once registered (Kafka registers
                // before it opens its listeners).
                if p.broker_epoch < 0 {
                    return;
                }
                let body = self.control(now, version, body, cfg);
                if let (Some(hook), Some(p)) = (cfg.partition_hook, self.process.as_mut()) {
                    let tps: Vec<TopicPartition> = p.rm.partitions().cloned().collect();
                    for tp in tps {
                        if let Some(part) = p.rm.partition_mut(&tp) {
                            hook(part);
                        }
                    }
                }
                out.push((from, Msg::ControlResp { id, body }));
            }
            Msg::Fetch { id, request } => match p.rm.fetch(now, &request) {
                FetchOutcome::Respond(response) => {
                    out.push((from, Msg::FetchResp { id, response }))
                }
                FetchOutcome::Delayed { request_id } => {
                    p.delayed_fetch.insert(request_id, (from, id));
                }
            },
            Msg::EpochQuery { id, request } => {
                let response = p.rm.offset_for_leader_epoch(&request);
                out.push((from, Msg::EpochAnswer { id, response }));
            }
            Msg::Produce { id, request, .. } => match p.rm.produce(now, &request) {
                ProduceOutcome::Respond(response) => {
                    out.push((from, Msg::ProduceResp { id, response }))
                }
                ProduceOutcome::Delayed { request_id } => {
                    p.delayed_produce.insert(request_id, (from, id));
                }
                ProduceOutcome::NoResponse => {}
            },
            Msg::FetchResp { id, response } => {
                if let Some(f) = p.fetchers.get_mut(&from) {
                    if f.in_flight.is_some_and(|(i, _)| i == id) {
                        f.in_flight = None;
                        f.core.on_fetch_response(now, &response, &mut p.rm);
                    }
                }
            }
            Msg::EpochAnswer { id, response } => {
                if let Some(f) = p.fetchers.get_mut(&from) {
                    if f.in_flight.is_some_and(|(i, _)| i == id) {
                        f.in_flight = None;
                        f.core
                            .on_offset_for_leader_epoch_response(now, &response, &mut p.rm);
                    }
                }
            }
            Msg::ControlledShutdown { id, broker_epoch } => {
                // The controller on this broker answers, once its event is handled (and the
                // node is running).
                let handle = p.controller.clone();
                let life = p.life.clone();
                let replies = p.replies.clone();
                let me = self.id;
                tokio::spawn(async move {
                    let result = handle
                        .controlled_shutdown(from, broker_epoch)
                        .await
                        .map(|left| left.len())
                        .map_err(|e| e.to_string());
                    life.wait_running().await;
                    let _ = replies.send((me, from, Msg::ControlledShutdownResp { id, result }));
                });
            }
            Msg::ControlledShutdownResp { id, result } => {
                if let Some(s) = p
                    .stopping
                    .as_mut()
                    .filter(|s| s.in_flight.is_some_and(|(i, _)| i == id))
                {
                    s.in_flight = None;
                    s.attempts += 1;
                    if result == Ok(0) || s.attempts >= CONTROLLED_SHUTDOWN_ATTEMPTS {
                        s.done = true;
                    }
                }
            }
            Msg::ControlResp { .. } | Msg::ProduceResp { .. } => {}
        }
        self.drain_actions(cfg, out);
    }

    /// LeaderAndIsr (K4), UpdateMetadata (K5.1), StopReplica (K2.1), each refused with
    /// STALE_BROKER_EPOCH when meant for an earlier registration (KIP-380).
    fn control(
        &mut self,
        now: u64,
        version: i16,
        body: RequestBody,
        cfg: &RealConfig,
    ) -> ResponseBody {
        let Some(p) = self.process.as_mut() else {
            return ResponseBody::UpdateMetadata(UpdateMetadataResponse::default());
        };
        let ignore = cfg.brokers_ignore_epochs.is_some();
        let stale = |epoch: i64| !ignore && epoch != -1 && epoch < p.broker_epoch;
        let stale_code = ErrorCode::StaleBrokerEpoch.code();
        match body {
            RequestBody::LeaderAndIsr(req) => {
                if stale(req.broker_epoch) {
                    self.refused_stale += 1;
                    return ResponseBody::LeaderAndIsr(LeaderAndIsrResponse {
                        error_code: stale_code,
                        ..Default::default()
                    });
                }
                let response = p.rm.become_leader_or_follower(now, &req, version);
                let refused = response
                    .partition_errors
                    .iter()
                    .chain(
                        response
                            .topics
                            .iter()
                            .flat_map(|t| t.partition_errors.iter()),
                    )
                    .filter(|e| {
                        e.error_code == ErrorCode::StaleControllerEpoch.code()
                            || e.error_code == ErrorCode::FencedLeaderEpoch.code()
                    })
                    .count();
                self.refused_stale += refused as u64;
                // The ISR writer stamps its writes with the epoch of the controller that
                // made this broker leader.
                let ungrouped = req
                    .ungrouped_partition_states
                    .iter()
                    .map(|s| (s.topic_name.to_string(), s));
                let grouped = req.topic_states.iter().flat_map(|t| {
                    t.partition_states
                        .iter()
                        .map(move |s| (t.topic_name.to_string(), s))
                });
                for (topic, s) in ungrouped.chain(grouped) {
                    let tp = TopicPartition::new(topic, s.partition_index);
                    match p.rm.partition(&tp) {
                        Some(part) if part.is_leader() && part.leader_epoch() == s.leader_epoch => {
                            p.isr_writer.set_controller_epoch(tp, req.controller_epoch)
                        }
                        Some(part) if !part.is_leader() => p.isr_writer.forget(&tp),
                        _ => {}
                    }
                }
                ResponseBody::LeaderAndIsr(response)
            }
            RequestBody::UpdateMetadata(req) => {
                if stale(req.broker_epoch) {
                    self.refused_stale += 1;
                    return ResponseBody::UpdateMetadata(UpdateMetadataResponse {
                        error_code: stale_code,
                        ..Default::default()
                    });
                }
                let response = p.rm.update_metadata(&req);
                if response.error_code != 0 {
                    self.refused_stale += 1;
                }
                ResponseBody::UpdateMetadata(response)
            }
            RequestBody::StopReplica(req) => {
                if stale(req.broker_epoch) {
                    self.refused_stale += 1;
                    return ResponseBody::StopReplica(StopReplicaResponse {
                        error_code: stale_code,
                        ..Default::default()
                    });
                }
                ResponseBody::StopReplica(stop_replica(&mut p.rm, &req))
            }
            _ => ResponseBody::UpdateMetadata(UpdateMetadataResponse {
                error_code: ErrorCode::InvalidRequest.code(),
                ..Default::default()
            }),
        }
    }
}

/// StopReplica over every partition the request names.
fn stop_replica(
    rm: &mut ReplicaManager<MemoryLog>,
    req: &StopReplicaRequest,
) -> StopReplicaResponse {
    let mut response = StopReplicaResponse::default();
    for t in stop_replica_targets(req) {
        let tp = t.topic_partition;
        let code = match rm.stop_replica(req.controller_epoch, &tp, t.leader_epoch, t.delete) {
            Ok(_) => 0,
            Err(code) => code.code(),
        };
        response.partition_errors.push(StopReplicaPartitionError {
            topic_name: tp.topic.into(),
            partition_index: tp.partition,
            error_code: code,
            ..Default::default()
        });
    }
    response
}
