//! The administration APIs of a broker on three in-process nodes on the in-memory store:
//! each request is checked against what it wrote to the store and what the metadata shows.

mod admin_common;

use std::collections::BTreeMap;

use admin_common::{create_topic, create_topic_assigned, created, AdminCluster};
use kafka_controller::zk_data::{paths, KafkaZkClient, TopicConfig};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_wire::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_wire::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_wire::messages::delete_topics_request::DeleteTopicState;
use kafka_wire::messages::describe_configs_request::DescribeConfigsResource;
use kafka_wire::messages::elect_leaders_request::TopicPartitions;
use kafka_wire::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{
    AlterPartitionReassignmentsRequest, CreatePartitionsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, ElectLeadersRequest,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest, ProduceRequest,
};
use kafka_wire::records::RecordBatchBuilder;
use kafka_wire::{RequestBody, ResponseBody, Uuid};

const NONE: i16 = 0;

fn code(c: ErrorCode) -> i16 {
    c.code()
}

async fn topic_config(cluster: &AdminCluster, topic: &str) -> BTreeMap<String, String> {
    let zk = KafkaZkClient::new(cluster.store());
    zk.topic_config(topic)
        .await
        .expect("read")
        .map(|c: TopicConfig| c.config)
        .unwrap_or_default()
}

