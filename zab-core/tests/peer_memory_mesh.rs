//! `QuorumPeer` ensembles over the in-memory mesh: election at start-up (Z7), discovery fixing
//! one epoch per leader with a quorum (Z1, Z5), re-election after a leader crash (Z8) and
//! heartbeat/connection loss sending servers back to LOOKING (Z6).

#![cfg(feature = "tokio")]

mod peer_support;

use std::time::Duration;

use peer_support::{config, gone, holds_for, settled};
use zab_core::peer::{PeerHandle, QuorumPeer};
use zab_core::store::{ElectionStore, MemoryElectionStore};
use zab_core::transport::MemoryNetwork;
use zab_core::{ServerId, ServerState};

const SETTLE: Duration = Duration::from_secs(10);

async fn start(
    net: &MemoryNetwork,
    sid: i64,
    voters: &[i64],
    observers: &[i64],
    store: &MemoryElectionStore,
) -> PeerHandle {
    QuorumPeer::new(
        config(sid, voters, observers),
        net.endpoint(ServerId(sid)),
        store.clone(),
    )
    .await
    .unwrap()
    .spawn()
}

async fn ensemble(
    n: i64,
    observers: &[i64],
) -> (MemoryNetwork, Vec<PeerHandle>, Vec<MemoryElectionStore>) {
    let net = MemoryNetwork::new();
    let voters: Vec<i64> = (1..=n).collect();
    let mut handles = Vec::new();
    let mut stores = Vec::new();
    for sid in voters.iter().chain(observers.iter()) {
        let store = MemoryElectionStore::default();
        handles.push(start(&net, *sid, &voters, observers, &store).await);
        stores.push(store);
    }
    (net, handles, stores)
}

#[tokio::test]
async fn z7_three_peers_elect_the_largest_sid_and_establish_epoch_1() {
    let (_net, h, stores) = ensemble(3, &[]).await;
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch), (ServerId(3), 1));
    for s in &stores {
        let e = s.load().await.unwrap();
        assert_eq!((e.accepted_epoch, e.current_epoch), (1, 1));
    }
}

#[tokio::test]
async fn z7_five_peers_elect_one_leader() {
    let (_net, h, _) = ensemble(5, &[]).await;
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch), (ServerId(5), 1));
}

#[tokio::test]
async fn z3_observer_observes_the_leader_and_never_leads() {
    let (_net, h, _) = ensemble(3, &[4]).await;
    let (leader, _) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!(leader, ServerId(3));
    assert_eq!(h[3].current().state, ServerState::Observing);
}

#[tokio::test]
async fn z8_killing_the_leader_reelects_with_a_higher_epoch() {
    let (_net, h, _) = ensemble(3, &[]).await;
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch), (ServerId(3), 1));
    h[2].kill();
    let (leader2, epoch2) = settled(&[&h[0], &h[1]], SETTLE).await;
    assert_eq!(leader2, ServerId(2));
    assert!(epoch2 > epoch, "new epoch {epoch2} must exceed {epoch}");
}

#[tokio::test]
async fn z8_five_peers_survive_two_successive_leader_crashes() {
    let (_net, h, _) = ensemble(5, &[]).await;
    let (_, e1) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    h[4].kill();
    let (l2, e2) = settled(&[&h[0], &h[1], &h[2], &h[3]], SETTLE).await;
    assert_eq!(l2, ServerId(4));
    h[3].kill();
    let (l3, e3) = settled(&[&h[0], &h[1], &h[2]], SETTLE).await;
    assert_eq!(l3, ServerId(3));
    assert!(e1 < e2 && e2 < e3);
}

#[tokio::test]
async fn z6_partitioned_follower_goes_looking_and_rejoins() {
    let (net, h, _) = ensemble(3, &[]).await;
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    net.isolate(ServerId(1));
    let s = h[0]
        .wait_for(SETTLE, |s| s.state == ServerState::Looking)
        .await
        .expect("isolated follower goes LOOKING");
    assert_eq!(s.leader, None);
    // The other two keep their leader.
    assert_eq!(h[2].current().epoch, Some(epoch));
    net.heal();
    let (leader2, epoch2) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader2, epoch2), (leader, epoch));
}

