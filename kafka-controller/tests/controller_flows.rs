//! End-to-end controller flows through the real event loop, on `MemoryCoordination` and the
//! in-memory broker channel: K1, K2.1, K2.2, K5, K6, K7, controlled shutdown, preferred
//! elections, ISR change notifications, fencing and malformed znodes.

mod controller_harness;

use std::collections::BTreeMap;

use controller_harness::{test_config, wait_for, Cluster};
use ha_coordination::{Coordination, CreateMode, Op, ANY_VERSION};
use kafka_controller::admin;
use kafka_controller::broker_channel::SentRequest;
use kafka_controller::context::{BrokerId, TopicPartition};
use kafka_controller::controller::ControllerConfig;
use kafka_controller::zk_data::{
    encode_controller_epoch, paths, ControllerZNode, KafkaZkClient, KafkaZkError,
};
use kafka_wire::RequestBody;

fn tp(t: &str, p: i32) -> TopicPartition {
    TopicPartition::new(t, p)
}

fn is_lai(r: &SentRequest) -> bool {
    matches!(r.body, RequestBody::LeaderAndIsr(_))
}
fn is_um(r: &SentRequest) -> bool {
    matches!(r.body, RequestBody::UpdateMetadata(_))
}
fn is_stop(r: &SentRequest, delete: bool) -> bool {
    match &r.body {
        RequestBody::StopReplica(s) => {
            s.delete_partitions == delete
                || s.topic_states
                    .iter()
                    .flat_map(|t| t.partition_states.iter())
                    .any(|p| p.delete_partition == delete)
        }
        _ => false,
    }
}

async fn create(c: &Cluster, topic: &str, assignment: &[(i32, &[BrokerId])]) {
    let a: BTreeMap<i32, Vec<BrokerId>> =
        assignment.iter().map(|(p, r)| (*p, r.to_vec())).collect();
    admin::create_topic_with_assignment(&c.admin, topic, &a)
        .await
        .unwrap();
    for (p, _) in assignment {
        let t = tp(topic, *p);
        wait_for("partition state", || async { c.state(&t).await.is_some() }).await;
    }
}

#[tokio::test]
async fn k2_2_topic_creation_first_live_replica_leads_and_isr_is_ar() {
    let c = Cluster::start(&[1, 2, 3]).await;
    c.channel.clear();
    create(&c, "orders", &[(0, &[2, 3, 1]), (1, &[3, 1, 2])]).await;
    assert_eq!(
        c.leader_isr(&tp("orders", 0)).await,
        Some((2, vec![2, 3, 1]))
    );
    assert_eq!(
        c.leader_isr(&tp("orders", 1)).await,
        Some((3, vec![3, 1, 2]))
    );
    let st = c.state(&tp("orders", 0)).await.unwrap();
    assert_eq!((st.leader_epoch, st.controller_epoch), (0, 1));
    // LeaderAndIsr to every replica: one per broker carrying both partitions.
    wait_for("LeaderAndIsr", || async {
        (1..=3).all(|b| c.channel.sent_to(b).iter().filter(|r| is_lai(r)).count() == 1)
    })
    .await;
}

#[tokio::test]
async fn k2_2_partitions_added_to_an_existing_topic_are_created() {
    let c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "grow", &[(0, &[1, 2])]).await;
    admin::add_partitions(&c.admin, "grow", &BTreeMap::from([(1, vec![3, 1])]))
        .await
        .unwrap();
    let p1 = tp("grow", 1);
    wait_for("new partition", || async { c.state(&p1).await.is_some() }).await;
    assert_eq!(c.leader_isr(&p1).await, Some((3, vec![3, 1])));
}

