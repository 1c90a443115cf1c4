//! K6 controller failover, one test per step of `onControllerFailover` (K6.1 … K6.12), each
//! through the real event loop on `MemoryCoordination` and the in-memory broker channel: the
//! controller (broker 1) dies and the successor's effect of that one step is checked in the
//! store, in the control requests it sends and in its state machines.

mod controller_harness;

use std::collections::BTreeMap;
use std::time::Duration;

use controller_harness::{test_config, wait_for, Cluster};
use ha_coordination::Coordination;
use kafka_controller::admin;
use kafka_controller::broker_channel::SentRequest;
use kafka_controller::context::{BrokerId, PartitionReplica, TopicPartition};
use kafka_controller::controller::ControllerConfig;
use kafka_controller::partition_state_machine::PartitionState;
use kafka_controller::replica_state_machine::ReplicaState;
use kafka_controller::zk_data::{decode_controller_epoch, paths, ControllerZNode};
use kafka_wire::RequestBody;

fn tp(t: &str, p: i32) -> TopicPartition {
    TopicPartition::new(t, p)
}

/// One partition state carried by a LeaderAndIsr request: (topic, partition, leader,
/// leader epoch, ISR).
type LaiState = (String, i32, BrokerId, i32, Vec<BrokerId>);

fn lai_states(r: &SentRequest) -> Vec<LaiState> {
    let RequestBody::LeaderAndIsr(l) = &r.body else {
        return Vec::new();
    };
    l.ungrouped_partition_states
        .iter()
        .chain(
            l.topic_states
                .iter()
                .flat_map(|t| t.partition_states.iter()),
        )
        .map(|p| {
            let topic = l
                .topic_states
                .iter()
                .find(|t| t.partition_states.iter().any(|q| q == p))
                .map_or_else(|| p.topic_name.to_string(), |t| t.topic_name.to_string());
            (
                topic,
                p.partition_index,
                p.leader,
                p.leader_epoch,
                p.isr.to_vec(),
            )
        })
        .collect()
}

fn controller_epoch_of(r: &SentRequest) -> i32 {
    match &r.body {
        RequestBody::LeaderAndIsr(x) => x.controller_epoch,
        RequestBody::UpdateMetadata(x) => x.controller_epoch,
        RequestBody::StopReplica(x) => x.controller_epoch,
        _ => -1,
    }
}

