//! `ha-admin --bootstrap-server`: the admin verbs through a broker's administration APIs, on
//! three in-process brokers on the in-memory store (the binary is a real process speaking the
//! Kafka wire to them), each checked against the store.

mod admin_common;
mod kcat_common;

use std::time::Duration;

use admin_common::AdminCluster;
use kafka_controller::zk_data::KafkaZkClient;
use kcat_common::{run, Output};

async fn admin(cluster: &AdminCluster, broker: i32, verb: &[&str]) -> Output {
    let mut args = vec![
        "--bootstrap-server".to_owned(),
        cluster.node(broker).local_addr().to_string(),
    ];
    args.extend(verb.iter().map(|s| (*s).to_owned()));
    tokio::task::spawn_blocking(move || {
        run(
            env!("CARGO_BIN_EXE_ha-admin"),
            &args,
            "",
            Duration::from_secs(60),
        )
    })
    .await
    .expect("ha-admin ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_admin_bootstrap_server_creates_describes_reassigns_elects_lists_and_deletes() {
    let cluster = AdminCluster::start(3).await;
    let zk = KafkaZkClient::new(cluster.store());
    // Any broker will do: the client finds the controller through Metadata.
    let other = cluster.other_than_controller();
    let out = admin(
        &cluster,
        other,
        &[
            "create-topic",
            "ledger",
            "--partitions",
            "2",
            "--replication-factor",
            "2",
            "--config",
            "retention.ms=60000",
        ],
    )
    .await;
    assert!(out.ok, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.starts_with("Created topic ledger: 0:["),
        "{}",
        out.stdout
    );
    let (assignment, _) = zk
        .topic_assignment("ledger", false)
        .await
        .expect("read")
        .expect("created");
    assert_eq!(assignment.partitions.len(), 2);
    let config = zk
        .topic_config("ledger")
        .await
        .expect("read")
        .expect("config");
    assert_eq!(config.config["retention.ms"], "60000");
    let out = admin(&cluster, other, &["create-topic", "ledger"]).await;
    assert!(
        !out.ok && out.stderr.contains("TOPIC_ALREADY_EXISTS"),
        "{}",
        out.stderr
    );
    let out = admin(
        &cluster,
        other,
        &["create-topic", "x", "--start-index", "1"],
    )
    .await;
    assert!(
        !out.ok && out.stderr.contains("--zookeeper"),
        "{}",
        out.stderr
    );

    // The broker asked learns the new topic from the controller's UpdateMetadata, which may
    // come a moment after the controller's broker answered CreateTopics (as in Kafka).
    let mut out = admin(&cluster, other, &["describe", "ledger"]).await;
    cluster
        .eventually(
            "the asked broker's metadata has both partitions",
            async |c| {
                out = admin(c, other, &["describe", "ledger"]).await;
                out.ok
                    && out.stdout.matches("\tPartition: ").count() == 2
                    && !out.stdout.contains("Leader: none")
            },
        )
        .await;
    assert!(
        out.stdout
            .contains("Topic: ledger\tPartitionCount: 2\tReplicationFactor: 2"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches("\tPartition: ").count(),
        2,
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("Leader: none"), "{}", out.stdout);

    // Partition 0 moves to the broker it is not on, which becomes its preferred replica.
    let current = &assignment.partitions[&0];
    let outside = (1..=3)
        .find(|b| !current.contains(b))
        .expect("a third broker");
    let want: Vec<i32> = vec![outside, current[0]];
    let target = format!("{},{}", want[0], want[1]);
    let out = admin(&cluster, other, &["reassign", "ledger", "0", &target]).await;
    assert!(out.ok, "{}", out.stderr);
    cluster
        .eventually("partition 0 moved in the store", async |_| {
            zk.topic_assignment("ledger", false)
                .await
                .ok()
                .flatten()
                .is_some_and(|(a, _)| a.partitions[&0] == want)
        })
        .await;
    let out = admin(&cluster, other, &["reassign", "ledger", "0", "1,1"]).await;
    assert!(
        !out.ok && out.stderr.contains("INVALID_REPLICA_ASSIGNMENT"),
        "{}",
        out.stderr
    );

    // The new preferred replica takes the leadership (it may already have it).
    let out = admin(&cluster, other, &["preferred-election", "ledger", "0"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stdout.contains("Preferred replica election: "),
        "{}",
        out.stdout
    );
    let controller = cluster.controller_id().expect("controller");
    assert_eq!(cluster.leader(controller, "ledger", 0).await, want[0]);
    let out = admin(&cluster, other, &["preferred-election"]).await;
    assert!(out.ok, "{}", out.stderr);

    let out = admin(&cluster, other, &["list-brokers"]).await;
    assert!(out.ok, "{}", out.stderr);
    for id in 1..=3 {
        let port = cluster.node(id).local_addr().port();
        assert!(
            out.stdout
                .contains(&format!("Broker: {id}\tEndpoint: 127.0.0.1:{port}")),
            "{}",
            out.stdout
        );
    }
    assert!(
        out.stdout
            .contains(&format!("Broker: {controller}\tEndpoint: ")),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches("\tcontroller").count(),
        1,
        "{}",
        out.stdout
    );

    let out = admin(&cluster, other, &["delete-topic", "ledger"]).await;
    assert!(out.ok, "{}", out.stderr);
    // The answer comes once the brokers' metadata has dropped the topic; the controller
    // removes its znodes after that, as Kafka's does.
    cluster
        .eventually("the topic's znodes deleted", async |_| {
            zk.topic_assignment("ledger", false)
                .await
                .is_ok_and(|a| a.is_none())
        })
        .await;
    let out = admin(&cluster, other, &["delete-topic", "ledger"]).await;
    assert!(
        !out.ok && out.stderr.contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{}",
        out.stderr
    );
}
