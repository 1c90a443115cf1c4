//! The encoding and decoding traits, the safe output trait [`WireWrite`], and
//! [`ChunkedWriter`], which keeps shared data (record sets) as separate chunks so a server can
//! write a response vectored without copying record bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::{DecodeError, EncodeError};

/// Where encoded bytes go.
///
/// A safe stand-in for [`bytes::BufMut`] (which is an `unsafe` trait). Every `BufMut` is a
/// `WireWrite`; [`ChunkedWriter`] is one that does not copy shared data and [`LenCounter`]
/// one that only counts.
pub trait WireWrite {
    /// Appends a copy of `src`.
    fn write_slice(&mut self, src: &[u8]);

    /// Appends shared data; a writer may keep the [`Bytes`] itself instead of copying it.
    fn write_shared(&mut self, data: Bytes);

    /// Appends one signed byte.
    #[inline]
    fn write_i8(&mut self, v: i8) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends one unsigned byte.
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.write_slice(&[v]);
    }
    /// Appends a big-endian `i16`.
    #[inline]
    fn write_i16(&mut self, v: i16) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends a big-endian `u16`.
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends a big-endian `i32`.
    #[inline]
    fn write_i32(&mut self, v: i32) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends a big-endian `u32`.
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends a big-endian `i64`.
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends a big-endian IEEE 754 `f64`.
    #[inline]
    fn write_f64(&mut self, v: f64) {
        self.write_slice(&v.to_be_bytes());
    }
    /// Appends each of `v` as a big-endian `i32`.
    #[inline]
    fn write_i32_slice(&mut self, v: &[i32]) {
        for x in v {
            self.write_i32(*x);
        }
    }
    /// Appends a compact array of `int32`: its length plus one as an unsigned varint, then
    /// the elements big-endian. The caller checks that the length plus one fits in a `u32`
    /// (`put_int32_array` does).
    #[inline]
    fn write_compact_i32_array(&mut self, v: &[i32]) {
        self.write_unsigned_varint((v.len() as u32).wrapping_add(1));
        self.write_i32_slice(v);
    }
    /// Appends an unsigned varint (1 to 5 bytes).
    #[inline]
    fn write_unsigned_varint(&mut self, v: u32) {
        if v < 0x80 {
            self.write_u8(v as u8);
            return;
        }
        let mut buf = [0u8; 5];
        let mut n = 0;
        let mut value = v;
        while value >= 0x80 {
            buf[n] = (value as u8 & 0x7f) | 0x80;
            value >>= 7;
            n += 1;
        }
        buf[n] = value as u8;
        self.write_slice(&buf[..=n]);
    }
}

impl<T: BufMut> WireWrite for T {
    #[inline]
    fn write_slice(&mut self, src: &[u8]) {
        self.put_slice(src);
    }
    #[inline]
    fn write_shared(&mut self, data: Bytes) {
        self.put_slice(&data);
    }
    #[inline]
    fn write_i8(&mut self, v: i8) {
        self.put_i8(v);
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.put_u8(v);
    }
    #[inline]
    fn write_i16(&mut self, v: i16) {
        self.put_i16(v);
    }
    #[inline]
    fn write_i32(&mut self, v: i32) {
        self.put_i32(v);
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.put_i64(v);
    }
}

/// A writer that only counts the bytes it is given; used to compute encoded lengths.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LenCounter(pub usize);

impl WireWrite for LenCounter {
    #[inline]
    fn write_slice(&mut self, src: &[u8]) {
        self.0 += src.len();
    }
    #[inline]
    fn write_shared(&mut self, data: Bytes) {
        self.0 += data.len();
    }
}

/// A writer that collects small writes in a buffer of `N` bytes on the stack and passes them
/// on to the writer it wraps in blocks: used for arrays of small structs, where it replaces a
/// capacity check and length update of the destination per field with a bounds check against
/// the buffer. Shared data and writes of `N` bytes or more go through unbuffered (in order).
///
/// [`BufferedWriter::finish`] writes what is left; a writer dropped without it loses that
/// part (as after an encoding error).
pub struct BufferedWriter<'w, W: WireWrite, const N: usize> {
    inner: &'w mut W,
    buf: [u8; N],
    len: usize,
}

impl<'w, W: WireWrite, const N: usize> BufferedWriter<'w, W, N> {
    /// An empty buffer in front of `inner`.
    #[inline(always)]
    pub fn new(inner: &'w mut W) -> Self {
        Self {
            inner,
            buf: [0; N],
            len: 0,
        }
    }

    /// Writes the buffered bytes to the wrapped writer.
    #[inline]
    pub fn finish(mut self) {
        self.flush();
    }

