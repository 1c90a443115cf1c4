//! The harness the deterministic simulators share (feature `testing`): [`SimServer`], one
//! simulated server — a [`PeerCore`] with an in-memory transaction log and epochs that survive
//! a crash (the log's unsynced tail does not) and a recording state machine that does not.
//!
//! It carries out the storage half of the core's actions itself, exactly as the contract of
//! [`PeerAction`] asks (a leader's log and snapshot reads for a learner's sync are answered at
//! once), and hands every action back to the simulator ([`Carried`]) so that it
//! carries the network half (sends, closes, refusals) and checks its invariants. A log append
//! stays unsynced until the simulator calls [`SimServer::flush`], so a crash can fall between
//! a write and its fsync. Every production composition (stashed learner packets, kept LOOKING
//! votes, the connect grace, ACKs held until durable) is the core's, hence simulated.

use std::time::Instant;

use crate::peer::{PeerAction, PeerConfig, PeerCore, PeerInput, PeerStatus};
use crate::state_machine::{RecordingStateMachine, SnapshotError, StateMachine};
use crate::store::PersistedEpochs;
use crate::txnlog::{
    read_committed_window, read_for_sync, FsyncPolicy, MemoryTxnLog, SnapshotPolicy, Txn, TxnLog,
    TxnLogError,
};
use crate::zxid::Zxid;

/// Why a simulated server could not carry out an action (its log or snapshot is broken: a
/// simulator reports it as a failure).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The in-memory log refused an operation.
    #[error("transaction log: {0}")]
    Log(#[from] TxnLogError),
    /// A snapshot could not be restored.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// One action a [`SimServer`] carried out (its storage part done), with the transactions its
/// state machine applied for it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Carried {
    /// The action.
    pub action: PeerAction,
    /// What the state machine applied (for `Apply` and `CommitLogged`).
    pub applied: Vec<Txn>,
}

/// One simulated server (see the module docs).
#[derive(Debug)]
pub struct SimServer {
    cfg: PeerConfig,
    policy: SnapshotPolicy,
    core: PeerCore,
    log: MemoryTxnLog,
    epochs: PersistedEpochs,
    sm: RecordingStateMachine,
    unsynced: Option<Zxid>,
    status: PeerStatus,
    /// Answer a leader's log reads only when asked ([`answer_deferred_reads`](Self::answer_deferred_reads)).
    defer_reads: bool,
    deferred: Vec<PeerAction>,
}

impl SimServer {
    /// A fresh server with an empty log and epochs 0.
    pub fn new(cfg: PeerConfig, policy: SnapshotPolicy) -> Self {
        let log = MemoryTxnLog::with_policy(FsyncPolicy::OnSync);
        Self::from_durable(cfg, policy, log, PersistedEpochs::default())
    }

    /// A server process starting from durable state: the state machine is rebuilt from the
    /// newest snapshot and the log, and the core votes with the log's last zxid. Nothing
    /// happens until [`PeerInput::Start`].
    pub fn from_durable(
        cfg: PeerConfig,
        policy: SnapshotPolicy,
        log: MemoryTxnLog,
        mut epochs: PersistedEpochs,
    ) -> Self {
        let mut sm = RecordingStateMachine::default();
        reload(&log, &mut sm);
        epochs.last_zxid = log.last_zxid().0;
        let core = Self::core_for(&cfg, policy, &log, epochs, &sm);
        Self {
            cfg,
            policy,
            core,
            log,
            epochs,
            sm,
            unsynced: None,
            status: PeerStatus::LOOKING,
            defer_reads: false,
            deferred: Vec::new(),
        }
    }

    /// With `on`, a leader's [`PeerAction::ReadLog`] is not answered when carried out but
    /// kept until [`answer_deferred_reads`](Self::answer_deferred_reads), as an embedder that
    /// paces a learner's sync by its connection does (the contract lets an answer come later,
    /// with other inputs between). Kept across [`restart`](Self::restart); the reads kept are
    /// lost with a crash.
    pub fn set_deferred_reads(&mut self, on: bool) {
        self.defer_reads = on;
    }