#[tokio::test]
async fn k1_broker_failure_moves_leaderships_with_one_leader_and_isr_per_broker() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    create(
        &c,
        "t",
        &[(0, &[2, 1, 3]), (1, &[2, 3, 1]), (2, &[3, 2, 1])],
    )
    .await;
    c.channel.clear();
    c.kill(2).await;
    // K1.2: a live ISR member leads, ISR = live part of the old ISR; K1.3 leader epoch + 1.
    wait_for("leaders moved", || async {
        c.leader_isr(&tp("t", 0)).await == Some((1, vec![1, 3]))
            && c.leader_isr(&tp("t", 1)).await == Some((3, vec![3, 1]))
    })
    .await;
    assert_eq!(c.state(&tp("t", 0)).await.unwrap().leader_epoch, 1);
    // The follower replica on 2 left the ISR of t-2 too.
    wait_for("ISR shrink", || async {
        c.leader_isr(&tp("t", 2)).await == Some((3, vec![3, 1]))
    })
    .await;
    // K1.4: the whole failure is one batch: one LeaderAndIsr per live broker carrying all
    // of its partitions.
    wait_for("requests", || async {
        c.channel.sent_to(1).iter().any(is_lai) && c.channel.sent_to(3).iter().any(is_lai)
    })
    .await;
    // Every request of the failure is queued once the controller has handled its events; a
    // deliberate window then lets a second LeaderAndIsr, which must not exist, show.
    c.controller().await.sync().await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    for b in [1, 3] {
        let lai: Vec<_> = c.channel.sent_to(b).into_iter().filter(is_lai).collect();
        assert_eq!(lai.len(), 1, "one LeaderAndIsr to broker {b}");
        let RequestBody::LeaderAndIsr(r) = &lai[0].body else {
            unreachable!()
        };
        let partitions: usize = r
            .topic_states
            .iter()
            .map(|t| t.partition_states.len())
            .sum();
        assert_eq!(
            partitions, 3,
            "all three partitions in the one request to broker {b}"
        );
    }
    assert!(
        c.channel.sent_to(2).is_empty(),
        "nothing goes to the dead broker"
    );
}

#[tokio::test]
async fn k5_broker_startup_update_metadata_online_replicas_and_offline_partitions_elected() {
    let mut c = Cluster::start(&[1, 2]).await;
    create(&c, "solo", &[(0, &[2])]).await;
    c.kill(2).await;
    wait_for("partition offline", || async {
        c.leader_isr(&tp("solo", 0)).await.map(|x| x.0) == Some(-1)
    })
    .await;
    c.channel.clear();
    c.add_broker(2, None).await;
    // K5.3: the offline partition gets its leader back.
    wait_for("partition online", || async {
        c.leader_isr(&tp("solo", 0)).await.map(|x| x.0) == Some(2)
    })
    .await;
    // K5.1: UpdateMetadata to the existing broker and to the new one (before LeaderAndIsr).
    wait_for("requests", || async {
        c.channel.sent_to(1).iter().any(is_um) && c.channel.sent_to(2).iter().any(is_lai)
    })
    .await;
    let to2 = c.channel.sent_to(2);
    let first_um = to2.iter().position(is_um).unwrap();
    let first_lai = to2.iter().position(is_lai).unwrap();
    assert!(first_um < first_lai, "UpdateMetadata before LeaderAndIsr");
}

#[tokio::test]
async fn kip_380_bounced_broker_is_failed_then_started() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "t", &[(0, &[2, 1, 3])]).await;
    let before = c.state(&tp("t", 0)).await.unwrap();
    // Broker 2 restarts faster than the controller notices: same id, new czxid.
    let old = c.brokers.remove(&2).unwrap();
    c.tree.expire(old.session.session_id());
    old.handle.shutdown();
    c.add_broker(2, None).await;
    wait_for("bounce handled", || async {
        c.state(&tp("t", 0)).await.unwrap().leader_epoch > before.leader_epoch
    })
    .await;
    let ctx = c.controller().await.context().await.unwrap();
    assert!(ctx.is_broker_live(2));
}

