//! Consumer groups with the Python clients against one `ha-broker --memory` process:
//! `kafka-python`'s `KafkaConsumer(group_id=...)` commits and reads back its offsets and a
//! later consumer of the group resumes after them; `confluent-kafka`'s `Consumer` with a
//! `group.instance.id` (KIP-345) is replaced by a new instance of the same id without waiting
//! for its session to expire; its `AdminClient` lists and describes the groups (ListGroups,
//! DescribeGroups).
//!
//! Fails when `CI` is set and Python or a client module is missing; skips with a notice
//! otherwise. The broker process is killed when the test ends.

mod kcat_common;

use std::time::Duration;

use ha_testkit::require_python;
use kcat_common::{args, run, tail, BrokerProcess};

const SCRIPT: &str = r#"
import json, sys, time
from confluent_kafka import Producer, Consumer, TopicPartition as CTP
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, TopicPartition

bootstrap = sys.argv[1]
topic = "pt"
out = {}

p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
for i in range(30):
    p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
p.flush(30)

def drain(consumer, want, limit=60):
    got = []
    deadline = time.time() + limit
    while len(got) < want and time.time() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value.decode() for r in records)
    return got

# kafka-python: a group member commits, the committed offsets read back.
c = KafkaConsumer(topic, group_id="kp", bootstrap_servers=bootstrap,
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=10000, heartbeat_interval_ms=1000)
out["kp_first"] = len(drain(c, 30))
c.commit()
parts = [TopicPartition(topic, i) for i in range(3)]
out["kp_committed"] = sum(c.committed(tp) or 0 for tp in parts)
c.close()

# A later member of the group reads only what came after the commit.
for i in range(30, 35):
    p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
p.flush(30)
c = KafkaConsumer(topic, group_id="kp", bootstrap_servers=bootstrap,
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=10000, heartbeat_interval_ms=1000)
second = drain(c, 5)
time.sleep(1)
second += [r.value.decode() for rs in c.poll(timeout_ms=500).values() for r in rs]
out["kp_second"] = sorted(second)
c.close()

# confluent-kafka, static membership: the instance restarts with a new member id.
def static_consumer():
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "ck",
                     "group.instance.id": "instance-1", "session.timeout.ms": 30000,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})

def consume(consumer, want, limit=60):
    n = 0
    deadline = time.time() + limit
    while n < want and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            n += 1
    return n

s1 = static_consumer()
s1.subscribe([topic])
out["ck_first"] = consume(s1, 35)
s1.commit(asynchronous=False)
s1.close()  # a static member does not leave the group on close
start = time.time()
s2 = static_consumer()
assigned = []
s2.subscribe([topic], on_assign=lambda c, ps: assigned.extend(p.partition for p in ps))
deadline = time.time() + 20
while not assigned and time.time() < deadline:
    s2.poll(0.2)
out["ck_rejoin_seconds"] = time.time() - start
out["ck_assigned"] = sorted(assigned)
committed = s2.committed([CTP(topic, i) for i in range(3)], timeout=10)
out["ck_committed"] = sum(tp.offset for tp in committed)

admin = AdminClient({"bootstrap.servers": bootstrap})
listed = admin.list_consumer_groups().result(timeout=20)
out["groups"] = sorted(g.group_id for g in listed.valid)
described = admin.describe_consumer_groups(["ck"])["ck"].result(timeout=20)
out["ck_state"] = str(described.state)
out["ck_members"] = [m.group_instance_id for m in described.members]
s2.close()
print(json.dumps(out))
"#;

#[test]
fn python_clients_commit_resume_and_replace_a_static_member() {
    let name = "python_clients_commit_resume_and_replace_a_static_member";
    let Some(python) =
        require_python(name, &["kafka", "confluent_kafka"]).expect("Python clients under CI")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("broker.log");
    let a = args(&[
        "--id",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--memory",
        "--topic",
        "pt:3",
        "--override",
        "group.initial.rebalance.delay.ms=0",
        "--override",
        "offsets.topic.num.partitions=5",
    ]);
    let broker = BrokerProcess::start(1, &a, &log, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = run(
        python.to_str().expect("utf-8 path"),
        &args(&["-c", SCRIPT, &broker.addr]),
        "",
        Duration::from_secs(240),
    );
    assert!(
        out.ok,
        "the client script failed\nstdout:\n{}\nstderr:\n{}\nbroker:\n{}",
        out.stdout,
        out.stderr,
        tail(&log, 40)
    );
    let line = out.stdout.lines().last().unwrap_or_default();
    let r: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
    eprintln!("{r}");
    assert_eq!(r["kp_first"], 30);
    assert_eq!(r["kp_committed"], 30, "kafka-python reads its commits back");
    let second: Vec<String> = (30..35).map(|i| format!("v{i}")).collect();
    assert_eq!(
        r["kp_second"],
        serde_json::json!(second),
        "a later member resumes after the committed offsets"
    );
    assert_eq!(r["ck_first"], 35);
    assert_eq!(r["ck_assigned"], serde_json::json!([0, 1, 2]));
    assert!(
        r["ck_rejoin_seconds"].as_f64().unwrap_or(f64::MAX) < 15.0,
        "the static member's rejoin did not wait for its 30 s session: {r}"
    );
    assert_eq!(r["ck_committed"], 35);
    assert_eq!(r["groups"], serde_json::json!(["ck", "kp"]));
    assert_eq!(r["ck_state"], "ConsumerGroupState.STABLE");
    assert_eq!(r["ck_members"], serde_json::json!(["instance-1"]));
    drop(broker);
}
