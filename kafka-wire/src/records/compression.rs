//! Compression of a batch's records section: gzip, Snappy, LZ4 (frame format) and Zstandard,
//! each behind its cargo feature.
//!
//! Decompression is bounded: output beyond the caller's maximum is an error, and no codec
//! allocates much more than that maximum (Snappy's declared length is also checked against
//! the input's size; Zstandard's window is capped near the maximum, at least 2 MiB).
//!
//! Snappy: Kafka's Java clients write the xerial framing (a 16-byte header, then blocks each
//! prefixed by a 4-byte big-endian length), librdkafka writes a plain Snappy block for magic
//! v2. Both are decoded; the builder writes a plain block, which Java reads too.

use bytes::Bytes;

use super::attributes::Compression;
use crate::{DecodeError, EncodeError};

#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
fn read_bounded<R: std::io::Read>(
    reader: R,
    input_len: usize,
    max: usize,
) -> Result<Bytes, DecodeError> {
    use std::io::Read;
    let mut out = Vec::with_capacity(input_len.saturating_mul(2).min(max));
    reader
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError::Decompression(e.to_string()))?;
    if out.len() > max {
        return Err(too_large(max));
    }
    Ok(Bytes::from(out))
}

#[allow(dead_code)]
fn too_large(max: usize) -> DecodeError {
    DecodeError::Decompression(format!("output exceeds the bound of {max} bytes"))
}

/// Decompresses a records section with `codec`, failing once the output exceeds `max` bytes.
pub(crate) fn decompress(
    codec: Compression,
    input: &[u8],
    max: usize,
) -> Result<Bytes, DecodeError> {
    let _ = max;
    match codec {
        Compression::None => Ok(Bytes::copy_from_slice(input)),
        #[cfg(feature = "gzip")]
        Compression::Gzip => {
            read_bounded(flate2::read::MultiGzDecoder::new(input), input.len(), max)
        }
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::decompress(input, max),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => {
            read_bounded(lz4_flex::frame::FrameDecoder::new(input), input.len(), max)
        }
        #[cfg(feature = "zstd")]
        Compression::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::new(input)
                .map_err(|e| DecodeError::Decompression(e.to_string()))?;
            // The window is the decoder's largest allocation: keep it near the bound, but
            // never under 2 MiB (the window of zstd's default levels on streamed input).
            let ceil_log2 = usize::BITS - max.max(2).saturating_sub(1).leading_zeros();
            let window_log = ceil_log2.clamp(21, 27);
            decoder
                .window_log_max(window_log)
                .map_err(|e| DecodeError::Decompression(e.to_string()))?;
            read_bounded(decoder, input.len(), max)
        }
        #[allow(unreachable_patterns)]
        other => Err(DecodeError::UnsupportedCompression(other.id())),
    }
}

/// Compresses a records section with `codec`.
pub(crate) fn compress(codec: Compression, input: &[u8]) -> Result<Bytes, EncodeError> {
    match codec {
        Compression::None => Ok(Bytes::copy_from_slice(input)),
        #[cfg(feature = "gzip")]
        Compression::Gzip => {
            use std::io::Write;
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(input.len() / 2 + 64),
                flate2::Compression::default(),
            );
            enc.write_all(input).map_err(compression_error)?;
            enc.finish().map(Bytes::from).map_err(compression_error)
        }
        #[cfg(feature = "snappy")]
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(input)
            .map(Bytes::from)
            .map_err(compression_error),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => {
            use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
            use std::io::Write;
            // Kafka's LZ4 reader expects independent blocks.
            let info = FrameInfo::new()
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Independent);
            let mut enc =
                FrameEncoder::with_frame_info(info, Vec::with_capacity(input.len() / 2 + 64));
            enc.write_all(input).map_err(compression_error)?;
            enc.finish().map(Bytes::from).map_err(compression_error)
        }
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::bulk::compress(input, 3)
            .map(Bytes::from)
            .map_err(compression_error),
        #[allow(unreachable_patterns)]
        other => Err(EncodeError::Compression(format!(
            "codec {other:?} is not compiled in (enable its cargo feature)"
        ))),
    }
}

#[allow(dead_code)]
fn compression_error<E: std::fmt::Display>(e: E) -> EncodeError {
    EncodeError::Compression(e.to_string())
}

#[cfg(feature = "snappy")]
mod snappy {
    use bytes::Bytes;

    use super::too_large;
    use crate::DecodeError;

    /// The xerial framing's magic, followed by two big-endian i32 versions.
    const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
    const XERIAL_HEADER: usize = 16;
    /// A Snappy block cannot expand more than this many times (a 3-byte copy emits at most
    /// 64 bytes), so a larger declared length is corrupt and is refused before allocating.
    const MAX_RATIO: usize = 24;

    fn err(e: snap::Error) -> DecodeError {
        DecodeError::Decompression(e.to_string())
    }

    fn block(input: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), DecodeError> {
        let len = snap::raw::decompress_len(input).map_err(err)?;
        if len > input.len().saturating_mul(MAX_RATIO).saturating_add(16) {
            return Err(DecodeError::Decompression(format!(
                "snappy block of {} bytes declares {len} bytes",
                input.len()
            )));
        }
        if out.len().saturating_add(len) > max {
            return Err(too_large(max));
        }
        let start = out.len();
        out.resize(start + len, 0);
        let n = snap::raw::Decoder::new()
            .decompress(input, &mut out[start..])
            .map_err(err)?;
        out.truncate(start + n);
        Ok(())
    }

    pub(super) fn decompress(input: &[u8], max: usize) -> Result<Bytes, DecodeError> {
        let mut out = Vec::new();
        if input.len() >= XERIAL_HEADER && input[..8] == XERIAL_MAGIC {
            let mut rest = &input[XERIAL_HEADER..];
            while !rest.is_empty() {
                if rest.len() < 4 {
                    return Err(DecodeError::Truncated {
                        needed: 4,
                        remaining: rest.len(),
                    });
                }
                let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                rest = &rest[4..];
                if len > rest.len() {
                    return Err(DecodeError::Truncated {
                        needed: len,
                        remaining: rest.len(),
                    });
                }
                block(&rest[..len], &mut out, max)?;
                rest = &rest[len..];
            }
        } else {
            block(input, &mut out, max)?;
        }
        Ok(Bytes::from(out))
    }
}
