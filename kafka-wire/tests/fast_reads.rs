//! The generated decoders read a run of fields over the input as one byte slice (all readers
//! inlined, the position in a register) and, where that read gives up (a replica list of more
//! than four, aborted transactions, a long varint, too few bytes, a bad value), read the run
//! again field by field. Over an input in several chunks only the field-by-field reads run.
//! These tests decode the same bytes both ways and require the same answer: the same value,
//! or the same error.

use bytes::{Buf, Bytes, BytesMut};
use kafka_wire::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::{FetchResponse, LeaderAndIsrRequest};
use kafka_wire::sample::Gen;
use kafka_wire::{ApiKey, Decode, DecodeError, Encode, RequestBody, ResponseBody, Uuid};
use proptest::prelude::*;

/// An input handed out in pieces of at most `piece` bytes, so that no run is read over one
/// slice.
struct Pieces {
    data: Bytes,
    piece: usize,
}

impl Buf for Pieces {
    fn remaining(&self) -> usize {
        self.data.len()
    }
    fn chunk(&self) -> &[u8] {
        &self.data[..self.data.len().min(self.piece)]
    }
    fn advance(&mut self, n: usize) {
        self.data.advance(n);
    }
}

/// Decodes `bytes` whole (slice reads) and in pieces of 1, 3 and 16 bytes (field by field);
/// the answers and the bytes left must agree. Returns the first answer and the bytes it left.
fn both_ways<T: PartialEq + std::fmt::Debug>(
    bytes: &Bytes,
    whole: impl Fn(&mut Bytes) -> Result<T, DecodeError>,
    pieces: impl Fn(&mut Pieces) -> Result<T, DecodeError>,
) -> Result<(Result<T, DecodeError>, usize), TestCaseError> {
    let mut a = bytes.clone();
    let fast = whole(&mut a);
    for piece in [1, 3, 16] {
        let mut b = Pieces {
            data: bytes.clone(),
            piece,
        };
        let slow = pieces(&mut b);
        prop_assert_eq!(&fast, &slow, "pieces of {}", piece);
        if fast.is_ok() {
            prop_assert_eq!(a.len(), b.data.len(), "bytes left, pieces of {}", piece);
        }
    }
    Ok((fast, a.len()))
}

/// Every message at every version, as encoded and with one byte changed or cut short.
fn check(key: ApiKey, version: i16, seed: u64, request: bool) -> Result<(), TestCaseError> {
    let mut g = Gen::with_max_len(seed, 6);
    let mut buf = BytesMut::new();
    if request {
        RequestBody::sample(key, version, &mut g)
            .encode(&mut buf, version)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    } else {
        ResponseBody::sample(key, version, &mut g)
            .encode(&mut buf, version)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    }
    let encoded = buf.freeze();
    let mut inputs = vec![encoded.clone()];
    if !encoded.is_empty() {
        let at = (g.next_u64() as usize) % encoded.len();
        let mut changed = encoded.to_vec();
        changed[at] = g.next_u64() as u8;
        inputs.push(changed.into());
        inputs.push(encoded.slice(..at));
    }
    for input in &inputs {
        if request {
            let _ = both_ways(
                input,
                |b| RequestBody::decode(key, version, b),
                |b| RequestBody::decode(key, version, b),
            )?;
        } else {
            let _ = both_ways(
                input,
                |b| ResponseBody::decode(key, version, b),
                |b| ResponseBody::decode(key, version, b),
            )?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn slice_and_field_by_field_reads_agree_on_every_request(seed in any::<u64>()) {
        for key in ApiKey::ALL {
            let (lo, hi) = key.versions();
            for version in lo..=hi {
                check(key, version, seed, true)?;
            }
        }
    }

    #[test]
    fn slice_and_field_by_field_reads_agree_on_every_response(seed in any::<u64>()) {
        for key in ApiKey::ALL {
            let (lo, hi) = key.versions();
            for version in lo..=hi {
                check(key, version, seed, false)?;
            }
        }
    }
}

fn partition(p: i32, replicas: Vec<i32>) -> LeaderAndIsrPartitionState {
    LeaderAndIsrPartitionState {
        partition_index: p,
        controller_epoch: 3,
        leader: replicas[0],
        leader_epoch: 9,
        isr: replicas.clone().into(),
        partition_epoch: 4,
        replicas: replicas.clone().into(),
        adding_replicas: replicas[1..].to_vec().into(),
        is_new: p % 2 == 0,
        leader_recovery_state: 1,
        ..Default::default()
    }
}

/// Replica lists of zero to six brokers (the slice read takes up to four), at every version.
#[test]
fn leader_and_isr_partitions_with_long_replica_lists_decode_the_same_either_way() {
    let value = LeaderAndIsrRequest {
        controller_id: 1,
        controller_epoch: 3,
        broker_epoch: 77,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "t".into(),
            topic_id: Uuid::from_u128(5),
            partition_states: (0..7)
                .map(|n| partition(n, (1..=n.max(1)).collect()))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    for version in 2..=7i16 {
        let mut v = value.clone();
        if version < 5 {
            v.topic_states[0].topic_id = Uuid::ZERO;
            v.type_ = 0;
        }
        for p in &mut v.topic_states[0].partition_states {
            if version < 6 {
                p.leader_recovery_state = 0;
            }
            if version < 3 {
                p.adding_replicas = Default::default();
            }
        }
        let bytes = v.encode_to_bytes(version).expect("encode");
        let (back, left) = both_ways(
            &bytes,
            |b| LeaderAndIsrRequest::decode(b, version),
            |b| LeaderAndIsrRequest::decode(b, version),
        )
        .expect("same answer");
        assert_eq!(back.expect("decodes"), v, "v{version}");
        assert_eq!(left, 0);
    }
}

/// Aborted transactions null, empty and not empty (the slice read takes the first two), and
/// record sets null, empty and of 200 bytes (a two-byte length), at every version.
#[test]
fn fetch_partitions_with_aborted_transactions_decode_the_same_either_way() {
    let partitions: Vec<PartitionData> = (0..9)
        .map(|p| PartitionData {
            partition_index: p,
            high_watermark: 100 + i64::from(p),
            last_stable_offset: 90,
            log_start_offset: 3,
            aborted_transactions: match p % 3 {
                0 => None,
                1 => Some(Vec::new()),
                _ => Some(vec![AbortedTransaction {
                    producer_id: 7,
                    first_offset: 11,
                    ..Default::default()
                }]),
            },
            preferred_read_replica: -1,
            records: match p / 3 {
                0 => None,
                1 => Some(Bytes::new()),
                _ => Some(Bytes::from(vec![p as u8; 200])),
            },
            ..Default::default()
        })
        .collect();
    for version in 4..=17i16 {
        let value = FetchResponse {
            responses: vec![FetchableTopicResponse {
                topic: if version < 13 { "t".into() } else { "".into() },
                topic_id: if version >= 13 {
                    Uuid::from_u128(9)
                } else {
                    Uuid::ZERO
                },
                partitions: partitions
                    .iter()
                    .cloned()
                    .map(|mut p| {
                        if version < 5 {
                            p.log_start_offset = -1;
                        }
                        p
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let bytes = value.encode_to_bytes(version).expect("encode");
        let (back, left) = both_ways(
            &bytes,
            |b| FetchResponse::decode(b, version),
            |b| FetchResponse::decode(b, version),
        )
        .expect("same answer");
        assert_eq!(back.expect("decodes"), value, "v{version}");
        assert_eq!(left, 0);
    }
}
