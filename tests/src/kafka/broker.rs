//! One broker of the Kafka model: the real [`Partition`] core of `kafka-replication` for one
//! partition, plus what a broker does around it — apply LeaderAndIsr (K4), fetch from the
//! leader after truncating by leader epoch, answer fetches (K8), carry ISR proposals to the
//! coordination store, answer acks=all produces once the HW covers them, checkpoint the HW,
//! heartbeat its session. It can crash (its log survives), restart, and pause.

use bytes::Bytes;
use kafka_replication::epoch_cache::{EpochEndOffset, UNDEFINED_EPOCH};
use kafka_replication::isr::{BrokerId, IsrProposal, TopicPartition};
use kafka_replication::log::{LogStorage, MemoryLog};
use kafka_replication::partition::{
    AckCheck, FetchParams, Partition, PartitionState, CONSUMER_REPLICA_ID,
};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::records::RecordBatchBuilder;

use super::msg::{FetchReply, Msg};
use super::KafkaConfig;
use crate::net::NodeId;

/// The controller / coordination node.
pub const CONTROLLER: NodeId = 0;

/// Something a broker did that the run records (trace and checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerNote {
    /// A LeaderAndIsr was refused (stale controller or leader epoch).
    Refused(&'static str),
    /// A core call failed.
    CoreError(String),
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    id: u64,
    sent_at: u64,
    fetch_offset: i64,
}

#[derive(Debug, Clone, Copy)]
struct PendingAck {
    seq: i64,
    from: NodeId,
    offset: i64,
    required: i64,
    since: u64,
}

/// A broker.
#[derive(Debug)]
pub struct Broker {
    id: BrokerId,
    tp: TopicPartition,
    partition: Option<Partition<MemoryLog>>,
    stored: Option<MemoryLog>,
    paused_until: Option<u64>,
    controller_epoch: i32,
    broker_epoch: u64,
    applied_epoch: i32,
    needs_truncation: bool,
    in_flight: Option<InFlight>,
    next_request: u64,
    isr_in_flight: Option<(IsrProposal, u64)>,
    acks: Vec<PendingAck>,
    last_heartbeat: u64,
    last_checkpoint: u64,
    last_shrink_check: u64,
    flushed: i64,
    last_flush: u64,
}

const FETCH_TIMEOUT_MS: u64 = 100;
const ISR_RETRY_MS: u64 = 100;
const HEARTBEAT_MS: u64 = 50;
const CHECKPOINT_MS: u64 = 100;
const PRODUCE_TIMEOUT_MS: u64 = 1_000;

impl Broker {
    /// Broker `id` with an empty log, up, knowing nothing yet.
    pub fn new(id: BrokerId, tp: TopicPartition, cfg: &KafkaConfig) -> Self {
        let mut b = Broker {
            id,
            tp,
            partition: None,
            stored: Some(MemoryLog::new()),
            paused_until: None,
            controller_epoch: 0,
            broker_epoch: 0,
            applied_epoch: -1,
            needs_truncation: false,
            in_flight: None,
            next_request: 0,
            isr_in_flight: None,
            acks: Vec::new(),
            last_heartbeat: 0,
            last_checkpoint: 0,
            last_shrink_check: 0,
            flushed: 0,
            last_flush: 0,
        };
        b.start(cfg);
        b
    }

    /// The broker id.
    pub fn id(&self) -> BrokerId {
        self.id
    }

    /// The partition core, while the broker is up.
    pub fn partition(&self) -> Option<&Partition<MemoryLog>> {
        self.partition.as_ref()
    }

    /// The log, up or down (what is on disk).
    pub fn log(&self) -> Option<&MemoryLog> {
        match (&self.partition, &self.stored) {
            (Some(p), _) => Some(p.log()),
            (None, Some(l)) => Some(l),
            (None, None) => None,
        }
    }

    /// Whether the process runs (possibly paused).
    pub fn is_up(&self) -> bool {
        self.partition.is_some()
    }

    /// Whether the process is in a pause at `now`.
    pub fn paused_at(&self, now: u64) -> Option<u64> {
        self.paused_until.filter(|until| *until > now)
    }

