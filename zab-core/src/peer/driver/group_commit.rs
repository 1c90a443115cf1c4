//! Group commit for the peer's event loop (Z2): an established peer takes in the writes
//! and quorum packets already waiting, appends their log writes, and makes them durable with
//! one sync that runs on a blocking thread while the next group gathers (as ZooKeeper's sync
//! thread does), then reports it to the core ([`PeerInput::LogDurable`]), which holds what
//! vouches for the writes until then: a learner's ACKs and the leader's own acknowledgement.

use super::*;

/// Most writes and quorum packets already waiting that an established peer takes in before
/// acting on them, so that one log sync covers all of their log writes (group commit).
const MAX_BATCH: usize = 256;

/// Log writes appended but not yet synced (group commit).
#[derive(Debug, Default)]
pub(super) struct GroupCommit {
    /// The last zxid appended since the last sync, if any.
    pub(super) unsynced: Option<Zxid>,
}

impl GroupCommit {
    pub(super) fn is_empty(&self) -> bool {
        self.unsynced.is_none()
    }
}

/// A group whose sync runs on a blocking thread while the peer goes on (at most one).
#[derive(Debug)]
pub(super) struct InFlightSync {
    pub(super) group: GroupCommit,
    pub(super) task: JoinHandle<Result<(), TxnLogError>>,
}

/// Waits for the sync in flight, if any (forever if none).
pub(super) async fn sync_finished(f: &mut Option<InFlightSync>) -> Result<(), PeerError> {
    let Some(f) = f.as_mut() else {
        return std::future::pending().await;
    };
    let r = (&mut f.task).await.unwrap_or_else(|e| {
        Err(TxnLogError::Io {
            path: Default::default(),
            source: std::io::Error::other(format!("log sync task failed: {e}")),
        })
    });
    r.map_err(|e| PeerError::Replication(e.into()))
}

impl<T: Transport, S: ElectionStore + 'static> QuorumPeer<T, S> {
    /// An established peer also takes in the writes and quorum packets already waiting (up to
    /// [`MAX_BATCH`]) before acting, so that their log writes share one sync. It stops at the
    /// first event of another kind (handled too), so that elections and connection changes
    /// are acted on as before.
    pub(super) fn take_ready(&mut self) -> Result<(), PeerError> {
        if self.repl.is_none() || self.core.status().epoch.is_none() {
            return Ok(());
        }
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for _ in 0..MAX_BATCH {
            let mut took = false;
            if let Ok(c) = self.control.try_recv() {
                self.on_control(c);
                took = true;
            }
            let ready = self.transport.recv().as_mut().poll(&mut cx);
            match ready {
                std::task::Poll::Ready(Some(ev)) => {
                    let quorum = matches!(ev, TransportEvent::Quorum { .. });
                    self.on_event(ev);
                    if !quorum {
                        return Ok(());
                    }
                    took = true;
                }
                std::task::Poll::Ready(None) => return Err(PeerError::TransportClosed),
                std::task::Poll::Pending => {}
            }
            if !took {
                break;
            }
        }
        Ok(())
    }

    /// [`PeerAction::SyncLog`]: makes every log write appended so far durable now (waits for
    /// the sync in flight, syncs the current group). The core counts them durable already.
    pub(super) async fn sync_group(&mut self) -> Result<(), PeerError> {
        if self.in_flight.is_some() {
            sync_finished(&mut self.in_flight).await?;
            self.in_flight = None;
        }
        let group = std::mem::take(&mut self.group);
        if group.is_empty() {
            return Ok(());
        }
        if let Some(r) = self.repl.as_mut() {
            r.log.sync().map_err(ReplicationError::from)?;
        }
        Ok(())
    }

    /// Group commit, pipelined: when no sync is in flight, starts one for the current group
    /// on a blocking thread; the peer goes on meanwhile (the next group gathers). Returns
    /// whether the group was released at once (the log was already durable).
    pub(super) fn start_group_sync(&mut self) -> Result<bool, PeerError> {
        if self.group.is_empty() || self.in_flight.is_some() {
            return Ok(false);
        }
        let group = std::mem::take(&mut self.group);
        let pending = match self.repl.as_mut() {
            Some(r) => r.log.start_sync().map_err(ReplicationError::from)?,
            None => None,
        };
        match pending {
            None => {
                self.release(group);
                Ok(true)
            }
            Some(task) => {
                let task = tokio::task::spawn_blocking(task);
                self.in_flight = Some(InFlightSync { group, task });
                Ok(false)
            }
        }
    }

    /// A group is durable: the core lets what vouches for it go (Z2).
    pub(super) fn release(&mut self, group: GroupCommit) {
        if let Some(z) = group.unsynced {
            self.core.handle(Instant::now(), PeerInput::LogDurable(z));
        }
    }

    /// Appends `txns` to the log, durable once their group is synced.
    pub(super) fn append_grouped(
        &mut self,
        txns: Vec<crate::txnlog::Txn>,
    ) -> Result<(), PeerError> {
        let Some(r) = self.repl.as_mut() else {
            return Ok(());
        };
        let Some(last) = txns.last().map(|t| t.zxid) else {
            return Ok(());
        };
        r.log
            .append_deferred(&txns)
            .map_err(ReplicationError::from)?;
        self.group.unsynced = Some(last);
        Ok(())
    }
}