/// KIP-380, Kafka's `processBrokerChange`: the old registration's deletion and the new one's
/// creation reach the controller in one watch event (here: one transaction), so the children
/// list still names broker 2, but under a new czxid. That is a bounce: `onBrokerFailure`
/// (leadership moves, broker 2 leaves the ISR), then `onBrokerStartup` (UpdateMetadata, then
/// LeaderAndIsr to the new incarnation, carrying its new broker epoch).
#[tokio::test]
async fn kip_380_bounced_broker_in_one_watch_event_runs_failure_then_startup() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "t", &[(0, &[2, 1, 3])]).await;
    let before = c.state(&tp("t", 0)).await.unwrap();
    assert_eq!((before.leader, before.isr.clone()), (2, vec![2, 1, 3]));
    let old_epoch = c
        .controller()
        .await
        .context()
        .await
        .unwrap()
        .broker(2)
        .unwrap()
        .epoch;
    // Broker 2's old process stops; its session is still alive.
    let old = c.brokers.remove(&2).unwrap();
    old.handle.shutdown();
    c.channel.clear();
    // Its new process replaces the registration in one transaction.
    let new_session = c.tree.connect();
    let path = paths::broker(2);
    let data = kafka_controller::zk_data::BrokerRegistration::plaintext("localhost", 9002, None, 0)
        .to_json()
        .unwrap();
    new_session
        .multi(vec![
            Op::delete(path.clone(), ANY_VERSION),
            Op::create(path.clone(), data, CreateMode::Ephemeral),
        ])
        .await
        .unwrap();
    let new_epoch = new_session.get_data(&path, false).await.unwrap().1.czxid;
    assert!(new_epoch > old_epoch);
    assert_eq!(
        c.admin
            .children(paths::BROKER_IDS, false)
            .await
            .unwrap()
            .len(),
        3,
        "the children list never lost broker 2"
    );

    // onBrokerFailure: the leadership moved to the next live ISR member, 2 left the ISR.
    wait_for("failure handled", || async {
        c.state(&tp("t", 0))
            .await
            .is_some_and(|s| s.leader == 1 && s.isr == vec![1, 3])
    })
    .await;
    // onBrokerStartup: the new incarnation is live with its new epoch and hears UpdateMetadata
    // first, then a LeaderAndIsr to follow broker 1 at the current leader epoch.
    wait_for("startup handled", || async {
        c.channel.sent_to(2).iter().any(is_lai)
    })
    .await;
    let after = c.state(&tp("t", 0)).await.unwrap();
    assert!(after.leader_epoch > before.leader_epoch);
    let ctx = c.controller().await.context().await.unwrap();
    assert!(ctx.is_broker_live(2));
    assert_eq!(ctx.broker(2).unwrap().epoch, new_epoch);
    let to2 = c.channel.sent_to(2);
    let first_um = to2
        .iter()
        .position(is_um)
        .expect("UpdateMetadata to broker 2");
    let first_lai = to2
        .iter()
        .position(is_lai)
        .expect("LeaderAndIsr to broker 2");
    assert!(first_um < first_lai, "UpdateMetadata before LeaderAndIsr");
    let RequestBody::LeaderAndIsr(lai) = &to2[first_lai].body else {
        unreachable!("is_lai");
    };
    assert_eq!(
        lai.broker_epoch, new_epoch,
        "addressed to the new registration"
    );
    let state = lai
        .topic_states
        .iter()
        .flat_map(|t| t.partition_states.iter())
        .chain(lai.ungrouped_partition_states.iter())
        .find(|p| p.partition_index == 0)
        .expect("t-0 in the LeaderAndIsr");
    assert_eq!((state.leader, state.leader_epoch), (1, after.leader_epoch));
}

