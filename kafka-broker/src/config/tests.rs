//! Tests of the `server.properties` reader.

use std::collections::BTreeMap;
use std::time::Duration;

use super::properties::parse;
use super::{ConfigError, ServerSettings};

fn settings(text: &str) -> Result<(ServerSettings, Vec<String>), ConfigError> {
    ServerSettings::from_properties(&parse(text).expect("parses"))
}

fn error_key(text: &str) -> String {
    match settings(text) {
        Err(ConfigError::Invalid { key, .. } | ConfigError::Missing { key }) => key,
        Ok(s) => panic!("accepted: {s:?}"),
    }
}

const KAFKA_STYLE: &str = r"
# A server.properties as Kafka ships it, trimmed.
broker.id=2
listeners=PLAINTEXT://0.0.0.0:19092
advertised.listeners=PLAINTEXT://broker2.example:19092
log.dirs=/var/lib/kafka/data
zookeeper.connect=zk1:2181,zk2:2181/kafka
zookeeper.session.timeout.ms=6000
num.network.threads=5
num.io.threads=4
replica.lag.time.max.ms=10000
min.insync.replicas=2
unclean.leader.election.enable=TRUE
auto.create.topics.enable=false
delete.topic.enable=false
default.replication.factor=3
num.partitions=6
controlled.shutdown.enable=true
controlled.shutdown.max.retries=5
controlled.shutdown.retry.backoff.ms=250
log.retention.hours=168
log.cleaner.enable=true
";

#[test]
fn kafka_keys_are_read_with_their_types() {
    let (s, unknown) = settings(KAFKA_STYLE).expect("valid");
    assert_eq!(
        unknown,
        vec!["log.cleaner.enable".to_string()],
        "no compaction here"
    );
    assert_eq!(s.log_retention_ms, 168 * 3_600_000);
    assert_eq!((s.log_retention_bytes, s.log_segment_bytes), (-1, 1 << 30));
    assert_eq!(s.broker_id, 2);
    assert_eq!(
        (s.listener.host.as_str(), s.listener.port),
        ("0.0.0.0", 19092)
    );
    assert!(s.listener.is_wildcard());
    let adv = s.advertised_listener.clone().expect("advertised");
    assert_eq!((adv.host.as_str(), adv.port), ("broker2.example", 19092));
    assert_eq!(
        s.zookeeper_connect.as_deref(),
        Some("zk1:2181,zk2:2181/kafka")
    );
    assert_eq!(s.zookeeper_session_timeout_ms, 6_000);
    assert_eq!(
        s.zookeeper_connection_timeout_ms, 6_000,
        "defaults to the session timeout"
    );
    assert_eq!((s.num_network_threads, s.num_io_threads), (5, 4));
    assert_eq!(s.replica_lag_time_max_ms, 10_000);
    assert_eq!(s.min_insync_replicas, 2);
    assert!(s.unclean_leader_election_enable);
    assert!(!s.auto_create_topics_enable);
    assert!(!s.delete_topic_enable);
    assert_eq!((s.num_partitions, s.default_replication_factor), (6, 3));
    assert_eq!(s.controlled_shutdown_max_retries, 5);
    s.check_advertised().expect("advertised listener given");

    let c = s.node_config(s.listener.ip_addr().expect("an IP"));
    assert_eq!(c.broker.id, 2);
    assert_eq!(c.broker.listen, "0.0.0.0:19092".parse().expect("addr"));
    assert_eq!(c.advertised_host.as_deref(), Some("broker2.example"));
    assert_eq!(c.advertised_port, Some(19092));
    assert_eq!(
        c.logs.dir(),
        Some(std::path::Path::new("/var/lib/kafka/data"))
    );
    assert_eq!(c.broker.server.num_processors, 5);
    assert_eq!(c.broker.server.num_handlers, 4);
    assert_eq!(c.broker.partition.min_insync_replicas, 2);
    assert_eq!(c.broker.partition.replica_lag_time_max_ms, 10_000);
    assert!(c.controller.unclean_leader_election_enable);
    assert!(!c.controller.delete_topic_enable);
    assert_eq!(c.auto_create_topics, None);
    assert_eq!(c.controlled_shutdown.max_retries, 5);
    assert_eq!(
        c.controlled_shutdown.retry_backoff,
        Duration::from_millis(250)
    );
    assert!(c.controlled_shutdown.enable);
    assert_eq!(
        c.registration_wait,
        Duration::from_millis(6_000) + crate::glue::HOLDER_WAIT_MARGIN
    );
}

