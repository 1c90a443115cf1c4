//! Variable-length integers: Kafka's unsigned varint (LEB128, at most 5 bytes for 32 bits,
//! 10 for 64) and the zigzag-encoded signed varint / varlong used by record batches.
//!
//! Decoders reject encodings longer than the type allows ([`DecodeError::BadVarint`]) and
//! input that ends mid-value ([`DecodeError::Truncated`]).

use bytes::{Buf, BufMut};

use crate::DecodeError;

/// Reads an unsigned varint of at most 32 bits.
pub fn get_unsigned_varint<B: Buf>(buf: &mut B) -> Result<u32, DecodeError> {
    let v = get_unsigned_varlong_bounded(buf, 5)?;
    u32::try_from(v).map_err(|_| DecodeError::BadVarint)
}

/// Reads an unsigned varint of at most 64 bits.
pub fn get_unsigned_varlong<B: Buf>(buf: &mut B) -> Result<u64, DecodeError> {
    get_unsigned_varlong_bounded(buf, 10)
}

fn get_unsigned_varlong_bounded<B: Buf>(buf: &mut B, max_bytes: usize) -> Result<u64, DecodeError> {
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        if !buf.has_remaining() {
            return Err(DecodeError::Truncated {
                needed: 1,
                remaining: 0,
            });
        }
        let byte = buf.get_u8();
        let bits = u64::from(byte & 0x7f);
        let shift = 7 * i as u32;
        if shift == 63 && bits > 1 {
            return Err(DecodeError::BadVarint);
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::BadVarint)
}

/// Reads a zigzag-encoded signed 32-bit varint.
pub fn get_varint<B: Buf>(buf: &mut B) -> Result<i32, DecodeError> {
    let raw = get_unsigned_varint(buf)?;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zigzag-encoded signed 64-bit varlong.
pub fn get_varlong<B: Buf>(buf: &mut B) -> Result<i64, DecodeError> {
    let raw = get_unsigned_varlong(buf)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Writes an unsigned varint.
pub fn put_unsigned_varint<B: BufMut>(buf: &mut B, value: u32) {
    put_unsigned_varlong(buf, u64::from(value));
}

/// Writes an unsigned varlong.
pub fn put_unsigned_varlong<B: BufMut>(buf: &mut B, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Writes a zigzag-encoded signed varint.
pub fn put_varint<B: BufMut>(buf: &mut B, value: i32) {
    put_unsigned_varint(buf, zigzag32(value));
}

/// Writes a zigzag-encoded signed varlong.
pub fn put_varlong<B: BufMut>(buf: &mut B, value: i64) {
    put_unsigned_varlong(buf, zigzag64(value));
}

/// Encoded size of an unsigned varint.
pub fn unsigned_varint_len(value: u32) -> usize {
    unsigned_varlong_len(u64::from(value))
}

/// Encoded size of an unsigned varlong.
pub fn unsigned_varlong_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Encoded size of a zigzag varint.
pub fn varint_len(value: i32) -> usize {
    unsigned_varint_len(zigzag32(value))
}

/// Encoded size of a zigzag varlong.
pub fn varlong_len(value: i64) -> usize {
    unsigned_varlong_len(zigzag64(value))
}

fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn zigzag_known_values() {
        for (v, enc) in [
            (0i32, 0u32),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (i32::MAX, u32::MAX - 1),
            (i32::MIN, u32::MAX),
        ] {
            assert_eq!(zigzag32(v), enc);
            let mut b = BytesMut::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            assert_eq!(get_varint(&mut b.freeze()).unwrap(), v);
        }
    }

    #[test]
    fn varlong_round_trip_extremes() {
        for v in [0i64, -1, 1, 300, -300, i64::MAX, i64::MIN] {
            let mut b = BytesMut::new();
            put_varlong(&mut b, v);
            assert_eq!(b.len(), varlong_len(v));
            assert_eq!(get_varlong(&mut b.freeze()).unwrap(), v);
        }
    }

    #[test]
    fn overlong_and_truncated_varints_are_errors() {
        let mut six = &[0x80u8, 0x80, 0x80, 0x80, 0x80, 0x01][..];
        assert_eq!(get_unsigned_varint(&mut six), Err(DecodeError::BadVarint));
        let mut too_big = &[0xffu8, 0xff, 0xff, 0xff, 0x1f][..];
        assert_eq!(
            get_unsigned_varint(&mut too_big),
            Err(DecodeError::BadVarint)
        );
        let mut eleven = &[0xffu8; 11][..];
        assert_eq!(
            get_unsigned_varlong(&mut eleven),
            Err(DecodeError::BadVarint)
        );
        let mut cut = &[0x80u8][..];
        assert!(matches!(
            get_unsigned_varint(&mut cut),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