#[tokio::test]
async fn k6_controller_session_expiry_another_broker_wins_a_higher_epoch_and_the_old_one_is_fenced()
{
    let c = Cluster::start(&[1, 2, 3]).await;
    assert_eq!(c.wait_controller().await, 1);
    create(&c, "t", &[(0, &[1, 2])]).await;
    let kzk = KafkaZkClient::new(std::sync::Arc::new(c.admin.clone()));
    let first = kzk.controller_epoch().await.unwrap().unwrap();
    assert_eq!(first.epoch, 1);
    // Broker 1's session expires; its client opens a new session, which is cut off before
    // broker 1 can campaign on it (the controller task cannot run between these two calls).
    let session = &c.brokers[&1].session;
    c.tree.expire(session.session_id());
    c.tree.suspend(session.session_id());
    let new = c.wait_controller_other_than(1).await;
    assert_ne!(new, 1, "a different broker wins");
    wait_for("the successor controls epoch 2", || async {
        c.brokers[&new].handle.status().active_epoch == Some(2)
    })
    .await;
    // The expired session's registration is gone: t-0 moves to 2 under epoch 2.
    wait_for("t-0 led by 2 at controller epoch 2", || async {
        c.state(&tp("t", 0))
            .await
            .is_some_and(|s| s.leader == 2 && s.controller_epoch == 2)
    })
    .await;
    // Broker 1 reconnects: it resigned and stays a follower of the new controller.
    c.tree.resume(session.session_id());
    c.brokers[&1].handle.sync().await;
    assert_eq!(c.brokers[&1].handle.status().active_epoch, None);
    assert_eq!(c.brokers[&new].handle.status().active_epoch, Some(2));
    let (data, _) = c.admin.get_data(paths::CONTROLLER, false).await.unwrap();
    assert_eq!(ControllerZNode::from_json(&data).unwrap().brokerid, new);
    // A write broker 1 makes as the epoch-1 controller is rejected and lands nothing.
    let old = KafkaZkClient::new(std::sync::Arc::new(session.clone()));
    let zombie = old
        .fenced_multi(
            first,
            vec![Op::create("/zombie", Vec::new(), CreateMode::Persistent)],
        )
        .await;
    assert!(
        matches!(zombie, Err(KafkaZkError::ControllerMoved { .. })),
        "{zombie:?}"
    );
    assert!(c.admin.exists("/zombie", false).await.unwrap().is_none());
}

#[tokio::test]
async fn k2_1_topic_deletion_stops_replicas_and_removes_znodes() {
    let c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "doomed", &[(0, &[1, 2]), (1, &[2, 3])]).await;
    c.channel.clear();
    admin::delete_topic(&c.admin, "doomed").await.unwrap();
    wait_for("topic deleted", || async {
        c.admin
            .exists(&paths::topic("doomed"), false)
            .await
            .unwrap()
            .is_none()
            && c.admin
                .exists(&paths::delete_topic("doomed"), false)
                .await
                .unwrap()
                .is_none()
    })
    .await;
    for b in [1, 2, 3] {
        assert!(
            c.channel.sent_to(b).iter().any(|r| is_stop(r, true)),
            "StopReplica(delete) to {b}"
        );
    }
    let ctx = c.controller().await.context().await.unwrap();
    assert!(ctx.topic_assignment("doomed").is_none());
}

fn no_delete(id: BrokerId) -> ControllerConfig {
    let mut c = test_config(id);
    c.delete_topic_enable = false;
    c
}

#[tokio::test]
async fn k2_1_deletion_disabled_request_is_recorded_but_never_executed() {
    let mut c = Cluster::empty(no_delete).await;
    c.add_broker(1, None).await;
    c.wait_controller().await;
    create(&c, "kept", &[(0, &[1])]).await;
    admin::delete_topic(&c.admin, "kept").await.unwrap();
    // A later topic creation, once handled, orders after any event the deletion request
    // could have caused (one session's events arrive in order).
    create(&c, "marker", &[(0, &[1])]).await;
    c.controller().await.sync().await;
    assert!(c
        .admin
        .exists(&paths::topic("kept"), false)
        .await
        .unwrap()
        .is_some());
    assert!(c
        .admin
        .exists(&paths::delete_topic("kept"), false)
        .await
        .unwrap()
        .is_some());
    assert!(!c.channel.sent().iter().any(|r| is_stop(r, true)));
}

