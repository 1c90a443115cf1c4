//! The controller and the coordination store of the Kafka model, on one node.
//!
//! The store holds the partition state with a compare-and-set on its partition epoch (the
//! real `kafka-replication` [`MemoryIsrWriter`]) and the controller epoch (`/controller_epoch`);
//! every controller write is fenced by that epoch (KAFKA-6082). Broker sessions expire when
//! heartbeats stop. On an expiry the controller elects with the real `kafka-controller`
//! offline strategy (K1.2, clean or unclean), bumps the leader epoch (K1.3) and sends
//! LeaderAndIsr (K1.4); on a registration it sends the state (K5). It resends the current
//! state periodically, as Kafka's per-broker request queue retries. A failover bumps the
//! controller epoch; the old controller may live on as a zombie that acts on its stale view.

use std::collections::{BTreeMap, BTreeSet};

use kafka_controller::election::{offline_leader, ElectionInput};
use kafka_replication::isr::{BrokerId, LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::partition::PartitionState;

use super::msg::Msg;
use super::KafkaConfig;
use crate::net::NodeId;

const RESEND_MS: u64 = 200;

/// One write to the partition state, as the checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreWrite {
    /// The controller epoch of the writer (`None`: a leader's ISR change).
    pub controller_epoch: Option<i32>,
    /// The store's controller epoch at the time.
    pub current_controller_epoch: i32,
    /// The state written.
    pub state: LeaderAndIsr,
}

/// A deposed controller still acting on what it knew (a long pause, a lost session).
#[derive(Debug, Clone)]
struct Zombie {
    epoch: i32,
    view: LeaderAndIsr,
    act_at: u64,
}

/// The controller and its store.
#[derive(Debug)]
pub struct Controller {
    tp: TopicPartition,
    replicas: Vec<BrokerId>,
    store: MemoryIsrWriter,
    epoch: i32,
    last_heartbeat: BTreeMap<BrokerId, u64>,
    broker_epochs: BTreeMap<BrokerId, u64>,
    live: BTreeSet<BrokerId>,
    last_resend: u64,
    zombie: Option<Zombie>,
    writes: Vec<StoreWrite>,
    unclean_elections: u64,
}

impl Controller {
    /// Controller epoch 1; the partition created with `replicas` all in the ISR, the first
    /// leading epoch 0 (K2.2).
    pub fn new(tp: TopicPartition, replicas: Vec<BrokerId>) -> Self {
        let mut store = MemoryIsrWriter::new();
        store.set(
            tp.clone(),
            LeaderAndIsr {
                leader: replicas.first().copied().unwrap_or(-1),
                leader_epoch: 0,
                isr: replicas.clone(),
                partition_epoch: 0,
            },
        );
        Controller {
            tp,
            live: replicas.iter().copied().collect(),
            last_heartbeat: replicas.iter().map(|r| (*r, 0)).collect(),
            broker_epochs: replicas.iter().map(|r| (*r, 0)).collect(),
            replicas,
            store,
            epoch: 1,
            last_resend: 0,
            zombie: None,
            writes: Vec::new(),
            unclean_elections: 0,
        }
    }

    /// The stored partition state.
    pub fn state(&self) -> LeaderAndIsr {
        self.store.get(&self.tp).cloned().unwrap_or(LeaderAndIsr {
            leader: -1,
            leader_epoch: -1,
            isr: Vec::new(),
            partition_epoch: -1,
        })
    }

    /// The controller epoch.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Live brokers as the controller sees them.
    pub fn live(&self) -> &BTreeSet<BrokerId> {
        &self.live
    }

    /// Every write to the partition state so far (drained by the checks).
    pub fn take_writes(&mut self) -> Vec<StoreWrite> {
        std::mem::take(&mut self.writes)
    }

    /// Unclean elections so far.
    pub fn unclean_elections(&self) -> u64 {
        self.unclean_elections
    }

