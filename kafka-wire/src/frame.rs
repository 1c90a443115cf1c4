//! Framing: every Kafka request and response travels as a 4-byte big-endian size followed by
//! that many bytes. Size checks against a configurable maximum ([`DecodeError::FrameTooLarge`]),
//! a cheap peek at a request's api key, api version and correlation id for dispatch, and
//! (feature `tokio`) `KafkaFrameCodec`, a `tokio-util` decoder and encoder.
//!
//! The decoder never reserves memory for a frame's declared size ahead of its bytes, so a
//! peer announcing a large frame costs nothing until it sends it.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::{DecodeError, EncodeError};

/// Size of the length prefix.
pub const FRAME_PREFIX_SIZE: usize = 4;
/// Default maximum frame size: Kafka's `socket.request.max.bytes` default (100 MiB).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;
/// Most bytes the decoder reserves ahead of a frame's data.
const RESERVE_STEP: usize = 64 * 1024;

/// Reads the size prefix at the start of `buf`: `Ok(None)` if fewer than 4 bytes are there,
/// an error if the size is negative or above `max_frame_size`.
pub fn peek_frame_size(buf: &[u8], max_frame_size: usize) -> Result<Option<usize>, DecodeError> {
    if buf.len() < FRAME_PREFIX_SIZE {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 {
        return Err(DecodeError::InvalidLength {
            what: "frame size",
            length: i64::from(size),
        });
    }
    let size = size as usize;
    if size > max_frame_size {
        return Err(DecodeError::FrameTooLarge {
            size,
            max: max_frame_size,
        });
    }
    Ok(Some(size))
}

/// Takes one whole frame's payload (without the prefix) off the front of `src`, or returns
/// `Ok(None)` and leaves `src` as it is when the frame is not complete yet.
pub fn decode_frame(
    src: &mut BytesMut,
    max_frame_size: usize,
) -> Result<Option<Bytes>, DecodeError> {
    let Some(size) = peek_frame_size(src, max_frame_size)? else {
        return Ok(None);
    };
    let total = FRAME_PREFIX_SIZE + size;
    if src.len() < total {
        src.reserve((total - src.len()).min(RESERVE_STEP));
        return Ok(None);
    }
    src.advance(FRAME_PREFIX_SIZE);
    Ok(Some(src.split_to(size).freeze()))
}

/// Appends `payload` to `dst` as one frame.
pub fn encode_frame(
    payload: &[u8],
    dst: &mut BytesMut,
    max_frame_size: usize,
) -> Result<(), EncodeError> {
    if payload.len() > max_frame_size || payload.len() > i32::MAX as usize {
        return Err(EncodeError::TooLong {
            what: "frame",
            length: payload.len(),
        });
    }
    dst.reserve(FRAME_PREFIX_SIZE + payload.len());
    dst.put_u32(payload.len() as u32);
    dst.put_slice(payload);
    Ok(())
}

/// Reads `(api_key, api_version, correlation_id)` from the start of a request frame's payload
/// (the first 8 bytes of every request header version), without decoding the rest.
pub fn peek_request_header(payload: &[u8]) -> Result<(i16, i16, i32), DecodeError> {
    if payload.len() < 8 {
        return Err(DecodeError::Truncated {
            needed: 8,
            remaining: payload.len(),
        });
    }
    Ok((
        i16::from_be_bytes([payload[0], payload[1]]),
        i16::from_be_bytes([payload[2], payload[3]]),
        i32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]),
    ))
}

/// Reads the correlation id from the start of a response frame's payload.
pub fn peek_response_correlation_id(payload: &[u8]) -> Result<i32, DecodeError> {
    if payload.len() < 4 {
        return Err(DecodeError::Truncated {
            needed: 4,
            remaining: payload.len(),
        });
    }
    Ok(i32::from_be_bytes([
        payload[0], payload[1], payload[2], payload[3],
    ]))
}

#[cfg(feature = "tokio")]
pub use codec::{FrameError, KafkaFrameCodec};

#[cfg(feature = "tokio")]
mod codec {
    use bytes::{Bytes, BytesMut};
    use thiserror::Error;
    use tokio_util::codec::{Decoder, Encoder};

    use super::{decode_frame, encode_frame, DEFAULT_MAX_FRAME_SIZE};
    use crate::{DecodeError, EncodeError};

    /// Why [`KafkaFrameCodec`] failed.
    #[derive(Debug, Error)]
    #[non_exhaustive]
    pub enum FrameError {
        /// The transport failed.
        #[error("i/o: {0}")]
        Io(#[from] std::io::Error),
        /// A frame's size prefix is negative or above the maximum.
        #[error(transparent)]
        Decode(#[from] DecodeError),
        /// A frame to send is above the maximum.
        #[error(transparent)]
        Encode(#[from] EncodeError),
    }

    /// A `tokio-util` codec for size-prefixed Kafka frames; items are frame payloads.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct KafkaFrameCodec {
        max_frame_size: usize,
    }

    impl KafkaFrameCodec {
        /// A codec refusing frames above `max_frame_size` bytes, in either direction.
        pub fn new(max_frame_size: usize) -> KafkaFrameCodec {
            KafkaFrameCodec { max_frame_size }
        }

        /// The configured maximum.
        pub fn max_frame_size(&self) -> usize {
            self.max_frame_size
        }
    }

    impl Default for KafkaFrameCodec {
        /// A codec with [`DEFAULT_MAX_FRAME_SIZE`].
        fn default() -> Self {
            KafkaFrameCodec::new(DEFAULT_MAX_FRAME_SIZE)
        }
    }

    impl Decoder for KafkaFrameCodec {
        type Item = Bytes;
        type Error = FrameError;

        fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
            Ok(decode_frame(src, self.max_frame_size)?)
        }
    }

    impl Encoder<Bytes> for KafkaFrameCodec {
        type Error = FrameError;

        fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), FrameError> {
            Ok(encode_frame(&item, dst, self.max_frame_size)?)
        }
    }

    impl Encoder<&[u8]> for KafkaFrameCodec {
        type Error = FrameError;

        fn encode(&mut self, item: &[u8], dst: &mut BytesMut) -> Result<(), FrameError> {
            Ok(encode_frame(item, dst, self.max_frame_size)?)
        }
    }
}
