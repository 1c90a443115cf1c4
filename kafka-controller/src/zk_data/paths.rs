//! The znode paths of ZooKeeper-mode Kafka (Kafka's `ZkData.scala`).

/// Ephemeral; names the active controller.
pub const CONTROLLER: &str = "/controller";
/// Persistent; the controller epoch as an ASCII integer; its znode version fences controller
/// writes.
pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
/// Parent of `ids` and `topics`.
pub const BROKERS: &str = "/brokers";
/// Parent of the brokers' ephemeral registrations.
pub const BROKER_IDS: &str = "/brokers/ids";
/// Parent of the topics' assignments.
pub const BROKER_TOPICS: &str = "/brokers/topics";
/// Broker id sequence (used by brokers that generate ids).
pub const BROKER_SEQUENCE_ID: &str = "/brokers/seqid";
/// Parent of the admin requests.
pub const ADMIN: &str = "/admin";
/// Parent of the topics marked for deletion.
pub const DELETE_TOPICS: &str = "/admin/delete_topics";
/// The legacy partition reassignment request.
pub const REASSIGN_PARTITIONS: &str = "/admin/reassign_partitions";
/// The preferred replica election request.
pub const PREFERRED_REPLICA_ELECTION: &str = "/admin/preferred_replica_election";
/// Parent of the ISR change notifications.
pub const ISR_CHANGE_NOTIFICATION: &str = "/isr_change_notification";
/// Prefix of a sequential ISR change notification (`isr_change_<seq10>`).
pub const ISR_CHANGE_PREFIX: &str = "/isr_change_notification/isr_change_";
/// Parent of the log-dir event notifications.
pub const LOG_DIR_EVENT_NOTIFICATION: &str = "/log_dir_event_notification";
/// Prefix of a sequential log-dir event notification.
pub const LOG_DIR_EVENT_PREFIX: &str = "/log_dir_event_notification/log_dir_event_";
/// Parent of the entity configs.
pub const CONFIG: &str = "/config";
/// Parent of the topic configs.
pub const CONFIG_TOPICS: &str = "/config/topics";
/// Parent of the config change notifications.
pub const CONFIG_CHANGES: &str = "/config/changes";
/// Prefix of a sequential config change notification.
pub const CONFIG_CHANGE_PREFIX: &str = "/config/changes/config_change_";
/// Parent of the cluster id.
pub const CLUSTER: &str = "/cluster";
/// The cluster id.
pub const CLUSTER_ID: &str = "/cluster/id";

/// The persistent paths a Kafka broker creates at start-up when missing (Kafka's
/// `ZkData.PersistentZkPaths`), parents first.
pub const PERSISTENT_PATHS: &[&str] = &[
    "/consumers",
    BROKERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG,
    CONFIG_CHANGES,
    ADMIN,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    "/latest_producer_id_block",
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
];

/// `/brokers/ids/<id>`.
pub fn broker(id: i32) -> String {
    format!("{BROKER_IDS}/{id}")
}

/// `/brokers/topics/<topic>`.
pub fn topic(topic: &str) -> String {
    format!("{BROKER_TOPICS}/{topic}")
}

/// `/brokers/topics/<topic>/partitions`.
pub fn topic_partitions(topic: &str) -> String {
    format!("{BROKER_TOPICS}/{topic}/partitions")
}

/// `/brokers/topics/<topic>/partitions/<partition>`.
pub fn partition(topic: &str, partition: i32) -> String {
    format!("{BROKER_TOPICS}/{topic}/partitions/{partition}")
}

/// `/brokers/topics/<topic>/partitions/<partition>/state`.
pub fn partition_state(topic: &str, partition: i32) -> String {
    // Built directly, one allocation of the exact size: the controller formats one of these
    // per partition it reads or writes.
    const PARTITIONS: &str = "/partitions/";
    const STATE: &str = "/state";
    let mut digits = itoa::Buffer::new();
    let number = digits.format(partition);
    let mut path = String::with_capacity(
        BROKER_TOPICS.len() + 1 + topic.len() + PARTITIONS.len() + number.len() + STATE.len(),
    );
    path.push_str(BROKER_TOPICS);
    path.push('/');
    path.push_str(topic);
    path.push_str(PARTITIONS);
    path.push_str(number);
    path.push_str(STATE);
    path
}

/// `/admin/delete_topics/<topic>`.
pub fn delete_topic(topic: &str) -> String {
    format!("{DELETE_TOPICS}/{topic}")
}

/// `/config/topics/<topic>`.
pub fn topic_config(topic: &str) -> String {
    format!("{CONFIG_TOPICS}/{topic}")
}

/// The broker id of a child name of `/brokers/ids`, if it is one.
pub fn parse_broker_id(child: &str) -> Option<i32> {
    child.parse().ok()
}

/// Kafka's topic name rule: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_state_path_is_the_formatted_one_for_every_kind_of_index() {
        for p in [
            0,
            1,
            9,
            10,
            99,
            100,
            999,
            1000,
            123_456,
            i32::MAX,
            -1,
            -10,
            i32::MIN,
        ] {
            for topic in ["t", "topic-00001", "a.b_c-d"] {
                assert_eq!(
                    partition_state(topic, p),
                    format!("/brokers/topics/{topic}/partitions/{p}/state")
                );
            }
        }
    }

    #[test]
    fn paths_match_zookeeper_mode_kafka() {
        assert_eq!(broker(3), "/brokers/ids/3");
        assert_eq!(topic("t"), "/brokers/topics/t");
        assert_eq!(
            partition_state("t", 0),
            "/brokers/topics/t/partitions/0/state"
        );
        assert_eq!(delete_topic("t"), "/admin/delete_topics/t");
        assert_eq!(topic_config("t"), "/config/topics/t");
        assert_eq!(parse_broker_id("12"), Some(12));
        assert_eq!(parse_broker_id("x"), None);
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(is_valid_topic_name("orders.v1_x-2"));
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(250)] {
            assert!(!is_valid_topic_name(bad), "{bad}");
        }
    }
}