    #[inline]
    fn flush(&mut self) {
        if let Some(b) = self.buf.get(..self.len) {
            if !b.is_empty() {
                self.inner.write_slice(b);
            }
        }
        self.len = 0;
    }

    /// Writes one element of an array through the buffer.
    ///
    /// The element is encoded straight into the free part of the buffer through a
    /// [`SliceWriter`], whose position stays in a register, so each field costs one bounds
    /// check and no length update of the buffer or of the destination. The buffer is passed on
    /// first when less than a quarter of it is free; an element that does not fit is encoded
    /// again after the buffer is passed on, and one larger than the buffer goes to the wrapped
    /// writer directly. The bytes are those of `e.encode`, in order, whatever the path.
    #[inline(always)]
    pub fn encode_element<E: Encode + ?Sized>(
        &mut self,
        e: &E,
        version: i16,
    ) -> Result<(), EncodeError> {
        if self.len > N - N / 4 {
            self.flush();
        }
        let start = self.len;
        if let Some(free) = self.buf.get_mut(start..) {
            let mut sw = SliceWriter::new(free);
            e.encode(&mut sw, version)?;
            if let Some(n) = sw.written() {
                self.len = start + n;
                return Ok(());
            }
        }
        self.encode_element_again(e, version)
    }

    #[cold]
    #[inline(never)]
    fn encode_element_again<E: Encode + ?Sized>(
        &mut self,
        e: &E,
        version: i16,
    ) -> Result<(), EncodeError> {
        self.flush();
        let mut sw = SliceWriter::new(&mut self.buf);
        e.encode(&mut sw, version)?;
        match sw.written() {
            Some(n) => {
                self.len = n;
                Ok(())
            }
            None => e.encode(&mut *self.inner, version),
        }
    }

    #[cold]
    #[inline(never)]
    fn write_through(&mut self, src: &[u8]) {
        self.flush();
        match self.buf.get_mut(..src.len()) {
            Some(dst) => {
                dst.copy_from_slice(src);
                self.len = src.len();
            }
            None => self.inner.write_slice(src),
        }
    }
}

impl<W: WireWrite, const N: usize> WireWrite for BufferedWriter<'_, W, N> {
    #[inline(always)]
    fn write_slice(&mut self, src: &[u8]) {
        let end = self.len + src.len();
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(src);
                self.len = end;
            }
            None => self.write_through(src),
        }
    }

    #[inline]
    fn write_shared(&mut self, data: Bytes) {
        self.flush();
        self.inner.write_shared(data);
    }
}

/// A writer into a byte slice that never writes past its end: a write that does not fit marks
/// the writer as overflowed (see [`SliceWriter::written`]) instead of failing, so a caller can
/// try an encoding into a fixed buffer and start again elsewhere when it was too small.
pub struct SliceWriter<'a> {
    rest: &'a mut [u8],
    capacity: usize,
    overflowed: bool,
}

impl<'a> SliceWriter<'a> {
    /// A writer at the start of `buf`.
    #[inline(always)]
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self {
            capacity: buf.len(),
            rest: buf,
            overflowed: false,
        }
    }

    /// Writes `prefix` and then `ids` big-endian with one bounds check (at constant offsets,
    /// `K` being known).
    #[inline(always)]
    fn write_prefixed_ids<const K: usize>(&mut self, prefix: u8, ids: [i32; K]) {
        let n = 1 + 4 * K;
        if n <= self.rest.len() {
            let (dst, rest) = std::mem::take(&mut self.rest).split_at_mut(n);
            dst[0] = prefix;
            for (d, x) in dst[1..].chunks_exact_mut(4).zip(ids) {
                d.copy_from_slice(&x.to_be_bytes());
            }
            self.rest = rest;
        } else {
            self.overflowed = true;
        }
    }

    /// The number of bytes written at the start of the slice, or `None` when a write did not
    /// fit (the slice then holds no usable encoding).
    #[inline(always)]
    pub fn written(&self) -> Option<usize> {
        if self.overflowed {
            None
        } else {
            Some(self.capacity - self.rest.len())
        }
    }
}

