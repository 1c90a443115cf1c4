"""Administration of an ha-blocks cluster through the broker with real clients.

confluent-kafka's AdminClient (librdkafka) creates a topic (validate_only first, with a
config), describes it (list_topics, describe_configs), alters its configs incrementally,
adds partitions, runs a preferred leader election, describes the cluster, deletes records
and deletes the topic. confluent-kafka has no partition-reassignment calls, so that step
uses kafka-python's KafkaAdminClient.

Usage: admin_client.py BOOTSTRAP BROKER_IDS(comma separated)

Each step prints "STEP <name>" and asserts what the broker answered; after the steps that
change the store it prints "CHECK <what> <args...>" and waits for the test driving it to
answer "ok" (or "ok <value>") on stdin once it has checked the store itself.
"""

import sys
import time

from confluent_kafka import ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

TOPIC = "admin-client-orders"
TIMEOUT = 30


def step(name):
    print(f"STEP {name}", flush=True)


def check(*what):
    """Asks the driving test to check the store; returns its answer's words after 'ok'."""
    print("CHECK " + " ".join(str(w) for w in what), flush=True)
    answer = sys.stdin.readline().split()
    assert answer and answer[0] == "ok", f"the store check {what} failed: {answer}"
    return answer[1:]


def wait_for(what, condition, limit=TIMEOUT):
    deadline = time.time() + limit
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def partitions_of(admin, topic):
    # All topics: a Metadata request naming the topic would auto-create it.
    md = admin.list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return t.partitions


