//! Primitive types of the Kafka protocol: fixed-width integers, float64, uuid, booleans,
//! (compact, nullable) strings and byte strings, (compact, nullable) array lengths, and
//! tagged-field sections with unknown tags kept.
//!
//! Readers work over any [`bytes::Buf`]; over [`Bytes`] byte fields and strings are slices of
//! the input. Every length or count is checked against the bytes that remain before anything
//! is allocated.

use std::fmt;

use bytes::{Buf, Bytes};
use bytestring::ByteString;

use crate::encode::WireWrite;
use crate::varint::get_unsigned_varint;
use crate::{DecodeError, EncodeError};

/// A 128-bit universally unique identifier (topic ids), kept as its 16 big-endian bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero id (Kafka's "no id").
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// The id whose big-endian bytes are `v`.
    pub const fn from_u128(v: u128) -> Self {
        Uuid(v.to_be_bytes())
    }

    /// The id as a number.
    pub const fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid({:032x})", self.as_u128())
    }
}

/// A tagged field whose tag this version does not know, kept to be written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawTaggedField {
    /// The tag.
    pub tag: u32,
    /// The field's raw bytes.
    pub data: Bytes,
}

/// Fails with [`DecodeError::Truncated`] unless `n` bytes remain.
#[inline]
pub fn ensure<B: Buf>(buf: &B, n: usize) -> Result<(), DecodeError> {
    let remaining = buf.remaining();
    if remaining < n {
        Err(DecodeError::Truncated {
            needed: n,
            remaining,
        })
    } else {
        Ok(())
    }
}

/// Reads an `int8`.
#[inline]
pub fn get_i8<B: Buf>(buf: &mut B) -> Result<i8, DecodeError> {
    ensure(buf, 1)?;
    Ok(buf.get_i8())
}

/// Reads a `bool` (any non-zero byte is true, as Kafka reads it).
#[inline]
pub fn get_bool<B: Buf>(buf: &mut B) -> Result<bool, DecodeError> {
    ensure(buf, 1)?;
    Ok(buf.get_u8() != 0)
}

/// Reads a big-endian `int16`.
#[inline]
pub fn get_i16<B: Buf>(buf: &mut B) -> Result<i16, DecodeError> {
    ensure(buf, 2)?;
    Ok(buf.get_i16())
}

/// Reads a big-endian `uint16`.
#[inline]
pub fn get_u16<B: Buf>(buf: &mut B) -> Result<u16, DecodeError> {
    ensure(buf, 2)?;
    Ok(buf.get_u16())
}

/// Reads a big-endian `int32`.
#[inline]
pub fn get_i32<B: Buf>(buf: &mut B) -> Result<i32, DecodeError> {
    ensure(buf, 4)?;
    Ok(buf.get_i32())
}

/// Reads a big-endian `uint32`.
#[inline]
pub fn get_u32<B: Buf>(buf: &mut B) -> Result<u32, DecodeError> {
    ensure(buf, 4)?;
    Ok(buf.get_u32())
}

/// Reads a big-endian `int64`.
#[inline]
pub fn get_i64<B: Buf>(buf: &mut B) -> Result<i64, DecodeError> {
    ensure(buf, 8)?;
    Ok(buf.get_i64())
}

/// Reads a big-endian IEEE 754 `float64`.
#[inline]
pub fn get_f64<B: Buf>(buf: &mut B) -> Result<f64, DecodeError> {
    ensure(buf, 8)?;
    Ok(buf.get_f64())
}

/// Reads a `uuid`.
#[inline]
pub fn get_uuid<B: Buf>(buf: &mut B) -> Result<Uuid, DecodeError> {
    ensure(buf, 16)?;
    let mut b = [0u8; 16];
    buf.copy_to_slice(&mut b);
    Ok(Uuid(b))
}

/// Reads a length prefix: `int16` (strings) or `int32` (bytes, arrays) when not compact,
/// unsigned varint minus one when compact. `None` is null (-1).
#[inline]
fn get_len<B: Buf>(
    buf: &mut B,
    compact: bool,
    wide: bool,
    what: &'static str,
) -> Result<Option<usize>, DecodeError> {
    let len: i64 = if compact {
        i64::from(get_unsigned_varint(buf)?) - 1
    } else if wide {
        i64::from(get_i32(buf)?)
    } else {
        i64::from(get_i16(buf)?)
    };
    if len == -1 {
        return Ok(None);
    }
    if len < -1 {
        return Err(DecodeError::InvalidLength { what, length: len });
    }
    Ok(Some(len as usize))
}

#[inline]
fn take_bytes<B: Buf>(buf: &mut B, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
    if len > buf.remaining() {
        return Err(DecodeError::InvalidLength {
            what,
            length: len as i64,
        });
    }
    Ok(buf.copy_to_bytes(len))
}

fn null_error(what: &'static str) -> DecodeError {
    DecodeError::InvalidLength { what, length: -1 }
}

