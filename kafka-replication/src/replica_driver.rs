//! [`ReplicaDriver`]: the tokio driver around the sans-IO
//! [`ReplicaManager`] (feature `tokio`, on by default).
//!
//! The manager sits behind one mutex with the table of requests waiting in its purgatories.
//! Every call that can produce actions drains them before the lock is released, so a delayed
//! answer is never lost between "parked" and "registered". One ticker task feeds it time
//! (`tokio::time`, milliseconds since the driver started) at its next deadline; one fetcher
//! task per source broker runs a [`ReplicaFetcher`] over a [`LeaderLink`]; ISR proposals go
//! to the [`IsrWriter`] on their own task and the answer comes back through the lock; the
//! leaderships a LeaderAndIsr gave or took ([`ReplicaAction::BecameLeader`] /
//! [`ReplicaAction::BecameFollower`]) go to the [`LeadershipListener`], if one is set.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::isr::{BrokerId, IsrWriter, TopicPartition};
use crate::log::LogStorage;
use crate::replica_fetcher::{FetcherConfig, FetcherRequest, LeaderLink, ReplicaFetcher};
use crate::replica_manager::{ReplicaAction, ReplicaManager};
use kafka_wire::messages::{FetchResponse, ProduceResponse};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The answer to a request that waited in a purgatory.
#[derive(Debug)]
pub enum DelayedAnswer {
    /// An acks=-1 produce.
    Produce(ProduceResponse),
    /// A delayed fetch.
    Fetch(FetchResponse),
}

/// K4.1 / KIP-380: told which partitions this broker now leads and the epoch of the
/// controller that decided it — what an ISR writer on the coordination store needs to stamp
/// its writes — and which it no longer leads. The driver tells it every
/// [`ReplicaAction::BecameLeader`] / [`ReplicaAction::BecameFollower`], under the manager's
/// lock (keep it quick).
pub trait LeadershipListener: Send + Sync {
    /// This broker leads `tp` by the decision of the controller of `controller_epoch`.
    fn leading(&self, tp: &TopicPartition, controller_epoch: i32);
    /// This broker no longer leads `tp`.
    fn not_leading(&self, tp: &TopicPartition);
}

/// Opens the [`LeaderLink`] to a leader broker (for a TCP cluster: `kafka_broker::TcpLeaderLink`;
/// in memory: [`MemoryLeaderLink`](crate::replica_fetcher::MemoryLeaderLink)).
pub type LinkFactory<K> = Box<dyn Fn(BrokerId) -> K + Send + Sync>;

/// What the lock guards: the manager and who waits for which delayed answer.
pub struct Core<L> {
    /// The broker's partitions.
    pub manager: ReplicaManager<L>,
    waiting: HashMap<u64, oneshot::Sender<DelayedAnswer>>,
}

/// Commands to a fetcher task.
enum FetcherCommand {
    Add(Vec<TopicPartition>),
    Remove(Vec<TopicPartition>),
}

