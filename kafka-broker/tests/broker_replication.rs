//! Two brokers of `KafkaApis` + `ReplicaDriver` on loopback TCP: the follower replicates over
//! `TcpLeaderLink`, the high watermark advances, the ISR shrinks through the driver's
//! `IsrWriter`, and an old leader truncates by leader epoch. A raw `kafka-wire` client plays
//! the controller.

mod broker_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_broker::LATEST_TIMESTAMP;
use kafka_replication::isr::{LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::FetcherConfig;
use kafka_wire::ResponseBody;

use broker_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8_2_follower_replicates_over_tcp_leader_link_and_acks_all_completes_when_hw_advances() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let mut isr = MemoryIsrWriter::new();
    isr.set(
        TopicPartition::new(TOPIC, 0),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2],
            partition_epoch: 0,
        },
    );
    let b1 = start_broker(1, addresses.clone(), isr.clone()).await;
    let b2 = start_broker(2, addresses.clone(), isr).await;
    let brokers = [(1, b1.server.local_addr()), (2, b2.server.local_addr())];
    if let Ok(mut a) = addresses.lock() {
        a.extend(brokers);
    }
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    for c in [&mut c1, &mut c2] {
        c.send(4, &leader_and_isr(1, 0, &[1, 2]))
            .await
            .expect("answered");
        c.send(7, &update_metadata(1, 0, &[1, 2], &brokers))
            .await
            .expect("answered");
    }

    // acks=all waits in the purgatory until broker 2 has fetched the records and the HW
    // covers them.
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        c1.send(9, &produce(-1, &[b"x", b"y"])),
    )
    .await
    .expect("the produce completes")
    .expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("{r:?}")
    };
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let latest = listed_offset(
        c1.send(7, &list_offsets(LATEST_TIMESTAMP))
            .await
            .expect("ok"),
    );
    assert_eq!(
        latest,
        (0, 2),
        "the leader's high watermark covers both records"
    );

    let tp = TopicPartition::new(TOPIC, 0);
    let follower_leo = b2
        .apis
        .driver()
        .with_manager(|m, _| m.partition(&tp).map(|p| p.log_end_offset()));
    assert_eq!(follower_leo, Some(2));

    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_leader_link_reconnects_once_the_leader_becomes_reachable() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let b1 = start_broker(1, addresses.clone(), MemoryIsrWriter::new()).await;
    let b2 = start_broker(2, addresses.clone(), MemoryIsrWriter::new()).await;
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    c1.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c1.send(9, &produce(1, &[b"a", b"b", b"c"]))
        .await
        .expect("answered");
    // The follower starts fetching while the leader's address is unknown: its link fails
    // and backs off.
    c2.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    // A deliberate window, the thing tested: while the leader's address is unknown the
    // follower fetches nothing (there is no event to wait for, only an absence).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let tp = TopicPartition::new(TOPIC, 0);
    let leo = |b: &TestBroker| {
        b.apis
            .driver()
            .with_manager(|m, _| m.partition(&tp).map(|p| p.log_end_offset()))
    };
    assert_eq!(leo(&b2), Some(0));

    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while leo(&b2) != Some(3) {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower caught up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_lag_time_max_a_silent_follower_falling_behind_leaves_the_isr_and_acks_all_completes(
) {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut store = MemoryIsrWriter::new();
    store.set(
        tp.clone(),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2],
            partition_epoch: 0,
        },
    );
    let config = PartitionConfig::default()
        .with_replica_lag_time_max_ms(400)
        .with_min_insync_replicas(1);
    let b1 = start_broker_with(1, addresses.clone(), store.clone(), config).await;
    let b2 = start_broker_with(2, addresses.clone(), store, config).await;
    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
    }
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    c1.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c2.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c1.send(9, &produce(-1, &[b"both"]))
        .await
        .expect("answered");

    // The follower goes away.
    b2.server.shutdown().await;
    b2.apis.driver().shutdown().await;

    // A follower whose log end equals the leader's stays in sync however long it is
    // silent; a new append leaves it behind, and replica.lag.time.max.ms later the leader
    // proposes the ISR without it. The waiting acks=all produce completes then.
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        c1.send(9, &produce(-1, &[b"alone"])),
    )
    .await
    .expect("acks=all completes once the ISR shrinks to the leader")
    .expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("{r:?}")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 1));
    let (isr, partition_epoch) = b1
        .apis
        .driver()
        .with_manager(|m, _| {
            m.partition(&tp)
                .map(|p| (p.isr().to_vec(), p.partition_epoch()))
        })
        .expect("partition");
    assert_eq!(
        (isr, partition_epoch),
        (vec![1], 1),
        "written through the IsrWriter"
    );

    b1.server.shutdown().await;
    b1.apis.driver().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_101_an_old_leader_becoming_follower_truncates_its_unreplicated_tail_over_tcp() {
    old_leader_truncates_its_tail(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_10554_truncation_through_fetch_v12_diverging_epochs_over_tcp() {
    old_leader_truncates_its_tail(true).await;
}

/// Broker 1 leads epoch 0, loses leadership to broker 2 (epoch 1) without knowing, takes an
/// unreplicated write, then follows broker 2: it must drop that write by leader epoch —
/// through OffsetForLeaderEpoch, or through the diverging epoch of a Fetch v12 answer.
async fn old_leader_truncates_its_tail(truncate_via_fetch: bool) {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let fetcher = FetcherConfig::default()
        .with_max_wait_ms(100)
        .with_backoff_ms(50)
        .with_truncate_via_fetch(truncate_via_fetch);
    let start = |id| {
        start_broker_full(
            id,
            addresses.clone(),
            MemoryIsrWriter::new(),
            PartitionConfig::default(),
            fetcher,
        )
    };
    let b1 = start(1).await;
    let b2 = start(2).await;
    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
        a.insert(2, b2.server.local_addr());
    }
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    c1.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c2.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c1.send(9, &produce(-1, &[b"committed"]))
        .await
        .expect("answered");

    // Broker 2 takes over at epoch 1 while broker 1 still thinks it leads and accepts an
    // acks=1 write nobody replicates.
    c2.send(4, &leader_and_isr(2, 1, &[2, 1]))
        .await
        .expect("answered");
    c1.send(9, &produce(1, &[b"stale"]))
        .await
        .expect("answered");
    c2.send(9, &produce(1, &[b"new"])).await.expect("answered");

    // Broker 1 learns it follows broker 2: it asks where epoch 0 ends (offset 1) over TCP,
    // truncates "stale" and fetches "new".
    c1.send(4, &leader_and_isr(2, 1, &[2, 1]))
        .await
        .expect("answered");
    let tp = TopicPartition::new(TOPIC, 0);
    let state = |b: &TestBroker| {
        b.apis.driver().with_manager(|m, _| {
            m.partition(&tp).map(|p| {
                (
                    p.log_end_offset(),
                    p.log().epoch_cache().latest_epoch(),
                    p.high_watermark(),
                )
            })
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state(&b1).map(|s| (s.0, s.1)) != Some((2, Some(1))) || state(&b2).map(|s| s.2) != Some(2)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the old leader truncated and caught up: {:?} / {:?}",
            state(&b1),
            state(&b2)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}
