//! ZooKeeper's jute binary encoding (`BinaryInputArchive` / `BinaryOutputArchive`) as the
//! client port uses it: big-endian `int` (4 bytes) and `long` (8 bytes), `boolean` as one
//! byte, `buffer` and `ustring` as an `int` length (-1 = null) then the bytes, `vector` as an
//! `int` count (-1 = null) then the elements, records as their fields in order.
//!
//! [`Reader`] decodes from a byte slice without ever trusting a length: every length and
//! vector count is checked against the bytes left before anything is allocated, so a claimed
//! length of 2^31-1 in a 10-byte input is a [`JuteError`], not an allocation. [`Writer`]
//! encodes, optionally as a whole client-port frame (4-byte length prefix included).
//!
//! Where ZooKeeper's reader is lenient, this one is too, so that real clients' bytes decode
//! the same: a `boolean` is true for any non-zero byte (`DataInput.readBoolean`), a vector
//! count below -1 reads as an empty vector (ZooKeeper's `BinaryIndex` is done at once). Where
//! it fails, this one fails: a buffer or string length below -1 is an error ("Unreasonable
//! length"), running out of bytes is an error (`EOFException`). One difference is deliberate:
//! ZooKeeper decodes strings with `new String(bytes, UTF_8)`, which replaces malformed UTF-8
//! by U+FFFD; [`Reader::read_ustring`] refuses it ([`JuteError::BadUtf8`]). Java clients
//! always send well-formed UTF-8.

use super::types::{Acl, Id, Stat};

/// The largest client-port frame (the length after the 4-byte prefix) ZooKeeper 3.8 accepts:
/// `jute.maxbuffer`, default `0xfffff` (1,048,575 bytes).
///
/// `NIOServerCnxn.readLength` (and `NettyServerCnxn`) close the connection when a frame's
/// length is negative or greater than `BinaryInputArchive.maxBuffer`, with no extra
/// allowance. The extra allowance `zookeeper.jute.maxbuffer.extrasize` (default: the same as
/// `jute.maxbuffer`, at least 1,024) only widens `BinaryInputArchive.checkLength`, the bound
/// on one buffer or string inside a record; on the client port the frame bound is the
/// tighter one, so it never matters there. The Java client applies the same default bound to
/// the frames it receives (`ClientCnxnSocket.readLength` against
/// `ZKClientConfig.CLIENT_MAX_PACKET_LENGTH_DEFAULT`, `0xfffff`): a larger reply makes it drop
/// the connection.
pub const MAX_PACKET: usize = 0xfffff;

/// A jute decoding error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JuteError {
    /// The input ended inside a field.
    #[error("truncated input: {needed} bytes needed, {remaining} left")]
    Truncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        remaining: usize,
    },
    /// A buffer or string length below -1.
    #[error("negative length {0}")]
    NegativeLength(i32),
    /// A buffer or string length greater than the bytes left.
    #[error("length {len} exceeds the {remaining} bytes left")]
    LengthTooLong {
        /// The length claimed.
        len: usize,
        /// Bytes left.
        remaining: usize,
    },
    /// A vector count greater than the bytes left (every element takes at least one byte).
    #[error("vector of {count} elements cannot fit in the {remaining} bytes left")]
    VectorTooLong {
        /// The count claimed.
        count: usize,
        /// Bytes left.
        remaining: usize,
    },
    /// A string that is not UTF-8.
    #[error("string is not valid UTF-8")]
    BadUtf8,
    /// A null string (length -1) where the record needs one (a path, an ACL id, …).
    #[error("null string where a value is required")]
    NullString,
    /// An operation code ZooKeeper does not know.
    #[error("unknown op code {0}")]
    UnknownOp(i32),
    /// An operation not allowed where it appears (a read inside `multi`, a write inside
    /// `multiRead`, a nested `multi`, a result type a response may not carry, …).
    #[error("op {op} is not allowed in {context}")]
    OpNotAllowed {
        /// The op code.
        op: i32,
        /// Where it appeared.
        context: &'static str,
    },
    /// Bytes left after a record where none may be.
    #[error("{0} trailing bytes after the record")]
    TrailingBytes(usize),
    /// An enumerated field with a value outside its range.
    #[error("bad {field} value {value}")]
    BadEnum {
        /// The field.
        field: &'static str,
        /// The value.
        value: i32,
    },
    /// A client-port frame length that is negative or above [`MAX_PACKET`].
    #[error("frame length {0} is out of range (0..={MAX_PACKET})")]
    BadFrameLength(i64),
}

