//! # kafka-replication
//!
//! A broker's half of Kafka replication (K4, K8) as building blocks: partition logs, the
//! leader-epoch cache, a partition's ISR / log end offset / high watermark state on leader and
//! follower, leader-epoch truncation, and a delayed-operation purgatory over a hierarchical
//! timing wheel, and the idempotent-producer state of each partition's log (KIP-98). Everything
//! here is deterministic and sans-IO except the [`log::FileLog`] and the tokio driver: time is
//! a number of milliseconds you pass in, and ISR changes are proposals you carry to an
//! [`isr::IsrWriter`] yourself — or let `replica_driver::ReplicaDriver` (feature `tokio`, on
//! by default) carry them, feed the time and run the fetchers over [`replica_fetcher::LeaderLink`]s.
//!
//! The behaviour is Kafka 2.8's with the data-loss fixes made since the 0.8 design: leader
//! epochs in every batch and truncation by epoch instead of to the high watermark (KIP-101),
//! epoch iteration when the leader does not know the follower's epoch (KIP-279, KAFKA-7415),
//! ISR expansion only after the leader's epoch start offset (KAFKA-7128), and epoch fencing of
//! fetches (KIP-320).
//!
//! ## A leader, a follower, and the high watermark
//!
//! A [`partition::Partition`] wraps a [`log::LogStorage`]. Make broker 1 the leader of epoch 0
//! with followers 2 and 3, append, and let follower fetches move the high watermark (K8.2):
//!
//! ```
//! use kafka_replication::isr::TopicPartition;
//! use kafka_replication::log::MemoryLog;
//! use kafka_replication::partition::{FetchParams, Partition, PartitionConfig, PartitionState};
//! use kafka_wire::records::RecordBatchBuilder;
//!
//! let mut leader = Partition::new(TopicPartition::new("orders", 0), 1, MemoryLog::new(),
//!                                 PartitionConfig::default());
//! let state = PartitionState {
//!     controller_epoch: 1, leader: 1, leader_epoch: 0, isr: vec![1, 2, 3],
//!     partition_epoch: 0, replicas: vec![1, 2, 3],
//! };
//! leader.make_leader(0, &state)?;
//!
//! // A producer's batch: the leader assigns offsets and stamps its epoch.
//! let mut batch = RecordBatchBuilder::new(0);
//! batch.append(1_000, None, Some(b"hello"), &[])?;
//! batch.append(1_001, None, Some(b"world"), &[])?;
//! leader.append_as_leader(batch.build()?, -1)?;
//! assert_eq!(leader.log_end_offset(), 2);
//! assert_eq!(leader.high_watermark(), 0); // the followers have nothing yet
//!
//! // Each follower fetches from its log end offset; the second fetch tells the leader
//! // they have both records.
//! let fetch = |replica_id, fetch_offset| FetchParams {
//!     replica_id, fetch_offset, log_start_offset: 0, max_bytes: 1 << 20,
//!     min_one_batch: true, current_leader_epoch: Some(0), last_fetched_epoch: None,
//! };
//! let data = leader.fetch_records(10, &fetch(2, 0))?;
//! assert!(!data.records.is_empty());
//! leader.fetch_records(10, &fetch(3, 0))?;
//! leader.fetch_records(20, &fetch(2, 2))?;
//! let read = leader.fetch_records(20, &fetch(3, 2))?;
//! assert!(read.high_watermark_advanced);
//! assert_eq!(leader.high_watermark(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Following: truncate by leader epoch, then fetch
//!
//! A new follower asks the leader where its latest epoch ends (OffsetForLeaderEpoch) and
//! truncates there — never to its high watermark. If the follower does not have the epoch the
//! leader answers with, it truncates to the end of its own largest smaller epoch and asks again:
//!
//! ```
//! use kafka_replication::epoch_cache::EpochEndOffset;
//! use kafka_replication::isr::TopicPartition;
//! use kafka_replication::log::{LogStorage, MemoryLog};
//! use kafka_replication::partition::{Partition, PartitionConfig, PartitionState};
//! use kafka_wire::records::RecordBatchBuilder;
//!
//! let mut log = MemoryLog::new();
//! for epoch in [1, 3] {
//!     let mut b = RecordBatchBuilder::new(0);
//!     b.append(0, None, Some(b"x"), &[])?;
//!     log.append_as_leader(b.build()?, epoch)?; // offset 0 in epoch 1, offset 1 in epoch 3
//! }
//! let mut follower = Partition::new(TopicPartition::new("orders", 0), 2, log,
//!                                   PartitionConfig::default());
//! let state = PartitionState {
//!     controller_epoch: 1, leader: 1, leader_epoch: 4, isr: vec![1, 2],
//!     partition_epoch: 9, replicas: vec![1, 2],
//! };
//! assert!(follower.make_follower(&state)?); // start fetching: the leader changed
//! assert_eq!(follower.latest_epoch(), 3);   // ask the leader about epoch 3
//!
//! // The leader never had epoch 3; its largest epoch ≤ 3 is 2, which ends at offset 1.
//! let step = follower.truncate_to_leader_epoch(EpochEndOffset { epoch: 2, end_offset: 1 })?;
//! assert!(!step.complete);                  // we have no epoch 2: ask about epoch 1
//! assert_eq!(follower.latest_epoch(), 1);
//! let step = follower.truncate_to_leader_epoch(EpochEndOffset { epoch: 1, end_offset: 1 })?;
//! assert!(step.complete);
//! assert_eq!(follower.log_end_offset(), 1); // offset 1 (epoch 3) is gone; fetch from 1
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## ISR changes are proposals
//!
//! The leader shrinks the ISR when a follower has not caught up within
//! `replica.lag.time.max.ms` (call [`partition::Partition::maybe_shrink_isr`] every half of it)
//! and expands it on a fetch. Either way it produces an [`isr::IsrProposal`] for an
//! [`isr::IsrWriter`] — a compare-and-set on the partition epoch — and applies the answer:
//!
//! ```
//! # use kafka_replication::isr::{LeaderAndIsr, MemoryIsrWriter, TopicPartition};
//! # use kafka_replication::log::MemoryLog;
//! # use kafka_replication::partition::{Partition, PartitionConfig, PartitionState};
//! let tp = TopicPartition::new("orders", 0);
//! let mut store = MemoryIsrWriter::new();
//! store.set(tp.clone(), LeaderAndIsr { leader: 1, leader_epoch: 0, isr: vec![1, 2], partition_epoch: 0 });
//! let mut p = Partition::new(tp, 1, MemoryLog::new(), PartitionConfig::default());
//! p.make_leader(0, &PartitionState { controller_epoch: 1, leader: 1, leader_epoch: 0,
//!     isr: vec![1, 2], partition_epoch: 0, replicas: vec![1, 2] })?;
//!
//! // Follower 2 never fetches; 30 s later it is out.
//! assert!(p.maybe_shrink_isr(30_001));
//! let proposal = p.poll_isr_proposal().expect("a proposal");
//! assert_eq!(proposal.proposed.isr, vec![1]);
//! p.on_isr_result(&proposal, store.propose_now(&proposal));
//! assert_eq!(p.isr(), &[1]);
//! assert_eq!(p.partition_epoch(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Delayed fetches: the purgatory
//!
//! A fetch that cannot be answered yet (K8.5) waits in a [`purgatory::Purgatory`], watched on
//! its partitions; a log end offset change checks the watchers, and the timing wheel expires the
//! rest:
//!
//! ```
//! use kafka_replication::purgatory::{Admission, Outcome, Purgatory};
//!
//! let mut purgatory: Purgatory<&str, u64> = Purgatory::new(0);
//! // A fetch wanting offset 5 on "orders-0", with max wait 500 ms.
//! let leo = 3;
//! let admission = purgatory.try_complete_else_watch(0, 500, 5, ["orders-0"], |want| *want <= leo);
//! assert!(matches!(admission, Ok(Admission::Watching(_))));
//!
//! let leo = 6; // an append moved the log end offset
//! assert_eq!(purgatory.check_and_complete(&"orders-0", |want| *want <= leo), 1);
//! let done = purgatory.poll_completed().expect("completed");
//! assert_eq!(done.outcome, Outcome::Completed);
//!
//! purgatory.try_complete_else_watch(10, 500, 99, ["orders-0"], |want| *want <= leo).ok();
//! purgatory.advance(510); // nothing came: it expires
//! assert_eq!(purgatory.poll_completed().map(|f| f.outcome), Some(Outcome::Expired));
//! ```
//!
//! ## A broker: the replica manager
//!
//! [`replica_manager::ReplicaManager`] holds all partitions of one broker and speaks
//! `kafka-wire` messages: LeaderAndIsr (K4), Fetch (K8) with delayed fetches, Produce with
//! acks, OffsetForLeaderEpoch, UpdateMetadata, StopReplica. What it cannot do itself — ISR
//! writes, fetcher changes, answers to requests that waited — comes out of `poll_action`. A
//! follower's [`replica_fetcher::ReplicaFetcher`] drives its side against the leader:
//!
//! ```
//! use kafka_replication::isr::TopicPartition;
//! use kafka_replication::log::MemoryLog;
//! use kafka_replication::partition::PartitionConfig;
//! use kafka_replication::replica_fetcher::{FetcherConfig, FetcherRequest, ReplicaFetcher};
//! use kafka_replication::replica_manager::{FetchOutcome, ReplicaManager};
//! use kafka_wire::messages::leader_and_isr_request::{LeaderAndIsrPartitionState, LeaderAndIsrTopicState};
//! use kafka_wire::messages::LeaderAndIsrRequest;
//! use kafka_wire::records::RecordBatchBuilder;
//!
//! let request = LeaderAndIsrRequest {
//!     controller_epoch: 1,
//!     topic_states: vec![LeaderAndIsrTopicState {
//!         topic_name: "orders".into(),
//!         partition_states: vec![LeaderAndIsrPartitionState {
//!             topic_name: "orders".into(), partition_index: 0, controller_epoch: 1,
//!             leader: 1, leader_epoch: 0, isr: vec![1, 2].into(), partition_epoch: 0,
//!             replicas: vec![1, 2].into(), ..Default::default()
//!         }],
//!         ..Default::default()
//!     }],
//!     ..Default::default()
//! };
//! let new_log = || -> kafka_replication::replica_manager::LogFactory<MemoryLog> {
//!     Box::new(|_| Ok(MemoryLog::new()))
//! };
//! let mut broker1 = ReplicaManager::new(1, PartitionConfig::default(), 0, new_log());
//! let mut broker2 = ReplicaManager::new(2, PartitionConfig::default(), 0, new_log());
//! broker1.become_leader_or_follower(0, &request, 4); // K4.3: leader
//! broker2.become_leader_or_follower(0, &request, 4); // K4.3: follower of broker 1
//!
//! let tp = TopicPartition::new("orders", 0);
//! let mut batch = RecordBatchBuilder::new(0);
//! batch.append(0, None, Some(b"paid"), &[])?;
//! broker1.append_records(&tp, batch.build()?, -1)?;
//!
//! let mut fetcher = ReplicaFetcher::new(2, 1, FetcherConfig::default().with_max_wait_ms(0));
//! fetcher.add_partitions([tp.clone()]);
//! for now in 1..4 {
//!     match fetcher.poll_request(now, &mut broker2) {
//!         Some(FetcherRequest::OffsetForLeaderEpoch(req)) => {
//!             let resp = broker1.offset_for_leader_epoch(&req);
//!             fetcher.on_offset_for_leader_epoch_response(now, &resp, &mut broker2);
//!         }
//!         Some(FetcherRequest::Fetch(req)) => {
//!             if let FetchOutcome::Respond(resp) = broker1.fetch(now, &req) {
//!                 fetcher.on_fetch_response(now, &resp, &mut broker2);
//!             }
//!         }
//!         None => {}
//!     }
//! }
//! assert_eq!(broker2.partition(&tp).map(|p| p.log_end_offset()), Some(1));
//! assert_eq!(broker1.partition(&tp).map(|p| p.high_watermark()), Some(1)); // committed
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Logs
//!
//! [`log::MemoryLog`] is for tests and simulation; [`log::FileLog`] keeps segments with an
//! offset index on disk, checks every batch's CRC on recovery and truncates a torn tail, and
//! writes its epoch cache and checkpoints atomically. Both pass the `testing::log_storage`
//! conformance suite (feature `testing`), which you can run against your own
//! [`log::LogStorage`].
//!
//! ## Cargo features
//!
//! - `tokio` (default): the async driver `replica_driver::ReplicaDriver`.
//! - `testing`: the conformance suites (`testing`) of the traits a composition implements —
//!   [`log::LogStorage`], [`isr::IsrWriter`] and (with `tokio`) [`replica_fetcher::LeaderLink`]. Purely additive: it adds a module and changes no behaviour.
//! - `never-in-production`: test-only legacy switches (see the crate's `Cargo.toml`).

pub mod data_path;
pub mod epoch_cache;
pub mod isr;
pub mod log;
pub mod metadata_cache;
pub mod partition;
pub mod producer_state;
pub mod purgatory;
#[cfg(feature = "tokio")]
pub mod replica_driver;
pub mod replica_fetcher;
pub mod replica_manager;
#[cfg(feature = "testing")]
pub mod testing;
pub mod timer;

#[cfg(test)]
mod sim;