#[tokio::test]
async fn z6_leader_that_loses_its_quorum_steps_down() {
    let (net, h, _) = ensemble(3, &[]).await;
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!(leader, ServerId(3));
    net.isolate(ServerId(3));
    h[2].wait_for(SETTLE, |s| s.state == ServerState::Looking)
        .await
        .expect("isolated leader steps down");
    let (leader2, epoch2) = settled(&[&h[0], &h[1]], SETTLE).await;
    assert_eq!(leader2, ServerId(2));
    assert!(epoch2 > epoch);
    // Z1: the old leader, still isolated, does not lead any epoch. That it does not for a
    // while is the subject here, so the test watches it for 300 ms.
    holds_for(Duration::from_millis(300), || {
        assert_ne!(h[2].current().state, ServerState::Leading);
    })
    .await;
}

#[tokio::test]
async fn z6_silent_leader_is_abandoned_after_sync_limit() {
    // Quorum packets from the leader are lost, election traffic is not: followers hear no
    // PINGs and leave after syncLimit ticks. (They may re-elect the same leader at once, so the
    // LOOKING state itself can be too short to observe: what must end is the established epoch.)
    use zab_core::transport::{LinkVerdict, MessageKind};
    let (net, h, _) = ensemble(3, &[]).await;
    let (_, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    let t = std::time::Instant::now();
    net.set_filter(|from, _to, kind| {
        if from == ServerId(3) && kind == MessageKind::Quorum {
            LinkVerdict::Drop
        } else {
            LinkVerdict::Deliver
        }
    });
    let s = h[0]
        .wait_for(SETTLE, |s| s.epoch != Some(epoch))
        .await
        .expect("follower leaves a silent leader");
    assert_ne!(s.epoch, Some(epoch));
    // syncLimit * tickTime = 500 ms of silence.
    assert!(t.elapsed() >= std::time::Duration::from_millis(400));
}

#[tokio::test]
async fn z1_restarted_follower_rejoins_with_its_persisted_epochs() {
    let net = MemoryNetwork::new();
    let voters = [1, 2, 3];
    let stores: Vec<MemoryElectionStore> = (0..3).map(|_| MemoryElectionStore::default()).collect();
    let mut h = Vec::new();
    for (i, sid) in voters.iter().enumerate() {
        h.push(start(&net, *sid, &voters, &[], &stores[i]).await);
    }
    let (_, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    h[0].kill();
    gone(&h[0], SETTLE).await;
    h[0] = start(&net, 1, &voters, &[], &stores[0]).await;
    let (leader, epoch2) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch2), (ServerId(3), epoch));
    assert_eq!(stores[0].snapshot().accepted_epoch, epoch);
}

#[tokio::test]
async fn z1_peer_on_a_file_store_restarts_with_its_epochs() {
    use zab_core::store::FileElectionStore;
    let dir = tempfile::tempdir().unwrap();
    let net = MemoryNetwork::new();
    let voters = [1, 2, 3];
    let others: Vec<MemoryElectionStore> = (0..2).map(|_| MemoryElectionStore::default()).collect();
    let file = FileElectionStore::create_fresh(dir.path()).unwrap();
    let mut h = vec![
        QuorumPeer::new(config(1, &voters, &[]), net.endpoint(ServerId(1)), file)
            .await
            .unwrap()
            .spawn(),
    ];
    h.push(start(&net, 2, &voters, &[], &others[0]).await);
    h.push(start(&net, 3, &voters, &[], &others[1]).await);
    let (_, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    h[0].kill();
    gone(&h[0], SETTLE).await;
    let reopened = FileElectionStore::open(dir.path()).unwrap();
    let e = reopened.load().await.unwrap();
    assert_eq!((e.accepted_epoch, e.current_epoch), (epoch, epoch));
    h[0] = QuorumPeer::new(config(1, &voters, &[]), net.endpoint(ServerId(1)), reopened)
        .await
        .unwrap()
        .spawn();
    let (leader, epoch2) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch2), (ServerId(3), epoch));
}

#[tokio::test]
async fn z7_election_completes_over_delayed_and_lossy_links() {
    use zab_core::transport::{LinkVerdict, MessageKind};
    let net = MemoryNetwork::new();
    // Every message takes 20 ms; election messages from 1 to 3 are lost.
    net.set_filter(|from, to, kind| {
        if from == ServerId(1) && to == ServerId(3) && kind == MessageKind::Election {
            LinkVerdict::Drop
        } else {
            LinkVerdict::Delay(Duration::from_millis(20))
        }
    });
    let voters = [1, 2, 3];
    let mut h = Vec::new();
    for sid in voters {
        h.push(start(&net, sid, &voters, &[], &MemoryElectionStore::default()).await);
    }
    let (leader, epoch) = settled(&h.iter().collect::<Vec<_>>(), SETTLE).await;
    assert_eq!((leader, epoch), (ServerId(3), 1));
}