    fn start(&mut self, cfg: &KafkaConfig) {
        if let Some(log) = self.stored.take() {
            let mut p = Partition::new(self.tp.clone(), self.id, log, cfg.partition_config());
            if let Some(hook) = cfg.partition_hook {
                hook(&mut p);
            }
            self.partition = Some(p);
        }
        self.controller_epoch = 0;
        self.applied_epoch = -1;
        self.needs_truncation = false;
        self.in_flight = None;
        self.isr_in_flight = None;
        self.acks.clear();
        self.paused_until = None;
    }

    /// The process dies: memory is gone, the log stays on disk.
    pub fn crash(&mut self) {
        if let Some(p) = self.partition.take() {
            self.stored = Some(p.into_log());
        }
        self.acks.clear();
        self.paused_until = None;
    }

    /// Power loss: the process dies and the log loses what was not flushed yet (a torn last
    /// write is dropped by recovery, so the log ends at the last flushed batch boundary).
    pub fn power_loss(&mut self) {
        self.crash();
        if let Some(log) = self.stored.as_mut() {
            let keep = self.flushed.min(log.log_end_offset());
            let _ = log.truncate_to(keep);
        }
    }

    /// The process starts again from its log (K5: it will register and hear from the
    /// controller).
    pub fn restart(&mut self, cfg: &KafkaConfig) {
        self.broker_epoch += 1;
        self.start(cfg);
    }

    /// A long stop-the-world pause: nothing runs until `until`.
    pub fn pause(&mut self, until: u64) {
        if self.is_up() {
            self.paused_until = Some(until);
        }
    }

    /// Handles one message; answers go to `out`.
    pub fn handle(
        &mut self,
        now: u64,
        from: NodeId,
        msg: Msg,
        cfg: &KafkaConfig,
        out: &mut Vec<(NodeId, Msg)>,
        notes: &mut Vec<BrokerNote>,
    ) {
        let Some(p) = self.partition.as_mut() else {
            return;
        };
        match msg {
            Msg::LeaderAndIsr {
                controller_epoch,
                broker_epoch,
                state,
            } => {
                // KIP-380: a request meant for a previous incarnation is refused.
                if broker_epoch != self.broker_epoch && !cfg.broken.ignore_epochs {
                    notes.push(BrokerNote::Refused("stale broker epoch"));
                    return;
                }
                self.on_leader_and_isr(now, controller_epoch, state, cfg, out, notes)
            }
            Msg::Fetch { id, params } => {
                let result = match p.fetch_records(now, &params) {
                    Ok(read) => Ok(FetchReply {
                        records: read.records,
                        high_watermark: read.high_watermark,
                        diverging: read.diverging_epoch,
                    }),
                    Err(e) => Err(e.error_code()),
                };
                out.push((from, Msg::FetchResp { id, result }));
                self.after_leader_event(now, out);
            }
            Msg::EpochQuery {
                id,
                current_leader_epoch,
                epoch,
            } => {
                let result = p
                    .last_offset_for_leader_epoch(Some(current_leader_epoch), epoch)
                    .map_err(|e| e.error_code());
                out.push((from, Msg::EpochAnswer { id, result }));
            }
            Msg::FetchResp { id, result } => {
                let Some(f) = self.in_flight.filter(|f| f.id == id) else {
                    return;
                };
                self.in_flight = None;
                if let Ok(reply) = result {
                    let r = if let Some(d) = reply.diverging {
                        p.truncate_to_leader_epoch(d).map(|_| ())
                    } else if f.fetch_offset == p.log_end_offset() {
                        p.append_as_follower(reply.records, reply.high_watermark)
                            .map(|_| ())
                    } else {
                        Ok(())
                    };
                    if let Err(e) = r {
                        notes.push(BrokerNote::CoreError(e.to_string()));
                    }
                }
            }
            Msg::EpochAnswer { id, result } => {
                if self.in_flight.is_none_or(|f| f.id != id) {
                    return;
                }
                self.in_flight = None;
                if let Ok(answer) = result {
                    match p.truncate_to_leader_epoch(answer) {
                        Ok(st) if st.complete => self.needs_truncation = false,
                        Ok(_) => {}
                        Err(e) => notes.push(BrokerNote::CoreError(e.to_string())),
                    }
                }
            }
            Msg::IsrAnswer { proposal, result } => {
                if self
                    .isr_in_flight
                    .as_ref()
                    .is_some_and(|(sent, _)| *sent == proposal)
                {
                    self.isr_in_flight = None;
                    p.on_isr_result(&proposal, result);
                    self.after_leader_event(now, out);
                }
            }
            Msg::Produce { seq } => {
                let result = produce_batch(seq)
                    .and_then(|batch| p.append_as_leader(batch, -1).map_err(|e| e.error_code()));
                match result {
                    Ok((info, _)) => self.acks.push(PendingAck {
                        seq,
                        from,
                        offset: info.first_offset,
                        required: info.last_offset + 1,
                        since: now,
                    }),
                    Err(code) => out.push((
                        from,
                        Msg::ProduceResp {
                            seq,
                            result: Err(code),
                        },
                    )),
                }
                self.after_leader_event(now, out);
            }
            Msg::ConsumerFetch { offset } => {
                let params = FetchParams {
                    replica_id: CONSUMER_REPLICA_ID,
                    fetch_offset: offset,
                    log_start_offset: -1,
                    max_bytes: 1 << 16,
                    min_one_batch: true,
                    current_leader_epoch: None,
                    last_fetched_epoch: None,
                };
                if let Ok(read) = p.fetch_records(now, &params) {
                    out.push((
                        from,
                        Msg::ConsumerResp {
                            offset,
                            records: read.records,
                        },
                    ));
                }
            }
            Msg::Heartbeat { .. }
            | Msg::IsrPropose { .. }
            | Msg::ProduceResp { .. }
            | Msg::ConsumerResp { .. } => {}
        }
    }

