//! Behaviours of particular messages: fields missing from a version, ignorable fields, nulls,
//! unknown tagged fields, zero-copy record data on decode and on chunked encode.

use bytes::{Buf, Bytes, BytesMut};
use kafka_wire::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::{FetchRequest, FetchResponse, LeaderAndIsrRequest, MetadataRequest};
use kafka_wire::{ChunkedWriter, Decode, Encode, EncodeError, RawTaggedField};

#[test]
fn non_default_field_missing_from_version_is_refused() {
    let req = LeaderAndIsrRequest {
        is_k_raft_controller: true,
        ..Default::default()
    };
    assert_eq!(
        req.encoded_len(6),
        Err(EncodeError::FieldNotInVersion {
            field: "is_k_raft_controller",
            version: 6
        })
    );
    assert!(req.encoded_len(7).is_ok());
}

#[test]
fn ignorable_field_is_dropped_at_versions_without_it() {
    let req = LeaderAndIsrRequest {
        controller_id: 3,
        broker_epoch: 99,
        ..Default::default()
    };
    let bytes = req.encode_to_bytes(1).unwrap();
    let back = LeaderAndIsrRequest::decode(&mut bytes.clone(), 1).unwrap();
    assert_eq!(back.broker_epoch, -1, "default of the ignorable field");
    assert_eq!(back.controller_id, 3);
}

#[test]
fn leader_and_isr_v1_carries_partitions_ungrouped_and_v2_grouped() {
    let part = LeaderAndIsrPartitionState {
        topic_name: "t".into(),
        partition_index: 2,
        leader: 1,
        isr: vec![1, 2],
        replicas: vec![1, 2, 3],
        ..Default::default()
    };
    let v1 = LeaderAndIsrRequest {
        ungrouped_partition_states: vec![part.clone()],
        ..Default::default()
    };
    assert_eq!(
        LeaderAndIsrRequest::decode(&mut v1.encode_to_bytes(1).unwrap(), 1).unwrap(),
        v1
    );
    assert!(
        v1.encode_to_bytes(2).is_err(),
        "ungrouped states do not exist in v2"
    );
    let v2 = LeaderAndIsrRequest {
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "t".into(),
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: "".into(),
                ..part
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        LeaderAndIsrRequest::decode(&mut v2.encode_to_bytes(2).unwrap(), 2).unwrap(),
        v2
    );
}

#[test]
fn null_where_the_version_forbids_it_is_refused() {
    let all_topics = MetadataRequest {
        topics: None,
        ..Default::default()
    };
    assert_eq!(
        all_topics.encoded_len(0),
        Err(EncodeError::NullNotAllowed {
            field: "topics",
            version: 0
        })
    );
    assert!(all_topics.encoded_len(1).is_ok());
}

#[test]
fn unknown_tagged_fields_are_kept_and_written_back() {
    let req = FetchRequest {
        max_wait_ms: 500,
        unknown_tagged_fields: vec![
            RawTaggedField {
                tag: 7,
                data: Bytes::from_static(b"seven"),
            },
            RawTaggedField {
                tag: 40,
                data: Bytes::from_static(b""),
            },
        ],
        ..Default::default()
    };
    let bytes = req.encode_to_bytes(12).unwrap();
    let back = FetchRequest::decode(&mut bytes.clone(), 12).unwrap();
    assert_eq!(back, req);
    assert_eq!(back.encode_to_bytes(12).unwrap(), bytes);
    assert!(
        req.encode_to_bytes(11).is_err(),
        "tagged fields need a flexible version"
    );
}

fn fetch_response(records: Bytes) -> FetchResponse {
    FetchResponse {
        responses: vec![FetchableTopicResponse {
            topic: "t".into(),
            partitions: vec![PartitionData {
                partition_index: 0,
                high_watermark: 10,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn fetch_response_records_decode_as_slices_of_the_input() {
    let resp = fetch_response(Bytes::from(vec![7u8; 4096]));
    let bytes = resp.encode_to_bytes(11).unwrap();
    let back = FetchResponse::decode(&mut bytes.clone(), 11).unwrap();
    let records = back.responses[0].partitions[0].records.clone().unwrap();
    let start = records.as_ptr() as usize - bytes.as_ptr() as usize;
    assert!(start < bytes.len(), "records point into the input buffer");
    assert_eq!(&bytes[start..start + records.len()], &records[..]);
}

#[test]
fn chunked_writer_keeps_record_data_as_its_own_chunk() {
    let records = Bytes::from(vec![9u8; 16 * 1024]);
    let resp = fetch_response(records.clone());
    for version in [12, 16] {
        let mut w = ChunkedWriter::new();
        resp.encode(&mut w, version).unwrap();
        assert_eq!(w.len(), resp.encoded_len(version).unwrap());
        let chunks = w.into_chunks();
        assert!(
            chunks
                .iter()
                .any(|c| c.as_ptr() == records.as_ptr() && c.len() == records.len()),
            "the record bytes were not copied"
        );
        let mut joined = BytesMut::new();
        for c in &chunks {
            joined.extend_from_slice(c);
        }
        assert_eq!(joined.freeze(), resp.encode_to_bytes(version).unwrap());
    }
}

#[test]
fn decode_reads_exactly_one_body() {
    let req = FetchRequest {
        max_wait_ms: 5,
        ..Default::default()
    };
    let mut bytes = BytesMut::from(&req.encode_to_bytes(4).unwrap()[..]);
    bytes.extend_from_slice(b"next");
    let mut input = bytes.freeze();
    FetchRequest::decode(&mut input, 4).unwrap();
    assert_eq!(input.remaining(), 4);
}
