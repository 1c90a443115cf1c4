//! [`GroupService`]: the tokio task that owns a broker's
//! [`GroupCoordinator`](kafka_group_coordinator::GroupCoordinator).
//!
//! The task takes requests (each answered on its own oneshot), leadership changes of
//! `__consumer_offsets` partitions, finished loads and finished appends from one queue, feeds
//! them to the core with the wall-clock time, sleeps until the core's next deadline, and
//! carries out the core's actions: answers go back to the waiting request, appends go to the
//! [`OffsetsLog`] in a task of their own (their completion comes back through the queue), and
//! a partition this broker starts to lead is read from its start in a blocking task. A new
//! leader epoch of a partition it leads and has loaded (the controller bumps it when a
//! follower leaves the ISR) keeps the partition's groups, as Kafka's coordinator keeps a
//! partition it owns; only the epoch its appends carry changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use kafka_group_coordinator::{
    Action, AppendRecord, GroupCoordinator, GroupCoordinatorConfig, Input, LogRecord, Request,
    Response,
};
use kafka_replication::isr::TopicPartition;
use kafka_replication::replica_driver::LeadershipListener;
use kafka_wire::error_code::ErrorCode;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::OFFSETS_TOPIC;

/// Where a coordinator's records live: the `__consumer_offsets` partitions of this broker.
#[async_trait]
pub trait OffsetsLog: Send + Sync + 'static {
    /// The leader epoch this broker leads `partition` at, or the error (not its leader).
    fn leader_epoch(&self, partition: i32) -> Result<i32, ErrorCode>;

    /// Every record of `partition` from its log start to its log end, if this broker leads
    /// it at `leader_epoch`.
    fn read_all(&self, partition: i32, leader_epoch: i32) -> Result<Vec<LogRecord>, ErrorCode>;

    /// Appends `records` with `acks=-1` if this broker still leads `partition` at
    /// `leader_epoch` (else `FENCED_LEADER_EPOCH` / `NOT_LEADER_OR_FOLLOWER`), and waits
    /// until they are committed: the log offset of the first record, or the error.
    async fn append(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<AppendRecord>,
    ) -> Result<i64, ErrorCode>;
}

/// What the task is told.
enum Command {
    Request {
        request: Request,
        reply: oneshot::Sender<Response>,
    },
    Leading(i32),
    NotLeading(i32),
    Loaded {
        partition: i32,
        leader_epoch: i32,
        records: Result<Vec<LogRecord>, ErrorCode>,
    },
    AppendDone {
        append_id: u64,
        result: Result<i64, ErrorCode>,
    },
}

/// A handle on the running coordinator task; cheap to clone. The task runs until
/// [`GroupService::shutdown`] (`BrokerNode::shutdown` calls it).
#[derive(Clone)]
pub struct GroupService {
    tx: mpsc::UnboundedSender<Command>,
    task: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
    num_partitions: i32,
}

impl std::fmt::Debug for GroupService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupService")
            .field("num_partitions", &self.num_partitions)
            .finish()
    }
}

/// The broker's wall clock in milliseconds, never going backwards: group and offset
/// timestamps are compared across brokers (after a failover), so they are wall-clock times.
struct Clock {
    last: u64,
}

impl Clock {
    fn now(&mut self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        self.last = self.last.max(wall);
        self.last
    }
}

