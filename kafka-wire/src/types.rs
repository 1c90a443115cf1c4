//! Value types the messages share: [`Uuid`], [`Int32Array`] (replica lists), and the raw
//! tagged fields a version does not know ([`RawTaggedField`], [`UnknownTaggedFields`]).

use std::fmt;

use bytes::Bytes;
use smallvec::SmallVec;

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

/// The tagged fields of a struct that its version does not know, in the order read.
///
/// Empty (the usual case) it holds no allocation and costs nothing to create or drop. It
/// derefs to a slice; build one with `From<Vec<RawTaggedField>>` or [`UnknownTaggedFields::push`].
#[derive(Clone, Default)]
// One pointer wide when empty, which every struct of every message carries: the box keeps
// the common case small, the rare non-empty case pays one more allocation.
#[allow(clippy::box_collection)]
pub struct UnknownTaggedFields(Option<Box<Vec<RawTaggedField>>>);

impl UnknownTaggedFields {
    /// No fields.
    pub const fn new() -> Self {
        UnknownTaggedFields(None)
    }

    /// Appends a field.
    pub fn push(&mut self, field: RawTaggedField) {
        self.0.get_or_insert_with(Box::default).push(field);
    }

    /// The fields as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[RawTaggedField] {
        match &self.0 {
            None => &[],
            Some(v) => v,
        }
    }
}

impl std::ops::Deref for UnknownTaggedFields {
    type Target = [RawTaggedField];
    #[inline]
    fn deref(&self) -> &[RawTaggedField] {
        self.as_slice()
    }
}

impl PartialEq for UnknownTaggedFields {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        // Both empty (the usual case, as when an encoder compares a struct with its default)
        // is decided without a call.
        match (&self.0, &other.0) {
            (None, None) => true,
            _ => self.as_slice() == other.as_slice(),
        }
    }
}

impl Eq for UnknownTaggedFields {}

impl fmt::Debug for UnknownTaggedFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl From<Vec<RawTaggedField>> for UnknownTaggedFields {
    fn from(v: Vec<RawTaggedField>) -> Self {
        if v.is_empty() {
            UnknownTaggedFields(None)
        } else {
            UnknownTaggedFields(Some(Box::new(v)))
        }
    }
}

impl FromIterator<RawTaggedField> for UnknownTaggedFields {
    fn from_iter<I: IntoIterator<Item = RawTaggedField>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

/// An array of `int32` (broker ids, partition indexes): up to four elements are stored inline,
/// so the common replica lists of a partition need no allocation of their own.
pub type Int32Array = SmallVec<[i32; 4]>;