    /// Whether log reads wait for [`answer_deferred_reads`](Self::answer_deferred_reads).
    pub fn has_deferred_reads(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Reads the log now for every deferred [`PeerAction::ReadLog`] and gives the core the
    /// answers, in the order asked; returns how many.
    pub fn answer_deferred_reads(&mut self, now: Instant) -> Result<usize, SimError> {
        let reads = std::mem::take(&mut self.deferred);
        let n = reads.len();
        for a in reads {
            if let PeerAction::ReadLog {
                learner,
                after,
                upto,
                max_bytes,
                max_txns,
            } = a
            {
                let read = read_for_sync(&self.log, after, upto, max_bytes, max_txns)?;
                self.core.handle(now, PeerInput::LogRead { learner, read });
            }
        }
        Ok(n)
    }

    fn core_for(
        cfg: &PeerConfig,
        policy: SnapshotPolicy,
        log: &MemoryTxnLog,
        epochs: PersistedEpochs,
        sm: &RecordingStateMachine,
    ) -> PeerCore {
        let mut core =
            PeerCore::new(cfg.clone(), epochs).with_log(log.last_zxid(), sm.last_applied());
        core.set_snapshot_policy(policy);
        core
    }

    /// The core.
    pub fn core(&self) -> &PeerCore {
        &self.core
    }

    /// The core, to turn on a test-only election rule (`never-in-production`).
    pub fn core_mut(&mut self) -> &mut PeerCore {
        &mut self.core
    }

    /// The log (durable: survives [`crash`](Self::crash) but for its unsynced tail).
    pub fn log(&self) -> &MemoryTxnLog {
        &self.log
    }

    /// The epochs as carried out so far (durable).
    pub fn epochs(&self) -> PersistedEpochs {
        PersistedEpochs {
            last_zxid: self.log.last_zxid().0,
            ..self.epochs
        }
    }

    /// The state machine (lost on a crash, rebuilt on restart).
    pub fn state_machine(&self) -> &RecordingStateMachine {
        &self.sm
    }

    /// The status as the actions carried out so far reported it. The core's own
    /// [`PeerCore::status`] may be ahead: it changes when an action is queued.
    pub fn status(&self) -> PeerStatus {
        self.status
    }

    /// Gives the core an input.
    pub fn handle(&mut self, now: Instant, input: PeerInput) {
        self.core.handle(now, input);
    }

    /// Whether appends are waiting for [`flush`](Self::flush).
    pub fn has_unsynced(&self) -> bool {
        self.unsynced.is_some()
    }

    /// Makes the appended transactions durable and tells the core (one group commit).
    pub fn flush(&mut self, now: Instant) -> Result<(), SimError> {
        if let Some(z) = self.unsynced.take() {
            self.log.sync()?;
            self.core.handle(now, PeerInput::LogDurable(z));
        }
        Ok(())
    }

    /// The process dies: the log loses its unsynced tail; the state machine and the core are
    /// gone until [`restart`](Self::restart).
    pub fn crash(&mut self) {
        self.log.crash();
        self.unsynced = None;
    }

    /// A new process from the durable state (after [`crash`](Self::crash)).
    pub fn restart(&mut self) {
        let mut fresh =
            Self::from_durable(self.cfg.clone(), self.policy, self.log.clone(), self.epochs);
        fresh.defer_reads = self.defer_reads;
        *self = fresh;
    }

    /// Carries out the core's next action (its storage part), in order; `None` when there
    /// is none.
    pub fn carry_out_next(&mut self, now: Instant) -> Result<Option<Carried>, SimError> {
        let Some(action) = self.core.poll_action() else {
            return Ok(None);
        };
        let mut applied = Vec::new();
        match &action {
            PeerAction::Status(s) => self.status = *s,
            PeerAction::PersistAcceptedEpoch(e) => self.epochs.accepted_epoch = *e,
            PeerAction::PersistCurrentEpoch(e) => self.epochs.current_epoch = *e,
            PeerAction::Append(txns) => {
                self.log.append(txns)?;
                self.unsynced = txns.last().map(|t| t.zxid).or(self.unsynced);
            }
            PeerAction::SyncLog => {
                self.log.sync()?;
                self.unsynced = None;
            }
            PeerAction::Truncate(z) => {
                self.log.truncate(*z)?;
                if self.sm.last_applied() > *z {
                    reload(&self.log, &mut self.sm);
                }
            }
            PeerAction::RestoreSnapshot(s) => {
                self.log.clear()?;
                self.sm.restore(s)?;
                self.log.save_snapshot(s)?;
            }
            // (one the state machine already has was replayed from the log at start-up)
            PeerAction::Apply(t) if t.zxid > self.sm.last_applied() => {
                self.sm.apply(t);
                applied.push(t.clone());
            }
            PeerAction::CommitLogged(z) => {
                for t in self.log.read_after(self.sm.last_applied())? {
                    if t.zxid > *z {
                        break;
                    }
                    self.sm.apply(&t);
                    applied.push(t);
                }
            }
            PeerAction::TakeSnapshot => {
                let s = self.sm.take_snapshot();
                self.log.save_snapshot(&s)?;
                self.log.purge(s.zxid)?;
            }
            PeerAction::LoadHistory { max } => {
                let (base, committed) = read_committed_window(&self.log, *max)?;
                self.core
                    .handle(now, PeerInput::History { base, committed });
            }
            read @ PeerAction::ReadLog { .. } if self.defer_reads => {
                self.deferred.push(read.clone());
            }
            PeerAction::ReadLog {
                learner,
                after,
                upto,
                max_bytes,
                max_txns,
            } => {
                let read = read_for_sync(&self.log, *after, *upto, *max_bytes, *max_txns)?;
                let learner = *learner;
                self.core.handle(now, PeerInput::LogRead { learner, read });
            }
            PeerAction::ReadSnapshot(learner) => {
                let snapshot = self.log.latest_snapshot()?;
                let learner = *learner;
                self.core
                    .handle(now, PeerInput::SnapshotRead { learner, snapshot });
            }
            // The simulated network queues without bound: drained at once.
            PeerAction::AwaitDrain(learner) => {
                let learner = *learner;
                self.core.handle(now, PeerInput::Drained(learner));
            }
            // The network's and the observers' part: the simulator's.
            _ => {}
        }
        Ok(Some(Carried { action, applied }))
    }
}

/// Rebuilds the state machine from the newest snapshot and the log.
fn reload(log: &MemoryTxnLog, sm: &mut RecordingStateMachine) {
    sm.reset();
    if let Ok(Some(s)) = log.latest_snapshot() {
        // A snapshot the log stored was taken from a state machine: it restores.
        let _ = sm.restore(&s);
    }
    for t in log.read_after(sm.last_applied()).unwrap_or_default() {
        sm.apply(&t);
    }
}