impl WireWrite for SliceWriter<'_> {
    #[inline(always)]
    fn write_slice(&mut self, src: &[u8]) {
        if src.len() <= self.rest.len() {
            let (dst, rest) = std::mem::take(&mut self.rest).split_at_mut(src.len());
            dst.copy_from_slice(src);
            self.rest = rest;
        } else {
            self.overflowed = true;
        }
    }

    #[inline(always)]
    fn write_i32_slice(&mut self, v: &[i32]) {
        // One bounds check for the whole array.
        let n = v.len().saturating_mul(4);
        if n <= self.rest.len() {
            let (dst, rest) = std::mem::take(&mut self.rest).split_at_mut(n);
            for (d, x) in dst.chunks_exact_mut(4).zip(v) {
                d.copy_from_slice(&x.to_be_bytes());
            }
            self.rest = rest;
        } else {
            self.overflowed = true;
        }
    }

    #[inline(always)]
    fn write_compact_i32_array(&mut self, v: &[i32]) {
        // Replica lists are short: up to four elements go out with one bounds check and no
        // loop.
        match *v {
            [] => self.write_prefixed_ids(1, []),
            [a] => self.write_prefixed_ids(2, [a]),
            [a, b] => self.write_prefixed_ids(3, [a, b]),
            [a, b, c] => self.write_prefixed_ids(4, [a, b, c]),
            [a, b, c, d] => self.write_prefixed_ids(5, [a, b, c, d]),
            _ => {
                self.write_unsigned_varint((v.len() as u32).wrapping_add(1));
                self.write_i32_slice(v);
            }
        }
    }

    #[inline]
    fn write_shared(&mut self, data: Bytes) {
        self.write_slice(&data);
    }
}

/// A writer that keeps shared data as its own chunks.
///
/// Small values are copied into a current [`BytesMut`]; every [`WireWrite::write_shared`]
/// closes the current chunk and pushes the given [`Bytes`] as a chunk of its own without
/// copying it. [`ChunkedWriter::into_chunks`] hands the chunks over in order, ready for a
/// vectored write.
#[derive(Debug, Default)]
pub struct ChunkedWriter {
    chunks: Vec<Bytes>,
    current: BytesMut,
    len: usize,
}

impl ChunkedWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer whose first copied chunk has room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            chunks: Vec::new(),
            current: BytesMut::with_capacity(capacity),
            len: 0,
        }
    }

    /// Total bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunks, in order; their concatenation is everything written.
    #[must_use = "dropping the chunks loses everything written"]
    pub fn into_chunks(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.chunks.push(self.current.freeze());
        }
        self.chunks
    }

    /// Everything written, as one contiguous buffer (copies when there is more than one chunk).
    #[must_use = "dropping the buffer loses everything written"]
    pub fn into_bytes(self) -> Bytes {
        let mut chunks = self.into_chunks();
        if chunks.len() == 1 {
            return chunks.pop().unwrap_or_default();
        }
        let total = chunks.iter().map(Bytes::len).sum();
        let mut out = BytesMut::with_capacity(total);
        for c in chunks {
            out.extend_from_slice(&c);
        }
        out.freeze()
    }
}

impl WireWrite for ChunkedWriter {
    #[inline]
    fn write_slice(&mut self, src: &[u8]) {
        self.current.extend_from_slice(src);
        self.len += src.len();
    }

    fn write_shared(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        if !self.current.is_empty() {
            self.chunks.push(self.current.split().freeze());
        }
        self.len += data.len();
        self.chunks.push(data);
    }
}

/// A value that can be written at a given version of its message.
pub trait Encode {
    /// Writes `self` as `version` lays it out.
    ///
    /// Fails with [`EncodeError::FieldNotInVersion`] when a field holding a non-default value
    /// does not exist at `version` (unless the spec marks it ignorable), and with
    /// [`EncodeError::NullNotAllowed`] for a null that `version` cannot carry. On error,
    /// part of the value may already have been written; [`Encode::encoded_len`] performs
    /// the same checks without writing.
    fn encode<W: WireWrite>(&self, w: &mut W, version: i16) -> Result<(), EncodeError>;

    /// The exact number of bytes [`Encode::encode`] writes at `version`.
    fn encoded_len(&self, version: i16) -> Result<usize, EncodeError> {
        let mut counter = LenCounter(0);
        self.encode(&mut counter, version)?;
        Ok(counter.0)
    }

    /// Encodes into a fresh contiguous buffer (sized first, so it is allocated once).
    fn encode_to_bytes(&self, version: i16) -> Result<Bytes, EncodeError> {
        let len = self.encoded_len(version)?;
        let mut out = BytesMut::with_capacity(len);
        self.encode(&mut out, version)?;
        Ok(out.freeze())
    }
}

/// A value that can be read at a given version of its message.
pub trait Decode: Sized {
    /// Reads a value as `version` lays it out. Byte, string and record fields are slices of
    /// the input when `buf` is [`Bytes`] (no copy).
    fn decode<B: Buf>(buf: &mut B, version: i16) -> Result<Self, DecodeError>;
}

/// A top-level request or response body of one API.
pub trait Message: Encode + Decode + Default {
    /// The API this message belongs to.
    const API_KEY: crate::api::ApiKey;
    /// Lowest valid version.
    const MIN_VERSION: i16;
    /// Highest valid version.
    const MAX_VERSION: i16;
    /// First flexible version (compact encodings and tagged fields), or `i16::MAX` when none.
    const FLEXIBLE_MIN: i16;

