//! Primitive types of the Kafka protocol: fixed-width integers, float64, uuid, booleans,
//! (compact, nullable) strings and byte strings, (compact, nullable) array lengths, and
//! tagged-field sections with unknown tags kept.
//!
//! Readers work over any [`bytes::Buf`]; over [`Bytes`] byte fields and strings are slices of
//! the input. Every length or count is checked against the bytes that remain before anything
//! is allocated.

use bytes::{Buf, Bytes};
use bytestring::ByteString;

pub use crate::types::{Int32Array, RawTaggedField, UnknownTaggedFields, Uuid};

use crate::encode::WireWrite;
use crate::varint::get_unsigned_varint;
use crate::{DecodeError, EncodeError};

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

/// Defines a reader of one big-endian fixed-width number: a fast path when the current chunk
/// holds all its bytes, else a bounds-checked read across chunks.
macro_rules! fixed_width_reader {
    ($($name:ident: $ty:ty, $getter:ident, $kafka:literal;)*) => {$(
        #[doc = concat!("Reads a big-endian `", $kafka, "`.")]
        #[inline(always)]
        pub fn $name<B: Buf>(buf: &mut B) -> Result<$ty, DecodeError> {
            const N: usize = std::mem::size_of::<$ty>();
            if let Some(b) = buf.chunk().first_chunk::<N>() {
                let v = <$ty>::from_be_bytes(*b);
                buf.advance(N);
                return Ok(v);
            }
            ensure(buf, N)?;
            Ok(buf.$getter())
        }
    )*};
}

fixed_width_reader! {
    get_i16: i16, get_i16, "int16";
    get_u16: u16, get_u16, "uint16";
    get_i32: i32, get_i32, "int32";
    get_u32: u32, get_u32, "uint32";
    get_i64: i64, get_i64, "int64";
    get_f64: f64, get_f64, "float64";
}

/// Reads a `uuid`.
#[inline]
pub fn get_uuid<B: Buf>(buf: &mut B) -> Result<Uuid, DecodeError> {
    ensure(buf, 16)?;
    let mut b = [0u8; 16];
    buf.copy_to_slice(&mut b);
    Ok(Uuid(b))
}

/// Reads an unsigned varint, taking the one-byte case without a loop.
#[inline(always)]
pub fn get_uvarint<B: Buf>(buf: &mut B) -> Result<u32, DecodeError> {
    let c = buf.chunk();
    if let Some(&b) = c.first() {
        if b < 0x80 {
            buf.advance(1);
            return Ok(u32::from(b));
        }
        if let Some(c) = c.first_chunk::<5>() {
            let mut v = 0u32;
            for (i, &b) in c.iter().enumerate() {
                v |= u32::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    if i == 4 && b > 0x0f {
                        return Err(DecodeError::BadVarint);
                    }
                    buf.advance(i + 1);
                    return Ok(v);
                }
            }
            return Err(DecodeError::BadVarint);
        }
    }
    get_unsigned_varint(buf)
}