struct Shared<L, K, W> {
    core: Mutex<Core<L>>,
    start: Instant,
    fetchers: Mutex<HashMap<BrokerId, mpsc::UnboundedSender<FetcherCommand>>>,
    links: LinkFactory<K>,
    leadership: Mutex<Option<Arc<dyn LeadershipListener>>>,
    isr_writer: Arc<tokio::sync::Mutex<W>>,
    fetcher_config: FetcherConfig,
    wake: tokio::sync::Notify,
    /// Woken after every step of the manager, for [`ReplicaDriver::wait_until`].
    stepped: tokio::sync::Notify,
    /// When the ticker will next wake on its own (ms on the driver's clock).
    ticker_deadline: std::sync::atomic::AtomicU64,
    cancel: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// The driver of one broker's [`ReplicaManager`]; cheap to clone.
pub struct ReplicaDriver<L, K, W> {
    shared: Arc<Shared<L, K, W>>,
}

impl<L, K, W> Clone for ReplicaDriver<L, K, W> {
    fn clone(&self) -> Self {
        ReplicaDriver {
            shared: self.shared.clone(),
        }
    }
}

impl<L, K, W> ReplicaDriver<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// Starts the driver (its ticker task) around `manager`: follower fetchers open their
    /// links with `links`, ISR changes go to `isr_writer`.
    pub fn start(
        manager: ReplicaManager<L>,
        links: LinkFactory<K>,
        isr_writer: W,
        fetcher_config: FetcherConfig,
    ) -> Self {
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                manager,
                waiting: HashMap::new(),
            }),
            start: Instant::now(),
            fetchers: Mutex::new(HashMap::new()),
            links,
            leadership: Mutex::new(None),
            isr_writer: Arc::new(tokio::sync::Mutex::new(isr_writer)),
            fetcher_config,
            wake: tokio::sync::Notify::new(),
            stepped: tokio::sync::Notify::new(),
            ticker_deadline: std::sync::atomic::AtomicU64::new(0),
            cancel: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
        });
        let driver = ReplicaDriver { shared };
        let ticker = tokio::spawn(driver.clone().run_ticker());
        driver.push_task(ticker);
        driver
    }

    /// Tells `listener` every leadership a LeaderAndIsr gives or takes from now on (`None`:
    /// nobody).
    pub fn set_leadership_listener(&self, listener: Option<Arc<dyn LeadershipListener>>) {
        *self
            .shared
            .leadership
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = listener;
    }

    /// The listener set with [`ReplicaDriver::set_leadership_listener`].
    pub fn leadership_listener(&self) -> Option<Arc<dyn LeadershipListener>> {
        self.shared
            .leadership
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Milliseconds since the driver started: the manager's clock.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.shared.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Runs `f` on the manager under the lock, then performs the actions it produced.
    pub fn with_manager<R>(&self, f: impl FnOnce(&mut ReplicaManager<L>, u64) -> R) -> R {
        self.with_core(|core, now| f(&mut core.manager, now))
    }

    /// Runs `f` on the core under the lock (to park a delayed request and register its
    /// waiter atomically), then performs the actions it produced.
    pub fn with_core<R>(&self, f: impl FnOnce(&mut Core<L>, u64) -> R) -> R {
        let now = self.now_ms();
        let mut core = self.lock();
        let r = f(&mut core, now);
        self.drain(&mut core);
        let deadline = core.manager.next_deadline();
        drop(core);
        self.shared.stepped.notify_waiters();
        // A delayed request may have brought the next deadline forward: wake the ticker.
        if deadline < self.shared.ticker_deadline.load(Ordering::Relaxed) {
            self.shared.wake.notify_one();
        }
        r
    }

    /// [`ReplicaDriver::with_core`] without waking the ticker (the ticker's own call).
    fn with_core_quiet<R>(&self, f: impl FnOnce(&mut Core<L>, u64) -> R) -> R {
        let now = self.now_ms();
        let mut core = self.lock();
        let r = f(&mut core, now);
        self.drain(&mut core);
        drop(core);
        self.shared.stepped.notify_waiters();
        r
    }

    /// Waits until `done` holds on the manager (checked now and after each of its steps:
    /// a request, a fetch answer, a tick) or `deadline` passes; whether it held. For answers
    /// that wait on the replicas' state without a purgatory of their own (the
    /// administration APIs' waits for metadata and low watermarks).
    pub async fn wait_until(
        &self,
        deadline: tokio::time::Instant,
        mut done: impl FnMut(&mut ReplicaManager<L>) -> bool,
    ) -> bool {
        loop {
            // Registered before the check, so that a step between the check and the wait
            // is not missed.
            let stepped = self.shared.stepped.notified();
            tokio::pin!(stepped);
            stepped.as_mut().enable();
            if done(&mut self.lock().manager) {
                return true;
            }
            if tokio::time::timeout_at(deadline, stepped).await.is_err() {
                return done(&mut self.lock().manager);
            }
        }
    }

    /// Stops the ticker and every fetcher task.
    pub async fn shutdown(&self) {
        self.shared.cancel.cancel();
        let tasks: Vec<_> = match self.shared.tasks.lock() {
            Ok(mut t) => t.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Core<L>> {
        // A panic under the lock leaves the manager as it was at the panic; go on with it.
        self.shared
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `task` for [`ReplicaDriver::shutdown`], forgetting those that ended.
    fn push_task(&self, task: JoinHandle<()>) {
        if let Ok(mut t) = self.shared.tasks.lock() {
            t.retain(|h| !h.is_finished());
            t.push(task);
        }
    }

    /// Performs every pending action of the manager.
    fn drain(&self, core: &mut Core<L>) {
        while let Some(action) = core.manager.poll_action() {
            match action {
                ReplicaAction::ProduceResponse {
                    request_id,
                    response,
                } => {
                    if let Some(tx) = core.waiting.remove(&request_id) {
                        crate::data_path::count_hop(crate::data_path::Hop::DelayedProduceAnswered);
                        let _ = tx.send(DelayedAnswer::Produce(response));
                    }
                }
                ReplicaAction::FetchResponse {
                    request_id,
                    response,
                } => {
                    if let Some(tx) = core.waiting.remove(&request_id) {
                        crate::data_path::count_hop(crate::data_path::Hop::DelayedFetchAnswered);
                        let _ = tx.send(DelayedAnswer::Fetch(response));
                    }
                }
                ReplicaAction::AlterIsr(proposal) => {
                    let driver = self.clone();
                    let writer = self.shared.isr_writer.clone();
                    let task = tokio::spawn(async move {
                        let result = writer.lock().await.propose(&proposal).await;
                        driver.with_manager(|m, _| m.on_isr_result(&proposal, result));
                    });
                    self.push_task(task);
                }
                ReplicaAction::AddFetcherPartitions { leader, partitions } => {
                    self.fetcher_command(leader, FetcherCommand::Add(partitions));
                }
                ReplicaAction::RemoveFetcherPartitions { partitions } => {
                    let senders: Vec<_> = match self.shared.fetchers.lock() {
                        Ok(f) => f.values().cloned().collect(),
                        Err(_) => Vec::new(),
                    };
                    for tx in senders {
                        let _ = tx.send(FetcherCommand::Remove(partitions.clone()));
                    }
                }
                ReplicaAction::ShutdownIdleFetcher { leader } => {
                    if let Ok(mut f) = self.shared.fetchers.lock() {
                        // Dropping the sender ends the task once it has read its commands.
                        f.remove(&leader);
                    }
                }
                ReplicaAction::BecameLeader {
                    topic_partition,
                    controller_epoch,
                    ..
                } => {
                    if let Some(listener) = self.leadership_listener() {
                        listener.leading(&topic_partition, controller_epoch);
                    }
                }
                ReplicaAction::BecameFollower {
                    topic_partition, ..
                } => {
                    if let Some(listener) = self.leadership_listener() {
                        listener.not_leading(&topic_partition);
                    }
                }
                ReplicaAction::StartHighWatermarkCheckpoint => {
                    let driver = self.clone();
                    let task = tokio::spawn(async move {
                        let mut every = tokio::time::interval(Duration::from_secs(5));
                        loop {
                            every.tick().await;
                            if let Err(e) =
                                driver.with_manager(|m, _| m.checkpoint_high_watermarks())
                            {
                                tracing::warn!(error = %e, "high watermark checkpoint failed");
                            }
                        }
                    });
                    self.push_task(task);
                    // Retention (Kafka's log cleanup task), on the wall clock: it compares
                    // record timestamps.
                    let driver = self.clone();
                    let period = core.manager.retention_check_interval_ms();
                    let task = tokio::spawn(async move {
                        let mut every = tokio::time::interval(Duration::from_millis(period));
                        every.tick().await;
                        loop {
                            every.tick().await;
                            let now = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_millis() as i64);
                            driver.with_manager(|m, _| m.apply_retention(now));
                        }
                    });
                    self.push_task(task);
                }
            }
        }
    }

    fn fetcher_command(&self, leader: BrokerId, command: FetcherCommand) {
        let Ok(mut fetchers) = self.shared.fetchers.lock() else {
            return;
        };
        if let Some(tx) = fetchers.get(&leader) {
            let _ = tx.send(command);
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(command);
        fetchers.insert(leader, tx);
        drop(fetchers);
        let link = (self.shared.links)(leader);
        let task = tokio::spawn(self.clone().run_fetcher(leader, link, rx));
        self.push_task(task);
    }

    /// Registers a waiter for the delayed request `request_id` (call under the lock, from
    /// [`ReplicaDriver::with_core`], right after the manager parked it).
    #[must_use = "the delayed answer arrives on it"]
    pub fn register(core: &mut Core<L>, request_id: u64) -> oneshot::Receiver<DelayedAnswer> {
        let (tx, rx) = oneshot::channel();
        core.waiting.insert(request_id, tx);
        rx
    }

    async fn run_ticker(self) {
        loop {
            // Until the new sleep is known, every change wakes us (a stored permit).
            self.shared
                .ticker_deadline
                .store(u64::MAX, Ordering::Relaxed);
            let deadline = {
                let core = self.lock();
                core.manager.next_deadline()
            };
            let now = self.now_ms();
            let sleep_ms = deadline.saturating_sub(now).clamp(1, 1_000);
            self.shared
                .ticker_deadline
                .store(now + sleep_ms, Ordering::Relaxed);
            tokio::select! {
                _ = self.shared.cancel.cancelled() => return,
                _ = self.shared.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
            }
            self.with_core_quiet(|core, now| core.manager.tick(now));
        }
    }

    async fn run_fetcher(
        self,
        leader: BrokerId,
        mut link: K,
        mut commands: mpsc::UnboundedReceiver<FetcherCommand>,
    ) {
        let local = self.local_broker();
        let mut fetcher = ReplicaFetcher::new(local, leader, self.shared.fetcher_config);
        loop {
            // Apply every command that is waiting; end when the driver dropped our sender.
            loop {
                match commands.try_recv() {
                    Ok(FetcherCommand::Add(p)) => fetcher.add_partitions(p),
                    Ok(FetcherCommand::Remove(p)) => fetcher.remove_partitions(p.iter()),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => return,
                }
            }
            if self.shared.cancel.is_cancelled() {
                return;
            }
            let request = {
                let now = self.now_ms();
                let mut core = self.lock();
                fetcher.poll_request(now, &mut core.manager)
            };
            match request {
                None => {
                    // Idle or backing off: wait for a command or a short while.
                    tokio::select! {
                        _ = self.shared.cancel.cancelled() => return,
                        c = commands.recv() => match c {
                            Some(FetcherCommand::Add(p)) => fetcher.add_partitions(p),
                            Some(FetcherCommand::Remove(p)) => fetcher.remove_partitions(p.iter()),
                            None => return,
                        },
                        _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                    }
                }
                Some(FetcherRequest::OffsetForLeaderEpoch(req)) => {
                    match link.offset_for_leader_epoch(req).await {
                        Ok(resp) => self.with_core(|core, now| {
                            fetcher.on_offset_for_leader_epoch_response(
                                now,
                                &resp,
                                &mut core.manager,
                            )
                        }),
                        Err(e) => {
                            tracing::debug!(broker = local, leader, error = %e, "leader link failed");
                            fetcher.on_link_error(self.now_ms());
                        }
                    }
                }
                Some(FetcherRequest::Fetch(req)) => match link.fetch(req).await {
                    Ok(resp) => self.with_core(|core, now| {
                        fetcher.on_fetch_response(now, &resp, &mut core.manager)
                    }),
                    Err(e) => {
                        tracing::debug!(broker = local, leader, error = %e, "leader link failed");
                        fetcher.on_link_error(self.now_ms());
                    }
                },
            }
        }
    }

    fn local_broker(&self) -> BrokerId {
        self.lock().manager.broker_id()
    }
}