def main():
    bootstrap = sys.argv[1]
    broker_ids = sorted(int(b) for b in sys.argv[2].split(","))
    admin = AdminClient({"bootstrap.servers": bootstrap})

    step("create_topics validate_only")
    topic = NewTopic(TOPIC, num_partitions=3, replication_factor=3,
                     config={"retention.ms": "3600000"})
    admin.create_topics([topic], validate_only=True, request_timeout=TIMEOUT)[TOPIC].result()
    assert partitions_of(admin, TOPIC) is None, "validate_only created the topic"
    check("absent", TOPIC)

    step("create_topics")
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3,
                                  config={"retention.ms": "3600000"})],
                        operation_timeout=TIMEOUT, request_timeout=TIMEOUT)[TOPIC].result()
    parts = partitions_of(admin, TOPIC)
    assert parts is not None and len(parts) == 3, f"metadata: {parts}"
    for p in parts.values():
        assert p.leader in broker_ids and sorted(p.replicas) == broker_ids, p
    check("created", TOPIC, 3, 3, "retention.ms=3600000")
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)], request_timeout=TIMEOUT)[TOPIC].result()
        raise AssertionError("a second creation succeeded")
    except KafkaException as e:
        assert e.args[0].name() == "TOPIC_ALREADY_EXISTS", e
    try:
        admin.create_topics([NewTopic("odd-config", 1, 1, config={"no.such.key": "1"})],
                            request_timeout=TIMEOUT)["odd-config"].result()
        raise AssertionError("an unknown config was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_CONFIG", e
    try:
        admin.create_topics([NewTopic("too-wide", 1, len(broker_ids) + 1)],
                            request_timeout=TIMEOUT)["too-wide"].result()
        raise AssertionError("a replication factor above the broker count was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_REPLICATION_FACTOR", e

    step("describe_configs")
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result()
    retention = configs["retention.ms"]
    assert retention.value == "3600000", retention
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, retention.source
    policy = configs["cleanup.policy"]
    assert policy.value == "delete" and policy.is_default, policy
    assert policy.source == ConfigSource.DEFAULT_CONFIG.value, policy.source

    step("incremental_alter_configs")
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT)[resource].result()
    check("config", TOPIC, "cleanup.policy=delete,compact", "min.insync.replicas=2")
    plain = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([plain], request_timeout=TIMEOUT)[plain].result()
    assert configs["cleanup.policy"].value == "delete,compact", configs["cleanup.policy"]
    # The override is gone: the broker's value (its static config or Kafka's default) shows.
    assert configs["retention.ms"].source in (ConfigSource.STATIC_BROKER_CONFIG.value,
                                              ConfigSource.DEFAULT_CONFIG.value), configs
    assert configs["min.insync.replicas"].value == "2", configs["min.insync.replicas"]
    bad = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    try:
        admin.incremental_alter_configs([bad], request_timeout=TIMEOUT)[bad].result()
        raise AssertionError("APPEND on a number was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_CONFIG", e

    step("create_partitions")
    admin.create_partitions([NewPartitions(TOPIC, 5)], operation_timeout=TIMEOUT,
                            request_timeout=TIMEOUT)[TOPIC].result()
    parts = partitions_of(admin, TOPIC)
    assert len(parts) == 5 and all(p.leader in broker_ids for p in parts.values()), parts
    check("partitions", TOPIC, 5)
    try:
        admin.create_partitions([NewPartitions(TOPIC, 4)], request_timeout=TIMEOUT)[TOPIC].result()
        raise AssertionError("a decrease was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_PARTITIONS", e

    step("elect_leaders preferred")
    # (confluent-kafka 2.16's elect_leaders fails on any timeout keyword: none is passed.)
    # The driving test stops and restarts a preferred leader that is not the controller;
    # it answers with a partition now led by another replica.
    partition = int(check("unpreferred", TOPIC)[0])
    parts = partitions_of(admin, TOPIC)
    preferred = parts[partition].replicas[0]
    assert parts[partition].leader != preferred, parts[partition]
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, partition)]
                                  ).result(timeout=TIMEOUT)
    for tp, error in results.items():
        assert error is None, f"{tp}: {error}"
    wait_for("the preferred leader in the metadata",
             lambda: partitions_of(admin, TOPIC)[partition].leader == preferred)
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, partition)]
                                  ).result(timeout=TIMEOUT)
    for tp, error in results.items():
        assert error is not None and error.name() == "ELECTION_NOT_NEEDED", f"{tp}: {error}"
    check("leader", TOPIC, partition, preferred)

    step("alter/list partition reassignments (kafka-python)")
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    # Down to two replicas (a reassignment that only reorders them would not be carried out
    # by this controller).
    current = partitions_of(admin, TOPIC)[0].replicas
    target = [current[1], current[0]]
    answer = kadmin.alter_partition_reassignments({KTopicPartition(TOPIC, 0): target})
    assert all(v is None for v in answer.values()), answer
    check("assignment", TOPIC, 0, ",".join(str(b) for b in target))
    ongoing = kadmin.list_partition_reassignments({TOPIC: [0]})
    assert KTopicPartition(TOPIC, 0) not in ongoing, ongoing
    answer = kadmin.alter_partition_reassignments({KTopicPartition(TOPIC, 1): None})
    assert all(v is not None and "NoReassignmentInProgress" in str(v) for v in answer.values()), answer
    kadmin.close()

    step("describe_cluster")
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result()
    assert sorted(n.id for n in cluster.nodes) == broker_ids, cluster.nodes
    assert cluster.controller is not None and cluster.controller.id in broker_ids
    check("cluster", cluster.cluster_id, cluster.controller.id)

    step("delete_records")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(10):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=0)
        producer.flush(TIMEOUT)
    deleted = admin.delete_records([TopicPartition(TOPIC, 0, 4)], operation_timeout=TIMEOUT,
                                   request_timeout=TIMEOUT)
    for tp, future in deleted.items():
        result = future.result()
        assert result.low_watermark == 4, result.low_watermark
    check("log-start", TOPIC, 0, 4)
    try:
        bad = admin.delete_records([TopicPartition(TOPIC, 0, 1000)], request_timeout=TIMEOUT)
        for future in bad.values():
            future.result()
        raise AssertionError("an offset beyond the high watermark was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "OFFSET_OUT_OF_RANGE", e

    step("delete_topics")
    admin.delete_topics([TOPIC], operation_timeout=TIMEOUT,
                        request_timeout=TIMEOUT)[TOPIC].result()
    assert partitions_of(admin, TOPIC) is None, "still in the metadata"
    check("absent", TOPIC)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
