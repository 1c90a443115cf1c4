//! # ha-tests: the deterministic cluster simulator
//!
//! One seed gives one exact run: a seeded random generator decides every delay, loss,
//! duplication, partition, crash and pause; time is simulated; every collection that decisions
//! depend on is ordered. [`real`] runs Kafka clusters on the real cores: every broker runs
//! `kafka-controller`'s `Controller` (campaigning on a shared `MemoryCoordination` tree) and
//! `kafka-replication`'s `ReplicaManager` with its fetchers, the requests between them are
//! `kafka-wire` messages on the simulated network, and everything runs on a paused-clock tokio
//! runtime. The Kafka model ([`kafka`]) runs brokers on the real
//! `kafka-replication` partition core and a controller electing with the real
//! `kafka-controller` strategies, over a [`net::Network`] that misbehaves, and checks the
//! replication invariants after every step, every delivered message and every store write. The ZooKeeper model ([`zab`]) runs ensembles of
//! servers on zab-core's real election, discovery and broadcast cores and checks Z1, Z5, the
//! survival of committed transactions and liveness. The consumer-group simulation ([`groups`])
//! runs `kafka-group-coordinator` on every broker over a model of the replicated
//! `__consumer_offsets` log and checks that acknowledged commits survive coordinator moves,
//! crashes and zombies. A failing run reports its seed and a trace of
//! the last events; running the seed again replays it.
//!
//! ```
//! use ha_tests::kafka::{cluster::run_seed, KafkaConfig};
//!
//! let cfg = KafkaConfig { duration_ms: 500, ..KafkaConfig::default() };
//! let (stats, failure) = run_seed(7, cfg);
//! assert!(failure.is_none(), "{}", failure.map(|f| f.to_string()).unwrap_or_default());
//! assert_eq!(stats.steps, 100);
//! // The same seed, the same run.
//! assert_eq!(run_seed(7, cfg).0, stats);
//! ```
//!
//! Three brokers on the real controller and replica manager, with every fault:
//!
//! ```
//! use ha_tests::real::{cluster::run_seed, RealConfig};
//!
//! let (stats, failure) = run_seed(7, RealConfig::default());
//! assert!(failure.is_none(), "{}", failure.map(|f| f.to_string()).unwrap_or_default());
//! assert!(stats.acked > 0 && stats.controller_epochs > 0);
//! assert_eq!(run_seed(7, RealConfig::default()).0, stats);
//! ```
//!
//! A ZooKeeper ensemble of three voters and an observer, 3 s of faults, then calm:
//!
//! ```
//! use ha_tests::zab::{ensemble::run_seed, ZabConfig};
//!
//! let (stats, failure) = run_seed(7, &ZabConfig::new(3, 1));
//! assert!(failure.is_none(), "{}", failure.map(|f| f.to_string()).unwrap_or_default());
//! assert!(stats.epochs > 0 && stats.committed > 0);
//! ```

pub mod groups;
pub mod kafka;
pub mod net;
pub mod real;
pub mod runner;
pub mod trace;
pub mod zab;