async fn assignment(cluster: &AdminCluster, topic: &str) -> Option<BTreeMap<i32, Vec<i32>>> {
    let zk = KafkaZkClient::new(cluster.store());
    zk.topic_assignment(topic, false)
        .await
        .expect("read")
        .map(|(a, _)| a.partitions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_4_create_topics_validates_writes_the_config_and_answers_once_every_partition_is_led() {
    let cluster = AdminCluster::start(3).await;
    // validate_only writes nothing but answers as a creation would (v5: the counts).
    let r = created(
        cluster
            .send_controller(
                7,
                create_topic("orders", 3, 3, &[("retention.ms", "60000")], true),
            )
            .await,
    );
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!((r.num_partitions, r.replication_factor), (3, 3));
    assert!(assignment(&cluster, "orders").await.is_none());

    let r = created(
        cluster
            .send_controller(
                7,
                create_topic("orders", 3, 3, &[("retention.ms", "60000")], false),
            )
            .await,
    );
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!((r.num_partitions, r.replication_factor), (3, 3));
    assert_ne!(r.topic_id, Uuid::ZERO, "v7 carries the topic id");
    let configs = r.configs.expect("v5 configs");
    let retention = configs
        .iter()
        .find(|c| &*c.name == "retention.ms")
        .expect("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("60000"));
    assert_eq!(retention.config_source, 1, "TOPIC_CONFIG");
    let segment = configs
        .iter()
        .find(|c| &*c.name == "segment.bytes")
        .expect("segment.bytes");
    assert_eq!(segment.config_source, 5, "DEFAULT_CONFIG");
    // The store holds the config and the assignment; the metadata every partition's leader.
    assert_eq!(
        topic_config(&cluster, "orders")
            .await
            .get("retention.ms")
            .map(String::as_str),
        Some("60000")
    );
    let a = assignment(&cluster, "orders").await.expect("assigned");
    assert_eq!(a.len(), 3);
    assert!(a.values().all(|r| r.len() == 3));
    for p in 0..3 {
        assert!(
            cluster
                .leader(cluster.controller_id().unwrap(), "orders", p)
                .await
                >= 0
        );
    }

    // Refusals.
    let cases: Vec<(RequestBody, ErrorCode)> = vec![
        (
            create_topic("orders", 1, 1, &[], false),
            ErrorCode::TopicAlreadyExists,
        ),
        (
            create_topic("bad/name", 1, 1, &[], false),
            ErrorCode::InvalidTopicException,
        ),
        (
            create_topic("wide", 1, 4, &[], false),
            ErrorCode::InvalidReplicationFactor,
        ),
        (
            create_topic("empty", 0, 1, &[], false),
            ErrorCode::InvalidPartitions,
        ),
        (
            create_topic("odd", 1, 1, &[("no.such.key", "1")], false),
            ErrorCode::InvalidConfig,
        ),
        (
            create_topic("odd", 1, 1, &[("retention.ms", "soon")], false),
            ErrorCode::InvalidConfig,
        ),
        (
            create_topic("odd", 1, 1, &[("cleanup.policy", "shred")], false),
            ErrorCode::InvalidConfig,
        ),
        (
            create_topic_assigned("holes", &[&[1, 1]]),
            ErrorCode::InvalidReplicaAssignment,
        ),
    ];
    for (request, expected) in cases {
        let r = created(cluster.send_controller(7, request).await);
        assert_eq!(
            r.error_code,
            code(expected),
            "{}: {:?}",
            r.name,
            r.error_message
        );
        assert_eq!(r.num_partitions, -1);
    }
    assert!(assignment(&cluster, "odd").await.is_none());

    // -1 / -1: the broker's defaults (1 partition, 1 replica); an explicit assignment.
    let r = created(
        cluster
            .send_controller(7, create_topic("defaults", -1, -1, &[], false))
            .await,
    );
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!((r.num_partitions, r.replication_factor), (1, 1));
    let r = created(
        cluster
            .send_controller(7, create_topic_assigned("placed", &[&[3, 1], &[1, 2]]))
            .await,
    );
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!(
        assignment(&cluster, "placed").await,
        Some(BTreeMap::from([(0, vec![3, 1]), (1, vec![1, 2])]))
    );

    // Only the controller creates topics.
    let other = cluster.other_than_controller();
    let r = created(
        cluster
            .send(other, 7, create_topic("elsewhere", 1, 1, &[], false))
            .await,
    );
    assert_eq!(r.error_code, code(ErrorCode::NotController));

    // Timeout 0: created, answered at once with REQUEST_TIMED_OUT, as Kafka does.
    let RequestBody::CreateTopics(mut quick) = create_topic("quick", 1, 1, &[], false) else {
        unreachable!()
    };
    quick.timeout_ms = 0;
    let r = created(
        cluster
            .send_controller(4, RequestBody::CreateTopics(quick))
            .await,
    );
    assert_eq!(r.error_code, code(ErrorCode::RequestTimedOut));
    assert!(assignment(&cluster, "quick").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_4_delete_topics_by_name_and_by_id_waits_until_the_topic_is_gone() {
    let cluster = AdminCluster::start(3).await;
    for t in ["doomed", "by-id"] {
        let r = created(
            cluster
                .send_controller(7, create_topic(t, 2, 2, &[], false))
                .await,
        );
        assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    }
    let by_id = created(
        cluster
            .send_controller(7, create_topic("by-id-2", 1, 1, &[], false))
            .await,
    );
    let request = DeleteTopicsRequest {
        topic_names: vec!["doomed".into(), "never-was".into()],
        timeout_ms: 20_000,
        ..Default::default()
    };
    let ResponseBody::DeleteTopics(r) = cluster
        .send_controller(5, RequestBody::DeleteTopics(request))
        .await
    else {
        panic!("not a delete topics response")
    };
    let by_name: BTreeMap<String, i16> = r
        .responses
        .iter()
        .map(|t| (t.name.as_deref().unwrap_or("").to_owned(), t.error_code))
        .collect();
    assert_eq!(by_name["doomed"], NONE);
    assert_eq!(
        by_name["never-was"],
        code(ErrorCode::UnknownTopicOrPartition)
    );
    // Kafka's DelayedDeleteTopics answers once the metadata no longer has the topic (the
    // controller's UpdateMetadata at the start of the deletion); the controller removes the
    // topic's znodes when the replicas have stopped, possibly just after.
    let gone = cluster
        .with_controller_metadata(|m| !m.topics.iter().any(|t| t.name.as_deref() == Some("doomed")))
        .await;
    assert!(gone, "gone from the metadata when answered");
    cluster
        .eventually("doomed deleted from the store", async |c| {
            assignment(c, "doomed").await.is_none()
        })
        .await;

    // v6, by topic id.
    let request = DeleteTopicsRequest {
        topics: vec![
            DeleteTopicState {
                name: None,
                topic_id: by_id.topic_id,
                ..Default::default()
            },
            DeleteTopicState {
                name: None,
                topic_id: Uuid([9; 16]),
                ..Default::default()
            },
        ],
        timeout_ms: 20_000,
        ..Default::default()
    };
    let ResponseBody::DeleteTopics(r) = cluster
        .send_controller(6, RequestBody::DeleteTopics(request))
        .await
    else {
        panic!("not a delete topics response")
    };
    assert_eq!(
        r.responses[0].error_code, NONE,
        "{:?}",
        r.responses[0].error_message
    );
    assert_eq!(r.responses[0].name.as_deref(), Some("by-id-2"));
    assert_eq!(r.responses[1].error_code, code(ErrorCode::UnknownTopicId));
    cluster
        .eventually("by-id-2 deleted from the store", async |c| {
            assignment(c, "by-id-2").await.is_none()
        })
        .await;

    let other = cluster.other_than_controller();
    let request = DeleteTopicsRequest {
        topic_names: vec!["by-id".into()],
        timeout_ms: 1_000,
        ..Default::default()
    };
    let ResponseBody::DeleteTopics(r) = cluster
        .send(other, 5, RequestBody::DeleteTopics(request))
        .await
    else {
        panic!("not a delete topics response")
    };
    assert_eq!(r.responses[0].error_code, code(ErrorCode::NotController));
}

fn create_partitions(
    topic: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> RequestBody {
    RequestBody::CreatePartitions(CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic {
            name: topic.into(),
            count,
            assignments: assignments.map(|a| {
                a.into_iter()
                    .map(|r| CreatePartitionsAssignment {
                        broker_ids: r.into_iter().collect(),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        }],
        timeout_ms: 20_000,
        validate_only,
        ..Default::default()
    })
}

async fn partitions_created(cluster: &AdminCluster, body: RequestBody) -> i16 {
    let ResponseBody::CreatePartitions(mut r) = cluster.send_controller(3, body).await else {
        panic!("not a create partitions response")
    };
    let t = r.results.pop().expect("one topic");
    t.error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_195_create_partitions_only_increases_and_assigns_the_new_partitions() {
    let cluster = AdminCluster::start(3).await;
    let r = created(
        cluster
            .send_controller(7, create_topic("grow", 2, 2, &[], false))
            .await,
    );
    assert_eq!(r.error_code, NONE);
    assert_eq!(
        partitions_created(&cluster, create_partitions("grow", 4, None, true)).await,
        NONE
    );
    assert_eq!(
        assignment(&cluster, "grow").await.unwrap().len(),
        2,
        "validate_only"
    );
    assert_eq!(
        partitions_created(&cluster, create_partitions("grow", 4, None, false)).await,
        NONE
    );
    let a = assignment(&cluster, "grow").await.unwrap();
    assert_eq!(a.len(), 4);
    assert!(a.values().all(|r| r.len() == 2));
    for p in 0..4 {
        assert!(
            cluster
                .leader(cluster.controller_id().unwrap(), "grow", p)
                .await
                >= 0
        );
    }
    let cases = [
        (
            create_partitions("grow", 3, None, false),
            ErrorCode::InvalidPartitions,
        ),
        (
            create_partitions("grow", 4, None, false),
            ErrorCode::InvalidPartitions,
        ),
        (
            create_partitions("nope", 5, None, false),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            create_partitions("grow", 6, Some(vec![vec![1, 2]]), false),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            create_partitions("grow", 5, Some(vec![vec![1, 9]]), false),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            create_partitions("grow", 5, Some(vec![vec![1]]), false),
            ErrorCode::InvalidReplicaAssignment,
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(partitions_created(&cluster, body).await, code(expected));
    }
    assert_eq!(
        partitions_created(
            &cluster,
            create_partitions("grow", 5, Some(vec![vec![3, 1]]), false)
        )
        .await,
        NONE
    );
    assert_eq!(assignment(&cluster, "grow").await.unwrap()[&4], vec![3, 1]);
}

fn describe_topic(topic: &str, keys: Option<&[&str]>, synonyms: bool) -> RequestBody {
    RequestBody::DescribeConfigs(DescribeConfigsRequest {
        resources: vec![DescribeConfigsResource {
            resource_type: 2,
            resource_name: topic.into(),
            configuration_keys: keys.map(|k| k.iter().map(|k| (*k).into()).collect()),
            ..Default::default()
        }],
        include_synonyms: synonyms,
        // v3+ only: asked along with the synonyms.
        include_documentation: synonyms,
        ..Default::default()
    })
}

fn alter(topic: &str, ops: &[(&str, i8, &str)], validate_only: bool) -> RequestBody {
    RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource_type: 2,
            resource_name: topic.into(),
            configs: ops
                .iter()
                .map(|(k, op, v)| AlterableConfig {
                    name: (*k).into(),
                    config_operation: *op,
                    value: Some((*v).into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        validate_only,
        ..Default::default()
    })
}

async fn altered(cluster: &AdminCluster, broker: i32, body: RequestBody) -> i16 {
    let ResponseBody::IncrementalAlterConfigs(mut r) = cluster.send(broker, 1, body).await else {
        panic!("not an incremental alter configs response")
    };
    r.responses.pop().expect("one resource").error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_339_incremental_alter_configs_sets_deletes_appends_and_subtracts_with_a_change_notification(
) {
    let cluster = AdminCluster::start(3).await;
    let r = created(
        cluster
            .send_controller(
                7,
                create_topic("tuned", 1, 3, &[("min.insync.replicas", "2")], false),
            )
            .await,
    );
    assert_eq!(r.error_code, NONE);
    // Any broker answers DescribeConfigs and IncrementalAlterConfigs.
    let other = cluster.other_than_controller();
    let ResponseBody::DescribeConfigs(mut d) = cluster
        .send(other, 4, describe_topic("tuned", None, true))
        .await
    else {
        panic!("not a describe configs response")
    };
    let result = d.results.pop().expect("one resource");
    assert_eq!(result.error_code, NONE);
    let by_name: BTreeMap<String, _> = result
        .configs
        .into_iter()
        .map(|c| (c.name.to_string(), c))
        .collect();
    let min_isr = &by_name["min.insync.replicas"];
    assert_eq!(min_isr.value.as_deref(), Some("2"));
    assert_eq!((min_isr.config_source, min_isr.read_only), (1, false));
    assert_eq!(min_isr.synonyms[0].source, 1, "the override first");
    assert!(min_isr.documentation.is_some());
    let policy = &by_name["cleanup.policy"];
    assert_eq!(
        (policy.value.as_deref(), policy.config_source),
        (Some("delete"), 5)
    );
    assert_eq!(policy.config_type, 7, "LIST");

    let before = cluster
        .store()
        .children(paths::CONFIG_CHANGES, false)
        .await
        .map(|c| c.len())
        .unwrap_or(0);
    let ops = [
        ("retention.ms", 0, "120000"),
        ("min.insync.replicas", 1, ""),
        ("cleanup.policy", 2, "compact"),
    ];
    assert_eq!(
        altered(&cluster, other, alter("tuned", &ops, true)).await,
        NONE
    );
    assert!(
        !topic_config(&cluster, "tuned")
            .await
            .contains_key("retention.ms"),
        "validate_only"
    );
    assert_eq!(
        altered(&cluster, other, alter("tuned", &ops, false)).await,
        NONE
    );
    let config = topic_config(&cluster, "tuned").await;
    assert_eq!(
        config,
        BTreeMap::from([
            ("cleanup.policy".to_owned(), "delete,compact".to_owned()),
            ("retention.ms".to_owned(), "120000".to_owned()),
        ])
    );
    let changes = cluster
        .store()
        .children(paths::CONFIG_CHANGES, false)
        .await
        .expect("notifications");
    assert_eq!(changes.len(), before + 1);
    assert!(changes.iter().all(|c| c.starts_with("config_change_")));
    assert_eq!(
        altered(
            &cluster,
            other,
            alter("tuned", &[("cleanup.policy", 3, "delete")], false)
        )
        .await,
        NONE
    );
    assert_eq!(
        topic_config(&cluster, "tuned").await["cleanup.policy"],
        "compact"
    );

    let cases = [
        (
            alter("tuned", &[("retention.ms", 2, "5")], false),
            ErrorCode::InvalidConfig,
        ),
        (
            alter("tuned", &[("bogus", 0, "5")], false),
            ErrorCode::InvalidConfig,
        ),
        (
            alter("tuned", &[("min.insync.replicas", 0, "0")], false),
            ErrorCode::InvalidConfig,
        ),
        (
            alter(
                "tuned",
                &[("retention.ms", 0, "5"), ("retention.ms", 1, "")],
                false,
            ),
            ErrorCode::InvalidRequest,
        ),
        (
            alter("missing", &[("retention.ms", 0, "5")], false),
            ErrorCode::UnknownTopicOrPartition,
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(altered(&cluster, other, body).await, code(expected));
    }
    let ResponseBody::DescribeConfigs(mut d) = cluster
        .send(
            other,
            1,
            describe_topic("tuned", Some(&["retention.ms"]), false),
        )
        .await
    else {
        panic!("not a describe configs response")
    };
    let result = d.results.pop().expect("one resource");
    assert_eq!(result.configs.len(), 1);
    assert_eq!(result.configs[0].value.as_deref(), Some("120000"));
    assert!(!result.configs[0].is_default, "v1+: told by the source");
    assert!(result.configs[0].synonyms.is_empty());
    let ResponseBody::DescribeConfigs(mut d) = cluster
        .send(other, 4, describe_topic("missing", None, false))
        .await
    else {
        panic!("not a describe configs response")
    };
    assert_eq!(
        d.results.pop().unwrap().error_code,
        code(ErrorCode::UnknownTopicOrPartition)
    );
    // The broker resource: its static configs, read-only.
    let body = RequestBody::DescribeConfigs(DescribeConfigsRequest {
        resources: vec![DescribeConfigsResource {
            resource_type: 4,
            resource_name: other.to_string().as_str().into(),
            configuration_keys: None,
            ..Default::default()
        }],
        ..Default::default()
    });
    let ResponseBody::DescribeConfigs(mut d) = cluster.send(other, 4, body).await else {
        panic!("not a describe configs response")
    };
    let result = d.results.pop().unwrap();
    assert_eq!(result.error_code, NONE);
    let retention = result
        .configs
        .iter()
        .find(|c| &*c.name == "log.retention.ms")
        .expect("log.retention.ms");
    assert!(retention.read_only);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_700_describe_cluster_lists_the_brokers_the_controller_and_the_cluster_id() {
    let cluster = AdminCluster::start(3).await;
    let other = cluster.other_than_controller();
    let ResponseBody::DescribeCluster(r) = cluster
        .send(
            other,
            1,
            RequestBody::DescribeCluster(DescribeClusterRequest::default()),
        )
        .await
    else {
        panic!("not a describe cluster response")
    };
    assert_eq!(r.error_code, NONE);
    assert_eq!(
        r.brokers.iter().map(|b| b.broker_id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(Some(r.controller_id), cluster.controller_id());
    assert_eq!(&*r.cluster_id, cluster.node(other).cluster_id());
    assert_eq!(r.cluster_authorized_operations, -2147483648);
    assert_eq!(
        r.brokers[0].port,
        i32::from(cluster.node(1).local_addr().port())
    );
}

fn elect(kind: i8, topic: &str, partitions: &[i32]) -> RequestBody {
    RequestBody::ElectLeaders(ElectLeadersRequest {
        election_type: kind,
        topic_partitions: Some(vec![TopicPartitions {
            topic: topic.into(),
            partitions: partitions.iter().copied().collect(),
            ..Default::default()
        }]),
        timeout_ms: 20_000,
        ..Default::default()
    })
}

async fn elected(cluster: &AdminCluster, body: RequestBody) -> BTreeMap<i32, i16> {
    let ResponseBody::ElectLeaders(r) = cluster.send_controller(2, body).await else {
        panic!("not an elect leaders response")
    };
    assert_eq!(r.error_code, NONE);
    r.replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter())
        .map(|p| (p.partition_id, p.error_code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_460_elect_leaders_preferred_and_unclean_with_a_result_per_partition() {
    let mut cluster = AdminCluster::start(3).await;
    let controller = cluster.controller_id().unwrap();
    let others: Vec<i32> = (1..=3).filter(|b| *b != controller).collect();
    let (a, b) = (others[0], others[1]);
    // Partition 0 on [a, b]; partition 1 on [a] alone.
    let r = created(
        cluster
            .send_controller(
                7,
                create_topic_assigned("votes", &[&[a, b], &[a, controller]]),
            )
            .await,
    );
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!(
        elected(&cluster, elect(0, "votes", &[0, 7])).await,
        BTreeMap::from([
            (0, code(ErrorCode::ElectionNotNeeded)),
            (7, code(ErrorCode::UnknownTopicOrPartition))
        ])
    );
    // Stop a: b and the controller lead; a comes back and catches up; the preferred
    // election gives a its leaderships back.
    cluster.stop(a).await;
    cluster
        .eventually("b leads partition 0", async |c| {
            c.leader(controller, "votes", 0).await == b
        })
        .await;
    assert_eq!(
        elected(&cluster, elect(0, "votes", &[0])).await,
        BTreeMap::from([(0, code(ErrorCode::PreferredLeaderNotAvailable))])
    );
    cluster.restart(a).await;
    let zk = KafkaZkClient::new(cluster.store());
    cluster
        .eventually("a back in both ISRs", async |_| {
            let states = zk
                .partition_states(&[("votes".to_owned(), 0), ("votes".to_owned(), 1)])
                .await;
            states
                .iter()
                .all(|s| matches!(s, Ok(Some((s, _))) if s.isr.contains(&a)))
        })
        .await;
    assert_eq!(
        elected(&cluster, elect(0, "votes", &[0, 1])).await,
        BTreeMap::from([(0, NONE), (1, NONE)])
    );
    assert_eq!(
        cluster.leader(controller, "votes", 0).await,
        a,
        "visible when answered"
    );
    assert_eq!(cluster.leader(controller, "votes", 1).await, a);
    // Unclean: not needed while a leader lives; b out of the ISR and a gone leaves
    // partition 0 leaderless, and only an unclean election brings it back, on b.
    assert_eq!(
        elected(&cluster, elect(1, "votes", &[0])).await,
        BTreeMap::from([(0, code(ErrorCode::ElectionNotNeeded))])
    );
    cluster.stop(b).await;
    cluster
        .eventually("ISR of partition 0 is [a]", async |_| {
            let s = zk.partition_states(&[("votes".to_owned(), 0)]).await;
            matches!(&s[0], Ok(Some((s, _))) if s.isr == vec![a])
        })
        .await;
    cluster.stop(a).await;
    cluster
        .eventually("partition 0 leaderless", async |_| {
            let s = zk.partition_states(&[("votes".to_owned(), 0)]).await;
            matches!(&s[0], Ok(Some((s, _))) if s.leader == -1)
        })
        .await;
    assert_eq!(
        elected(&cluster, elect(1, "votes", &[0])).await,
        BTreeMap::from([(0, code(ErrorCode::EligibleLeadersNotAvailable))])
    );
    cluster.restart(b).await;
    cluster
        .eventually("b registered", async |c| {
            c.with_controller_metadata(|m| m.brokers.iter().any(|x| x.node_id == b))
                .await
        })
        .await;
    assert_eq!(
        elected(&cluster, elect(1, "votes", &[0])).await,
        BTreeMap::from([(0, NONE)])
    );
    assert_eq!(cluster.leader(controller, "votes", 0).await, b);
    // Not the controller: NOT_CONTROLLER per partition.
    let ResponseBody::ElectLeaders(r) = cluster.send(b, 2, elect(0, "votes", &[0])).await else {
        panic!("not an elect leaders response")
    };
    assert_eq!(
        r.replica_election_results[0].partition_result[0].error_code,
        code(ErrorCode::NotController)
    );
}

fn reassign(topic: &str, partition: i32, replicas: Option<&[i32]>) -> RequestBody {
    RequestBody::AlterPartitionReassignments(AlterPartitionReassignmentsRequest {
        timeout_ms: 10_000,
        topics: vec![ReassignableTopic {
            name: topic.into(),
            partitions: vec![ReassignablePartition {
                partition_index: partition,
                replicas: replicas.map(|r| r.iter().copied().collect()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

async fn reassigned(cluster: &AdminCluster, body: RequestBody) -> (i16, i16) {
    let ResponseBody::AlterPartitionReassignments(r) = cluster.send_controller(0, body).await
    else {
        panic!("not an alter partition reassignments response")
    };
    let p = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.error_code);
    (r.error_code, p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_455_alter_and_list_partition_reassignments() {
    let cluster = AdminCluster::start(3).await;
    let r = created(
        cluster
            .send_controller(7, create_topic_assigned("moving", &[&[1, 2]]))
            .await,
    );
    assert_eq!(r.error_code, NONE);
    assert_eq!(
        reassigned(&cluster, reassign("moving", 0, None)).await,
        (NONE, code(ErrorCode::NoReassignmentInProgress))
    );
    for bad in [&[1, 1][..], &[1, 9], &[]] {
        assert_eq!(
            reassigned(&cluster, reassign("moving", 0, Some(bad))).await,
            (NONE, code(ErrorCode::InvalidReplicaAssignment)),
            "{bad:?}"
        );
    }
    assert_eq!(
        reassigned(&cluster, reassign("moving", 3, Some(&[1]))).await,
        (NONE, code(ErrorCode::UnknownTopicOrPartition))
    );
    assert_eq!(
        reassigned(&cluster, reassign("moving", 0, Some(&[2, 3]))).await,
        (NONE, NONE)
    );
    cluster
        .eventually("partition 0 on [2, 3]", async |c| {
            assignment(c, "moving")
                .await
                .is_some_and(|a| a[&0] == vec![2, 3])
        })
        .await;
    assert_eq!(
        reassigned(&cluster, reassign("moving", 0, Some(&[3, 2]))).await,
        (NONE, NONE)
    );
    cluster
        .eventually("partition 0 on [3, 2]", async |c| {
            assignment(c, "moving")
                .await
                .is_some_and(|a| a[&0] == vec![3, 2])
        })
        .await;
    // Done: nothing listed.
    let ResponseBody::ListPartitionReassignments(l) = cluster
        .send_controller(
            0,
            RequestBody::ListPartitionReassignments(ListPartitionReassignmentsRequest {
                timeout_ms: 10_000,
                topics: None,
                ..Default::default()
            }),
        )
        .await
    else {
        panic!("not a list partition reassignments response")
    };
    assert_eq!(l.error_code, NONE);
    assert!(l.topics.is_empty(), "{:?}", l.topics);
    let other = cluster.other_than_controller();
    let ResponseBody::ListPartitionReassignments(l) = cluster
        .send(
            other,
            0,
            RequestBody::ListPartitionReassignments(ListPartitionReassignmentsRequest::default()),
        )
        .await
    else {
        panic!("not a list partition reassignments response")
    };
    assert_eq!(l.error_code, code(ErrorCode::NotController));
}

fn batch(values: usize) -> bytes::Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..values {
        b.append(1_000 + i as i64, Some(b"k"), Some(b"v"), &[])
            .expect("appends");
    }
    b.build().expect("builds")
}

fn delete_records(topic: &str, offset: i64) -> RequestBody {
    RequestBody::DeleteRecords(DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: topic.into(),
            partitions: vec![DeleteRecordsPartition {
                partition_index: 0,
                offset,
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 20_000,
        ..Default::default()
    })
}

async fn records_deleted(cluster: &AdminCluster, broker: i32, body: RequestBody) -> (i16, i64) {
    let ResponseBody::DeleteRecords(r) = cluster.send(broker, 2, body).await else {
        panic!("not a delete records response")
    };
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_107_delete_records_moves_the_log_start_offset_on_every_replica() {
    let cluster = AdminCluster::start(3).await;
    let r = created(
        cluster
            .send_controller(7, create_topic_assigned("trimmed", &[&[1, 2, 3]]))
            .await,
    );
    assert_eq!(r.error_code, NONE);
    let leader = cluster.leader(1, "trimmed", 0).await;
    assert_eq!(leader, 1);
    let produce = RequestBody::Produce(ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: "trimmed".into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(batch(1)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    // Five batches of one record: offsets 0..5, each its own batch so the log can start
    // between them.
    cluster
        .eventually("the ISR holds all three", async |c| {
            c.with_metadata(1, |m| {
                m.topics
                    .iter()
                    .any(|t| t.partitions.iter().any(|p| p.isr_nodes.len() == 3))
            })
            .await
        })
        .await;
    for _ in 0..5 {
        let ResponseBody::Produce(r) = cluster.send(leader, 8, produce.clone()).await else {
            panic!("not a produce response")
        };
        assert_eq!(r.responses[0].partition_responses[0].error_code, NONE);
    }
    assert_eq!(
        records_deleted(&cluster, leader, delete_records("trimmed", 9)).await,
        (code(ErrorCode::OffsetOutOfRange), -1)
    );
    assert_eq!(
        records_deleted(&cluster, 2, delete_records("trimmed", 2)).await,
        (code(ErrorCode::NotLeaderOrFollower), -1)
    );
    assert_eq!(
        records_deleted(&cluster, leader, delete_records("absent", 2)).await,
        (code(ErrorCode::UnknownTopicOrPartition), -1)
    );
    // Answered once every replica's log starts at 3.
    let (error, low) = records_deleted(&cluster, leader, delete_records("trimmed", 3)).await;
    assert_eq!(error, NONE);
    assert!(low >= 3, "low watermark {low}");
    for broker in 1..=3 {
        let start = cluster.node(broker).apis().driver().with_manager(|m, _| {
            m.partition(&kafka_replication::isr::TopicPartition::new(
                "trimmed".to_owned(),
                0,
            ))
            .map(|p| p.log_start_offset())
        });
        assert_eq!(start, Some(3), "broker {broker}");
    }
    // -1: up to the high watermark.
    let (error, low) = records_deleted(&cluster, leader, delete_records("trimmed", -1)).await;
    assert_eq!((error, low), (NONE, 5));
}

/// Every version of every administration API is answered (and its answer encodes at that
/// version), success and refusal alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_of_every_administration_api_is_answered() {
    use kafka_wire::ApiKey;
    let cluster = AdminCluster::start(3).await;
    let all = |k: ApiKey| k.versions().0..=k.versions().1;
    for v in all(ApiKey::CreateTopics) {
        let r = created(
            cluster
                .send_controller(
                    v,
                    create_topic(&format!("v{v}"), 1, 1, &[("retention.ms", "1000")], false),
                )
                .await,
        );
        assert_eq!(r.error_code, NONE, "CreateTopics v{v}");
        let r = created(
            cluster
                .send_controller(v, create_topic(&format!("v{v}"), 1, 1, &[], false))
                .await,
        );
        assert_eq!(
            r.error_code,
            code(ErrorCode::TopicAlreadyExists),
            "CreateTopics v{v}"
        );
    }
    for v in all(ApiKey::CreatePartitions) {
        assert_eq!(
            partitions_created(
                &cluster,
                create_partitions("v0", 2 + i32::from(v), None, false)
            )
            .await,
            NONE,
            "CreatePartitions v{v}"
        );
    }
    for v in all(ApiKey::DescribeConfigs) {
        let ResponseBody::DescribeConfigs(r) =
            cluster.send(1, v, describe_topic("v1", None, v >= 3)).await
        else {
            panic!("DescribeConfigs v{v}")
        };
        assert_eq!(r.results[0].error_code, NONE, "DescribeConfigs v{v}");
    }
    for v in all(ApiKey::IncrementalAlterConfigs) {
        let ResponseBody::IncrementalAlterConfigs(r) = cluster
            .send(2, v, alter("v1", &[("retention.ms", 0, "5000")], false))
            .await
        else {
            panic!("IncrementalAlterConfigs v{v}")
        };
        assert_eq!(
            r.responses[0].error_code, NONE,
            "IncrementalAlterConfigs v{v}"
        );
    }
    for v in all(ApiKey::ElectLeaders) {
        let ResponseBody::ElectLeaders(r) =
            cluster.send_controller(v, elect(0, "v1", &[0, 9])).await
        else {
            panic!("ElectLeaders v{v}")
        };
        assert_eq!(
            r.replica_election_results[0].partition_result.len(),
            2,
            "ElectLeaders v{v}"
        );
    }
    for v in all(ApiKey::DescribeCluster) {
        let ResponseBody::DescribeCluster(r) = cluster
            .send(
                3,
                v,
                RequestBody::DescribeCluster(DescribeClusterRequest::default()),
            )
            .await
        else {
            panic!("DescribeCluster v{v}")
        };
        assert_eq!(r.brokers.len(), 3, "DescribeCluster v{v}");
    }
    for v in all(ApiKey::DeleteRecords) {
        let leader = cluster.leader(1, "v2", 0).await;
        assert_eq!(
            records_deleted(&cluster, leader, delete_records("v2", 0))
                .await
                .0,
            NONE,
            "DeleteRecords v{v}"
        );
    }
    for v in all(ApiKey::AlterPartitionReassignments) {
        assert_eq!(
            reassigned(&cluster, reassign("v3", 0, None)).await.1,
            code(ErrorCode::NoReassignmentInProgress),
            "v{v}"
        );
    }
    for v in all(ApiKey::DeleteTopics) {
        let mut request = DeleteTopicsRequest {
            timeout_ms: 20_000,
            ..Default::default()
        };
        let name = format!("v{v}");
        if v >= 6 {
            request.topics = vec![DeleteTopicState {
                name: Some(name.as_str().into()),
                ..Default::default()
            }];
        } else {
            request.topic_names = vec![name.as_str().into()];
        }
        let ResponseBody::DeleteTopics(r) = cluster
            .send_controller(v, RequestBody::DeleteTopics(request))
            .await
        else {
            panic!("DeleteTopics v{v}")
        };
        assert_eq!(
            r.responses[0].error_code, NONE,
            "DeleteTopics v{v}: {:?}",
            r.responses[0].error_message
        );
    }
}
