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

/// The controller's reads in a broker failure: elections and ISR removals write first,
/// conditional on the version the context holds, and read only what got BADVERSION (or what
/// they would not write); the outcomes are those of Kafka's read-then-write. The states its
/// elections wrote are not read again by the ISR removals of the same event.
mod own_writes {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use async_trait::async_trait;
    use ha_coordination::{CoordinationLayer, MemoryCoordination, Stat};
    use kafka_controller::admin;
    use kafka_controller::broker_channel::MemoryBrokerChannel;
    use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
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

        fn take(&self) -> Vec<String> {
            let mut reads =
                std::mem::take(&mut *self.state_reads.lock().unwrap_or_else(|e| e.into_inner()));
            reads.sort();
            reads
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

    async fn state_of(c: &dyn Coordination, p: i32) -> Option<(PartitionStateZNode, i32)> {
        let (data, stat) = c
            .get_data(&paths::partition_state("t", p), false)
            .await
            .ok()?;
        Some((PartitionStateZNode::from_json(&data).ok()?, stat.version))
    }

    /// (leader, ISR, leader epoch, znode version) of a partition state.
    type Summary = (i32, Vec<i32>, i32, i32);

    /// The [`Summary`] of partition `p` of topic `t`.
    async fn summary(c: &dyn Coordination, p: i32) -> Option<Summary> {
        state_of(c, p)
            .await
            .map(|(s, v)| (s.leader, s.isr, s.leader_epoch, v))
    }

    /// Rewrites partition `p`'s state as its leader would (an ISR change), behind the
    /// controller's back: the context keeps the state it loaded.
    async fn external_isr_change(
        c: &dyn Coordination,
        p: i32,
        leader: i32,
        isr: Vec<i32>,
    ) -> TestResult {
        let (current, version) = state_of(c, p).await.ok_or("state exists")?;
        let changed =
            PartitionStateZNode::new(leader, current.leader_epoch, current.controller_epoch, isr);
        c.set_data(
            &paths::partition_state("t", p),
            &changed.to_json()?,
            version,
        )
        .await?;
        Ok(())
    }

    /// Brokers 1–3 with the controller on broker 1 (its reads recorded) and topic `t` of
    /// `assignment` created (every state at version 0, leader the first replica).
    struct Cluster {
        tree: MemoryTree,
        admin: MemoryCoordination,
        recorder: Arc<RecordReads>,
        sessions: BTreeMap<i32, Arc<dyn Coordination>>,
        handle: ControllerHandle,
    }

    async fn cluster(
        assignment: &BTreeMap<i32, Vec<i32>>,
    ) -> Result<Cluster, Box<dyn std::error::Error>> {
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
        admin::create_topic_with_assignment(&admin_session, "t", assignment).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for p in assignment.keys() {
            while state_of(&admin_session, *p).await.is_none() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "partition {p} created"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        handle.sync().await;
        recorder.take();
        Ok(Cluster {
            tree,
            admin: admin_session,
            recorder,
            sessions,
            handle,
        })
    }

    impl Cluster {
        /// Broker 2's session expires; waits until every partition in `changed` has a state
        /// other than `before` (or none), then until the controller is idle.
        async fn fail_broker_2(&self, changed: &[(i32, Option<Summary>)]) -> TestResult {
            assert!(self.tree.expire(self.sessions[&2].session_id()));
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            for (p, before) in changed {
                while summary(&self.admin, *p).await == *before {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "partition {p} changed"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            self.handle.sync().await;
            Ok(())
        }
    }

    fn assignment(entries: &[(i32, &[i32])]) -> BTreeMap<i32, Vec<i32>> {
        entries.iter().map(|(p, r)| (*p, r.to_vec())).collect()
    }

    fn state(p: i32) -> String {
        paths::partition_state("t", p)
    }

    #[tokio::test]
    async fn k1_a_broker_failure_on_a_current_context_writes_without_reading_any_state(
    ) -> TestResult {
        // Led by 2: 0, 1; followed by 2: 2, 3, 4; without 2: 5.
        let c = cluster(&assignment(&[
            (0, &[2, 1, 3]),
            (1, &[2, 3, 1]),
            (2, &[1, 2, 3]),
            (3, &[3, 2, 1]),
            (4, &[1, 3, 2]),
            (5, &[1, 3]),
        ]))
        .await?;
        let mut unchanged = Vec::new();
        for p in 0..5 {
            unchanged.push((p, summary(&c.admin, p).await));
        }
        c.fail_broker_2(&unchanged).await?;
        assert_eq!(summary(&c.admin, 0).await, Some((1, vec![1, 3], 1, 1)));
        assert_eq!(summary(&c.admin, 1).await, Some((3, vec![3, 1], 1, 1)));
        assert_eq!(summary(&c.admin, 2).await, Some((1, vec![1, 3], 1, 1)));
        assert_eq!(summary(&c.admin, 3).await, Some((3, vec![3, 1], 1, 1)));
        assert_eq!(summary(&c.admin, 4).await, Some((1, vec![1, 3], 1, 1)));
        assert_eq!(summary(&c.admin, 5).await, Some((1, vec![1, 3], 0, 0)));
        // The context held every state at its version: each election and ISR removal was
        // one conditional write, no state was read (and the ISR removals of 0 and 1 took the
        // elections' own writes).
        assert_eq!(c.recorder.take(), Vec::<String>::new());
        c.handle.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn k1_3_states_changed_behind_the_controller_are_read_and_decided_again_as_kafka_does(
    ) -> TestResult {
        let c = cluster(&assignment(&[
            (0, &[2, 1, 3]),
            (1, &[2, 3, 1]),
            (2, &[1, 2, 3]),
            (3, &[3, 2, 1]),
            (4, &[1, 3, 2]),
        ]))
        .await?;
        // The leaders change ISRs after the controller loaded them (versions 0 → 1):
        // 0: broker 1 fell out (the election must pick 3, not 1);
        external_isr_change(&c.admin, 0, 2, vec![2, 3]).await?;
        // 1: only 2 is in sync (no clean leader: the election fails, the partition stays
        // offline, the ISR removal keeps the one-member ISR and sets leader -1);
        external_isr_change(&c.admin, 1, 2, vec![2]).await?;
        // 2: 2 already fell out (nothing to remove: no write);
        external_isr_change(&c.admin, 2, 1, vec![1, 3]).await?;
        // 3: 1 fell out (the removal of 2 leaves [3], not [3, 1]).
        external_isr_change(&c.admin, 3, 3, vec![3, 2]).await?;
        let mut watched = Vec::new();
        for p in [0, 1, 3, 4] {
            watched.push((p, summary(&c.admin, p).await));
        }
        c.fail_broker_2(&watched).await?;
        // Each conflicting state was written on top of the newer one, with its leader epoch
        // bumped once, or left alone where Kafka's decision from the newer state writes
        // nothing.
        assert_eq!(summary(&c.admin, 0).await, Some((3, vec![3], 1, 2)));
        assert_eq!(summary(&c.admin, 1).await, Some((-1, vec![2], 1, 2)));
        assert_eq!(summary(&c.admin, 2).await, Some((1, vec![1, 3], 0, 1)));
        assert_eq!(summary(&c.admin, 3).await, Some((3, vec![3], 1, 2)));
        assert_eq!(summary(&c.admin, 4).await, Some((1, vec![1, 3], 1, 1)));
        // Read: the four whose optimistic write got BADVERSION (1 twice: by its failed
        // election, then by its ISR removal, as Kafka reads it); 4 was written directly.
        assert_eq!(
            c.recorder.take(),
            vec![state(0), state(1), state(1), state(2), state(3)]
        );
        c.handle.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn k1_a_deleted_state_znode_fails_its_election_and_isr_removal_and_is_not_recreated(
    ) -> TestResult {
        let c = cluster(&assignment(&[
            (0, &[2, 1, 3]),
            (1, &[1, 2, 3]),
            (2, &[3, 2, 1]),
        ]))
        .await?;
        c.admin.delete(&state(0), -1).await?;
        c.admin.delete(&state(1), -1).await?;
        c.fail_broker_2(&[(2, summary(&c.admin, 2).await)]).await?;
        assert_eq!(summary(&c.admin, 0).await, None);
        assert_eq!(summary(&c.admin, 1).await, None);
        assert!(c.admin.exists(&state(0), false).await?.is_none());
        assert!(c.admin.exists(&state(1), false).await?.is_none());
        assert_eq!(summary(&c.admin, 2).await, Some((3, vec![3, 1], 1, 1)));
        // NONODE from the conditional write is the answer the read would have given.
        assert_eq!(c.recorder.take(), Vec::<String>::new());
        c.handle.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn kafka_6082_a_fenced_controller_writes_no_election_and_no_isr_removal() -> TestResult {
        let c = cluster(&assignment(&[(0, &[2, 1, 3]), (1, &[1, 2, 3])])).await?;
        let before = (summary(&c.admin, 0).await, summary(&c.admin, 1).await);
        // Another controller bumped the epoch (its own write of `/controller_epoch`).
        let (epoch, version) = c.admin.get_data(paths::CONTROLLER_EPOCH, false).await?;
        let next: i32 = std::str::from_utf8(&epoch)?.trim().parse::<i32>()? + 1;
        c.admin
            .set_data(
                paths::CONTROLLER_EPOCH,
                next.to_string().as_bytes(),
                version.version,
            )
            .await?;
        let first = c.handle.status().active_epoch;
        assert!(c.tree.expire(c.sessions[&2].session_id()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while c.handle.status().active_epoch == first {
            assert!(
                tokio::time::Instant::now() < deadline,
                "controller resigned"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        c.handle.sync().await;
        assert_eq!(
            (summary(&c.admin, 0).await, summary(&c.admin, 1).await),
            before
        );
        c.handle.shutdown();
        Ok(())
    }
}
