//! The batch's requests converted to `kafka-wire` messages: every version of LeaderAndIsr,
//! UpdateMetadata and StopReplica encodes and decodes back to the same message, and the
//! fields each version carries are filled from the batch.

mod common;

use bytes::BytesMut;
use common::*;
use kafka_controller::context::{BrokerInfo, LeaderRecoveryState};
use kafka_controller::request_batch::{
    ControlRequest, ControlVersions, ControllerBrokerRequestBatch, WireConversionError,
};
use kafka_wire::{ApiKey, RequestBody, Uuid};

fn requests() -> Vec<ControlRequest> {
    let mut ctx = context(&[]);
    ctx.controller_id = 1;
    for b in [1, 2, 3] {
        let mut info =
            BrokerInfo::new(b, 100 + i64::from(b)).with_plaintext(&format!("b{b}"), 9092);
        info.rack = Some(format!("r{b}"));
        ctx.add_live_broker(info);
    }
    let mut store = FakeStore::default();
    add_partition(
        &mut ctx,
        &mut store,
        "a",
        0,
        &[1, 2, 3],
        Some((1, &[1, 2, 3])),
    );
    add_partition(&mut ctx, &mut store, "a", 1, &[2, 3, 1], Some((2, &[2, 3])));
    add_partition(&mut ctx, &mut store, "b", 0, &[3, 1], Some((3, &[3, 1])));
    ctx.set_topic_id("a", Uuid::from_u128(0xaaaa));
    let mut batch = ControllerBrokerRequestBatch::new();
    for t in [tp("a", 0), tp("a", 1), tp("b", 0)] {
        batch.add_leader_and_isr(&ctx, &[1], &t, true);
    }
    batch.add_stop_replica(&ctx, &[1], &tp("a", 0), false);
    batch.add_stop_replica(&ctx, &[1], &tp("b", 0), true);
    batch
        .send_requests(&ctx)
        .into_iter()
        .filter(|r| r.broker == 1)
        .map(|r| r.request)
        .collect()
}

fn round_trip(version: i16, body: &RequestBody) {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", body.api_key()));
    let back = RequestBody::decode(body.api_key(), version, &mut buf.freeze()).unwrap();
    assert_eq!(&back, body, "{:?} v{version}", body.api_key());
}

#[test]
fn every_version_of_each_control_request_round_trips() {
    let reqs = requests();
    assert_eq!(reqs.len(), 3);
    for v in 0..=7 {
        let versions = ControlVersions {
            leader_and_isr: v,
            update_metadata: v.min(8),
            stop_replica: v.min(4),
        };
        for r in &reqs {
            for (version, body) in r.to_wire(versions, "PLAINTEXT").unwrap() {
                round_trip(version, &body);
            }
        }
    }
    let versions = ControlVersions {
        leader_and_isr: 7,
        update_metadata: 8,
        stop_replica: 4,
    };
    for r in &reqs {
        for (version, body) in r.to_wire(versions, "PLAINTEXT").unwrap() {
            round_trip(version, &body);
        }
    }
}

#[test]
fn kafka_2_8_leader_and_isr_carries_partitions_grouped_by_topic_with_ids() {
    let reqs = requests();
    let wire = reqs[0]
        .to_wire(ControlVersions::KAFKA_2_8, "PLAINTEXT")
        .unwrap();
    let [(5, RequestBody::LeaderAndIsr(lai))] = wire.as_slice() else {
        panic!("{wire:?}")
    };
    assert_eq!(
        (lai.controller_id, lai.controller_epoch, lai.broker_epoch),
        (1, 5, 101)
    );
    let topics: Vec<(&str, Uuid, usize)> = lai
        .topic_states
        .iter()
        .map(|t| (&*t.topic_name, t.topic_id, t.partition_states.len()))
        .collect();
    assert_eq!(
        topics,
        vec![("a", Uuid::from_u128(0xaaaa), 2), ("b", Uuid::ZERO, 1)]
    );
    let p = &lai.topic_states[0].partition_states[1];
    assert_eq!(
        (p.partition_index, p.leader, p.leader_epoch, p.isr.clone()),
        (1, 2, 3, vec![2, 3].into())
    );
    assert_eq!(
        (p.partition_epoch, p.is_new, p.replicas.clone()),
        (7, true, vec![2, 3, 1].into())
    );
    let leaders: Vec<(i32, &str, i32)> = lai
        .live_leaders
        .iter()
        .map(|l| (l.broker_id, &*l.host_name, l.port))
        .collect();
    assert_eq!(
        leaders,
        vec![(1, "b1", 9092), (2, "b2", 9092), (3, "b3", 9092)]
    );
}

