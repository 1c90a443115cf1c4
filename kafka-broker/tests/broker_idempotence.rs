//! Idempotent producers on the reference broker (Kafka 2.8 `ProducerStateManager` semantics):
//! unique producer ids from `/latest_producer_id_block`, retried batches answered with their
//! original offsets and never appended twice, sequence gaps and fenced epochs refused, five
//! batches remembered per producer, the state rebuilt from the log on leading again.

mod broker_common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use broker_common::{
    connect, fetch, leader_and_isr, list_offsets, listed_offset, start_broker, TOPIC,
};
use ha_coordination::{Coordination, MemoryTree};
use kafka_broker::glue::{
    ProducerIdBlock, ZkProducerIdManager, PRODUCER_ID_BLOCK_PATH, PRODUCER_ID_BLOCK_SIZE,
};
use kafka_broker::{KafkaConnection, ProducerIdSource};
use kafka_replication::isr::MemoryIsrWriter;
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{InitProducerIdRequest, ProduceRequest};
use kafka_wire::records::RecordBatchBuilder;
use kafka_wire::{RequestBody, ResponseBody};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const PID: i64 = 4_000;

/// Produce of `n` records from producer (`PID`, `epoch`) starting at sequence `seq`.
fn produce(acks: i16, epoch: i16, seq: i32, n: usize) -> RequestBody {
    let mut b = RecordBatchBuilder::new(0).producer(PID, epoch, seq);
    for i in 0..n {
        b.append(
            i as i64,
            Some(b"k"),
            Some(format!("e{epoch}-s{seq}-{i}").as_bytes()),
            &[],
        )
        .expect("record appends");
    }
    RequestBody::Produce(ProduceRequest {
        acks,
        timeout_ms: 5_000,
        topic_data: vec![TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(b.build().expect("batch builds")),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// (error code, base offset) of the one partition answered.
async fn send_produce(c: &mut KafkaConnection, request: &RequestBody) -> (i16, i64) {
    let r = c.send(9, request).await.expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("not a produce response: {r:?}");
    };
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn log_end(c: &mut KafkaConnection) -> i64 {
    // A replica's view (replica id 1 is the leader itself): the log end offset.
    let mut request = list_offsets(-1);
    if let RequestBody::ListOffsets(r) = &mut request {
        r.replica_id = 1;
    }
    listed_offset(c.send(1, &request).await.expect("answered")).1
}

/// Broker 1, sole replica and leader of the partition.
async fn leader() -> (broker_common::TestBroker, KafkaConnection) {
    let broker = start_broker(
        1,
        Arc::new(Mutex::new(HashMap::new())),
        MemoryIsrWriter::new(),
    )
    .await;
    let mut c = connect(&broker).await;
    let r = c
        .send(4, &leader_and_isr(1, 0, &[1]))
        .await
        .expect("answered");
    assert!(
        matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == 0),
        "{r:?}"
    );
    (broker, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retry_of_an_appended_batch_answers_its_original_offset_and_is_not_appended_twice(
) {
    let (_broker, mut c) = leader().await;
    assert_eq!(send_produce(&mut c, &produce(-1, 0, 0, 2)).await, (0, 0));
    assert_eq!(send_produce(&mut c, &produce(-1, 0, 2, 3)).await, (0, 2));
    assert_eq!(log_end(&mut c).await, 5);
    // Both retried, with acks=all and acks=1: the original offsets, nothing appended.
    assert_eq!(send_produce(&mut c, &produce(-1, 0, 0, 2)).await, (0, 0));
    assert_eq!(send_produce(&mut c, &produce(1, 0, 2, 3)).await, (0, 2));
    assert_eq!(log_end(&mut c).await, 5);
    // The next batch goes on.
    assert_eq!(send_produce(&mut c, &produce(1, 0, 5, 1)).await, (0, 5));
    assert_eq!(log_end(&mut c).await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_98_a_retried_acks_all_batch_is_answered_from_the_produce_purgatory_once_the_high_watermark_passes_it(
) {
    let broker = start_broker(
        1,
        Arc::new(Mutex::new(HashMap::new())),
        MemoryIsrWriter::new(),
    )
    .await;
    let mut c = connect(&broker).await;
    // Broker 1 leads with broker 2 in the ISR; this test plays broker 2's fetches.
    let r = c
        .send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    assert!(
        matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == 0),
        "{r:?}"
    );
    assert_eq!(send_produce(&mut c, &produce(1, 0, 0, 2)).await, (0, 0));
    // The acks=all retry of that batch waits: the follower has not got it.
    let mut retry_connection = connect(&broker).await;
    let retry =
        tokio::spawn(
            async move { send_produce(&mut retry_connection, &produce(-1, 0, 0, 2)).await },
        );
    let parked = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let waiting = broker
                .apis
                .driver()
                .with_manager(|m, _| m.delayed_produces());
            if waiting == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(parked.is_ok(), "the retry waits in the produce purgatory");
    assert!(!retry.is_finished());
    assert_eq!(log_end(&mut c).await, 2, "not appended again");
    // Broker 2 fetches the records, then fetches again from their end: the HW passes them.
    c.send(12, &fetch(2, 0, 0)).await.expect("answered");
    assert!(!retry.is_finished());
    c.send(12, &fetch(2, 2, 0)).await.expect("answered");
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), retry).await;
    assert!(
        matches!(answer, Ok(Ok((0, 0)))),
        "the original offset once committed: {answer:?}"
    );
    assert_eq!(log_end(&mut c).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_sequence_gap_is_out_of_order_sequence_number_and_not_appended() {
    let (_broker, mut c) = leader().await;
    assert_eq!(send_produce(&mut c, &produce(1, 0, 0, 2)).await, (0, 0));
    let (code, _) = send_produce(&mut c, &produce(1, 0, 5, 1)).await;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    // An overlap that is not exactly a cached batch is out of order too.
    let (code, _) = send_produce(&mut c, &produce(1, 0, 1, 1)).await;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(log_end(&mut c).await, 2);
    assert_eq!(send_produce(&mut c, &produce(1, 0, 2, 1)).await, (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_old_producer_epoch_is_invalid_producer_epoch_and_a_new_epoch_starts_at_zero() {
    let (_broker, mut c) = leader().await;
    assert_eq!(send_produce(&mut c, &produce(1, 1, 0, 1)).await, (0, 0));
    let (code, _) = send_produce(&mut c, &produce(1, 0, 1, 1)).await;
    assert_eq!(code, INVALID_PRODUCER_EPOCH);
    // A bumped epoch must restart its sequence at 0.
    let (code, _) = send_produce(&mut c, &produce(1, 2, 1, 1)).await;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(send_produce(&mut c, &produce(1, 2, 0, 1)).await, (0, 1));
    // ... and the old epoch's batches are no longer answered as duplicates.
    let (code, _) = send_produce(&mut c, &produce(1, 1, 0, 1)).await;
    assert_eq!(code, INVALID_PRODUCER_EPOCH);
    assert_eq!(log_end(&mut c).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_state_keeps_the_last_five_batches() {
    let (_broker, mut c) = leader().await;
    for seq in 0..6 {
        assert_eq!(
            send_produce(&mut c, &produce(1, 0, seq, 1)).await,
            (0, i64::from(seq))
        );
    }
    // Batch 0 is forgotten: its retry no longer continues the sequence.
    let (code, _) = send_produce(&mut c, &produce(1, 0, 0, 1)).await;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    // Batches 1..=5 are remembered.
    for seq in 1..6 {
        assert_eq!(
            send_produce(&mut c, &produce(1, 0, seq, 1)).await,
            (0, i64::from(seq))
        );
    }
    assert_eq!(log_end(&mut c).await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_state_is_rebuilt_from_the_log_when_the_broker_leads_again() {
    let (_broker, mut c) = leader().await;
    assert_eq!(send_produce(&mut c, &produce(1, 0, 0, 2)).await, (0, 0));
    assert_eq!(send_produce(&mut c, &produce(1, 0, 2, 1)).await, (0, 2));
    // Follower at epoch 1 (of broker 2): the state goes. Leader again at epoch 2: it comes
    // back from the log.
    for (leader, epoch) in [(2, 1), (1, 2)] {
        let r = c
            .send(4, &leader_and_isr(leader, epoch, &[1, 2]))
            .await
            .expect("answered");
        assert!(
            matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == 0),
            "{r:?}"
        );
    }
    assert_eq!(send_produce(&mut c, &produce(1, 0, 0, 2)).await, (0, 0));
    let (code, _) = send_produce(&mut c, &produce(1, 0, 7, 1)).await;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(log_end(&mut c).await, 3);
    assert_eq!(send_produce(&mut c, &produce(1, 0, 3, 1)).await, (0, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_hands_out_unique_ids_from_latest_producer_id_block() -> TestResult {
    let tree = MemoryTree::new();
    let one = ZkProducerIdManager::new(Arc::new(tree.connect()), 1);
    let two = ZkProducerIdManager::new(Arc::new(tree.connect()), 2);
    assert_eq!(one.next_producer_id().await?, 0);
    assert_eq!(two.next_producer_id().await?, PRODUCER_ID_BLOCK_SIZE);
    let (data, _) = tree
        .connect()
        .get_data(PRODUCER_ID_BLOCK_PATH, false)
        .await?;
    assert_eq!(
        ProducerIdBlock::from_json(&data)?,
        ProducerIdBlock {
            broker: 2,
            block_start: 1000,
            block_end: 1999
        }
    );
    assert_eq!(
        String::from_utf8(data)?,
        r#"{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}"#
    );
    // Broker 1 uses up its block and claims the next free one; no id is handed out twice.
    let mut seen = HashSet::from([0, PRODUCER_ID_BLOCK_SIZE]);
    for _ in 1..=PRODUCER_ID_BLOCK_SIZE {
        assert!(seen.insert(one.next_producer_id().await?));
    }
    assert!(
        seen.contains(&(2 * PRODUCER_ID_BLOCK_SIZE)),
        "next block from 2000"
    );
    // A restarted broker never reuses ids: it claims a new block.
    let again = ZkProducerIdManager::new(Arc::new(tree.connect()), 1);
    assert_eq!(again.next_producer_id().await?, 3 * PRODUCER_ID_BLOCK_SIZE);

    // Through the broker: InitProducerId answers from the source it was given.
    let (broker, mut c) = leader().await;
    broker
        .apis
        .use_producer_ids(Arc::new(ZkProducerIdManager::new(
            Arc::new(tree.connect()),
            1,
        )));
    let r = c
        .send(
            4,
            &RequestBody::InitProducerId(InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            }),
        )
        .await?;
    let ResponseBody::InitProducerId(r) = r else {
        return Err(format!("{r:?}").into());
    };
    assert_eq!(
        (r.error_code, r.producer_id, r.producer_epoch),
        (0, 4 * PRODUCER_ID_BLOCK_SIZE, 0)
    );
    Ok(())
}
