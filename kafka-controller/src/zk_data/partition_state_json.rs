//! A direct reader and writer for the compact partition-state JSON that Kafka and this crate
//! write (`{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3]}`, keys
//! in any order, `leader_recovery_state` optional), used before the general `serde_json` path:
//! a controller reads and writes one such znode per partition per event.
//!
//! Both are exact or decline: the reader accepts only input without whitespace, with the five
//! known keys (and optionally `leader_recovery_state`) once each, and plain integers that fit
//! an `i32`; anything else (unknown fields, escapes, floats, `null`, duplicates, errors) returns
//! `None` and the caller falls back to `serde_json`, which gives the same result for everything
//! the reader accepts. The writer produces the same bytes as `serde_json::to_vec` and declines
//! states with unknown fields.

use serde_json::Map;

use super::topic::PartitionStateZNode;

/// A byte cursor over the input.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn eat(&mut self, b: u8) -> Option<()> {
        if self.bytes.get(self.at) == Some(&b) {
            self.at += 1;
            Some(())
        } else {
            None
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// A key: `"` then ASCII letters or `_`, then `"` (no escapes).
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        while let Some(b) = self.peek() {
            if b.is_ascii_lowercase() || b == b'_' {
                self.at += 1;
            } else {
                break;
            }
        }
        let bytes: &'a [u8] = self.bytes;
        let key = bytes.get(start..self.at)?;
        self.eat(b'"')?;
        Some(key)
    }

    /// A JSON integer fitting an `i32`: optional `-`, then `0` or a digit 1–9 followed by
    /// digits; not followed by a fraction or exponent. `-0` is declined.
    fn int(&mut self) -> Option<i32> {
        let negative = self.eat(b'-').is_some();
        let start = self.at;
        let mut value: i64 = 0;
        while let Some(b) = self.peek() {
            if !b.is_ascii_digit() {
                break;
            }
            value = value * 10 + i64::from(b - b'0');
            if value > i64::from(i32::MAX) + 1 {
                return None;
            }
            self.at += 1;
        }
        let digits = self.at - start;
        if digits == 0 || (digits > 1 && self.bytes.get(start) == Some(&b'0')) {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) || (negative && value == 0) {
            return None;
        }
        i32::try_from(if negative { -value } else { value }).ok()
    }
}

/// Decodes a compact partition state, or `None` to leave it to `serde_json`.
pub(crate) fn decode(bytes: &[u8]) -> Option<PartitionStateZNode> {
    let mut c = Cursor { bytes, at: 0 };
    c.eat(b'{')?;
    let (mut version, mut leader, mut leader_epoch, mut controller_epoch) =
        (None, None, None, None);
    let mut isr: Option<Vec<i32>> = None;
    let mut recovery: Option<i32> = None;
    loop {
        let key = c.key()?;
        c.eat(b':')?;
        let slot = match key {
            b"version" => &mut version,
            b"leader" => &mut leader,
            b"leader_epoch" => &mut leader_epoch,
            b"controller_epoch" => &mut controller_epoch,
            b"leader_recovery_state" => &mut recovery,
            b"isr" => {
                if isr.is_some() {
                    return None;
                }
                c.eat(b'[')?;
                let mut members = Vec::with_capacity(4);
                if c.eat(b']').is_none() {
                    loop {
                        members.push(c.int()?);
                        if c.eat(b',').is_none() {
                            c.eat(b']')?;
                            break;
                        }
                    }
                }
                isr = Some(members);
                if c.eat(b',').is_some() {
                    continue;
                }
                break;
            }
            _ => return None,
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(c.int()?);
        if c.eat(b',').is_none() {
            break;
        }
    }
    c.eat(b'}')?;
    if c.at != bytes.len() {
        return None;
    }
    Some(PartitionStateZNode {
        version: version?,
        leader: leader?,
        leader_epoch: leader_epoch?,
        controller_epoch: controller_epoch?,
        isr: isr?,
        leader_recovery_state: recovery,
        extra: Map::new(),
    })
}

/// Encodes a partition state without unknown fields exactly as `serde_json::to_vec` does, or
/// `None` (unknown fields) to leave it to `serde_json`.
pub(crate) fn encode(z: &PartitionStateZNode) -> Option<Vec<u8>> {
    use std::fmt::Write as _;
    if !z.extra.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(96);
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        r#"{{"version":{},"leader":{},"leader_epoch":{},"controller_epoch":{},"isr":["#,
        z.version, z.leader, z.leader_epoch, z.controller_epoch
    );
    for (i, r) in z.isr.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{r}");
    }
    out.push(']');
    if let Some(s) = z.leader_recovery_state {
        let _ = write!(out, r#","leader_recovery_state":{s}"#);
    }
    out.push('}');
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_decode(bytes: &[u8]) -> Option<PartitionStateZNode> {
        serde_json::from_slice(bytes).ok()
    }

    /// Whatever the direct reader accepts, `serde_json` decodes to the same state.
    #[test]
    fn direct_partition_state_reader_agrees_with_serde_json() {
        let accepted: &[&[u8]] = &[
            br#"{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3]}"#,
            br#"{"version":1,"leader":-1,"leader_epoch":0,"controller_epoch":1,"isr":[2]}"#,
            br#"{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":7,"isr":[2],"leader_recovery_state":1}"#,
            br#"{"isr":[],"version":1,"leader":2147483647,"leader_epoch":-2147483648,"controller_epoch":0}"#,
            br#"{"version":1,"leader":10,"leader_epoch":0,"controller_epoch":1,"isr":[10,0,30]}"#,
        ];
        for json in accepted {
            let direct = decode(json);
            assert!(direct.is_some(), "{}", String::from_utf8_lossy(json));
            assert_eq!(
                direct,
                serde_decode(json),
                "{}",
                String::from_utf8_lossy(json)
            );
        }
        let declined: &[&[u8]] = &[
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1],"zz":true}"#,
            br#"{"version":1, "leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1]} "#,
            br#"{"version":1,"leader":1,"leader":2,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1],"isr":[2]}"#,
            br#"{"version":1,"leader":01,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":-0,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":1.0,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":1e1,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":2147483648,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1,]}"#,
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7}"#,
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1],"leader_recovery_state":null}"#,
            br#"{"version":1,"le\u0061der":1,"leader_epoch":3,"controller_epoch":7,"isr":[1]}"#,
            br#"{}"#,
            br#""#,
            br#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1]"#,
        ];
        for json in declined {
            assert_eq!(decode(json), None, "{}", String::from_utf8_lossy(json));
        }
    }

    /// The direct writer's bytes are `serde_json`'s.
    #[test]
    fn direct_partition_state_writer_matches_serde_json() {
        let mut recovering = PartitionStateZNode::new(2, 4, 7, vec![2]);
        recovering.leader_recovery_state = Some(1);
        for z in [
            PartitionStateZNode::new(1, 3, 7, vec![1, 2, 3]),
            PartitionStateZNode::new(-1, i32::MAX, i32::MIN, vec![]),
            recovering,
        ] {
            assert_eq!(encode(&z), serde_json::to_vec(&z).ok());
        }
        let mut extra = PartitionStateZNode::new(1, 3, 7, vec![1]);
        extra
            .extra
            .insert("zz".into(), serde_json::Value::Bool(true));
        assert_eq!(encode(&extra), None);
    }
}