#[test]
fn defaults_are_kafkas() {
    let (s, unknown) = settings("broker.id=0").expect("valid");
    assert!(unknown.is_empty());
    assert_eq!(s.zookeeper_session_timeout_ms, 18_000);
    assert_eq!((s.num_network_threads, s.num_io_threads), (3, 8));
    assert_eq!(s.replica_lag_time_max_ms, 30_000);
    assert_eq!(s.min_insync_replicas, 1);
    assert!(!s.unclean_leader_election_enable);
    assert!(s.auto_create_topics_enable && s.delete_topic_enable);
    assert_eq!((s.num_partitions, s.default_replication_factor), (1, 1));
    assert!(s.controlled_shutdown_enable);
    assert_eq!(s.controlled_shutdown_max_retries, 3);
    assert_eq!(s.controlled_shutdown_retry_backoff_ms, 5_000);
    assert_eq!(
        s.listener.ip_addr(),
        Some("127.0.0.1:9092".parse().expect("addr"))
    );
    assert_eq!(s.log_dir.as_os_str(), "data");
}

#[test]
fn command_line_overrides_replace_file_values() {
    let mut props = parse(KAFKA_STYLE).expect("parses");
    props.insert("min.insync.replicas".into(), "1".into());
    props.insert("broker.id".into(), "7".into());
    let (s, _) = ServerSettings::from_properties(&props).expect("valid");
    assert_eq!((s.broker_id, s.min_insync_replicas), (7, 1));
}

#[test]
fn bad_values_are_errors_naming_the_key() {
    assert_eq!(error_key(""), "broker.id");
    assert_eq!(error_key("broker.id=-1"), "broker.id");
    assert_eq!(error_key("broker.id=one"), "broker.id");
    assert_eq!(error_key("broker.id=1\nnum.io.threads=0"), "num.io.threads");
    assert_eq!(
        error_key("broker.id=1\nnum.network.threads=x"),
        "num.network.threads"
    );
    assert_eq!(
        error_key("broker.id=1\nunclean.leader.election.enable=yes"),
        "unclean.leader.election.enable"
    );
    assert_eq!(error_key("broker.id=1\nlisteners=SSL://h:1"), "listeners");
    assert_eq!(
        error_key("broker.id=1\nlisteners=PLAINTEXT://h:99999"),
        "listeners"
    );
    assert_eq!(
        error_key("broker.id=1\nlisteners=PLAINTEXT://a:1,PLAINTEXT://b:2"),
        "listeners"
    );
    assert_eq!(
        error_key("broker.id=1\nadvertised.listeners=PLAINTEXT://0.0.0.0:9092"),
        "advertised.listeners"
    );
    assert_eq!(error_key("broker.id=1\nlog.dirs=/a,/b"), "log.dirs");
    assert_eq!(
        error_key("broker.id=1\nzookeeper.session.timeout.ms=0"),
        "zookeeper.session.timeout.ms"
    );
    let e = settings("broker.id=1\nmin.insync.replicas=zero").expect_err("invalid");
    assert!(
        e.to_string().starts_with("min.insync.replicas=\"zero\""),
        "{e}"
    );
}