#[test]
fn update_metadata_carries_brokers_with_endpoints_and_racks() {
    let reqs = requests();
    let wire = reqs[1]
        .to_wire(ControlVersions::KAFKA_2_8, "PLAINTEXT")
        .unwrap();
    let [(7, RequestBody::UpdateMetadata(um))] = wire.as_slice() else {
        panic!("{wire:?}")
    };
    assert_eq!(um.broker_epoch, 101);
    assert_eq!(um.live_brokers.len(), 3);
    let b2 = &um.live_brokers[1];
    assert_eq!((b2.id, b2.rack.as_deref()), (2, Some("r2")));
    assert_eq!(
        (
            &*b2.endpoints[0].host,
            b2.endpoints[0].port,
            &*b2.endpoints[0].listener
        ),
        ("b2", 9092, "PLAINTEXT")
    );
    assert_eq!(um.topic_states[0].topic_id, Uuid::from_u128(0xaaaa));
    assert_eq!(
        um.topic_states
            .iter()
            .map(|t| t.partition_states.len())
            .sum::<usize>(),
        3
    );
    // v0 has a single host and port per broker.
    let v0 = ControlVersions {
        update_metadata: 0,
        ..ControlVersions::KAFKA_2_8
    };
    let wire0 = reqs[1].to_wire(v0, "PLAINTEXT").unwrap();
    let [(0, RequestBody::UpdateMetadata(um0))] = wire0.as_slice() else {
        panic!("{wire0:?}")
    };
    assert_eq!(
        (&*um0.live_brokers[0].v0_host, um0.live_brokers[0].v0_port),
        ("b1", 9092)
    );
}

#[test]
fn stop_replica_v3_carries_per_partition_delete_and_epoch_older_versions_split() {
    let reqs = requests();
    let wire = reqs[2]
        .to_wire(ControlVersions::KAFKA_2_8, "PLAINTEXT")
        .unwrap();
    let [(3, RequestBody::StopReplica(sr))] = wire.as_slice() else {
        panic!("{wire:?}")
    };
    let parts: Vec<(&str, i32, i32, bool)> = sr
        .topic_states
        .iter()
        .flat_map(|t| {
            t.partition_states.iter().map(move |p| {
                (
                    &*t.topic_name,
                    p.partition_index,
                    p.leader_epoch,
                    p.delete_partition,
                )
            })
        })
        .collect();
    assert_eq!(parts, vec![("a", 0, 3, false), ("b", 0, 3, true)]);
    let v2 = ControlVersions {
        stop_replica: 2,
        ..ControlVersions::KAFKA_2_8
    };
    let wire = reqs[2].to_wire(v2, "PLAINTEXT").unwrap();
    let flags: Vec<bool> = wire
        .iter()
        .map(|(_, b)| match b {
            RequestBody::StopReplica(r) => r.delete_partitions,
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        flags,
        vec![false, true],
        "one request per delete flag before v3"
    );
    assert!(wire.iter().all(|(_, b)| b.api_key() == ApiKey::StopReplica));
}

#[test]
fn leader_recovery_state_only_from_v6_and_bad_versions_are_refused() {
    let reqs = requests();
    let ControlRequest::LeaderAndIsr {
        header,
        mut partitions,
        topic_ids,
        live_leaders,
    } = reqs[0].clone()
    else {
        panic!()
    };
    partitions[0].leader_recovery_state = LeaderRecoveryState::Recovering;
    let r = ControlRequest::LeaderAndIsr {
        header,
        partitions,
        topic_ids,
        live_leaders,
    };
    for (v, want) in [(5, 0), (6, 1)] {
        let versions = ControlVersions {
            leader_and_isr: v,
            ..ControlVersions::KAFKA_2_8
        };
        let wire = r.to_wire(versions, "PLAINTEXT").unwrap();
        let RequestBody::LeaderAndIsr(lai) = &wire[0].1 else {
            panic!()
        };
        assert_eq!(
            lai.topic_states[0].partition_states[0].leader_recovery_state,
            want
        );
        round_trip(v, &wire[0].1);
    }
    let bad = ControlVersions {
        leader_and_isr: 8,
        ..ControlVersions::KAFKA_2_8
    };
    assert_eq!(
        r.to_wire(bad, "PLAINTEXT"),
        Err(WireConversionError::UnsupportedVersion {
            message: "LeaderAndIsr",
            version: 8
        })
    );
}