    /// Whether `version` is flexible for this message.
    fn is_flexible(version: i16) -> bool {
        version >= Self::FLEXIBLE_MIN
    }
}

/// A versioned data record that is not a request or response (`"type": "data"` specs), such as
/// the keys and values the group coordinator writes to `__consumer_offsets`.
///
/// Such records are stored as a big-endian `int16` schema version followed by the body at that
/// version (Kafka's `GroupMetadataManager` framing); [`DataRecord::to_versioned_bytes`] and
/// [`DataRecord::from_versioned_bytes`] read and write that form.
pub trait DataRecord: Encode + Decode + Default {
    /// Lowest valid version.
    const MIN_VERSION: i16;
    /// Highest valid version.
    const MAX_VERSION: i16;
    /// First flexible version (compact encodings and tagged fields), or `i16::MAX` when none.
    const FLEXIBLE_MIN: i16;

    /// The record as `int16 version` + body at `version`.
    fn to_versioned_bytes(&self, version: i16) -> Result<Bytes, EncodeError> {
        let len = self.encoded_len(version)?;
        let mut out = BytesMut::with_capacity(len + 2);
        out.extend_from_slice(&version.to_be_bytes());
        self.encode(&mut out, version)?;
        Ok(out.freeze())
    }

    /// Reads `int16 version` + body; returns the version read and the record. Bytes left over
    /// after the body are an error (a record is exactly one value).
    fn from_versioned_bytes(mut bytes: Bytes) -> Result<(i16, Self), DecodeError> {
        if bytes.remaining() < 2 {
            return Err(DecodeError::Truncated {
                needed: 2,
                remaining: bytes.remaining(),
            });
        }
        let version = bytes.get_i16();
        let value = Self::decode(&mut bytes, version)?;
        if bytes.has_remaining() {
            return Err(DecodeError::InvalidValue {
                what: "data record",
                reason: "bytes left after the record's body",
            });
        }
        Ok((version, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An element of `len` bytes counting up from `seed`, written field by field.
    struct Blob {
        seed: u8,
        len: usize,
    }

    impl Encode for Blob {
        fn encode<W: WireWrite>(&self, w: &mut W, _version: i16) -> Result<(), EncodeError> {
            for i in 0..self.len {
                w.write_u8(self.seed.wrapping_add(i as u8));
            }
            Ok(())
        }
    }

    fn through_buffer(elements: &[Blob]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut bw = BufferedWriter::<_, 64>::new(&mut out);
        for e in elements {
            bw.encode_element(e, 0).expect("encodes");
        }
        bw.finish();
        out
    }

    fn direct(elements: &[Blob]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in elements {
            e.encode(&mut out, 0).expect("encodes");
        }
        out
    }

    #[test]
    fn buffered_elements_that_fit_do_not_fit_or_exceed_the_buffer_keep_their_bytes_in_order() {
        // Sizes around the flush threshold (a quarter of 64 free), the free space left, and
        // the buffer size, mixed.
        let sizes = [
            5, 17, 40, 3, 47, 48, 49, 63, 64, 65, 200, 1, 0, 16, 30, 30, 30,
        ];
        let elements: Vec<Blob> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| Blob {
                seed: (i * 37) as u8,
                len,
            })
            .collect();
        assert_eq!(through_buffer(&elements), direct(&elements));
    }

    #[test]
    fn slice_writer_reports_overflow_instead_of_writing_past_its_end() {
        let mut buf = [0u8; 6];
        let mut sw = SliceWriter::new(&mut buf);
        sw.write_i32(0x0102_0304);
        assert_eq!(sw.written(), Some(4));
        sw.write_i32(5);
        assert_eq!(sw.written(), None);
        assert_eq!(buf, [1, 2, 3, 4, 0, 0]);
    }

    #[test]
    fn slice_writer_writes_compact_int32_arrays_as_the_generic_writer_does() {
        for n in 0..8 {
            let v: Vec<i32> = (0..n).map(|i| i * 0x0101_0101 - 7).collect();
            let mut generic = Vec::new();
            generic.write_compact_i32_array(&v);
            let mut buf = [0u8; 64];
            let mut sw = SliceWriter::new(&mut buf);
            sw.write_compact_i32_array(&v);
            let n = sw.written().expect("fits");
            assert_eq!(&buf[..n], &generic[..], "{} elements", v.len());
            // One byte short: overflow, whatever the length.
            let mut short = vec![0u8; generic.len() - 1];
            let mut sw = SliceWriter::new(&mut short);
            sw.write_compact_i32_array(&v);
            assert_eq!(sw.written(), None, "{} elements", v.len());
        }
    }
}