    fn partition_state(&self, s: &LeaderAndIsr, controller_epoch: i32) -> PartitionState {
        PartitionState {
            controller_epoch,
            leader: s.leader,
            leader_epoch: s.leader_epoch,
            isr: s.isr.clone(),
            partition_epoch: s.partition_epoch,
            replicas: self.replicas.clone(),
        }
    }

    fn send_state(&self, to: impl IntoIterator<Item = BrokerId>, out: &mut Vec<(NodeId, Msg)>) {
        let state = self.partition_state(&self.state(), self.epoch);
        for b in to {
            out.push((
                b,
                Msg::LeaderAndIsr {
                    controller_epoch: self.epoch,
                    broker_epoch: self.broker_epochs.get(&b).copied().unwrap_or(0),
                    state: state.clone(),
                },
            ));
        }
    }

    /// K1.3: a conditional write by a controller of `writer_epoch`, based on `read`'s
    /// partition epoch. Fenced by the controller epoch unless the store is deliberately broken.
    fn write(
        &mut self,
        writer_epoch: i32,
        read: &LeaderAndIsr,
        new: LeaderAndIsr,
        cfg: &KafkaConfig,
    ) -> bool {
        if writer_epoch < self.epoch && !cfg.broken.store_ignores_controller_epoch {
            return false;
        }
        if self.state().partition_epoch != read.partition_epoch {
            return false;
        }
        self.writes.push(StoreWrite {
            controller_epoch: Some(writer_epoch),
            current_controller_epoch: self.epoch,
            state: new.clone(),
        });
        self.store.set(self.tp.clone(), new);
        true
    }

    /// K1.2: elect for the current state with `live`, and write it.
    fn elect(&mut self, cfg: &KafkaConfig, out: &mut Vec<(NodeId, Msg)>) {
        let s = self.state();
        let empty = BTreeSet::new();
        let input = ElectionInput {
            assignment: &self.replicas,
            target_replicas: &self.replicas,
            isr: &s.isr,
            live: &self.live,
            shutting_down: &empty,
            unclean_enabled: cfg.unclean_election,
        };
        let new = match offline_leader(&input, false) {
            Some(r) => {
                if r.unclean {
                    self.unclean_elections += 1;
                }
                LeaderAndIsr {
                    leader: r.leader,
                    leader_epoch: s.leader_epoch + 1,
                    isr: r.isr,
                    partition_epoch: s.partition_epoch + 1,
                }
            }
            // No live candidate: offline; ZK mode keeps the ISR as it was.
            None => LeaderAndIsr {
                leader: -1,
                leader_epoch: s.leader_epoch + 1,
                isr: s.isr.clone(),
                partition_epoch: s.partition_epoch + 1,
            },
        };
        if self.write(self.epoch, &s, new, cfg) {
            self.send_state(self.live.clone(), out);
        }
    }

    /// A broker's session ended (expiry, or the fault forcing it): K1.
    pub fn expire(&mut self, b: BrokerId, cfg: &KafkaConfig, out: &mut Vec<(NodeId, Msg)>) {
        if !self.live.remove(&b) {
            return;
        }
        let s = self.state();
        if s.leader == b {
            self.elect(cfg, out);
        } else if s.isr.contains(&b) && s.isr.len() > 1 {
            // OfflineReplica: out of the ISR, with a new leader epoch.
            let new = LeaderAndIsr {
                leader: s.leader,
                leader_epoch: s.leader_epoch + 1,
                isr: s.isr.iter().copied().filter(|r| *r != b).collect(),
                partition_epoch: s.partition_epoch + 1,
            };
            if self.write(self.epoch, &s, new, cfg) {
                self.send_state(self.live.clone(), out);
            }
        }
    }