impl GroupService {
    /// Starts the coordinator task over `log`, for broker `broker`.
    pub fn spawn(broker: i32, config: GroupCoordinatorConfig, log: Arc<dyn OffsetsLog>) -> Self {
        let num_partitions = config.offsets_topic_num_partitions;
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(broker, config, log, tx.clone(), rx));
        GroupService {
            tx,
            task: Arc::new(std::sync::Mutex::new(Some(task))),
            num_partitions,
        }
    }

    /// `offsets.topic.num.partitions`.
    pub fn num_partitions(&self) -> i32 {
        self.num_partitions
    }

    /// The `__consumer_offsets` partition of `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        kafka_group_coordinator::partition_for(group_id, self.num_partitions)
    }

    /// Sends `request` and waits for its answer (`None` if the task stopped).
    pub async fn request(&self, request: Request) -> Option<Response> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Request { request, reply }).ok()?;
        rx.await.ok()
    }

    /// The leadership listener that tells this service which offsets partitions the broker
    /// leads.
    pub fn leadership(&self) -> Arc<dyn LeadershipListener> {
        Arc::new(GroupLeadership {
            tx: self.tx.clone(),
        })
    }

    /// Tells the service this broker leads (`true`) or stopped leading `partition`.
    pub fn leadership_changed(&self, partition: i32, leading: bool) {
        let _ = self.tx.send(if leading {
            Command::Leading(partition)
        } else {
            Command::NotLeading(partition)
        });
    }

    /// Stops the task; waiting requests get no answer.
    pub async fn shutdown(&self) {
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Tells a [`GroupService`] the `__consumer_offsets` leaderships the replica manager gains and
/// loses (it is called under the manager's lock, so it only queues).
struct GroupLeadership {
    tx: mpsc::UnboundedSender<Command>,
}

impl LeadershipListener for GroupLeadership {
    fn leading(&self, tp: &TopicPartition, _controller_epoch: i32) {
        if tp.topic == OFFSETS_TOPIC {
            let _ = self.tx.send(Command::Leading(tp.partition));
        }
    }

    fn not_leading(&self, tp: &TopicPartition) {
        if tp.topic == OFFSETS_TOPIC {
            let _ = self.tx.send(Command::NotLeading(tp.partition));
        }
    }
}

/// Two leadership listeners as one: the one the broker had, and the group service's.
pub struct BothListeners(
    /// The first.
    pub Option<Arc<dyn LeadershipListener>>,
    /// The second.
    pub Arc<dyn LeadershipListener>,
);

impl LeadershipListener for BothListeners {
    fn leading(&self, tp: &TopicPartition, controller_epoch: i32) {
        if let Some(a) = &self.0 {
            a.leading(tp, controller_epoch);
        }
        self.1.leading(tp, controller_epoch);
    }

    fn not_leading(&self, tp: &TopicPartition) {
        if let Some(a) = &self.0 {
            a.not_leading(tp);
        }
        self.1.not_leading(tp);
    }
}

async fn run(
    broker: i32,
    config: GroupCoordinatorConfig,
    log: Arc<dyn OffsetsLog>,
    tx: mpsc::UnboundedSender<Command>,
    mut rx: mpsc::UnboundedReceiver<Command>,
) {
    let mut core = GroupCoordinator::new(config);
    let mut clock = Clock { last: 0 };
    let mut waiting: HashMap<u64, oneshot::Sender<Response>> = HashMap::new();
    let mut next_request_id: u64 = 1;
    loop {
        let deadline = core.next_deadline();
        let command = match deadline {
            Some(at) => {
                let now = clock.now();
                let wait = Duration::from_millis(at.saturating_sub(now));
                match tokio::time::timeout(wait, rx.recv()).await {
                    Ok(Some(c)) => Some(c),
                    Ok(None) => return,
                    Err(_) => None,
                }
            }
            None => match rx.recv().await {
                Some(c) => Some(c),
                None => return,
            },
        };
        let now = clock.now();
        match command {
            None => core.handle(now, Input::Tick),
            Some(Command::Request { request, reply }) => {
                let request_id = next_request_id;
                next_request_id += 1;
                waiting.insert(request_id, reply);
                core.handle(
                    now,
                    Input::Request {
                        request_id,
                        request,
                    },
                );
            }
            Some(Command::Leading(partition)) => match log.leader_epoch(partition) {
                // Led without interruption since it was loaded: a newer epoch only.
                Ok(leader_epoch) if core.is_loaded(partition) => {
                    if core.leader_epoch(partition) < Some(leader_epoch) {
                        tracing::info!(
                            broker,
                            partition,
                            leader_epoch,
                            "still leading __consumer_offsets partition at a new leader epoch"
                        );
                    }
                    core.handle(
                        now,
                        Input::Reelected {
                            partition,
                            leader_epoch,
                        },
                    );
                }
                Ok(leader_epoch) => {
                    tracing::info!(
                        broker,
                        partition,
                        leader_epoch,
                        "loading __consumer_offsets partition"
                    );
                    core.handle(
                        now,
                        Input::BeginLoad {
                            partition,
                            leader_epoch,
                        },
                    );
                    let log = log.clone();
                    let tx = tx.clone();
                    tokio::task::spawn_blocking(move || {
                        let records = log.read_all(partition, leader_epoch);
                        let _ = tx.send(Command::Loaded {
                            partition,
                            leader_epoch,
                            records,
                        });
                    });
                }
                Err(error) => {
                    tracing::debug!(broker, partition, %error, "not leading the partition after all");
                }
            },
            Some(Command::NotLeading(partition)) => {
                if core.is_loaded(partition) {
                    tracing::info!(broker, partition, "unloading __consumer_offsets partition");
                }
                core.handle(now, Input::Unload { partition });
            }
            Some(Command::Loaded {
                partition,
                leader_epoch,
                records,
            }) => match records {
                Ok(records) => core.handle(
                    now,
                    Input::Load {
                        partition,
                        leader_epoch,
                        records,
                    },
                ),
                Err(error) => {
                    // Leadership moved while reading: the NotLeading (or a newer Leading)
                    // that follows decides.
                    tracing::warn!(broker, partition, leader_epoch, %error, "offsets partition not loaded");
                }
            },
            Some(Command::AppendDone { append_id, result }) => {
                core.handle(now, Input::AppendCompleted { append_id, result });
            }
        }
        while let Some(action) = core.poll_action() {
            match action {
                Action::Respond {
                    request_id,
                    response,
                } => {
                    if let Some(reply) = waiting.remove(&request_id) {
                        let _ = reply.send(response);
                    }
                }
                Action::Append {
                    append_id,
                    partition,
                    leader_epoch,
                    records,
                } => {
                    let log = log.clone();
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let result = log.append(partition, leader_epoch, records).await;
                        let _ = tx.send(Command::AppendDone { append_id, result });
                    });
                }
                Action::Loaded {
                    partition,
                    leader_epoch,
                    groups,
                    offsets,
                    skipped,
                } => {
                    tracing::info!(
                        broker,
                        partition,
                        leader_epoch,
                        groups,
                        offsets,
                        skipped,
                        "__consumer_offsets partition loaded: this broker coordinates its groups"
                    );
                }
            }
        }
    }
}