/// The length of a client-port frame from its 4-byte prefix, checked as ZooKeeper's
/// `NIOServerCnxn.readLength` checks it: negative or above [`MAX_PACKET`] is
/// [`JuteError::BadFrameLength`] (ZooKeeper closes the connection).
///
/// On a connection's first frame ZooKeeper first checks whether the four bytes are a
/// four-letter word (`ruok`, `srvr`, …: `NIOServerCnxn.checkFourLetterWord`); read as a
/// length each of them is far above [`MAX_PACKET`], so a server must check for them before
/// calling this.
pub fn frame_length(prefix: [u8; 4]) -> Result<usize, JuteError> {
    frame_length_with_limit(prefix, MAX_PACKET)
}

/// [`frame_length`] against another limit (a configured `jute.maxbuffer`).
pub fn frame_length_with_limit(prefix: [u8; 4], limit: usize) -> Result<usize, JuteError> {
    let len = i32::from_be_bytes(prefix);
    match usize::try_from(len) {
        Ok(n) if n <= limit => Ok(n),
        _ => Err(JuteError::BadFrameLength(i64::from(len))),
    }
}

/// A jute decoder over a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// Ends decoding: [`JuteError::TrailingBytes`] if bytes are left.
    pub fn finish(self) -> Result<(), JuteError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(JuteError::TrailingBytes(self.buf.len()))
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], JuteError> {
        if n > self.buf.len() {
            return Err(JuteError::Truncated {
                needed: n,
                remaining: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], JuteError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// An `int`.
    pub fn read_i32(&mut self) -> Result<i32, JuteError> {
        Ok(i32::from_be_bytes(self.take_array()?))
    }

    /// A `long`.
    pub fn read_i64(&mut self) -> Result<i64, JuteError> {
        Ok(i64::from_be_bytes(self.take_array()?))
    }

    /// A `boolean`: one byte, true unless zero (as Java's `DataInput.readBoolean`).
    pub fn read_bool(&mut self) -> Result<bool, JuteError> {
        Ok(self.take_array::<1>()?[0] != 0)
    }

    /// The bytes of a buffer or string of length `len` (-1 = null, `None`).
    fn read_len_prefixed(&mut self) -> Result<Option<&'a [u8]>, JuteError> {
        let len = self.read_i32()?;
        if len == -1 {
            return Ok(None);
        }
        let n = usize::try_from(len).map_err(|_| JuteError::NegativeLength(len))?;
        if n > self.buf.len() {
            return Err(JuteError::LengthTooLong {
                len: n,
                remaining: self.buf.len(),
            });
        }
        self.take(n).map(Some)
    }

    /// A `buffer`: `None` for null (length -1).
    pub fn read_buffer(&mut self) -> Result<Option<Vec<u8>>, JuteError> {
        Ok(self.read_len_prefixed()?.map(<[u8]>::to_vec))
    }

    /// A `buffer` where ZooKeeper makes no difference between null and empty (a session
    /// password, an auth token): null reads as empty.
    pub fn read_buffer_or_empty(&mut self) -> Result<Vec<u8>, JuteError> {
        Ok(self.read_buffer()?.unwrap_or_default())
    }

    /// A `ustring`: `None` for null (length -1).
    pub fn read_ustring(&mut self) -> Result<Option<String>, JuteError> {
        match self.read_len_prefixed()? {
            None => Ok(None),
            Some(b) => std::str::from_utf8(b)
                .map(|s| Some(s.to_owned()))
                .map_err(|_| JuteError::BadUtf8),
        }
    }

    /// A `ustring` the record needs (a path, a scheme, an id): null is
    /// [`JuteError::NullString`].
    ///
    /// ZooKeeper itself deserialises the null and fails later: a null path of a write is
    /// answered `BadArguments` (`PathUtils.validatePath`), of a read `MarshallingError` (a
    /// `NullPointerException` in `FinalRequestProcessor`); an empty string would not be
    /// equivalent (the data tree also keeps the root under `""`), hence an error, which the
    /// server answers `MarshallingError`.
    pub fn read_string(&mut self) -> Result<String, JuteError> {
        self.read_ustring()?.ok_or(JuteError::NullString)
    }

    /// A vector count: `None` for null (-1), 0 for any other negative count (as ZooKeeper's
    /// `BinaryIndex`), and never more than the bytes left (each element takes at least one).
    fn read_count(&mut self) -> Result<Option<usize>, JuteError> {
        let count = self.read_i32()?;
        if count == -1 {
            return Ok(None);
        }
        let n = usize::try_from(count).unwrap_or(0);
        if n > self.buf.len() {
            return Err(JuteError::VectorTooLong {
                count: n,
                remaining: self.buf.len(),
            });
        }
        Ok(Some(n))
    }

    /// A `vector`, each element read by `elem`; null (-1) reads as empty (no client-port
    /// record gives a null vector a meaning of its own).
    pub fn read_vec<T>(
        &mut self,
        elem: impl FnMut(&mut Reader<'a>) -> Result<T, JuteError>,
    ) -> Result<Vec<T>, JuteError> {
        Ok(self.read_opt_vec(elem)?.unwrap_or_default())
    }

    /// A `vector`: `None` for null (-1).
    pub fn read_opt_vec<T>(
        &mut self,
        mut elem: impl FnMut(&mut Reader<'a>) -> Result<T, JuteError>,
    ) -> Result<Option<Vec<T>>, JuteError> {
        let Some(n) = self.read_count()? else {
            return Ok(None);
        };
        // The count is bounded by the bytes left; the elements' sizes are not known yet, so
        // reserve for at most one element per 4 bytes left (the smallest non-boolean field).
        let mut out = Vec::with_capacity(n.min(self.buf.len() / 4));
        for _ in 0..n {
            out.push(elem(self)?);
        }
        Ok(Some(out))
    }

    /// A `vector<ustring>` (each string required).
    pub fn read_strings(&mut self) -> Result<Vec<String>, JuteError> {
        self.read_vec(Reader::read_string)
    }

    /// A `Stat` record.
    pub fn read_stat(&mut self) -> Result<Stat, JuteError> {
        Ok(Stat {
            czxid: self.read_i64()?,
            mzxid: self.read_i64()?,
            ctime: self.read_i64()?,
            mtime: self.read_i64()?,
            version: self.read_i32()?,
            cversion: self.read_i32()?,
            aversion: self.read_i32()?,
            ephemeral_owner: self.read_i64()?,
            data_length: self.read_i32()?,
            num_children: self.read_i32()?,
            pzxid: self.read_i64()?,
        })
    }

    /// An `Id` record (scheme and id both required).
    pub fn read_id(&mut self) -> Result<Id, JuteError> {
        Ok(Id {
            scheme: self.read_string()?,
            id: self.read_string()?,
        })
    }

    /// An `ACL` record.
    pub fn read_acl(&mut self) -> Result<Acl, JuteError> {
        Ok(Acl {
            perms: self.read_i32()?,
            id: self.read_id()?,
        })
    }

    /// A `vector<ACL>`; null reads as empty (ZooKeeper answers both `InvalidACL`).
    pub fn read_acls(&mut self) -> Result<Vec<Acl>, JuteError> {
        self.read_vec(Reader::read_acl)
    }
}

/// A jute encoder.
///
/// The writes cannot fail; a buffer, string or vector longer than `i32::MAX` (which no
/// ZooKeeper frame can hold: see [`MAX_PACKET`]) cannot be encoded and panics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writer {
    buf: Vec<u8>,
    framed: bool,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// A writer of a client-port frame: 4 bytes are reserved for the length, which
    /// [`Writer::finish_frame`] fills in.
    pub fn frame() -> Writer {
        Writer {
            buf: vec![0; 4],
            framed: true,
        }
    }

    /// The bytes written (the reserved length prefix included for a [`Writer::frame`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Number of bytes written (the reserved length prefix included).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes written, as they are (for a [`Writer::frame`], see
    /// [`Writer::finish_frame`]).
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }

    /// The whole frame: the length prefix filled in (or prepended, if this writer was not
    /// made by [`Writer::frame`]) and the record bytes after it.
    ///
    /// # Panics
    /// If the record is longer than `i32::MAX` bytes.
    pub fn finish_frame(mut self) -> Vec<u8> {
        if !self.framed {
            self.buf.splice(0..0, [0u8; 4]);
        }
        let len = wire_len(self.buf.len() - 4);
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }

    /// An `int`.
    pub fn write_i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A `long`.
    pub fn write_i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A `boolean` (1 or 0).
    pub fn write_bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// A non-null `buffer`.
    pub fn write_buffer(&mut self, v: &[u8]) {
        self.write_i32(wire_len(v.len()));
        self.buf.extend_from_slice(v);
    }

    /// A `buffer`, null (-1) for `None`.
    pub fn write_opt_buffer(&mut self, v: Option<&[u8]>) {
        match v {
            Some(b) => self.write_buffer(b),
            None => self.write_i32(-1),
        }
    }

    /// A non-null `ustring`.
    pub fn write_string(&mut self, v: &str) {
        self.write_buffer(v.as_bytes());
    }

    /// A `ustring`, null (-1) for `None`.
    pub fn write_ustring(&mut self, v: Option<&str>) {
        self.write_opt_buffer(v.map(str::as_bytes));
    }

    /// A non-null `vector`, each element written by `elem`.
    pub fn write_vec<T>(&mut self, items: &[T], mut elem: impl FnMut(&mut Writer, &T)) {
        self.write_i32(wire_len(items.len()));
        for item in items {
            elem(self, item);
        }
    }

    /// A `vector<ustring>`.
    pub fn write_strings<S: AsRef<str>>(&mut self, items: &[S]) {
        self.write_vec(items, |w, s| w.write_string(s.as_ref()));
    }

    /// A `Stat` record.
    pub fn write_stat(&mut self, s: &Stat) {
        self.write_i64(s.czxid);
        self.write_i64(s.mzxid);
        self.write_i64(s.ctime);
        self.write_i64(s.mtime);
        self.write_i32(s.version);
        self.write_i32(s.cversion);
        self.write_i32(s.aversion);
        self.write_i64(s.ephemeral_owner);
        self.write_i32(s.data_length);
        self.write_i32(s.num_children);
        self.write_i64(s.pzxid);
    }

    /// An `Id` record.
    pub fn write_id(&mut self, id: &Id) {
        self.write_string(&id.scheme);
        self.write_string(&id.id);
    }

    /// An `ACL` record.
    pub fn write_acl(&mut self, acl: &Acl) {
        self.write_i32(acl.perms);
        self.write_id(&acl.id);
    }

    /// A `vector<ACL>`.
    pub fn write_acls(&mut self, acls: &[Acl]) {
        self.write_vec(acls, Writer::write_acl);
    }
}

/// A length as jute writes it. Saturates rather than panics: only a buffer or vector of more
/// than 2^31 bytes or elements would exceed it, which no server holds (data is bounded by
/// `jute.maxbuffer`) and which no client would accept either.
fn wire_len(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_buffer_length_is_an_error_not_an_allocation() {
        let mut bytes = vec![0x7f, 0xff, 0xff, 0xff];
        bytes.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            Reader::new(&bytes).read_buffer(),
            Err(JuteError::LengthTooLong {
                len: 0x7fff_ffff,
                remaining: 6
            })
        );
        assert!(matches!(
            Reader::new(&bytes).read_ustring(),
            Err(JuteError::LengthTooLong { .. })
        ));
    }

    #[test]
    fn oversized_vector_length_is_an_error_not_an_allocation() {
        let mut bytes = vec![0x7f, 0xff, 0xff, 0xff];
        bytes.extend_from_slice(&[0; 6]);
        assert_eq!(
            Reader::new(&bytes).read_strings(),
            Err(JuteError::VectorTooLong {
                count: 0x7fff_ffff,
                remaining: 6
            })
        );
    }

    #[test]
    fn buffer_length_below_minus_one_is_an_error() {
        let bytes = (-2i32).to_be_bytes();
        assert_eq!(
            Reader::new(&bytes).read_buffer(),
            Err(JuteError::NegativeLength(-2))
        );
    }

    #[test]
    fn null_buffer_and_string_read_as_none() {
        let bytes = [0xff; 8];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_buffer(), Ok(None));
        assert_eq!(r.read_ustring(), Ok(None));
        assert!(r.is_empty());
        assert_eq!(
            Reader::new(&bytes).read_string(),
            Err(JuteError::NullString)
        );
    }

    #[test]
    fn vector_count_below_minus_one_reads_as_empty_as_zookeeper_does() {
        let bytes = (-7i32).to_be_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_strings(), Ok(vec![]));
        assert!(r.is_empty());
        let null = (-1i32).to_be_bytes();
        assert_eq!(Reader::new(&null).read_opt_vec(Reader::read_i32), Ok(None));
    }

    #[test]
    fn any_non_zero_byte_is_true() {
        let mut r = Reader::new(&[0, 1, 2, 0xff]);
        assert_eq!(
            [r.read_bool(), r.read_bool(), r.read_bool(), r.read_bool()],
            [Ok(false), Ok(true), Ok(true), Ok(true)]
        );
    }

    #[test]
    fn malformed_utf8_is_an_error() {
        let bytes = [0, 0, 0, 2, 0xc3, 0x28];
        assert_eq!(Reader::new(&bytes).read_ustring(), Err(JuteError::BadUtf8));
    }

    #[test]
    fn truncated_int_is_an_error() {
        assert_eq!(
            Reader::new(&[0, 0, 1]).read_i32(),
            Err(JuteError::Truncated {
                needed: 4,
                remaining: 3
            })
        );
    }

    #[test]
    fn trailing_bytes_are_reported_by_finish() {
        let mut r = Reader::new(&[0, 0, 0, 1, 9]);
        assert_eq!(r.read_i32(), Ok(1));
        assert_eq!(r.finish(), Err(JuteError::TrailingBytes(1)));
    }

    #[test]
    fn stat_is_written_in_zookeeper_field_order() {
        let stat = Stat {
            czxid: 1,
            mzxid: 2,
            ctime: 3,
            mtime: 4,
            version: 5,
            cversion: 6,
            aversion: 7,
            ephemeral_owner: 8,
            data_length: 9,
            num_children: 10,
            pzxid: 11,
        };
        let mut w = Writer::new();
        w.write_stat(&stat);
        let mut expected = Vec::new();
        for (v, wide) in [
            (1i32, true),
            (2, true),
            (3, true),
            (4, true),
            (5, false),
            (6, false),
            (7, false),
            (8, true),
            (9, false),
            (10, false),
            (11, true),
        ] {
            if wide {
                expected.extend_from_slice(&i64::from(v).to_be_bytes());
            } else {
                expected.extend_from_slice(&v.to_be_bytes());
            }
        }
        assert_eq!(w.as_bytes(), &expected[..]);
        assert_eq!(Reader::new(&expected).read_stat(), Ok(stat));
    }

    #[test]
    fn frame_length_above_jute_maxbuffer_is_refused() {
        assert_eq!(frame_length(0xfffffu32.to_be_bytes()), Ok(0xfffff));
        assert_eq!(
            frame_length(0x100000u32.to_be_bytes()),
            Err(JuteError::BadFrameLength(0x100000))
        );
        assert_eq!(
            frame_length((-1i32).to_be_bytes()),
            Err(JuteError::BadFrameLength(-1))
        );
    }

    #[test]
    fn finish_frame_prefixes_the_record_length() {
        let mut w = Writer::frame();
        w.write_i32(7);
        assert_eq!(w.finish_frame(), vec![0, 0, 0, 4, 0, 0, 0, 7]);
        let mut w = Writer::new();
        w.write_bool(true);
        assert_eq!(w.finish_frame(), vec![0, 0, 0, 1, 1]);
    }
}
