//! The broker's metrics, published through the [`metrics`] facade under the names a Kafka
//! operator's dashboards use (Kafka's JMX MBeans as Prometheus' JMX exporter spells them:
//! `kafka_server_replicamanager_underreplicatedpartitions`, …).
//!
//! The sans-IO cores only count: [`ReplicaStats`] from the replica manager and
//! [`ControllerStats`] from the active controller's context. A [`MetricsPublisher`] task reads
//! both every period and sets the gauges and counters; the network server counts requests,
//! their latency and the bytes it reads and writes as they pass ([`record_request`],
//! [`record_bytes_in`], [`record_bytes_out`]). Without an installed recorder every call is a
//! no-op; the `ha-broker` binary installs a Prometheus one with `--metrics-listen`.
//!
//! | Kafka MBean | name here |
//! |---|---|
//! | `ReplicaManager.UnderReplicatedPartitions` | `kafka_server_replicamanager_underreplicatedpartitions` |
//! | `ReplicaManager.UnderMinIsrPartitionCount` | `kafka_server_replicamanager_underminisrpartitioncount` |
//! | `ReplicaManager.AtMinIsrPartitionCount` | `kafka_server_replicamanager_atminisrpartitioncount` |
//! | `ReplicaManager.LeaderCount` | `kafka_server_replicamanager_leadercount` |
//! | `ReplicaManager.PartitionCount` | `kafka_server_replicamanager_partitioncount` |
//! | `ReplicaManager.IsrShrinksPerSec` | `kafka_server_replicamanager_isrshrinks_total` |
//! | `ReplicaManager.IsrExpandsPerSec` | `kafka_server_replicamanager_isrexpands_total` |
//! | `DelayedOperationPurgatory.PurgatorySize` | `kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"\|"Produce"}` |
//! | `KafkaController.ActiveControllerCount` | `kafka_controller_kafkacontroller_activecontrollercount` |
//! | `KafkaController.OfflinePartitionsCount` | `kafka_controller_kafkacontroller_offlinepartitionscount` |
//! | `KafkaController.PreferredReplicaImbalanceCount` | `kafka_controller_kafkacontroller_preferredreplicaimbalancecount` |
//! | `KafkaController.GlobalPartitionCount` / `GlobalTopicCount` / `ActiveBrokerCount` | `kafka_controller_kafkacontroller_globalpartitioncount` / `…_globaltopiccount` / `…_activebrokercount` |
//! | `ControllerStats.LeaderElectionRateAndTimeMs` | `kafka_controller_controllerstats_leaderelections_total` |
//! | `ControllerStats.UncleanLeaderElectionsPerSec` | `kafka_controller_controllerstats_uncleanleaderelections_total` |
//! | `RequestMetrics.RequestsPerSec` / `TotalTimeMs` | `kafka_network_requestmetrics_requests_total{request}` / `kafka_network_requestmetrics_totaltimems{request}` |
//! | `BrokerTopicMetrics.BytesInPerSec` / `BytesOutPerSec` (all traffic here) | `kafka_server_brokertopicmetrics_bytesin_total` / `…_bytesout_total` |
//!
//! The controller's counts start again at each controllership (a counter reset, which
//! Prometheus' `rate` handles).

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_controller::context::ControllerStats;
use kafka_controller::controller::ControllerHandle;
use kafka_replication::replica_manager::ReplicaStats;
use kafka_wire::ApiKey;

/// Sets the replica manager's gauges and counters from `s`.
pub fn publish_replica_stats(s: &ReplicaStats) {
    metrics::gauge!("kafka_server_replicamanager_underreplicatedpartitions")
        .set(s.under_replicated_partitions as f64);
    metrics::gauge!("kafka_server_replicamanager_underminisrpartitioncount")
        .set(s.under_min_isr_partitions as f64);
    metrics::gauge!("kafka_server_replicamanager_atminisrpartitioncount")
        .set(s.at_min_isr_partitions as f64);
    metrics::gauge!("kafka_server_replicamanager_leadercount").set(s.leaders as f64);
    metrics::gauge!("kafka_server_replicamanager_partitioncount").set(s.partitions as f64);
    metrics::counter!("kafka_server_replicamanager_isrshrinks_total").absolute(s.isr_shrinks);
    metrics::counter!("kafka_server_replicamanager_isrexpands_total").absolute(s.isr_expands);
    metrics::gauge!("kafka_server_delayedoperationpurgatory_purgatorysize", "delayedOperation" => "Fetch")
        .set(s.delayed_fetches as f64);
    metrics::gauge!("kafka_server_delayedoperationpurgatory_purgatorysize", "delayedOperation" => "Produce")
        .set(s.delayed_produces as f64);
}