    /// Handles one message.
    pub fn handle(
        &mut self,
        now: u64,
        from: NodeId,
        msg: Msg,
        cfg: &KafkaConfig,
        out: &mut Vec<(NodeId, Msg)>,
    ) {
        match msg {
            Msg::Heartbeat { broker_epoch } => {
                // KIP-380: a heartbeat of an older incarnation (delayed) is ignored; a newer
                // broker epoch is a new registration even if the old session has not expired
                // yet (a bounce).
                let known = self.broker_epochs.get(&from).copied().unwrap_or(0);
                if broker_epoch < known {
                    return;
                }
                self.broker_epochs.insert(from, broker_epoch);
                let bounced = broker_epoch > known;
                self.last_heartbeat.insert(from, now);
                if self.live.insert(from) || bounced {
                    // K5: a broker (re)registered.
                    self.send_state([from], out);
                    if self.state().leader == -1 {
                        self.elect(cfg, out);
                    }
                }
            }
            Msg::IsrPropose {
                broker_epoch,
                proposal,
            } => {
                // KIP-497: an ISR change from an earlier incarnation of the broker (sent before
                // it crashed, delivered after it registered again) is refused; in ZooKeeper
                // mode the dead incarnation's session could not write either.
                let known = self.broker_epochs.get(&from).copied().unwrap_or(0);
                if broker_epoch < known {
                    return;
                }
                let result = self.store.propose_now(&proposal);
                if let kafka_replication::isr::IsrResult::Committed { .. } = result {
                    self.writes.push(StoreWrite {
                        controller_epoch: None,
                        current_controller_epoch: self.epoch,
                        state: self.state(),
                    });
                }
                out.push((from, Msg::IsrAnswer { proposal, result }));
            }
            _ => {}
        }
    }

    /// Time passes: expire silent sessions, resend the state, let a zombie act.
    pub fn tick(&mut self, now: u64, cfg: &KafkaConfig, out: &mut Vec<(NodeId, Msg)>) {
        let silent: Vec<BrokerId> = self
            .live
            .iter()
            .copied()
            .filter(|b| {
                self.last_heartbeat
                    .get(b)
                    .is_none_or(|t| now > t + cfg.session_timeout_ms)
            })
            .collect();
        for b in silent {
            self.expire(b, cfg, out);
        }
        if now >= self.last_resend + RESEND_MS {
            self.last_resend = now;
            self.send_state(self.live.clone(), out);
        }
        if let Some(z) = self.zombie.take_if(|z| now >= z.act_at) {
            // The zombie believes the leader it knew is gone and elects the next replica.
            let next = self
                .replicas
                .iter()
                .copied()
                .find(|r| *r != z.view.leader && z.view.isr.contains(r))
                .or_else(|| self.replicas.iter().copied().find(|r| *r != z.view.leader));
            if let Some(leader) = next {
                let new = LeaderAndIsr {
                    leader,
                    leader_epoch: z.view.leader_epoch + 1,
                    isr: z.view.isr.clone(),
                    partition_epoch: z.view.partition_epoch + 1,
                };
                let state = self.partition_state(&new, z.epoch);
                if self.write(z.epoch, &z.view, new, cfg) {
                    for r in self.replicas.clone() {
                        out.push((
                            r,
                            Msg::LeaderAndIsr {
                                controller_epoch: z.epoch,
                                broker_epoch: self.broker_epochs.get(&r).copied().unwrap_or(0),
                                state: state.clone(),
                            },
                        ));
                    }
                }
            }
        }
    }

    /// Controller failover (K6): a new controller with epoch+1 loads the state and sends it to
    /// every live broker (K6.10); the old one lives on as a zombie acting at `zombie_at`.
    pub fn fail_over(&mut self, zombie_at: u64, out: &mut Vec<(NodeId, Msg)>) {
        self.zombie = Some(Zombie {
            epoch: self.epoch,
            view: self.state(),
            act_at: zombie_at,
        });
        self.epoch += 1;
        self.send_state(self.live.clone(), out);
    }
}