/// Reads a length prefix: `int16` (strings) or `int32` (bytes, arrays) when not compact,
/// unsigned varint minus one when compact. `None` is null (-1).
#[inline(always)]
fn get_len<B: Buf>(
    buf: &mut B,
    compact: bool,
    wide: bool,
    what: &'static str,
) -> Result<Option<usize>, DecodeError> {
    if compact {
        let v = get_uvarint(buf)?;
        return Ok(v.checked_sub(1).map(|l| l as usize));
    }
    let len: i64 = if wide {
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

/// An unsigned varint at the front of `c` and its length in bytes ([`fast_uvarint`] without
/// moving `c`; `None` leaves the judgement to [`get_uvarint`]).
#[inline(always)]
fn peek_uvarint(c: &[u8]) -> Option<(u32, usize)> {
    let mut rest = c;
    let v = fast_uvarint(&mut rest)?;
    Some((v, c.len() - rest.len()))
}

/// Reads nullable (compact) bytes; over [`Bytes`] the result is a slice of the input.
#[inline]
pub fn get_nullable_bytes<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Option<Bytes>, DecodeError> {
    if compact {
        // The length read and checked in the current chunk, the input advanced once.
        let c = buf.chunk();
        if let Some((v, n)) = peek_uvarint(c) {
            match (v as usize).checked_sub(1) {
                None => {
                    buf.advance(n);
                    return Ok(None);
                }
                Some(len) if len <= c.len() - n => {
                    buf.advance(n);
                    return Ok(Some(buf.copy_to_bytes(len)));
                }
                Some(_) => {}
            }
        }
    }
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

/// Runs a block of field reads over the current chunk as a plain byte slice when that chunk
/// holds all the input (as it does for [`Bytes`] and slices), advancing `buf` once at the end
/// instead of once per field; over a multi-chunk [`Buf`] it runs the block on `buf` itself.
///
/// `over_chunk!(buf, |b| { ... })` evaluates to the block's value; the block reads through
/// `b` and may return early with `?`. Only for fields that are not byte strings (a string or
/// byte field read from the slice would be a copy, not a slice of the input).
macro_rules! over_chunk {
    ($buf:ident, |$b:ident| $body:block) => {{
        let chunk = $buf.chunk();
        if chunk.len() == $buf.remaining() {
            let mut rest: &[u8] = chunk;
            let value = {
                let $b = &mut rest;
                $body
            };
            let used = chunk.len() - rest.len();
            $buf.advance(used);
            value
        } else {
            let $b = &mut *$buf;
            $body
        }
    }};
}
pub(crate) use over_chunk;

// ---------------------------------------------------------------------------------------
// fast readers over a contiguous input
//
// The generated decoders read a run of fields first with these readers over the input as one
// byte slice, all inlined, so that the read position stays in a register; each returns `None`
// where it does not take the common case (too few bytes, a long array, a null, a bad value),
// and the decoder then reads the whole run again with the general readers above, which give
// the same values or the typed error. They never decide anything the general readers would
// decide otherwise.

macro_rules! fast_fixed_width_reader {
    ($($name:ident: $ty:ty;)*) => {$(
        #[doc = concat!("Reads a big-endian `", stringify!($ty), "` from the front of `c`.")]
        #[inline(always)]
        pub fn $name(c: &mut &[u8]) -> Option<$ty> {
            const N: usize = std::mem::size_of::<$ty>();
            let (h, rest) = c.split_first_chunk::<N>()?;
            *c = rest;
            Some(<$ty>::from_be_bytes(*h))
        }
    )*};
}

fast_fixed_width_reader! {
    fast_i8: i8;
    fast_i16: i16;
    fast_u16: u16;
    fast_i32: i32;
    fast_u32: u32;
    fast_i64: i64;
    fast_f64: f64;
}

/// Reads a `bool` from the front of `c` (any non-zero byte is true).
#[inline(always)]
pub fn fast_bool(c: &mut &[u8]) -> Option<bool> {
    let (h, rest) = c.split_first()?;
    *c = rest;
    Some(*h != 0)
}

/// Reads a `uuid` from the front of `c`.
#[inline(always)]
pub fn fast_uuid(c: &mut &[u8]) -> Option<Uuid> {
    let (h, rest) = c.split_first_chunk::<16>()?;
    *c = rest;
    Some(Uuid(*h))
}

/// Reads an unsigned varint from the front of `c` (`None` for a malformed one).
#[inline(always)]
pub fn fast_uvarint(c: &mut &[u8]) -> Option<u32> {
    let s = *c;
    let &b = s.first()?;
    if b < 0x80 {
        *c = &s[1..];
        return Some(u32::from(b));
    }
    let mut v = 0u32;
    for (i, &b) in s.iter().take(5).enumerate() {
        v |= u32::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            if i == 4 && b > 0x0f {
                return None;
            }
            *c = &s[i + 1..];
            return Some(v);
        }
    }
    None
}

/// Reads an array length from the front of `c`: unsigned varint minus one when compact,
/// `int32` when not; `Some(None)` is null, `None` a length the general reader must judge.
#[inline(always)]
fn fast_array_len(c: &mut &[u8], compact: bool) -> Option<Option<usize>> {
    if compact {
        let v = fast_uvarint(c)?;
        return Some(v.checked_sub(1).map(|l| l as usize));
    }
    match fast_i32(c)? {
        -1 => Some(None),
        l => usize::try_from(l).ok().map(Some),
    }
}

/// Reads a nullable (compact) array of fixed-width elements of `N` bytes from the front of
/// `c` (`Some(None)` is null).
#[inline(always)]
pub fn fast_nullable_fixed_array<T, const N: usize>(
    c: &mut &[u8],
    compact: bool,
    elem: fn([u8; N]) -> T,
) -> Option<Option<Vec<T>>> {
    let Some(n) = fast_array_len(c, compact)? else {
        return Some(None);
    };
    let bytes = c.get(..n.checked_mul(N)?)?;
    let v = bytes
        .chunks_exact(N)
        .map(|e| elem(e.try_into().unwrap_or([0; N])))
        .collect();
    *c = &c[bytes.len()..];
    Some(Some(v))
}

/// Reads a non-nullable (compact) array of fixed-width elements from the front of `c`.
#[inline(always)]
pub fn fast_fixed_array<T, const N: usize>(
    c: &mut &[u8],
    compact: bool,
    elem: fn([u8; N]) -> T,
) -> Option<Vec<T>> {
    fast_nullable_fixed_array(c, compact, elem)?
}

/// Reads a (compact) array of up to four `int32` from the front of `c` (longer arrays and
/// nulls are left to the general reader).
///
/// When 17 bytes are at hand the four slots are read without a branch on the count (slots
/// past the length are not part of the value).
#[inline(always)]
pub fn fast_int32_array(c: &mut &[u8], compact: bool) -> Option<Int32Array> {
    let (n, body) = if compact {
        let (&b0, body) = c.split_first()?;
        (usize::from(b0.wrapping_sub(1)), body)
    } else {
        let (h, body) = c.split_first_chunk::<4>()?;
        (usize::try_from(i32::from_be_bytes(*h)).ok()?, body)
    };
    if n > 4 {
        return None;
    }
    let mut inline = [0i32; 4];
    if let Some(e) = body.first_chunk::<16>() {
        for (k, slot) in inline.iter_mut().enumerate() {
            let o = 4 * k;
            *slot = i32::from_be_bytes([e[o], e[o + 1], e[o + 2], e[o + 3]]);
        }
    } else {
        let e = body.get(..4 * n)?;
        for (slot, e) in inline.iter_mut().zip(e.chunks_exact(4)) {
            *slot = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        }
    }
    *c = body.get(4 * n..)?;
    Some(Int32Array::from_buf_and_len(inline, n))
}

/// Reads a nullable (compact) array of up to four `int32` from the front of `c`.
#[inline(always)]
pub fn fast_nullable_int32_array(c: &mut &[u8], compact: bool) -> Option<Option<Int32Array>> {
    let mut probe = *c;
    if fast_array_len(&mut probe, compact)?.is_none() {
        *c = probe;
        return Some(None);
    }
    fast_int32_array(c, compact).map(Some)
}

/// Reads a nullable (compact) array of structs from the front of `c` when it is null or
/// empty, the usual case of the arrays this is used for; any other length is left to the
/// general reader.
#[inline(always)]
pub fn fast_nullable_empty_array<T>(c: &mut &[u8], compact: bool) -> Option<Option<Vec<T>>> {
    match fast_array_len(c, compact)? {
        None => Some(None),
        Some(0) => Some(Some(Vec::new())),
        Some(_) => None,
    }
}

/// Reads a non-nullable (compact) array of structs from the front of `c` when it is empty.
#[inline(always)]
pub fn fast_empty_array<T>(c: &mut &[u8], compact: bool) -> Option<Vec<T>> {
    fast_nullable_empty_array(c, compact)?
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

/// Reads a nullable (compact) array of structs, decoding each element in place into a
/// default value pushed onto the vector (large structs are not moved); see
/// [`get_nullable_array`] for the count check.
#[inline]
pub fn get_nullable_struct_array<B: Buf, T: Default>(
    buf: &mut B,
    compact: bool,
    min_elem: usize,
    what: &'static str,
    mut elem: impl FnMut(&mut B, &mut T) -> Result<(), DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    let Some(n) = get_len(buf, compact, true, what)? else {
        return Ok(None);
    };
    if n.checked_mul(min_elem.max(1))
        .is_none_or(|need| need > buf.remaining())
    {
        return Err(DecodeError::InvalidLength {
            what,
            length: n as i64,
        });
    }
    let mut v: Vec<T> = Vec::with_capacity(n);
    // Defaults are written in batches straight into the vector (a push of each would build
    // it on the stack and copy it), then decoded in place while still in cache.
    const BATCH: usize = 16;
    while v.len() < n {
        let start = v.len();
        v.resize_with(n.min(start + BATCH), T::default);
        for slot in &mut v[start..] {
            elem(buf, slot)?;
        }
    }
    Ok(Some(v))
}

/// Reads a non-nullable (compact) array of structs; see [`get_nullable_struct_array`].
#[inline]
pub fn get_struct_array<B: Buf, T: Default>(
    buf: &mut B,
    compact: bool,
    min_elem: usize,
    what: &'static str,
    elem: impl FnMut(&mut B, &mut T) -> Result<(), DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    get_nullable_struct_array(buf, compact, min_elem, what, elem)?.ok_or_else(|| null_error(what))
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

/// The fast path of compact `int32` arrays: a one-byte length and up to four elements, all in
/// the current chunk. When 17 bytes are at hand, the four slots are read without a branch on
/// the count (slots past the length are not part of the value); `None` leaves `buf` untouched
/// for the general reader.
#[inline(always)]
fn get_short_compact_int32_array<B: Buf>(buf: &mut B) -> Option<Int32Array> {
    let c = buf.chunk();
    let b0 = *c.first()?;
    if !(1..=5).contains(&b0) {
        return None;
    }
    let n = usize::from(b0) - 1;
    let mut inline = [0i32; 4];
    if let Some(c) = c.first_chunk::<17>() {
        for (k, slot) in inline.iter_mut().enumerate() {
            let o = 1 + 4 * k;
            *slot = i32::from_be_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]]);
        }
    } else {
        let e = c.get(1..1 + 4 * n)?;
        for (slot, e) in inline.iter_mut().zip(e.chunks_exact(4)) {
            *slot = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        }
    }
    buf.advance(1 + 4 * n);
    Some(Int32Array::from_buf_and_len(inline, n))
}

/// Reads a nullable (compact) array of `int32`, checking the count against what remains.
#[inline]
pub fn get_nullable_int32_array<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Option<Int32Array>, DecodeError> {
    if compact {
        if let Some(v) = get_short_compact_int32_array(buf) {
            return Ok(Some(v));
        }
    }
    let Some(n) = get_len(buf, compact, true, what)? else {
        return Ok(None);
    };
    if n.checked_mul(4).is_none_or(|b| b > buf.remaining()) {
        return Err(DecodeError::InvalidLength {
            what,
            length: n as i64,
        });
    }
    if n <= 4 {
        let mut inline = [0i32; 4];
        for slot in inline.iter_mut().take(n) {
            *slot = buf.get_i32();
        }
        return Ok(Some(Int32Array::from_buf_and_len(inline, n)));
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(buf.get_i32());
    }
    Ok(Some(Int32Array::from_vec(v)))
}

/// Reads a non-nullable (compact) array of `int32`.
#[inline(always)]
pub fn get_int32_array<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Int32Array, DecodeError> {
    if compact {
        if let Some(v) = get_short_compact_int32_array(buf) {
            return Ok(v);
        }
    }
    get_int32_array_slow(buf, compact, what)
}

#[inline(never)]
fn get_int32_array_slow<B: Buf>(
    buf: &mut B,
    compact: bool,
    what: &'static str,
) -> Result<Int32Array, DecodeError> {
    get_nullable_int32_array(buf, compact, what)?.ok_or_else(|| null_error(what))
}

/// Reads the header of one tagged field: its tag and its size, checked against what remains.
#[inline]
pub fn get_tag_header<B: Buf>(buf: &mut B) -> Result<(u32, usize), DecodeError> {
    let tag = get_uvarint(buf)?;
    let size = get_uvarint(buf)? as usize;
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
pub fn get_unknown_tagged_fields<B: Buf>(buf: &mut B) -> Result<UnknownTaggedFields, DecodeError> {
    let n = get_uvarint(buf)?;
    let mut out = UnknownTaggedFields::new();
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
        match len {
            None => w.write_u8(0),
            Some(l) if l < 0x7f => w.write_u8(l as u8 + 1),
            Some(l) if l < i32::MAX as usize => w.write_unsigned_varint(l as u32 + 1),
            Some(l) => return Err(too_long(l)),
        }
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
    if compact && s.len() < 0x7f {
        w.write_u8(s.len() as u8 + 1);
    } else {
        put_len(w, Some(s.len()), compact, false, what)?;
    }
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
#[inline(always)]
pub fn put_array_len<W: WireWrite>(
    w: &mut W,
    len: Option<usize>,
    compact: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    match len {
        Some(l) if compact && l < 0x7f => {
            w.write_u8(l as u8 + 1);
            Ok(())
        }
        _ => put_len(w, len, compact, true, what),
    }
}

/// Writes a (compact) array of `int32`.
#[inline(always)]
pub fn put_int32_array<W: WireWrite>(
    w: &mut W,
    v: &[i32],
    compact: bool,
    what: &'static str,
) -> Result<(), EncodeError> {
    if compact && v.len() < 0x7f {
        w.write_compact_i32_array(v);
    } else {
        put_array_len(w, Some(v.len()), compact, what)?;
        w.write_i32_slice(v);
    }
    Ok(())
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
#[inline(always)]
pub fn put_unknown_tagged_fields<W: WireWrite>(
    w: &mut W,
    unknown: &[RawTaggedField],
) -> Result<(), EncodeError> {
    if unknown.is_empty() {
        w.write_u8(0);
    } else {
        // Built aside so that `w` is not passed to a function that is not inlined: a writer
        // whose address is taken keeps its position in memory instead of a register.
        w.write_slice(&some_unknown_tagged_fields(unknown)?);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn some_unknown_tagged_fields(unknown: &[RawTaggedField]) -> Result<Vec<u8>, EncodeError> {
    let n = u32::try_from(unknown.len()).map_err(|_| EncodeError::TooLong {
        what: "tagged fields",
        length: unknown.len(),
    })?;
    let mut out = Vec::new();
    out.write_unsigned_varint(n);
    let mut next = 0;
    put_unknown_tagged_below(&mut out, unknown, &mut next, u64::MAX);
    Ok(out)
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
    fn fast_varint_agrees_with_the_reference_reader() {
        let mut x: u64 = 0x1234_5678;
        for i in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut bytes = x.to_le_bytes().to_vec();
            // Bias towards continuation bits so long encodings are exercised.
            for b in bytes.iter_mut().take((i % 6) as usize) {
                *b |= 0x80;
            }
            for len in [bytes.len(), 3, 5] {
                let input = Bytes::copy_from_slice(&bytes[..len]);
                let (mut a, mut b) = (input.clone(), input.clone());
                let fast = get_uvarint(&mut a);
                let slow = get_unsigned_varint(&mut b);
                assert_eq!(fast, slow, "{:02x?}", &bytes[..len]);
                if fast.is_ok() {
                    assert_eq!(a.len(), b.len());
                }
                // The slice readers, where they take a varint, take the same one.
                if let Some((v, n)) = peek_uvarint(&input) {
                    assert_eq!(Ok(v), slow, "{:02x?}", &bytes[..len]);
                    assert_eq!(input.len() - n, b.len());
                }
                let mut c: &[u8] = &input;
                if let Some(v) = fast_uvarint(&mut c) {
                    assert_eq!(Ok(v), slow, "{:02x?}", &bytes[..len]);
                    assert_eq!(c.len(), b.len());
                }
            }
        }
    }

    #[test]
    fn tag_size_larger_than_input_is_rejected() {
        let mut r = Bytes::from_static(&[1, 0, 200, 1]);
        assert!(get_unknown_tagged_fields(&mut r).is_err());
    }
}