/// Sets the controller's gauges: `ActiveControllerCount` is 1 with `Some` (this broker is the
/// active controller), and the other controller gauges are 0 on a broker that is not.
pub fn publish_controller_stats(s: Option<&ControllerStats>) {
    let active = s.is_some();
    let s = s.copied().unwrap_or_default();
    metrics::gauge!("kafka_controller_kafkacontroller_activecontrollercount").set(if active {
        1.0
    } else {
        0.0
    });
    metrics::gauge!("kafka_controller_kafkacontroller_offlinepartitionscount")
        .set(s.offline_partitions as f64);
    metrics::gauge!("kafka_controller_kafkacontroller_preferredreplicaimbalancecount")
        .set(s.preferred_replica_imbalance as f64);
    metrics::gauge!("kafka_controller_kafkacontroller_globalpartitioncount")
        .set(s.global_partition_count as f64);
    metrics::gauge!("kafka_controller_kafkacontroller_globaltopiccount")
        .set(s.global_topic_count as f64);
    metrics::gauge!("kafka_controller_kafkacontroller_activebrokercount")
        .set(s.live_brokers as f64);
    metrics::gauge!("kafka_controller_kafkacontroller_controllerepoch")
        .set(f64::from(s.controller_epoch));
    if active {
        metrics::counter!("kafka_controller_controllerstats_leaderelections_total")
            .absolute(s.leader_elections);
        metrics::counter!("kafka_controller_controllerstats_uncleanleaderelections_total")
            .absolute(s.unclean_leader_elections);
    }
}

/// Kafka's name of `api` (`Produce`, `Fetch`, …), made once per API.
fn api_name(api: ApiKey) -> &'static str {
    static NAMES: OnceLock<HashMap<i16, &'static str>> = OnceLock::new();
    NAMES
        .get_or_init(|| {
            ApiKey::ALL
                .iter()
                .map(|k| {
                    let name: &'static str = Box::leak(format!("{k:?}").into_boxed_str());
                    (k.as_i16(), name)
                })
                .collect()
        })
        .get(&api.as_i16())
        .copied()
        .unwrap_or("Unknown")
}

/// Counts one handled request of `api` and its time in the handler.
pub fn record_request(api: ApiKey, started: Instant) {
    let name = api_name(api);
    metrics::counter!("kafka_network_requestmetrics_requests_total", "request" => name)
        .increment(1);
    metrics::histogram!("kafka_network_requestmetrics_totaltimems", "request" => name)
        .record(started.elapsed().as_secs_f64() * 1_000.0);
}

/// Counts bytes read from clients and other brokers.
pub fn record_bytes_in(bytes: usize) {
    metrics::counter!("kafka_server_brokertopicmetrics_bytesin_total").increment(bytes as u64);
}

/// Counts bytes written to clients and other brokers.
pub fn record_bytes_out(bytes: usize) {
    metrics::counter!("kafka_server_brokertopicmetrics_bytesout_total").increment(bytes as u64);
}

/// A task that publishes the replica manager's and the controller's stats every period;
/// stopped when dropped.
#[derive(Debug)]
pub struct MetricsPublisher {
    task: tokio::task::JoinHandle<()>,
}

impl MetricsPublisher {
    /// Publishes `replica()` and `controller`'s stats every `period` (the first at once).
    pub fn spawn(
        period: Duration,
        replica: impl Fn() -> ReplicaStats + Send + 'static,
        controller: ControllerHandle,
    ) -> MetricsPublisher {
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(period.max(Duration::from_millis(10)));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                every.tick().await;
                publish_replica_stats(&replica());
                let stats = if controller.status().active_epoch.is_some() {
                    controller.stats().await
                } else {
                    None
                };
                publish_controller_stats(stats.as_ref());
            }
        });
        MetricsPublisher { task }
    }
}

impl Drop for MetricsPublisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}