    fn on_leader_and_isr(
        &mut self,
        now: u64,
        controller_epoch: i32,
        state: PartitionState,
        cfg: &KafkaConfig,
        out: &mut Vec<(NodeId, Msg)>,
        notes: &mut Vec<BrokerNote>,
    ) {
        // K4.1: a request from an older controller is refused whole.
        if controller_epoch < self.controller_epoch && !cfg.broken.ignore_epochs {
            notes.push(BrokerNote::Refused("stale controller epoch"));
            return;
        }
        self.controller_epoch = self.controller_epoch.max(controller_epoch);
        // K4.2 (ZooKeeper mode, as the replica manager does it): only a newer leader epoch
        // is applied; a resent or delayed copy of the current one is refused.
        let stale = state.leader_epoch <= self.applied_epoch;
        if stale && !cfg.broken.ignore_epochs {
            notes.push(BrokerNote::Refused("stale leader epoch"));
            return;
        }
        if stale {
            // Deliberately broken: the broker forgets what it applied and takes any state.
            if let Some(old) = self.partition.take() {
                let mut fresh = Partition::new(
                    self.tp.clone(),
                    self.id,
                    old.into_log(),
                    cfg.partition_config(),
                );
                if let Some(hook) = cfg.partition_hook {
                    hook(&mut fresh);
                }
                self.partition = Some(fresh);
            }
        }
        let Some(p) = self.partition.as_mut() else {
            return;
        };
        if state.leader == self.id {
            match p.make_leader(now, &state) {
                Ok(_) => {
                    self.applied_epoch = state.leader_epoch;
                    self.needs_truncation = false;
                    self.in_flight = None;
                    self.isr_in_flight = None;
                }
                Err(_) => {
                    notes.push(BrokerNote::Refused("stale leader epoch"));
                    return;
                }
            }
            self.after_leader_event(now, out);
        } else {
            match p.make_follower(&state) {
                Ok(changed) => {
                    self.applied_epoch = state.leader_epoch;
                    if changed {
                        self.needs_truncation = true;
                        self.in_flight = None;
                    }
                    self.isr_in_flight = None;
                    for a in self.acks.drain(..) {
                        out.push((
                            a.from,
                            Msg::ProduceResp {
                                seq: a.seq,
                                result: Err(ErrorCode::NotLeaderOrFollower),
                            },
                        ));
                    }
                }
                Err(_) => notes.push(BrokerNote::Refused("stale leader epoch")),
            }
        }
    }