/// Reads a nullable (compact) string.
#[inline]
pub fn get_nullable_string<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Option<ByteString>, DecodeError> {
    match get_len(buf, compact, false, what)? {
        None => Ok(None),
        Some(len) => {
            let bytes = take_bytes(buf, len, what)?;
            ByteString::try_from(bytes)
                .map(Some)
                .map_err(|_| DecodeError::InvalidUtf8)
        }
    }
}

/// Reads a non-nullable (compact) string; null is an [`DecodeError::InvalidLength`].
#[inline]
pub fn get_string<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<ByteString, DecodeError> {
    get_nullable_string(buf, compact, what)?.ok_or_else(|| null_error(what))
}

/// Reads nullable (compact) bytes; over [`Bytes`] the result is a slice of the input.
#[inline]
pub fn get_nullable_bytes<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Option<Bytes>, DecodeError> {
    match get_len(buf, compact, true, what)? {
        None => Ok(None),
        Some(len) => take_bytes(buf, len, what).map(Some),
    }
}

/// Reads non-nullable (compact) bytes.
#[inline]
pub fn get_bytes<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Bytes, DecodeError> {
    get_nullable_bytes(buf, compact, what)?.ok_or_else(|| null_error(what))
}

/// Reads a nullable (compact) array whose elements take at least `min_elem` bytes each.
///
/// The count is checked against the bytes that remain (times `min_elem`) before the vector
/// is allocated, so a frame declaring a huge count fails without allocating.
#[inline]
pub fn get_nullable_array<B: Buf, T>(
    buf: &mut B,
    compact: bool,
    min_elem: usize,
    what: &'static str,
    mut elem: impl FnMut(&mut B) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    let Some(n) = get_len(buf, compact, true, what)? else {
        return Ok(None);
    };
    let need = n.checked_mul(min_elem.max(1));
    if need.is_none_or(|need| need > buf.remaining()) {
        return Err(DecodeError::InvalidLength {
            what,
            length: n as i64,
        });
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(elem(buf)?);
    }
    Ok(Some(v))
}

/// Reads a non-nullable (compact) array; see [`get_nullable_array`].
#[inline]
pub fn get_array<B: Buf, T>(
    buf: &mut B,
    compact: bool,
    min_elem: usize,
    what: &'static str,
    elem: impl FnMut(&mut B) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    get_nullable_array(buf, compact, min_elem, what, elem)?.ok_or_else(|| null_error(what))
}

/// Reads the header of one tagged field: its tag and its size, checked against what remains.
#[inline]
pub fn get_tag_header<B: Buf>(buf: &mut B) -> Result<(u32, usize), DecodeError> {
    let tag = get_unsigned_varint(buf)?;
    let size = get_unsigned_varint(buf)? as usize;
    if size > buf.remaining() {
        return Err(DecodeError::InvalidLength {
            what: "tagged field",
            length: size as i64,
        });
    }
    Ok((tag, size))
}