#[test]
fn a_wildcard_listener_needs_an_advertised_listener() {
    for listeners in [
        "PLAINTEXT://:9092",
        "PLAINTEXT://0.0.0.0:9092",
        "PLAINTEXT://[::]:9092",
    ] {
        let (s, _) = settings(&format!("broker.id=1\nlisteners={listeners}")).expect("valid");
        assert!(s.listener.is_wildcard(), "{listeners}");
        let e = s.check_advertised().expect_err("refused");
        assert!(e.to_string().contains("advertised.listeners"), "{e}");
    }
    let (s, _) = settings("broker.id=1\nlisteners=PLAINTEXT://[::1]:9092").expect("valid");
    assert_eq!(
        s.listener.ip_addr(),
        Some("[::1]:9092".parse().expect("addr"))
    );
    s.check_advertised()
        .expect("a loopback address is advertised as is");
}

#[test]
fn log_dir_is_read_when_log_dirs_is_absent() {
    let props: BTreeMap<String, String> = [("broker.id", "1"), ("log.dir", "/x")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let (s, _) = ServerSettings::from_properties(&props).expect("valid");
    assert_eq!(s.log_dir.as_os_str(), "/x");
}

#[test]
fn retention_keys_follow_kafkas_precedence_and_bounds() {
    let (s, _) =
        settings("broker.id=1\nlog.retention.hours=1\nlog.retention.minutes=2\n").expect("valid");
    assert_eq!(s.log_retention_ms, 120_000, "minutes win over hours");
    let (s, _) = settings(
        "broker.id=1\nlog.retention.ms=-1\nlog.retention.minutes=2\nlog.retention.bytes=1000\n",
    )
    .expect("valid");
    assert_eq!(
        (s.log_retention_ms, s.log_retention_bytes),
        (-1, 1_000),
        "ms wins; -1 keeps"
    );
    let err = settings("broker.id=1\nlog.segment.bytes=10\n").expect_err("too small");
    assert!(err.to_string().contains("log.segment.bytes"), "{err}");
    let err = settings("broker.id=1\nlog.segment.bytes=5000000000\n").expect_err("too big");
    assert!(err.to_string().contains("log.segment.bytes"), "{err}");
    let (s, _) = settings("broker.id=1\nlog.retention.check.interval.ms=1000\n").expect("valid");
    let c = s.node_config("127.0.0.1:9092".parse().expect("address"));
    assert_eq!(c.broker.retention_check_interval_ms, 1_000);
}

#[test]
fn group_coordinator_settings_default_to_kafkas_and_reach_the_node_config() {
    let (s, unknown) = settings("broker.id=0").expect("valid");
    assert!(unknown.is_empty());
    assert_eq!(
        (
            s.offsets_topic_num_partitions,
            s.offsets_topic_replication_factor
        ),
        (50, 3)
    );
    assert_eq!(s.offsets_retention_minutes, 7 * 24 * 60);
    assert_eq!(s.group_initial_rebalance_delay_ms, 3_000);
    assert_eq!(
        (
            s.group_min_session_timeout_ms,
            s.group_max_session_timeout_ms
        ),
        (6_000, 1_800_000)
    );
    let (s, unknown) = settings(
        "broker.id=0\noffsets.topic.num.partitions=5\noffsets.topic.replication.factor=1\n\
         group.initial.rebalance.delay.ms=0\noffsets.retention.minutes=2\ngroup.max.size=4",
    )
    .expect("valid");
    assert!(unknown.is_empty());
    let c = s.node_config("127.0.0.1:9092".parse().expect("addr"));
    assert_eq!(c.groups.coordinator.offsets_topic_num_partitions, 5);
    assert_eq!(c.groups.offsets_topic_replication_factor, 1);
    assert_eq!(c.groups.coordinator.group_initial_rebalance_delay_ms, 0);
    assert_eq!(c.groups.coordinator.offsets_retention_ms, 120_000);
    assert_eq!(c.groups.coordinator.group_max_size, 4);
    assert!(settings("broker.id=0\noffsets.topic.num.partitions=0").is_err());
}
