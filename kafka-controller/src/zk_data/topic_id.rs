//! Topic ids (KIP-516) as the v3 `/brokers/topics/<t>` znode holds them: Kafka's
//! `Uuid.toString`, the 16 big-endian bytes in URL-safe base64 without padding (22
//! characters).

use kafka_wire::Uuid;

use super::error::ZkDataError;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The text form of a topic id (22 characters of URL-safe base64).
pub fn encode_topic_id(id: Uuid) -> String {
    let digit = |v: u32| char::from(ALPHABET[(v & 0x3f) as usize]);
    let mut out = String::with_capacity(22);
    let mut chunks = id.0.chunks_exact(3);
    for c in &mut chunks {
        let v = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend([digit(v >> 18), digit(v >> 12), digit(v >> 6), digit(v)]);
    }
    // 16 = 5 × 3 + 1: the last byte gives two digits (its 8 bits and 4 zero bits).
    if let [last] = chunks.remainder() {
        let v = u32::from(*last) << 4;
        out.extend([digit(v >> 6), digit(v)]);
    }
    out
}

fn index_of(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

/// Decodes a topic id's text form. Anything but 22 URL-safe base64 digits whose last digit
/// carries no stray bits is [`ZkDataError::TopicId`].
pub fn decode_topic_id(text: &str) -> Result<Uuid, ZkDataError> {
    let bad = || ZkDataError::TopicId {
        content: text.chars().take(64).collect(),
    };
    let digits: Vec<u32> = text
        .bytes()
        .map(|c| index_of(c).map(u32::from))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if digits.len() != 22 {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (i, quad) in digits.chunks(4).enumerate() {
        match *quad {
            [a, b, c, d] => {
                let v = (a << 18) | (b << 12) | (c << 6) | d;
                for (k, byte) in v.to_be_bytes()[1..].iter().enumerate() {
                    if let Some(slot) = out.get_mut(i * 3 + k) {
                        *slot = *byte;
                    }
                }
            }
            [a, b] => {
                // The last byte, then 4 padding bits that must be zero.
                if b & 0xf != 0 {
                    return Err(bad());
                }
                out[15] = u8::try_from(((a << 6) | b) >> 4).map_err(|_| bad())?;
            }
            _ => return Err(bad()),
        }
    }
    Ok(Uuid(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kip_516_topic_ids_round_trip_in_kafkas_text_form() {
        // Kafka: Uuid(0, 1).toString() == "AAAAAAAAAAAAAAAAAAAAAQ".
        assert_eq!(
            encode_topic_id(Uuid::from_u128(1)),
            "AAAAAAAAAAAAAAAAAAAAAQ"
        );
        assert_eq!(
            decode_topic_id("AAAAAAAAAAAAAAAAAAAAAQ"),
            Ok(Uuid::from_u128(1))
        );
        for v in [
            0,
            1,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
            1 << 127,
        ] {
            let id = Uuid::from_u128(v);
            let text = encode_topic_id(id);
            assert_eq!(text.len(), 22);
            assert_eq!(decode_topic_id(&text), Ok(id), "{text}");
        }
        assert_eq!(
            encode_topic_id(Uuid::from_u128(u128::MAX)),
            "_____________________w"
        );
    }

    #[test]
    fn malformed_topic_ids_are_a_typed_error() {
        for bad in [
            "",
            "AAAA",
            "AAAAAAAAAAAAAAAAAAAAA=",
            "AAAAAAAAAAAAAAAAAAAAAB",
            "é",
        ] {
            assert!(matches!(
                decode_topic_id(bad),
                Err(ZkDataError::TopicId { .. })
            ));
        }
    }
}
