//! Fuzzing every request and response decoder with `bolero` (a bounded randomized run under
//! plain `cargo test`; the same targets run under a coverage-guided engine with
//! `cargo bolero test`).
//!
//! Properties: decoding any bytes at any (api key, version) never panics; whatever decodes
//! re-encodes at the same version and decodes back equal. Inputs are both arbitrary bytes and
//! mutated valid encodings of sample values.

use bytes::{Bytes, BytesMut};
use kafka_wire::sample::Gen;
use kafka_wire::{ApiKey, RequestBody, ResponseBody};

const ITERATIONS: usize = 20_000;

/// Picks (api key, version, is request) from two selector bytes.
fn pick(a: u8, b: u8) -> (ApiKey, i16, bool) {
    let key = ApiKey::ALL[usize::from(a) % ApiKey::ALL.len()];
    let (lo, hi) = key.versions();
    let span = (hi - lo + 1) as u8;
    (key, lo + i16::from(b % span), a & 0x80 == 0)
}

/// Decodes `body`; when that succeeds, re-encodes and checks the value survives.
fn decode_and_recheck(key: ApiKey, version: i16, request: bool, body: Bytes) {
    if request {
        if let Ok(v) = RequestBody::decode(key, version, &mut body.clone()) {
            let again = v.encoded_len(version).and_then(|len| {
                let mut b = BytesMut::with_capacity(len);
                v.encode(&mut b, version).map(|()| b.freeze())
            });
            let again = again.unwrap_or_else(|e| {
                panic!("{key:?} v{version}: decoded value does not encode: {e}")
            });
            let back = RequestBody::decode(key, version, &mut again.clone())
                .unwrap_or_else(|e| panic!("{key:?} v{version}: re-encoding does not decode: {e}"));
            assert_eq!(back, v, "{key:?} v{version}");
        }
    } else if let Ok(v) = ResponseBody::decode(key, version, &mut body.clone()) {
        let mut b = BytesMut::new();
        v.encode(&mut b, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version}: decoded value does not encode: {e}"));
        let back = ResponseBody::decode(key, version, &mut b.freeze())
            .unwrap_or_else(|e| panic!("{key:?} v{version}: re-encoding does not decode: {e}"));
        assert_eq!(back, v, "{key:?} v{version}");
    }
}

#[test]
fn fuzz_every_decoder_on_arbitrary_bytes() {
    bolero::check!()
        .with_iterations(ITERATIONS)
        .with_max_len(512)
        .for_each(|input: &[u8]| {
            if input.len() < 2 {
                return;
            }
            let (key, version, request) = pick(input[0], input[1]);
            decode_and_recheck(key, version, request, Bytes::copy_from_slice(&input[2..]));
        });
}

#[test]
fn fuzz_every_decoder_on_mutated_valid_encodings() {
    bolero::check!()
        .with_type::<(u64, u8, u8, Vec<(u16, u8)>, Option<u16>)>()
        .with_iterations(ITERATIONS)
        .for_each(|(seed, a, b, edits, cut)| {
            let (key, version, request) = pick(*a, *b);
            let mut g = Gen::new(*seed);
            let mut out = BytesMut::new();
            let encoded = if request {
                RequestBody::sample(key, version, &mut g).encode(&mut out, version)
            } else {
                ResponseBody::sample(key, version, &mut g).encode(&mut out, version)
            };
            if let Err(e) = encoded {
                panic!("{key:?} v{version}: sample does not encode: {e}");
            }
            let mut bytes = out;
            if !bytes.is_empty() {
                for (pos, val) in edits.iter().take(8) {
                    let i = usize::from(*pos) % bytes.len();
                    bytes[i] ^= *val;
                }
            }
            if let Some(c) = cut {
                let keep = usize::from(*c) % (bytes.len() + 1);
                bytes.truncate(keep);
            }
            decode_and_recheck(key, version, request, bytes.freeze());
        });
}
