//! Three replica managers with their fetchers and a hand-driven controller: acks=all writes
//! survive a leader failure with a clean election, and the old leader's unreplicated tail is
//! truncated away when it comes back as a follower (K4, K8, KIP-101).

use std::collections::BTreeMap;

use kafka_replication::isr::{BrokerId, IsrResult, LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::{FetcherConfig, FetcherRequest, ReplicaFetcher};
use kafka_replication::replica_manager::{
    FetchOutcome, ProduceOutcome, ReplicaAction, ReplicaManager,
};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{LeaderAndIsrRequest, ProduceRequest};
use kafka_wire::records::RecordBatchBuilder;

struct Broker {
    manager: ReplicaManager<MemoryLog>,
    fetchers: BTreeMap<BrokerId, ReplicaFetcher>,
    produce_answers: Vec<(i16, i64)>,
}

struct Cluster {
    now: u64,
    brokers: BTreeMap<BrokerId, Broker>,
    store: MemoryIsrWriter,
    controller_epoch: i32,
}

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

impl Cluster {
    fn new() -> Cluster {
        let mut c = Cluster {
            now: 0,
            brokers: BTreeMap::new(),
            store: MemoryIsrWriter::new(),
            controller_epoch: 1,
        };
        for id in 1..=3 {
            c.brokers.insert(
                id,
                Broker {
                    manager: ReplicaManager::new(
                        id,
                        PartitionConfig::default()
                            .with_replica_lag_time_max_ms(10_000)
                            .with_min_insync_replicas(2),
                        0,
                        Box::new(|_| Ok(MemoryLog::new())),
                    ),
                    fetchers: BTreeMap::new(),
                    produce_answers: Vec::new(),
                },
            );
        }
        c.store.set(
            tp(),
            LeaderAndIsr {
                leader: 1,
                leader_epoch: 0,
                isr: vec![1, 2, 3],
                partition_epoch: 0,
            },
        );
        c.send_leader_and_isr();
        c
    }

    /// The controller sends the stored state to every live broker (K1.4, batched per broker).
    fn send_leader_and_isr(&mut self) {
        let Some(s) = self.store.get(&tp()).cloned() else {
            return;
        };
        let request = LeaderAndIsrRequest {
            controller_epoch: self.controller_epoch,
            topic_states: vec![LeaderAndIsrTopicState {
                topic_name: "orders".into(),
                partition_states: vec![LeaderAndIsrPartitionState {
                    topic_name: "orders".into(),
                    partition_index: 0,
                    controller_epoch: self.controller_epoch,
                    leader: s.leader,
                    leader_epoch: s.leader_epoch,
                    isr: s.isr.clone().into(),
                    partition_epoch: s.partition_epoch,
                    replicas: vec![1, 2, 3].into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let now = self.now;
        for b in self.brokers.values_mut() {
            b.manager.become_leader_or_follower(now, &request, 4);
        }
        self.handle_actions();
    }

    /// Carries out what the managers asked for: fetcher changes, ISR writes, answers.
    fn handle_actions(&mut self) {
        let ids: Vec<BrokerId> = self.brokers.keys().copied().collect();
        for id in ids {
            let Some(b) = self.brokers.get_mut(&id) else {
                continue;
            };
            let mut proposals = Vec::new();
            while let Some(a) = b.manager.poll_action() {
                match a {
                    ReplicaAction::AddFetcherPartitions { leader, partitions } => {
                        let fetcher = b.fetchers.entry(leader).or_insert_with(|| {
                            ReplicaFetcher::new(
                                id,
                                leader,
                                FetcherConfig::default().with_max_wait_ms(0),
                            )
                        });
                        fetcher.add_partitions(partitions);
                    }
                    ReplicaAction::RemoveFetcherPartitions { partitions } => {
                        for f in b.fetchers.values_mut() {
                            f.remove_partitions(&partitions);
                        }
                    }
                    ReplicaAction::ShutdownIdleFetcher { leader } => {
                        b.fetchers.remove(&leader);
                    }
                    ReplicaAction::AlterIsr(p) => proposals.push(p),
                    ReplicaAction::ProduceResponse { response, .. } => {
                        for t in &response.responses {
                            for p in &t.partition_responses {
                                b.produce_answers.push((p.error_code, p.base_offset));
                            }
                        }
                    }
                    ReplicaAction::StartHighWatermarkCheckpoint
                    | ReplicaAction::FetchResponse { .. }
                    | ReplicaAction::BecameLeader { .. }
                    | ReplicaAction::BecameFollower { .. } => {}
                }
            }
            for p in proposals {
                let result = self.store.propose_now(&p);
                if let Some(b) = self.brokers.get_mut(&id) {
                    b.manager.on_isr_result(&p, result);
                }
            }
        }
    }

    /// Every live follower runs one fetcher round against its leader.
    fn replicate(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.now += 10;
            let now = self.now;
            let ids: Vec<BrokerId> = self.brokers.keys().copied().collect();
            for id in ids {
                let Some(mut follower) = self.brokers.remove(&id) else {
                    continue;
                };
                let leaders: Vec<BrokerId> = follower.fetchers.keys().copied().collect();
                for leader_id in leaders {
                    let Some(leader) = self.brokers.get_mut(&leader_id) else {
                        continue;
                    };
                    let Some(fetcher) = follower.fetchers.get_mut(&leader_id) else {
                        continue;
                    };
                    match fetcher.poll_request(now, &mut follower.manager) {
                        Some(FetcherRequest::OffsetForLeaderEpoch(req)) => {
                            let resp = leader.manager.offset_for_leader_epoch(&req);
                            fetcher.on_offset_for_leader_epoch_response(
                                now,
                                &resp,
                                &mut follower.manager,
                            );
                        }
                        Some(FetcherRequest::Fetch(req)) => {
                            if let FetchOutcome::Respond(resp) = leader.manager.fetch(now, &req) {
                                fetcher.on_fetch_response(now, &resp, &mut follower.manager);
                            }
                        }
                        None => {}
                    }
                }
                self.brokers.insert(id, follower);
            }
            self.handle_actions();
        }
    }

    fn produce(&mut self, leader: BrokerId, value: &[u8]) {
        let mut b = RecordBatchBuilder::new(0);
        if let Err(e) = b.append(0, None, Some(value), &[]) {
            panic!("batch: {e}");
        }
        let records = match b.build() {
            Ok(r) => r,
            Err(e) => panic!("batch: {e}"),
        };
        let request = ProduceRequest {
            acks: -1,
            timeout_ms: 30_000,
            topic_data: vec![TopicProduceData {
                name: "orders".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(records),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let now = self.now;
        let Some(b) = self.brokers.get_mut(&leader) else {
            panic!("no broker {leader}")
        };
        match b.manager.produce(now, &request) {
            ProduceOutcome::Delayed { .. } => {}
            other => panic!("acks=all should wait, got {other:?}"),
        }
        self.handle_actions();
    }

    fn log_end(&self, id: BrokerId) -> i64 {
        self.brokers
            .get(&id)
            .and_then(|b| b.manager.partition(&tp()))
            .map_or(-1, |p| p.log_end_offset())
    }

    /// The controller's clean election after `failed` died (K1.2, K1.3).
    fn fail_and_elect(&mut self, failed: BrokerId) -> Broker {
        let Some(gone) = self.brokers.remove(&failed) else {
            panic!("no broker {failed}")
        };
        let Some(s) = self.store.get(&tp()).cloned() else {
            panic!("no state")
        };
        let isr: Vec<BrokerId> = s.isr.iter().copied().filter(|id| *id != failed).collect();
        let leader = isr.first().copied().unwrap_or(-1);
        self.store.set(
            tp(),
            LeaderAndIsr {
                leader,
                leader_epoch: s.leader_epoch + 1,
                isr,
                partition_epoch: s.partition_epoch + 1,
            },
        );
        self.send_leader_and_isr();
        gone
    }
}

#[test]
fn acks_all_writes_survive_a_leader_failure_and_the_old_leader_truncates_its_tail() {
    let mut c = Cluster::new();
    c.produce(1, b"a");
    c.produce(1, b"b");
    c.replicate(4);
    let answers = &c
        .brokers
        .get(&1)
        .map(|b| b.produce_answers.clone())
        .unwrap_or_default();
    assert_eq!(
        answers,
        &vec![(0, 0), (0, 1)],
        "both writes acknowledged to acks=all"
    );
    assert_eq!(c.log_end(2), 2);
    assert_eq!(c.log_end(3), 2);

    // Broker 1 takes a write no follower fetches, then dies.
    c.produce(1, b"unreplicated");
    let mut old = c.fail_and_elect(1);
    let Some(s) = c.store.get(&tp()).cloned() else {
        panic!("no state")
    };
    assert_eq!(s.leader, 2);
    c.produce(2, b"c");
    c.replicate(4);
    assert_eq!(c.log_end(3), 3);

    // Broker 1 comes back (its log intact) and is told to follow: it truncates by epoch.
    old.produce_answers.clear();
    old.fetchers.clear();
    c.brokers.insert(1, old);
    c.send_leader_and_isr();
    c.replicate(6);
    assert_eq!(c.log_end(1), 3);
    let batches = |id: BrokerId| {
        c.brokers
            .get(&id)
            .and_then(|b| b.manager.partition(&tp()))
            .map(|p| p.log().batches().to_vec())
            .unwrap_or_default()
    };
    assert_eq!(
        batches(1),
        batches(2),
        "the unreplicated record is gone; logs match"
    );
    assert_eq!(batches(3), batches(2));
    // The new leader's ISR grows back to all three through ISR proposals.
    c.replicate(2);
    let Some(s) = c.store.get(&tp()).cloned() else {
        panic!("no state")
    };
    let mut isr = s.isr.clone();
    isr.sort_unstable();
    assert_eq!(isr, vec![1, 2, 3]);
    assert!(
        matches!(
            c.store.propose_now(&kafka_replication::isr::IsrProposal {
                topic_partition: tp(),
                proposed: LeaderAndIsr {
                    leader: 1,
                    leader_epoch: 0,
                    isr: vec![1],
                    partition_epoch: 0
                },
            }),
            IsrResult::Conflict { .. }
        ),
        "a stale leader's ISR write is fenced"
    );
}