/// Reads a known tagged field of `size` bytes with `f`, which must consume exactly `size`.
#[inline]
pub fn get_tagged<B: Buf, T>(
    buf: &mut B,
    size: usize,
    f: impl FnOnce(&mut bytes::buf::Take<&mut B>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut sub = (&mut *buf).take(size);
    let v = f(&mut sub)?;
    if sub.has_remaining() {
        return Err(DecodeError::InvalidValue {
            what: "tagged field",
            reason: "size does not match its content",
        });
    }
    Ok(v)
}

/// Reads an unknown tagged field's bytes (size already checked by [`get_tag_header`]).
#[inline]
pub fn get_raw_tagged<B: Buf>(buf: &mut B, tag: u32, size: usize) -> RawTaggedField {
    RawTaggedField {
        tag,
        data: buf.copy_to_bytes(size),
    }
}

/// Skips a tagged-field section, keeping every field as unknown (used where no tag is known,
/// such as the request and response headers).
pub fn get_unknown_tagged_fields<B: Buf>(buf: &mut B) -> Result<Vec<RawTaggedField>, DecodeError> {
    let n = get_unsigned_varint(buf)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let (tag, size) = get_tag_header(buf)?;
        out.push(get_raw_tagged(buf, tag, size));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// writing

/// Encoded size of an unsigned varint.
#[inline]
pub fn uvarint_len(v: u32) -> usize {
    crate::varint::unsigned_varint_len(v)
}

#[inline]
fn put_len<W: WireWrite>(
    w: &mut W,
    len: Option<usize>,
    compact: bool,
    wide: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    let too_long = |length| EncodeError::TooLong { what, length };
    if compact {
        let v = match len {
            None => 0,
            Some(l) => u32::try_from(l)
                .ok()
                .and_then(|l| l.checked_add(1))
                .filter(|&l| l <= i32::MAX as u32)
                .ok_or_else(|| too_long(l))?,
        };
        w.write_unsigned_varint(v);
    } else if wide {
        let v = match len {
            None => -1,
            Some(l) => i32::try_from(l).map_err(|_| too_long(l))?,
        };
        w.write_i32(v);
    } else {
        let v = match len {
            None => -1,
            Some(l) => i16::try_from(l).map_err(|_| too_long(l))?,
        };
        w.write_i16(v);
    }
    Ok(())
}

/// Writes a (compact) string.
#[inline]
pub fn put_string<W: WireWrite>(
    w: &mut W,
    s: &str,
    compact: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_len(w, Some(s.len()), compact, false, what)?;
    w.write_slice(s.as_bytes());
    Ok(())
}

/// Writes a nullable (compact) string.
#[inline]
pub fn put_nullable_string<W: WireWrite>(
    w: &mut W,
    s: Option<&str>,
    compact: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    match s {
        None => put_len(w, None, compact, false, what),
        Some(s) => put_string(w, s, compact, what),
    }
}

/// Writes (compact) bytes; the data goes through [`WireWrite::write_shared`] when
/// `shared` (record sets), else it is copied.
#[inline]
pub fn put_bytes<W: WireWrite>(
    w: &mut W,
    b: &Bytes,
    compact: bool,
    shared: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_len(w, Some(b.len()), compact, true, what)?;
    if shared {
        w.write_shared(b.clone());
    } else {
        w.write_slice(b);
    }
    Ok(())
}

/// Writes nullable (compact) bytes; see [`put_bytes`].
#[inline]
pub fn put_nullable_bytes<W: WireWrite>(
    w: &mut W,
    b: Option<&Bytes>,
    compact: bool,
    shared: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    match b {
        None => put_len(w, None, compact, true, what),
        Some(b) => put_bytes(w, b, compact, shared, what),
    }
}

/// Writes an array length (`None` is a null array).
#[inline]
pub fn put_array_len<W: WireWrite>(
    w: &mut W,
    len: Option<usize>,
    compact: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_len(w, len, compact, true, what)
}

/// Writes a uuid.
#[inline]
pub fn put_uuid<W: WireWrite>(w: &mut W, u: &Uuid) {
    w.write_slice(&u.0);
}

/// Writes a bool as one byte.
#[inline]
pub fn put_bool<W: WireWrite>(w: &mut W, b: bool) {
    w.write_u8(u8::from(b));
}

/// Writes the unknown tagged fields whose tag is below `below`, from `*next` on, advancing
/// `*next`; so that known and unknown fields go out in ascending tag order.
#[inline]
pub fn put_unknown_tagged_below<W: WireWrite>(
    w: &mut W,
    unknown: &[RawTaggedField],
    next: &mut usize,
    below: u64,
) {
    while let Some(f) = unknown.get(*next) {
        if u64::from(f.tag) >= below {
            break;
        }
        w.write_unsigned_varint(f.tag);
        w.write_unsigned_varint(f.data.len() as u32);
        w.write_slice(&f.data);
        *next += 1;
    }
}

/// Writes a tagged-field section holding only `unknown` fields.
pub fn put_unknown_tagged_fields<W: WireWrite>(
    w: &mut W,
    unknown: &[RawTaggedField],
) -> Result<(), EncodeError> {
    let n = u32::try_from(unknown.len()).map_err(|_| EncodeError::TooLong {
        what: "tagged fields",
        length: unknown.len(),
    })?;
    w.write_unsigned_varint(n);
    let mut next = 0;
    put_unknown_tagged_below(w, unknown, &mut next, u64::MAX);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn strings_round_trip_compact_and_not() {
        for compact in [false, true] {
            let mut b = BytesMut::new();
            put_string(&mut b, "topic-a", compact, "s").unwrap();
            put_nullable_string(&mut b, None, compact, "s").unwrap();
            let mut r = b.freeze();
            assert_eq!(&*get_string(&mut r, compact, "s").unwrap(), "topic-a");
            assert_eq!(get_nullable_string(&mut r, compact, "s").unwrap(), None);
            assert!(!r.has_remaining());
        }
    }

    #[test]
    fn string_decode_is_zero_copy_over_bytes() {
        let mut b = BytesMut::new();
        put_string(&mut b, "zero-copy", false, "s").unwrap();
        let input = b.freeze();
        let mut r = input.clone();
        let s = get_string(&mut r, false, "s").unwrap();
        let inner = s.into_bytes();
        assert_eq!(inner.as_ptr(), input[2..].as_ptr());
    }

    #[test]
    fn huge_array_count_fails_before_allocating() {
        let mut r = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        let e = get_array(&mut r, false, 4, "a", get_i32).unwrap_err();
        assert!(matches!(e, DecodeError::InvalidLength { .. }));
    }

    #[test]
    fn invalid_utf8_is_a_typed_error() {
        let mut r = Bytes::from_static(&[0, 2, 0xff, 0xfe]);
        assert_eq!(
            get_string(&mut r, false, "s"),
            Err(DecodeError::InvalidUtf8)
        );
    }

    #[test]
    fn tag_size_larger_than_input_is_rejected() {
        let mut r = Bytes::from_static(&[1, 0, 200, 1]);
        assert!(get_unknown_tagged_fields(&mut r).is_err());
    }
}