fn is_lai(r: &SentRequest) -> bool {
    matches!(r.body, RequestBody::LeaderAndIsr(_))
}
fn is_um(r: &SentRequest) -> bool {
    matches!(r.body, RequestBody::UpdateMetadata(_))
}
fn is_delete_stop(r: &SentRequest) -> bool {
    match &r.body {
        RequestBody::StopReplica(s) => {
            s.delete_partitions
                || s.topic_states
                    .iter()
                    .flat_map(|t| t.partition_states.iter())
                    .any(|p| p.delete_partition)
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

async fn exists(c: &Cluster, path: &str) -> bool {
    c.admin.exists(path, false).await.unwrap().is_some()
}

/// Brokers 1, 2, 3 with controller 1 and topic `t` (`t-0` led by 1, `t-1` led by 2); then the
/// controller dies. Returns the successor, once its failover is complete, with the channel
/// holding only what was sent after controller 1 died.
async fn failover() -> (Cluster, BrokerId) {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    assert_eq!(c.wait_controller().await, 1);
    create(&c, "t", &[(0, &[1, 2, 3]), (1, &[2, 3, 1])]).await;
    wait_for("t-1 led by 2", || async {
        c.leader_isr(&tp("t", 1)).await == Some((2, vec![2, 3, 1]))
    })
    .await;
    c.brokers[&1].handle.sync().await;
    c.channel.clear();
    c.kill(1).await;
    let new = c.wait_controller_other_than(1).await;
    // Every event queued by the failover (K6.12 resumption, preferred elections) handled.
    c.brokers[&new].handle.sync().await;
    (c, new)
}

#[tokio::test]
async fn k6_1_successor_reads_and_increments_the_controller_epoch() {
    let (c, new) = failover().await;
    // The store: /controller_epoch went from 1 to 2 and /controller names the successor.
    let (data, _) = c
        .admin
        .get_data(paths::CONTROLLER_EPOCH, false)
        .await
        .unwrap();
    assert_eq!(decode_controller_epoch(&data).unwrap(), 2);
    let (data, _) = c.admin.get_data(paths::CONTROLLER, false).await.unwrap();
    assert_eq!(ControllerZNode::from_json(&data).unwrap().brokerid, new);
    // The successor controls epoch 2 and every request it sends carries it.
    assert_eq!(c.brokers[&new].handle.status().active_epoch, Some(2));
    assert_eq!(c.brokers[&new].handle.context().await.unwrap().epoch, 2);
    let sent = c.channel.sent();
    assert!(!sent.is_empty());
    for r in &sent {
        assert_eq!(controller_epoch_of(r), 2, "{r:?}");
    }
}

#[tokio::test]
async fn k6_2_successor_watches_reassign_partitions() {
    let (c, _) = failover().await;
    // Created after the failover: only the watch set by the successor can notice it.
    let p = tp("t", 1);
    admin::reassign_partitions(&c.admin, &BTreeMap::from([(p.clone(), vec![3, 2])]))
        .await
        .unwrap();
    let before = c.state(&p).await.unwrap();
    // RAR is already in the ISR (the dead broker 1 left it), so the reassignment runs through:
    // AR = RAR, the request deleted, the leader epoch bumped by the successor.
    wait_for("reassignment complete", || async {
        c.assignment(&p).await == Some(vec![3, 2]) && !exists(&c, paths::REASSIGN_PARTITIONS).await
    })
    .await;
    let after = c.state(&p).await.unwrap();
    assert!(after.leader_epoch > before.leader_epoch);
    assert_eq!(after.controller_epoch, 2);
    assert!(c.channel.sent_to(1).is_empty());
}

#[tokio::test]
async fn k6_3_successor_watches_preferred_replica_election() {
    let (mut c, new) = failover().await;
    // t-0's preferred replica 1 is dead; broker 1 comes back and rejoins the ISR of t-0.
    let p = tp("t", 0);
    let moved = c.state(&p).await.unwrap();
    assert_ne!(moved.leader, 1);
    c.add_broker(1, None).await;
    wait_for("1 live again", || async {
        c.brokers[&new]
            .handle
            .context()
            .await
            .is_some_and(|x| x.is_broker_live(1))
    })
    .await;
    let mut isr = moved.isr.clone();
    isr.push(1);
    c.leader_sets_isr(&p, isr.clone()).await;
    wait_for("ISR change seen by the controller", || async {
        c.brokers[&new]
            .handle
            .context()
            .await
            .is_some_and(|x| x.leadership(&p).is_some_and(|l| l.isr == isr))
    })
    .await;
    admin::preferred_replica_election(&c.admin, std::slice::from_ref(&p))
        .await
        .unwrap();
    wait_for("preferred leader 1 restored, request deleted", || async {
        c.leader_isr(&p).await.map(|x| x.0) == Some(1)
            && !exists(&c, paths::PREFERRED_REPLICA_ELECTION).await
    })
    .await;
    assert_eq!(c.state(&p).await.unwrap().controller_epoch, 2);
}

#[tokio::test]
async fn k6_4_successor_watches_brokers_topics() {
    let (c, new) = failover().await;
    c.channel.clear();
    create(&c, "later", &[(0, &[3, 2])]).await;
    assert_eq!(c.leader_isr(&tp("later", 0)).await, Some((3, vec![3, 2])));
    assert_eq!(c.state(&tp("later", 0)).await.unwrap().controller_epoch, 2);
    wait_for("LeaderAndIsr for the new topic", || async {
        [2, 3].iter().all(|b| {
            c.channel
                .sent_to(*b)
                .iter()
                .flat_map(lai_states)
                .any(|s| s.0 == "later")
        })
    })
    .await;
    let ctx = c.brokers[&new].handle.context().await.unwrap();
    assert_eq!(ctx.partitions_for_topic("later"), vec![tp("later", 0)]);
}

#[tokio::test]
async fn k6_5_successor_watches_delete_topics() {
    let (c, _) = failover().await;
    create(&c, "doomed", &[(0, &[2, 3])]).await;
    c.channel.clear();
    admin::delete_topic(&c.admin, "doomed").await.unwrap();
    wait_for("topic deleted", || async {
        !exists(&c, &paths::topic("doomed")).await
            && !exists(&c, &paths::delete_topic("doomed")).await
    })
    .await;
    for b in [2, 3] {
        assert!(
            c.channel.sent_to(b).iter().any(is_delete_stop),
            "StopReplica(delete) to replica {b}"
        );
    }
}

#[tokio::test]
async fn k6_5_successor_with_deletion_disabled_does_not_act_on_delete_topics() {
    fn config(id: BrokerId) -> ControllerConfig {
        let mut c = test_config(id);
        c.delete_topic_enable = id == 1;
        c
    }
    let mut c = Cluster::empty(config).await;
    for id in [1, 2] {
        c.add_broker(id, None).await;
        c.wait_controller().await;
    }
    create(&c, "kept", &[(0, &[2])]).await;
    c.kill(1).await;
    let new = c.wait_controller_other_than(1).await;
    c.channel.clear();
    admin::delete_topic(&c.admin, "kept").await.unwrap();
    // The successor handles everything queued before this point, the new znode included if
    // it watched `/admin/delete_topics`; it did not, so nothing was deleted.
    create(&c, "marker", &[(0, &[2])]).await;
    c.brokers[&new].handle.sync().await;
    assert!(exists(&c, &paths::topic("kept")).await);
    assert!(exists(&c, &paths::delete_topic("kept")).await);
    assert!(!c.channel.sent().iter().any(is_delete_stop));
}

#[tokio::test]
async fn k6_6_successor_watches_brokers_ids() {
    let (mut c, new) = failover().await;
    let other = if new == 2 { 3 } else { 2 };
    // A broker dying after the failover: its leaderships move.
    let p = tp("t", 1);
    let before = c.state(&p).await.unwrap();
    c.kill(other).await;
    wait_for("the dead broker left the ISR of t-1", || async {
        c.state(&p)
            .await
            .is_some_and(|s| !s.isr.contains(&other) && s.leader_epoch > before.leader_epoch)
    })
    .await;
    // A broker registering after the failover: it is told the metadata.
    c.channel.clear();
    c.add_broker(4, None).await;
    wait_for("UpdateMetadata to the new broker 4", || async {
        c.channel.sent_to(4).iter().any(is_um)
    })
    .await;
    let ctx = c.brokers[&new].handle.context().await.unwrap();
    assert_eq!(
        ctx.live_broker_ids().iter().copied().collect::<Vec<_>>(),
        vec![new, 4]
    );
}

#[tokio::test]
async fn k6_7_successor_loads_topics_live_brokers_and_leaderships() {
    let (c, new) = failover().await;
    let ctx = c.brokers[&new].handle.context().await.unwrap();
    assert_eq!(
        ctx.live_broker_ids().iter().copied().collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(ctx.topics().collect::<Vec<_>>(), vec!["t"]);
    assert_eq!(ctx.partitions_for_topic("t"), vec![tp("t", 0), tp("t", 1)]);
    for p in [0, 1] {
        let t = tp("t", p);
        let stored = c.assignment(&t).await.unwrap();
        assert_eq!(ctx.partition_replicas(&t), stored, "replicas of {t:?}");
        // The context's leadership is the store's, znode version included.
        assert_eq!(
            ctx.leadership(&t),
            c.state(&t).await.as_ref(),
            "leadership of {t:?}"
        );
    }
    assert!(ctx.topic_id("t").is_some(), "topic id loaded");
    // t-0 was led by the dead broker 1: re-elected from its live ISR.
    assert_eq!(c.leader_isr(&tp("t", 0)).await, Some((2, vec![2, 3])));
}

#[tokio::test]
async fn k6_8_successor_starts_the_replica_and_partition_state_machines() {
    let (c, new) = failover().await;
    let ctx = c.brokers[&new].handle.context().await.unwrap();
    for p in [0, 1] {
        let t = tp("t", p);
        assert_eq!(ctx.partition_state(&t), PartitionState::Online, "{t:?}");
        for b in [2, 3] {
            assert_eq!(
                ctx.replica_state(&PartitionReplica::new(t.clone(), b)),
                ReplicaState::Online,
                "replica {b} of {t:?} on a live broker"
            );
        }
        assert_eq!(
            ctx.replica_state(&PartitionReplica::new(t.clone(), 1)),
            ReplicaState::Offline,
            "replica 1 of {t:?} on the dead broker"
        );
    }
    // The replica machine's Online transition told every live replica its partition state.
    for b in [2, 3] {
        let partitions: Vec<i32> = c
            .channel
            .sent_to(b)
            .iter()
            .flat_map(lai_states)
            .map(|s| s.1)
            .collect();
        assert!(
            partitions.contains(&0) && partitions.contains(&1),
            "broker {b}: {partitions:?}"
        );
    }
}

#[tokio::test]
async fn k6_9_successor_marks_itself_running_as_controller() {
    let (c, new) = failover().await;
    assert_eq!(c.brokers[&new].handle.status().active_epoch, Some(2));
    assert!(c.brokers[&new].handle.context().await.is_some());
    for (id, b) in &c.brokers {
        if *id != new {
            assert_eq!(b.handle.status().active_epoch, None, "broker {id}");
            assert!(b.handle.context().await.is_none(), "broker {id}");
        }
    }
    // Running: it serves a controlled shutdown.
    let other = if new == 2 { 3 } else { 2 };
    let epoch = c
        .admin
        .get_data(&paths::broker(other), false)
        .await
        .unwrap()
        .1
        .czxid;
    let left = c.brokers[&new]
        .handle
        .controlled_shutdown(other, epoch)
        .await
        .unwrap();
    assert!(left.is_empty());
}

#[tokio::test]
async fn k6_10_successor_sends_every_leadership_to_every_live_broker_update_metadata_first() {
    let (c, _) = failover().await;
    let stored: BTreeMap<i32, (BrokerId, i32, Vec<BrokerId>)> = {
        let mut m = BTreeMap::new();
        for p in [0, 1] {
            let s = c.state(&tp("t", p)).await.unwrap();
            m.insert(p, (s.leader, s.leader_epoch, s.isr));
        }
        m
    };
    for b in [2, 3] {
        let sent = c.channel.sent_to(b);
        let um = sent.iter().position(is_um).expect("UpdateMetadata");
        let lai = sent.iter().position(is_lai).expect("LeaderAndIsr");
        assert!(um < lai, "UpdateMetadata before LeaderAndIsr to broker {b}");
        // The last LeaderAndIsr state per partition is what the store holds.
        let mut last: BTreeMap<i32, (BrokerId, i32, Vec<BrokerId>)> = BTreeMap::new();
        for s in sent.iter().flat_map(lai_states) {
            assert_eq!(s.0, "t");
            last.insert(s.1, (s.2, s.3, s.4));
        }
        assert_eq!(last, stored, "leaderships sent to broker {b}");
        // The UpdateMetadata carries the live brokers.
        let RequestBody::UpdateMetadata(u) = &sent[um].body else {
            unreachable!()
        };
        let mut live: Vec<i32> = u.live_brokers.iter().map(|x| x.id).collect();
        live.sort_unstable();
        assert_eq!(live, vec![2, 3]);
    }
    assert!(
        c.channel.sent_to(1).is_empty(),
        "nothing to the dead broker"
    );
}

/// Broker 1 controls with the rebalance task off; its successors run it every 50 ms.
fn rebalance_after_failover(id: BrokerId) -> ControllerConfig {
    let mut c = test_config(id);
    c.auto_leader_rebalance_enable = id != 1;
    c.leader_imbalance_check_interval = Duration::from_millis(50);
    c
}

#[tokio::test]
async fn k6_11_successor_starts_the_auto_rebalance_task() {
    let mut c = Cluster::empty(rebalance_after_failover).await;
    for id in [1, 2, 3, 4] {
        c.add_broker(id, None).await;
        c.wait_controller().await;
    }
    assert_eq!(c.wait_controller().await, 1);
    // Broker 3 is the preferred leader of both partitions; broker 1 replicates neither.
    let (p0, p1) = (tp("t", 0), tp("t", 1));
    create(&c, "t", &[(0, &[3, 2, 4]), (1, &[3, 4, 2])]).await;
    c.kill(3).await;
    wait_for("leaderships moved off 3", || async {
        c.leader_isr(&p0).await == Some((2, vec![2, 4]))
            && c.leader_isr(&p1).await == Some((4, vec![4, 2]))
    })
    .await;
    // Broker 3 returns and catches up: back in both ISRs, leading neither (100 % imbalance).
    c.add_broker(3, None).await;
    c.leader_sets_isr(&p0, vec![2, 4, 3]).await;
    c.leader_sets_isr(&p1, vec![4, 2, 3]).await;
    wait_for("ISRs with 3 seen by controller 1", || async {
        c.brokers[&1].handle.context().await.is_some_and(|x| {
            x.is_broker_live(3)
                && x.leadership(&p0).is_some_and(|l| l.isr.contains(&3))
                && x.leadership(&p1).is_some_and(|l| l.isr.contains(&3))
        })
    })
    .await;
    assert_eq!(c.leader_isr(&p0).await.unwrap().0, 2);
    assert_eq!(c.leader_isr(&p1).await.unwrap().0, 4);
    c.kill(1).await;
    let new = c.wait_controller_other_than(1).await;
    wait_for(
        "the successor's rebalance gives 3 its leaderships back",
        || async {
            c.leader_isr(&p0).await.map(|x| x.0) == Some(3)
                && c.leader_isr(&p1).await.map(|x| x.0) == Some(3)
        },
    )
    .await;
    for p in [&p0, &p1] {
        assert_eq!(c.state(p).await.unwrap().controller_epoch, 2);
    }
    assert_eq!(c.brokers[&new].handle.status().active_epoch, Some(2));
}

#[tokio::test]
async fn k6_12_successor_finishes_a_topic_deletion_pending_when_the_controller_died() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    assert_eq!(c.wait_controller().await, 1);
    // Replicas only on brokers that stay alive (a replica on a dead broker holds a deletion
    // back, K2.1).
    create(&c, "doomed", &[(0, &[2, 3]), (1, &[3, 2])]).await;
    c.brokers[&1].handle.sync().await;
    // The controller is cut off, the deletion is requested, and the controller dies before it
    // could act on it.
    c.tree.suspend(c.brokers[&1].session.session_id());
    admin::delete_topic(&c.admin, "doomed").await.unwrap();
    c.channel.clear();
    c.kill(1).await;
    assert!(exists(&c, &paths::topic("doomed")).await);
    let new = c.wait_controller_other_than(1).await;
    wait_for("the successor deleted the topic", || async {
        !exists(&c, &paths::topic("doomed")).await
            && !exists(&c, &paths::delete_topic("doomed")).await
            && !exists(&c, &paths::partition_state("doomed", 0)).await
    })
    .await;
    for b in [2, 3] {
        let stops: Vec<SentRequest> = c
            .channel
            .sent_to(b)
            .into_iter()
            .filter(is_delete_stop)
            .collect();
        assert!(!stops.is_empty(), "StopReplica(delete) to replica {b}");
        assert!(stops.iter().all(|r| controller_epoch_of(r) == 2));
    }
    let ctx = c.brokers[&new].handle.context().await.unwrap();
    assert!(ctx.topic_assignment("doomed").is_none());
    assert!(ctx.topics_to_delete().is_empty());
}
