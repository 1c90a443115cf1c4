//! KIP-516 topic ids: the controller loads them from the v3 topic znode, gives a fresh one to a
//! topic created without one (as Kafka 2.8's controller does), and sends them in LeaderAndIsr
//! v5+ and UpdateMetadata v7+.

mod controller_harness;

use std::collections::BTreeMap;

use controller_harness::{wait_for, Cluster};
use ha_coordination::{Coordination, CreateMode};
use kafka_controller::context::{BrokerId, TopicPartition};
use kafka_controller::controller::ControllerConfig;
use kafka_controller::topic_id_source::TopicIdGenerator;
use kafka_controller::zk_data::{paths, TopicAssignment};
use kafka_wire::{RequestBody, Uuid};

/// The topic ids named in every LeaderAndIsr and UpdateMetadata sent so far, by topic.
fn sent_topic_ids(c: &Cluster) -> Vec<(String, Uuid)> {
    let mut out = Vec::new();
    for r in c.channel.sent() {
        match &r.body {
            RequestBody::LeaderAndIsr(l) => out.extend(
                l.topic_states
                    .iter()
                    .map(|t| (t.topic_name.to_string(), t.topic_id)),
            ),
            RequestBody::UpdateMetadata(u) => out.extend(
                u.topic_states
                    .iter()
                    .map(|t| (t.topic_name.to_string(), t.topic_id)),
            ),
            _ => {}
        }
    }
    out
}

async fn topic_znode(c: &Cluster, topic: &str) -> TopicAssignment {
    let (data, _) = c.admin.get_data(&paths::topic(topic), false).await.unwrap();
    TopicAssignment::from_json(&data).unwrap()
}

fn assignment(replicas: &[BrokerId]) -> BTreeMap<i32, Vec<BrokerId>> {
    BTreeMap::from([(0, replicas.to_vec())])
}

#[tokio::test]
async fn kip_516_topic_created_without_id_gets_one_in_its_znode_and_in_requests() {
    let c = Cluster::start(&[1, 2, 3]).await;
    c.channel.clear();
    kafka_controller::admin::create_topic_with_assignment(&c.admin, "orders", &assignment(&[1, 2]))
        .await
        .unwrap();
    let tp = TopicPartition::new("orders", 0);
    wait_for("partition state", || async { c.state(&tp).await.is_some() }).await;
    let znode = topic_znode(&c, "orders").await;
    assert_eq!(znode.version, 3, "{znode:?}");
    let id = znode.id().unwrap().expect("topic id written");
    assert!(id.as_u128() > 1);
    assert_eq!(znode.partitions, assignment(&[1, 2]));
    wait_for("LeaderAndIsr with the id", || async {
        sent_topic_ids(&c).contains(&("orders".to_string(), id))
    })
    .await;
    assert!(
        sent_topic_ids(&c)
            .iter()
            .filter(|(t, _)| t == "orders")
            .all(|(_, i)| *i == id),
        "every request names the same id"
    );
}

#[tokio::test]
async fn kip_516_failover_loads_the_topic_id_from_the_v3_znode() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    let first = c.wait_controller().await;
    let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    let mut znode = TopicAssignment::new(assignment(&[2, 3]));
    znode.set_id(id);
    c.admin
        .create(
            &paths::topic("payments"),
            &znode.to_json().unwrap(),
            CreateMode::Persistent,
        )
        .await
        .unwrap();
    let tp = TopicPartition::new("payments", 0);
    wait_for("partition state", || async { c.state(&tp).await.is_some() }).await;
    // The existing id is kept, not replaced.
    assert_eq!(topic_znode(&c, "payments").await.id(), Ok(Some(id)));
    c.kill(first).await;
    c.channel.clear();
    let second = c.wait_controller_other_than(first).await;
    let ctx = c.brokers[&second].handle.context().await.expect("active");
    assert_eq!(ctx.topic_id("payments"), Some(id));
    wait_for("requests of the new controller name the id", || async {
        sent_topic_ids(&c).contains(&("payments".to_string(), id))
    })
    .await;
}

/// Counters in disjoint ranges per broker, so that whichever broker controls, the ids are
/// known in advance.
fn counter_config(id: BrokerId) -> ControllerConfig {
    controller_harness::test_config(id).with_topic_ids(TopicIdGenerator::counter(counter_base(id)))
}

fn counter_base(id: BrokerId) -> u128 {
    (u128::from(id.unsigned_abs()) << 64) | 0x100
}

/// No randomness in the controller: a topic's fresh id is the next one of the injected
/// source, and an id another topic already holds is skipped.
#[tokio::test]
async fn kip_516_fresh_topic_ids_come_from_the_injected_source_and_are_unique() {
    let mut c = Cluster::empty(counter_config).await;
    c.add_broker(1, None).await;
    let controller = c.wait_controller().await;
    let base = counter_base(controller);
    // "taken" already holds the counter's first id.
    let mut znode = TopicAssignment::new(assignment(&[1]));
    znode.set_id(Uuid::from_u128(base));
    c.admin
        .create(
            &paths::topic("taken"),
            &znode.to_json().unwrap(),
            CreateMode::Persistent,
        )
        .await
        .unwrap();
    let taken = TopicPartition::new("taken", 0);
    wait_for("partition state", || async {
        c.state(&taken).await.is_some()
    })
    .await;
    kafka_controller::admin::create_topic_with_assignment(&c.admin, "fresh", &assignment(&[1]))
        .await
        .unwrap();
    let fresh = TopicPartition::new("fresh", 0);
    wait_for("partition state", || async {
        c.state(&fresh).await.is_some()
    })
    .await;
    assert_eq!(
        topic_znode(&c, "fresh").await.id(),
        Ok(Some(Uuid::from_u128(base + 1))),
        "the source's first id is taken: the second one is used"
    );
}