    /// After anything that may move the HW or the ISR on a leader: send the next ISR proposal
    /// and answer the produces the HW now covers.
    fn after_leader_event(&mut self, now: u64, out: &mut Vec<(NodeId, Msg)>) {
        let Some(p) = self.partition.as_mut() else {
            return;
        };
        if self.isr_in_flight.is_none() {
            if let Some(proposal) = p.poll_isr_proposal() {
                out.push((
                    CONTROLLER,
                    Msg::IsrPropose {
                        broker_epoch: self.broker_epoch,
                        proposal: proposal.clone(),
                    },
                ));
                self.isr_in_flight = Some((proposal, now));
            }
        }
        let p = &*p;
        self.acks.retain(|a| {
            let answer = match p.check_enough_replicas_reach_offset(a.required) {
                Ok(AckCheck::Pending) if now.saturating_sub(a.since) < PRODUCE_TIMEOUT_MS => {
                    return true
                }
                Ok(AckCheck::Pending) => Err(ErrorCode::RequestTimedOut),
                Ok(AckCheck::Done(ErrorCode::None)) => Ok(a.offset),
                Ok(AckCheck::Done(code)) => Err(code),
                Err(e) => Err(e.error_code()),
            };
            out.push((
                a.from,
                Msg::ProduceResp {
                    seq: a.seq,
                    result: answer,
                },
            ));
            false
        });
    }

    /// Time passes: heartbeat, checkpoint, ISR shrink check, follower fetch, retries.
    pub fn tick(&mut self, now: u64, cfg: &KafkaConfig, out: &mut Vec<(NodeId, Msg)>) {
        let Some(p) = self.partition.as_mut() else {
            return;
        };
        if now >= self.last_heartbeat + HEARTBEAT_MS {
            self.last_heartbeat = now;
            out.push((
                CONTROLLER,
                Msg::Heartbeat {
                    broker_epoch: self.broker_epoch,
                },
            ));
        }
        self.flushed = self.flushed.min(p.log_end_offset());
        if now >= self.last_flush + cfg.flush_interval_ms {
            // The memory log stands for the page cache; what it holds at a flush is on disk.
            self.last_flush = now;
            self.flushed = p.log_end_offset();
        }
        if now >= self.last_checkpoint + CHECKPOINT_MS {
            self.last_checkpoint = now;
            let _ = p.checkpoint_high_watermark();
        }
        if p.is_leader() {
            if now >= self.last_shrink_check + cfg.partition_config().isr_check_interval_ms() {
                self.last_shrink_check = now;
                p.maybe_shrink_isr(now);
            }
            if let Some((proposal, sent)) = &mut self.isr_in_flight {
                if now >= *sent + ISR_RETRY_MS {
                    *sent = now;
                    out.push((
                        CONTROLLER,
                        Msg::IsrPropose {
                            broker_epoch: self.broker_epoch,
                            proposal: proposal.clone(),
                        },
                    ));
                }
            }
            self.after_leader_event(now, out);
            return;
        }
        let Some(leader) = p.leader() else { return };
        if self
            .in_flight
            .is_some_and(|f| now < f.sent_at + FETCH_TIMEOUT_MS)
        {
            return;
        }
        self.next_request += 1;
        let id = self.next_request;
        if self.needs_truncation {
            let epoch = p.latest_epoch();
            if epoch == UNDEFINED_EPOCH {
                let _ = p.truncate_to_leader_epoch(EpochEndOffset::UNDEFINED);
                self.needs_truncation = false;
            } else {
                self.in_flight = Some(InFlight {
                    id,
                    sent_at: now,
                    fetch_offset: -1,
                });
                out.push((
                    leader,
                    Msg::EpochQuery {
                        id,
                        current_leader_epoch: p.leader_epoch(),
                        epoch,
                    },
                ));
                return;
            }
        }
        let params = FetchParams {
            replica_id: self.id,
            fetch_offset: p.log_end_offset(),
            log_start_offset: p.log_start_offset(),
            max_bytes: cfg.fetch_max_bytes,
            min_one_batch: true,
            current_leader_epoch: Some(p.leader_epoch()),
            last_fetched_epoch: None,
        };
        self.in_flight = Some(InFlight {
            id,
            sent_at: now,
            fetch_offset: params.fetch_offset,
        });
        out.push((leader, Msg::Fetch { id, params }));
    }
}

/// A producer's one-record batch whose timestamp is its sequence number (the record's
/// identity in the checks).
pub fn produce_batch(seq: i64) -> Result<Bytes, ErrorCode> {
    let mut b = RecordBatchBuilder::new(0);
    b.append(seq, None, Some(&seq.to_be_bytes()), &[])
        .map_err(|_| ErrorCode::CorruptMessage)?;
    b.build().map_err(|_| ErrorCode::CorruptMessage)
}
