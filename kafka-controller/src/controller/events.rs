//! The controller's events and its event queue (Kafka's `ControllerEventManager`):
//! one FIFO drained one event at a time by the event loop; session expiry replaces everything
//! pending (`clearAndPut(Expire)`), and callers waiting on preempted events get an error.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use tokio::sync::{oneshot, Notify};

use crate::broker_channel::DeliveredResponse;
use crate::context::{BrokerId, ControllerContext, ControllerStats, TopicPartition};
use ha_coordination::SessionId;

use super::ControllerError;

/// Something the controller must handle.
#[derive(Debug)]
pub enum ControllerEvent {
    /// Start-up (or a new session after expiry): watch `/controller` and campaign.
    Startup,
    /// `/controller` was created, changed or deleted (`ControllerChange` / `Reelect`).
    ControllerChange,
    /// The children of `/brokers/ids` changed (K1, K5).
    BrokerChange,
    /// The data of `/brokers/ids/<id>` changed (Kafka's `BrokerModifications`): the broker
    /// rewrote its endpoints or features.
    BrokerModification(BrokerId),
    /// The children of `/brokers/topics` changed (K2.2).
    TopicChange,
    /// The data of `/brokers/topics/<topic>` changed: partitions may have been added.
    PartitionModifications(String),
    /// The children of `/admin/delete_topics` changed (K2.1).
    TopicDeletion,
    /// `/admin/reassign_partitions` was created or changed (K7).
    PartitionReassignment,
    /// The state znode of a partition being reassigned changed (its ISR may now hold the
    /// target replicas, K7 step 4).
    PartitionReassignmentIsrChange(TopicPartition),
    /// `/admin/preferred_replica_election` was created or changed.
    PreferredReplicaElection,
    /// The children of `/isr_change_notification` changed.
    IsrChangeNotification,
    /// The children of `/log_dir_event_notification` changed: a broker's log directory
    /// failed.
    LogDirEventNotification,
    /// A broker asks to shut down (Kafka's `ControlledShutdown` controller event); the reply lists
    /// the partitions it still leads.
    ControlledShutdown {
        /// The broker.
        broker: BrokerId,
        /// Its broker epoch (KIP-380; -1 = unknown).
        broker_epoch: i64,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Vec<TopicPartition>, ControllerError>>,
    },
    /// An admin client asks for leader elections (Kafka's `ReplicaLeaderElection` with the
    /// `AdminClientTriggered` trigger); `None`: every partition.
    ElectLeaders {
        /// The partitions, `None` for all.
        partitions: Option<Vec<TopicPartition>>,
        /// Preferred or unclean.
        kind: super::ElectionType,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<super::ElectionResults, ControllerError>>,
    },
    /// A broker answered a control request.
    BrokerResponse(DeliveredResponse),
    /// The auto-rebalance task's tick.
    AutoPreferredReplicaLeaderElection,
    /// The coordination session `session` expired: resign if this controller was elected on
    /// it; pending events were dropped.
    Expire {
        /// The expired session.
        session: SessionId,
    },
    /// A copy of the context, for inspection (`None` when not active).
    Inspect(oneshot::Sender<Option<ControllerContext>>),
    /// The metrics snapshot of the context (`None` when not active).
    Stats(oneshot::Sender<Option<ControllerStats>>),
    /// Answered once every event queued before it has been handled.
    Sync(oneshot::Sender<()>),
    /// Resign (if active) and stop the loop.
    Shutdown,
}

impl ControllerEvent {
    /// Answers a preempted event's caller, if it has one.
    fn preempt(self) {
        match self {
            ControllerEvent::ControlledShutdown { reply, .. } => {
                let _ = reply.send(Err(ControllerError::Preempted));
            }
            ControllerEvent::ElectLeaders { reply, .. } => {
                let _ = reply.send(Err(ControllerError::Preempted));
            }
            ControllerEvent::Inspect(reply) => {
                let _ = reply.send(None);
            }
            ControllerEvent::Stats(reply) => {
                let _ = reply.send(None);
            }
            _ => {}
        }
    }
}

/// The controller's event queue.
#[derive(Debug, Default)]
pub struct EventQueue {
    events: Mutex<VecDeque<ControllerEvent>>,
    notify: Notify,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ControllerEvent>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends an event.
    pub fn put(&self, event: ControllerEvent) {
        self.lock().push_back(event);
        self.notify.notify_one();
    }

    /// Drops every pending event (answering their callers with
    /// [`ControllerError::Preempted`]) and queues `event` alone (`clearAndPut`).
    pub fn clear_and_put(&self, event: ControllerEvent) {
        let dropped: Vec<ControllerEvent> = {
            let mut q = self.lock();
            let dropped = q.drain(..).collect();
            q.push_back(event);
            dropped
        };
        for e in dropped {
            if !matches!(e, ControllerEvent::Shutdown) {
                e.preempt();
            } else {
                self.lock().push_back(e);
            }
        }
        self.notify.notify_one();
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Waits for and removes the next event.
    pub async fn take(&self) -> ControllerEvent {
        loop {
            if let Some(e) = self.lock().pop_front() {
                return e;
            }
            self.notify.notified().await;
        }
    }
}
