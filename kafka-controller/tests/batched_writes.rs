//! Partition-state writes batched into fenced transactions (`KafkaZkClient::fenced_writes`,
//! used by the controller's `Store::write_states`): each write gets the outcome it would have
//! had as its own fenced transaction, a conflict inside a batch does not stop the others, a
//! moved controller is reported as such, batches stay below ZooKeeper's packet limit. The same
//! cases run on `MemoryCoordination` and (feature `zookeeper`) on a real ZooKeeper 3.8 started
//! by `ha-testkit`, which fails under `CI` when ZooKeeper is missing.

use std::sync::Arc;

use ha_coordination::{Coordination, CoordinationError, CreateMode, MemoryTree, Op, OpResult};
use kafka_controller::zk_data::{
    op_encoded_len, paths, Campaign, ControllerEpoch, KafkaZkClient, KafkaZkError,
    FENCED_BATCH_ATTEMPTS, FENCED_BATCH_BYTES, FENCED_BATCH_OPS,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The controller's client and a second session (another writer: a partition leader, or the
/// next controller).
struct Clients {
    controller: KafkaZkClient,
    other: Arc<dyn Coordination>,
}

fn state_path(p: usize) -> String {
    paths::partition_state("batched", i32::try_from(p).unwrap_or(i32::MAX))
}

fn state(p: usize, leader_epoch: usize) -> Vec<u8> {
    format!(
        r#"{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{leader_epoch},"isr":[1,2,3],"p":{p}}}"#
    )
    .into_bytes()
}

/// Elects the controller and creates `count` partition states (version 0).
async fn setup(c: &Clients, count: usize) -> Result<ControllerEpoch, Box<dyn std::error::Error>> {
    c.controller.create_persistent_paths().await?;
    let Campaign::Elected(epoch) = c.controller.campaign(1, 1).await? else {
        return Err("the only broker must win".into());
    };
    let coord = c.controller.coordination();
    for parent in [paths::topic("batched"), paths::topic_partitions("batched")] {
        coord.create(&parent, b"", CreateMode::Persistent).await?;
    }
    let mut creates = Vec::new();
    for p in 0..count {
        let partition = i32::try_from(p)?;
        creates.push(Op::create(
            paths::partition("batched", partition),
            Vec::new(),
            CreateMode::Persistent,
        ));
        creates.push(Op::create(
            state_path(p),
            state(p, 0),
            CreateMode::Persistent,
        ));
    }
    for chunk in creates.chunks(500) {
        coord.multi(chunk.to_vec()).await?;
    }
    Ok(epoch)
}

/// Leader epoch 1 for every partition, expecting version 0.
fn updates(count: usize) -> Vec<Op> {
    (0..count)
        .map(|p| Op::set_data(state_path(p), state(p, 1), 0))
        .collect()
}

/// Checks each partition's outcome and content: `conflicts` were changed by the other writer
/// first (BADVERSION, its content stays), every other partition was written (version 1).
async fn check_outcomes(
    c: &Clients,
    results: &[Result<OpResult, CoordinationError>],
    count: usize,
    conflicts: &[usize],
) -> TestResult {
    assert_eq!(results.len(), count);
    let reads = c
        .other
        .get_data_many(&(0..count).map(state_path).collect::<Vec<_>>())
        .await;
    for (p, (result, read)) in results.iter().zip(reads).enumerate() {
        let (data, stat) = read?;
        if conflicts.contains(&p) {
            assert!(
                matches!(result, Err(CoordinationError::BadVersion { path }) if *path == state_path(p)),
                "partition {p}: {result:?}"
            );
            assert_eq!(
                data,
                state(p, 7),
                "partition {p} keeps the other writer's state"
            );
            assert_eq!(stat.version, 1);
        } else {
            assert!(
                matches!(result, Ok(OpResult::SetData { stat }) if stat.version == 1),
                "partition {p}: {result:?}"
            );
            assert_eq!(data, state(p, 1), "partition {p} is written");
            assert_eq!(stat.version, 1);
        }
    }
    Ok(())
}

/// The other writer changes `conflicts` first.
async fn conflict(c: &Clients, conflicts: &[usize]) -> TestResult {
    for &p in conflicts {
        c.other.set_data(&state_path(p), &state(p, 7), 0).await?;
    }
    Ok(())
}

async fn a_conflict_inside_a_batch_falls_back_and_the_other_partitions_are_still_written(
    c: Clients,
) -> TestResult {
    // More than one batch; one conflict in the first, two in the second.
    let count = FENCED_BATCH_OPS + 500;
    let epoch = setup(&c, count).await?;
    let conflicts = [7, FENCED_BATCH_OPS + 3, count - 1];
    conflict(&c, &conflicts).await?;
    let results = c.controller.fenced_writes(epoch, updates(count)).await?;
    check_outcomes(&c, &results, count, &conflicts).await
}

async fn many_conflicts_in_one_batch_each_get_their_own_outcome(c: Clients) -> TestResult {
    // More conflicts than attempts of the batch: the rest go one by one.
    let count = 300;
    let epoch = setup(&c, count).await?;
    let conflicts: Vec<usize> = (0..=FENCED_BATCH_ATTEMPTS * 3).map(|i| i * 29).collect();
    conflict(&c, &conflicts).await?;
    let results = c.controller.fenced_writes(epoch, updates(count)).await?;
    check_outcomes(&c, &results, count, &conflicts).await
}

async fn a_fenced_batch_reports_the_controller_moved_and_writes_nothing(c: Clients) -> TestResult {
    let count = FENCED_BATCH_OPS + 10;
    let epoch = setup(&c, count).await?;
    // A conflict too: the fence must still be what is reported.
    conflict(&c, &[3]).await?;
    // Another controller was elected meanwhile: /controller_epoch moved on.
    c.other
        .set_data(paths::CONTROLLER_EPOCH, b"2", epoch.zk_version)
        .await?;
    let written = c.controller.fenced_writes(epoch, updates(count)).await;
    assert!(
        matches!(written, Err(KafkaZkError::ControllerMoved { expected_version }) if expected_version == epoch.zk_version),
        "{written:?}"
    );
    let reads = c
        .other
        .get_data_many(&(0..count).map(state_path).collect::<Vec<_>>())
        .await;
    for (p, read) in reads.into_iter().enumerate() {
        let (data, stat) = read?;
        let expected = if p == 3 { state(p, 7) } else { state(p, 0) };
        assert_eq!(data, expected, "partition {p} must not be written");
        assert_eq!(stat.version, if p == 3 { 1 } else { 0 });
    }
    Ok(())
}

async fn batches_stay_below_the_packet_limit(c: Clients) -> TestResult {
    // 12 states of 100 KB: 1.2 MB in all, more than ZooKeeper's default jute.maxbuffer (1 MiB)
    // would take in one request.
    let count = 12;
    let epoch = setup(&c, count).await?;
    let big = |p: usize| {
        let mut s = state(p, 1);
        s.resize(100 * 1024, b' ');
        s
    };
    let ops: Vec<Op> = (0..count)
        .map(|p| Op::set_data(state_path(p), big(p), 0))
        .collect();
    assert!(ops.iter().map(op_encoded_len).sum::<usize>() > 1024 * 1024);
    assert!(op_encoded_len(&ops[0]) * 5 < FENCED_BATCH_BYTES);
    let results = c.controller.fenced_writes(epoch, ops).await?;
    for (p, r) in results.iter().enumerate() {
        assert!(
            matches!(r, Ok(OpResult::SetData { stat }) if stat.version == 1),
            "partition {p}: {r:?}"
        );
        let (data, _) = c.other.get_data(&state_path(p), false).await?;
        assert_eq!(data, big(p));
    }
    Ok(())
}

async fn creates_and_updates_mixed_each_get_their_own_outcome(c: Clients) -> TestResult {
    let count = 50;
    let epoch = setup(&c, count).await?;
    // A create of an existing state, a create of a new one, an update of a missing one.
    let mut ops = updates(count);
    ops.push(Op::create(
        state_path(5),
        state(5, 9),
        CreateMode::Persistent,
    ));
    ops.push(Op::create(
        paths::partition("batched", 999),
        Vec::new(),
        CreateMode::Persistent,
    ));
    ops.push(Op::create(
        state_path(999),
        state(999, 0),
        CreateMode::Persistent,
    ));
    ops.push(Op::set_data(state_path(1000), state(1000, 1), 0));
    let results = c.controller.fenced_writes(epoch, ops).await?;
    assert_eq!(results.len(), count + 4);
    for (p, r) in results.iter().take(count).enumerate() {
        assert!(
            matches!(r, Ok(OpResult::SetData { stat }) if stat.version == 1),
            "partition {p}: {r:?}"
        );
    }
    assert!(
        matches!(&results[count], Err(CoordinationError::NodeExists { .. })),
        "{:?}",
        results[count]
    );
    assert!(matches!(&results[count + 1], Ok(OpResult::Create { .. })));
    assert!(matches!(&results[count + 2], Ok(OpResult::Create { .. })));
    assert!(
        matches!(&results[count + 3], Err(CoordinationError::NoNode { .. })),
        "{:?}",
        results[count + 3]
    );
    let (data, _) = c.other.get_data(&state_path(999), false).await?;
    assert_eq!(data, state(999, 0));
    let (data, stat) = c.other.get_data(&state_path(5), false).await?;
    assert_eq!((data, stat.version), (state(5, 1), 1));
    Ok(())
}

mod memory {
    use super::*;

    fn clients() -> Clients {
        let tree = MemoryTree::new();
        Clients {
            controller: KafkaZkClient::new(Arc::new(tree.connect())),
            other: Arc::new(tree.connect()),
        }
    }

    #[tokio::test]
    async fn a_conflict_inside_a_batched_multi_falls_back_and_the_other_partitions_are_still_written(
    ) -> TestResult {
        a_conflict_inside_a_batch_falls_back_and_the_other_partitions_are_still_written(clients())
            .await
    }

    #[tokio::test]
    async fn many_conflicts_in_one_batched_multi_each_get_their_own_outcome() -> TestResult {
        many_conflicts_in_one_batch_each_get_their_own_outcome(clients()).await
    }

    #[tokio::test]
    async fn kafka_6082_a_fenced_batch_reports_the_controller_moved_and_writes_nothing(
    ) -> TestResult {
        a_fenced_batch_reports_the_controller_moved_and_writes_nothing(clients()).await
    }

    #[tokio::test]
    async fn batched_writes_stay_below_the_packet_limit() -> TestResult {
        batches_stay_below_the_packet_limit(clients()).await
    }

    #[tokio::test]
    async fn batched_creates_and_updates_each_get_their_own_outcome() -> TestResult {
        creates_and_updates_mixed_each_get_their_own_outcome(clients()).await
    }
}

#[cfg(feature = "zookeeper")]
mod zookeeper {
    use std::time::Duration;

    use ha_coordination::{ZooKeeperCoordination, ZooKeeperOptions};
    use ha_testkit::{require_zookeeper, ZkEnsemble};

    use super::*;

    async fn clients(zk: &ZkEnsemble) -> Result<Clients, Box<dyn std::error::Error>> {
        let options = ZooKeeperOptions::new()
            .with_session_timeout(Duration::from_secs(10))
            .with_connection_timeout(Duration::from_secs(10));
        let controller =
            ZooKeeperCoordination::connect_with(&zk.connect_string(), options.clone()).await?;
        let other = ZooKeeperCoordination::connect_with(&zk.connect_string(), options).await?;
        Ok(Clients {
            controller: KafkaZkClient::new(Arc::new(controller)),
            other: Arc::new(other),
        })
    }

    /// Runs `case` on a fresh standalone ZooKeeper; `Ok` without running when ZooKeeper is
    /// missing outside `CI`.
    macro_rules! on_zookeeper {
        ($name:literal, $case:ident) => {{
            if !require_zookeeper($name)? {
                return Ok(());
            }
            let zk = ZkEnsemble::standalone()?;
            $case(clients(&zk).await?).await
        }};
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_conflict_inside_a_batched_multi_on_zookeeper_falls_back_and_the_other_partitions_are_still_written(
    ) -> TestResult {
        on_zookeeper!(
            "batched multi conflict",
            a_conflict_inside_a_batch_falls_back_and_the_other_partitions_are_still_written
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_conflicts_in_one_batched_multi_on_zookeeper_each_get_their_own_outcome(
    ) -> TestResult {
        on_zookeeper!(
            "batched multi conflicts",
            many_conflicts_in_one_batch_each_get_their_own_outcome
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kafka_6082_a_fenced_batch_on_zookeeper_reports_the_controller_moved_and_writes_nothing(
    ) -> TestResult {
        on_zookeeper!(
            "fenced batched multi",
            a_fenced_batch_reports_the_controller_moved_and_writes_nothing
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batched_writes_on_zookeeper_stay_below_jute_maxbuffer() -> TestResult {
        on_zookeeper!(
            "batched multi packet limit",
            batches_stay_below_the_packet_limit
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batched_creates_and_updates_on_zookeeper_each_get_their_own_outcome() -> TestResult {
        on_zookeeper!(
            "batched creates and updates",
            creates_and_updates_mixed_each_get_their_own_outcome
        )
    }
}

/// The controller's own writes in one event: the states its elections wrote are not read
/// again by the ISR removals of the same broker failure.
mod own_writes {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use async_trait::async_trait;
    use ha_coordination::{CoordinationLayer, MemoryCoordination, Stat};
    use kafka_controller::admin;
    use kafka_controller::broker_channel::MemoryBrokerChannel;
    use kafka_controller::controller::{Controller, ControllerConfig};
    use kafka_controller::zk_data::{BrokerRegistration, PartitionStateZNode};

    use super::*;

    /// Records the partition-state paths read through it.
    struct RecordReads {
        inner: MemoryCoordination,
        state_reads: Mutex<Vec<String>>,
    }

    impl RecordReads {
        fn record<'a>(&self, paths: impl IntoIterator<Item = &'a String>) {
            self.state_reads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(paths.into_iter().filter(|p| p.ends_with("/state")).cloned());
        }
    }

    #[async_trait]
    impl CoordinationLayer for RecordReads {
        fn inner(&self) -> &dyn Coordination {
            &self.inner
        }
        async fn get_data(
            &self,
            path: &str,
            watch: bool,
        ) -> Result<(Vec<u8>, Stat), CoordinationError> {
            self.record([&path.to_string()]);
            self.inner.get_data(path, watch).await
        }
        async fn get_data_many(
            &self,
            paths: &[String],
        ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
            self.record(paths);
            self.inner.get_data_many(paths).await
        }
    }

    async fn state_of(c: &dyn Coordination, p: i32) -> Option<PartitionStateZNode> {
        let (data, _) = c
            .get_data(&paths::partition_state("t", p), false)
            .await
            .ok()?;
        PartitionStateZNode::from_json(&data).ok()
    }

    #[tokio::test]
    async fn k1_isr_removals_do_not_read_again_the_states_the_elections_of_the_same_event_wrote(
    ) -> TestResult {
        let tree = MemoryTree::new();
        let admin_session = tree.connect();
        KafkaZkClient::new(Arc::new(admin_session.clone()))
            .create_persistent_paths()
            .await?;
        let recorder = Arc::new(RecordReads {
            inner: tree.connect(),
            state_reads: Mutex::new(Vec::new()),
        });
        let sessions: BTreeMap<i32, Arc<dyn Coordination>> = [
            (1, recorder.clone() as Arc<dyn Coordination>),
            (2, Arc::new(tree.connect())),
            (3, Arc::new(tree.connect())),
        ]
        .into_iter()
        .collect();
        for (id, s) in &sessions {
            KafkaZkClient::new(s.clone())
                .register_broker(
                    *id,
                    &BrokerRegistration::plaintext("localhost", 9092, None, 0),
                )
                .await?;
        }
        let mut config = ControllerConfig::new(1);
        config.auto_leader_rebalance_enable = false;
        let handle = Controller::start(
            config,
            sessions[&1].clone(),
            Arc::new(MemoryBrokerChannel::new()),
        );
        assert_eq!(handle.wait_active(Duration::from_secs(10)).await, Some(1));
        // Led by 2: 0, 1; followed by 2: 2, 3, 4; without 2: 5.
        let assignment: BTreeMap<i32, Vec<i32>> = [
            (0, vec![2, 1, 3]),
            (1, vec![2, 3, 1]),
            (2, vec![1, 2, 3]),
            (3, vec![3, 2, 1]),
            (4, vec![1, 3, 2]),
            (5, vec![1, 3]),
        ]
        .into_iter()
        .collect();
        admin::create_topic_with_assignment(&admin_session, "t", &assignment).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for p in 0..6 {
            while state_of(&admin_session, p).await.is_none() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "partition {p} created"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        handle.sync().await;
        recorder
            .state_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        assert!(tree.expire(sessions[&2].session_id()));
        let moved =
            |s: &Option<PartitionStateZNode>| s.as_ref().is_some_and(|s| !s.isr.contains(&2));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for p in 0..5 {
            while !moved(&state_of(&admin_session, p).await) {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "partition {p} moved"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        handle.sync().await;
        let state = |p: i32| paths::partition_state("t", p);
        assert_eq!(
            state_of(&admin_session, 0).await.map(|s| (s.leader, s.isr)),
            Some((1, vec![1, 3]))
        );
        assert_eq!(
            state_of(&admin_session, 1).await.map(|s| (s.leader, s.isr)),
            Some((3, vec![3, 1]))
        );
        let mut reads = recorder
            .state_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        reads.sort();
        // Each partition with a replica on broker 2 is read once: 0 and 1 by their elections
        // (and not again by the ISR removals), 2, 3 and 4 by the ISR removals.
        assert_eq!(reads, (0..5).map(state).collect::<Vec<_>>());
        handle.shutdown();
        Ok(())
    }
}
