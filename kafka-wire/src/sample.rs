//! Deterministic pseudo-random sample values for property tests, conformance tests, fuzzing
//! seeds and benches (feature `sample`).
//!
//! Every generated message has `fn sample(g: &mut Gen, version: i16) -> Self`, which fills
//! only the fields that exist at `version` (nulls only where `version` allows them), so the
//! value always encodes at that version. The same seed always gives the same value.

use bytes::Bytes;
use bytestring::ByteString;

use crate::primitives::{RawTaggedField, Uuid};

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Gen {
    state: u64,
    max_len: usize,
}

impl Gen {
    /// A generator seeded with `seed`; arrays hold at most 3 elements.
    pub fn new(seed: u64) -> Self {
        Gen {
            state: seed,
            max_len: 3,
        }
    }

    /// A generator whose arrays hold at most `max_len` elements.
    pub fn with_max_len(seed: u64, max_len: usize) -> Self {
        Gen {
            state: seed,
            max_len,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True one time in `n`.
    pub fn chance(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn edgy(&mut self, edges: &[i64]) -> i64 {
        if self.chance(4) {
            edges[self.below(edges.len() as u64) as usize]
        } else {
            self.next_u64() as i64
        }
    }

    /// A random bool.
    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
    /// A random `i8`, often an edge value.
    pub fn i8(&mut self) -> i8 {
        self.edgy(&[0, -1, 1, i8::MIN as i64, i8::MAX as i64]) as i8
    }
    /// A random `i16`, often an edge value.
    pub fn i16(&mut self) -> i16 {
        self.edgy(&[0, -1, 1, i16::MIN as i64, i16::MAX as i64]) as i16
    }
    /// A random `u16`.
    pub fn u16(&mut self) -> u16 {
        self.next_u64() as u16
    }
    /// A random `i32`, often an edge value.
    pub fn i32(&mut self) -> i32 {
        self.edgy(&[0, -1, 1, i32::MIN as i64, i32::MAX as i64]) as i32
    }
    /// A random `u32`.
    pub fn u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    /// A random `i64`, often an edge value.
    pub fn i64(&mut self) -> i64 {
        self.edgy(&[0, -1, 1, i64::MIN, i64::MAX])
    }
    /// A random finite `f64`.
    pub fn f64(&mut self) -> f64 {
        f64::from(self.i32()) / 8.0
    }
    /// A random uuid.
    pub fn uuid(&mut self) -> Uuid {
        Uuid::from_u128((u128::from(self.next_u64()) << 64) | u128::from(self.next_u64()))
    }
    /// An array length in `0..=max_len`.
    pub fn array_len(&mut self) -> usize {
        self.below(self.max_len as u64 + 1) as usize
    }
    /// A short string, sometimes empty, sometimes not ASCII.
    pub fn string(&mut self) -> ByteString {
        const WORDS: [&str; 8] = ["", "a", "topic", "t-1", "ключ", "日本", "x.y_z", "broker-9"];
        let a = WORDS[self.below(8) as usize];
        if self.chance(3) {
            let b = WORDS[self.below(8) as usize];
            ByteString::from(format!("{a}{b}"))
        } else {
            ByteString::from_static(a)
        }
    }
    /// Up to 40 random bytes.
    pub fn bytes(&mut self) -> Bytes {
        let n = self.below(41) as usize;
        (0..n)
            .map(|_| self.next_u64() as u8)
            .collect::<Vec<u8>>()
            .into()
    }
    /// Zero to two unknown tagged fields with tags above every known tag, in ascending order.
    pub fn unknown_tags(&mut self) -> Vec<RawTaggedField> {
        let mut out = Vec::new();
        let mut tag = 100;
        for _ in 0..self.below(3) {
            tag += 1 + self.below(1000) as u32;
            out.push(RawTaggedField {
                tag,
                data: self.bytes(),
            });
        }
        out
    }
}