#[tokio::test]
async fn k7_worked_example_through_the_loop() {
    let c = Cluster::start(&[1, 2, 3, 4, 5, 6]).await;
    let p = tp("t", 0);
    create(&c, "t", &[(0, &[1, 2, 3])]).await;
    let initial = c.state(&p).await.unwrap();
    assert_eq!((initial.leader, initial.isr.clone()), (1, vec![1, 2, 3]));
    admin::reassign_partitions(&c.admin, &BTreeMap::from([(p.clone(), vec![4, 5, 6])]))
        .await
        .unwrap();
    // Steps 1–3: AR = OAR + RAR in the store, leader epoch bumped, leader / ISR unchanged.
    wait_for("step 2", || async {
        c.state(&p).await.unwrap().leader_epoch > initial.leader_epoch
    })
    .await;
    assert_eq!(c.assignment(&p).await.unwrap(), vec![4, 5, 6, 1, 2, 3]);
    assert_eq!(c.leader_isr(&p).await, Some((1, vec![1, 2, 3])));
    // Step 4: the new replicas catch up (the leader writes the ISR, notifies).
    c.leader_sets_isr(&p, vec![1, 2, 3, 4, 5, 6]).await;
    // Steps 5–11: leader from RAR, OAR out of the ISR, AR = RAR, admin node deleted.
    wait_for("step 11", || async {
        c.admin
            .exists(paths::REASSIGN_PARTITIONS, false)
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert_eq!(c.assignment(&p).await.unwrap(), vec![4, 5, 6]);
    assert_eq!(c.leader_isr(&p).await, Some((4, vec![4, 5, 6])));
    for b in [1, 2, 3] {
        assert!(
            c.channel.sent_to(b).iter().any(|r| is_stop(r, true)),
            "replica {b} deleted"
        );
    }
}

fn crashed(c: &Cluster, id: BrokerId) -> bool {
    c.brokers
        .get(&id)
        .and_then(|b| b.crashing.as_ref())
        .is_some_and(|x| x.crashed.load(std::sync::atomic::Ordering::SeqCst))
}

/// Waits for `$done`, killing broker `$id` (its session expires) as soon as its client crashed.
macro_rules! wait_reaping {
    ($c:ident, $id:expr, $what:expr, $done:expr) => {{
        let deadline = tokio::time::Instant::now() + controller_harness::WAIT;
        loop {
            if crashed(&$c, $id) {
                $c.kill($id).await;
            }
            if $done {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {}",
                $what
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }};
}

/// Runs the K7 example with the first controller dying after `n` store writes.
async fn reassignment_with_crash_after(n: usize) {
    let mut c = Cluster::empty(test_config).await;
    c.add_broker(1, Some(n)).await;
    for b in 2..=6 {
        c.add_broker(b, None).await;
    }
    c.wait_controller().await;
    let p = tp("t", 0);
    admin::create_topic_with_assignment(&c.admin, "t", &BTreeMap::from([(0, vec![1, 2, 3])]))
        .await
        .unwrap();
    admin::reassign_partitions(&c.admin, &BTreeMap::from([(p.clone(), vec![4, 5, 6])]))
        .await
        .unwrap();
    // Phase A (steps 1-3) done, by the first controller or its successor.
    wait_reaping!(
        c,
        1,
        "phase A",
        c.assignment(&p).await.is_some_and(|a| a.len() == 6)
            && c.state(&p)
                .await
                .is_some_and(|s| s.leader_epoch > 0 && s.leader > 0)
    );
    // Step 4: the target replicas join the ISR.
    let mut isr = c.state(&p).await.unwrap().isr;
    isr.extend([4, 5, 6]);
    isr.dedup();
    c.leader_sets_isr(&p, isr).await;
    wait_reaping!(
        c,
        1,
        "reassignment finished",
        c.admin
            .exists(paths::REASSIGN_PARTITIONS, false)
            .await
            .unwrap()
            .is_none()
            && c.assignment(&p).await == Some(vec![4, 5, 6])
            && c.leader_isr(&p).await == Some((4, vec![4, 5, 6]))
    );
}

#[tokio::test]
async fn k7_controller_killed_at_each_store_write_successor_finishes() {
    for n in 0..14 {
        reassignment_with_crash_after(n).await;
    }
}

async fn all_created(c: &Cluster) -> bool {
    for p in 0..4 {
        if c.state(&tp("t", p)).await.is_none() {
            return false;
        }
    }
    true
}

async fn all_moved(c: &Cluster) -> bool {
    for p in 0..4 {
        let ok = c
            .leader_isr(&tp("t", p))
            .await
            .is_some_and(|(l, isr)| (l == 3 || l == 4) && !isr.contains(&2));
        if !ok {
            return false;
        }
    }
    true
}

/// K1 with the first controller dying after `n` store writes.
async fn broker_failure_with_crash_after(n: usize) {
    let mut c = Cluster::empty(test_config).await;
    c.add_broker(1, Some(n)).await;
    for b in 2..=4 {
        c.add_broker(b, None).await;
    }
    c.wait_controller().await;
    let parts: BTreeMap<i32, Vec<BrokerId>> = (0..4).map(|p| (p, vec![2, 3, 4])).collect();
    admin::create_topic_with_assignment(&c.admin, "t", &parts)
        .await
        .unwrap();
    wait_reaping!(c, 1, "created", all_created(&c).await);
    c.kill(2).await;
    wait_reaping!(
        c,
        1,
        "every partition led by a live broker",
        all_moved(&c).await
    );
}

#[tokio::test]
async fn k1_controller_killed_at_each_store_write_of_a_broker_failover_successor_finishes() {
    for n in 0..16 {
        broker_failure_with_crash_after(n).await;
    }
}

#[tokio::test]
async fn k6_two_controllers_racing_the_stale_one_is_fenced_and_no_write_lands() {
    let c = Cluster::start(&[1, 2, 3]).await;
    assert_eq!(c.wait_controller().await, 1);
    create(&c, "t", &[(0, &[3, 2])]).await;
    let before = c.state(&tp("t", 0)).await.unwrap();
    // Controller 1 is cut off; meanwhile broker 3 vanishes and another controller (99) wins
    // epoch 2.
    let s1 = c.brokers[&1].session.session_id();
    c.tree.suspend(s1);
    c.admin
        .delete(&paths::broker(3), ANY_VERSION)
        .await
        .unwrap();
    let (_, stat) = c
        .admin
        .get_data(paths::CONTROLLER_EPOCH, false)
        .await
        .unwrap();
    c.admin
        .multi(vec![
            Op::delete(paths::CONTROLLER, ANY_VERSION),
            Op::create(
                paths::CONTROLLER,
                ControllerZNode::new(99, 0).to_json().unwrap(),
                CreateMode::Ephemeral,
            ),
            Op::set_data(
                paths::CONTROLLER_EPOCH,
                encode_controller_epoch(2),
                stat.version,
            ),
        ])
        .await
        .unwrap();
    // Controller 1 comes back and handles the broker change first: its writes are fenced.
    c.tree.resume(s1);
    wait_for("controller 1 resigned", || async {
        c.brokers[&1].handle.status().active_epoch.is_none()
    })
    .await;
    // Everything controller 1 queued before it resigned has been handled.
    c.brokers[&1].handle.sync().await;
    assert_eq!(
        c.state(&tp("t", 0)).await.unwrap(),
        before,
        "no write of the stale controller"
    );
}

#[tokio::test]
async fn malformed_json_in_znodes_is_logged_without_panic() {
    let c = Cluster::start(&[1, 2]).await;
    for (path, mode) in [
        (paths::topic("bad"), CreateMode::Persistent),
        (
            paths::REASSIGN_PARTITIONS.to_string(),
            CreateMode::Persistent,
        ),
        (
            paths::PREFERRED_REPLICA_ELECTION.to_string(),
            CreateMode::Persistent,
        ),
        (
            paths::ISR_CHANGE_PREFIX.to_string(),
            CreateMode::PersistentSequential,
        ),
    ] {
        c.admin.create(&path, b"{not json", mode).await.unwrap();
    }
    c.admin
        .create(&paths::broker(7), b"[1,2", CreateMode::Ephemeral)
        .await
        .unwrap();
    // The controller still works.
    create(&c, "good", &[(0, &[2, 1])]).await;
    assert_eq!(c.leader_isr(&tp("good", 0)).await, Some((2, vec![2, 1])));
    assert!(c.controller().await.context().await.is_some());
}

#[tokio::test]
async fn controlled_shutdown_moves_leaderships_first_and_reports_none_left() {
    let c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "t", &[(0, &[2, 1, 3]), (1, &[3, 2, 1]), (2, &[2])]).await;
    let epoch = c
        .admin
        .get_data(&paths::broker(2), false)
        .await
        .unwrap()
        .1
        .czxid;
    let left = c
        .controller()
        .await
        .controlled_shutdown(2, epoch)
        .await
        .unwrap();
    // A single-replica partition cannot move (Kafka leaves it); the others did.
    assert_eq!(left, Vec::<TopicPartition>::new());
    assert_eq!(c.leader_isr(&tp("t", 0)).await, Some((1, vec![1, 3])));
    assert_eq!(c.leader_isr(&tp("t", 1)).await, Some((3, vec![3, 1])));
    // A stale broker epoch is refused.
    assert!(c
        .controller()
        .await
        .controlled_shutdown(3, 1)
        .await
        .is_err());
}

#[tokio::test]
async fn preferred_replica_election_admin_path_restores_the_preferred_leader() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "t", &[(0, &[3, 1, 2])]).await;
    c.kill(3).await;
    wait_for("moved", || async {
        c.leader_isr(&tp("t", 0)).await.map(|x| x.0) == Some(1)
    })
    .await;
    c.add_broker(3, None).await;
    // Broker 3 caught up and rejoined the ISR.
    wait_for("3 online", || async {
        c.controller()
            .await
            .context()
            .await
            .is_some_and(|x| x.is_broker_live(3))
    })
    .await;
    let isr = vec![1, 2, 3];
    c.leader_sets_isr(&tp("t", 0), isr.clone()).await;
    wait_for("the controller saw the ISR change", || async {
        c.controller()
            .await
            .context()
            .await
            .is_some_and(|x| x.leadership(&tp("t", 0)).is_some_and(|l| l.isr == isr))
    })
    .await;
    admin::preferred_replica_election(&c.admin, &[tp("t", 0)])
        .await
        .unwrap();
    wait_for("preferred leader", || async {
        c.leader_isr(&tp("t", 0)).await.map(|x| x.0) == Some(3)
            && c.admin
                .exists(paths::PREFERRED_REPLICA_ELECTION, false)
                .await
                .unwrap()
                .is_none()
    })
    .await;
}

#[tokio::test]
async fn isr_change_notification_sends_update_metadata_and_is_deleted() {
    let c = Cluster::start(&[1, 2]).await;
    create(&c, "t", &[(0, &[1, 2])]).await;
    c.channel.clear();
    c.leader_sets_isr(&tp("t", 0), vec![1]).await;
    wait_for("notification handled", || async {
        c.admin
            .children(paths::ISR_CHANGE_NOTIFICATION, false)
            .await
            .unwrap()
            .is_empty()
            && c.channel.sent_to(2).iter().any(is_um)
    })
    .await;
    let ctx = c.controller().await.context().await.unwrap();
    assert_eq!(ctx.leadership(&tp("t", 0)).unwrap().isr, vec![1]);
}

#[tokio::test]
async fn broker_channel_retries_the_same_item_until_it_succeeds() {
    let c = Cluster::start(&[1, 2]).await;
    c.channel.fail_next(2, 3);
    let before = c.channel.attempts();
    create(&c, "t", &[(0, &[2, 1])]).await;
    wait_for("delivered", || async {
        c.channel.sent_to(2).iter().any(is_lai)
    })
    .await;
    assert!(c.channel.attempts() >= before + 3);
}

/// Found by the real-core simulation in `ha-tests` (`Liveness`): a controller whose session
/// expired campaigns on its new session; if that session loses its connection before the
/// campaign's reads, the event used to fail with `ConnectionLoss` and be dropped — the
/// controller never watched `/controller` again and the cluster had no controller. Its store
/// operations now wait for the connection, as Kafka's `ZooKeeperClient` requests do.
#[tokio::test]
async fn k6_controller_campaigns_on_its_new_session_after_a_disconnection() {
    let c = Cluster::start(&[1]).await;
    assert_eq!(c.wait_controller().await, 1);
    let session = &c.brokers[&1].session;
    let old = session.session_id();
    c.tree.expire(old);
    let new = session.session_id();
    assert_ne!(old, new, "the client opened a new session");
    // Cut off before the controller can act on the new session.
    c.tree.suspend(new);
    // A deliberate window, the thing tested: while cut off it cannot campaign (its event
    // loop waits inside a store call, so there is no event to wait for).
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(c.brokers[&1].handle.status().active_epoch, None);
    c.tree.resume(new);
    wait_for("controller 1 campaigns on its new session", || async {
        c.brokers[&1].handle.status().active_epoch == Some(2)
    })
    .await;
}
