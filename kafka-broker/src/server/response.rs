//! Encoding a response frame: size prefix, response header of the version the API and version
//! call for, and the body, as chunks. Record data in the body stays in its own [`Bytes`]
//! chunks (no copy), ready for a vectored write.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::Duration;

use bytes::{Buf, Bytes};
use futures::FutureExt;
use kafka_wire::messages::ApiVersionsResponse;
use kafka_wire::{ApiKey, ChunkedWriter, Encode, EncodeError, ResponseBody, ResponseHeader};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Most buffers handed to one `write_vectored` call.
const MAX_IO_SLICES: usize = 64;

/// Encodes `body` as the answer to request `correlation_id` of `api_key` at `version`: a
/// 4-byte size, the response header ([`ApiKey::response_header_version`]) and the body.
pub(crate) fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseBody,
) -> Result<Vec<Bytes>, EncodeError> {
    let mut w = ChunkedWriter::with_capacity(256);
    write_header(&mut w, api_key, version, correlation_id)?;
    body.encode(&mut w, version)?;
    finish(w)
}

/// Encodes an ApiVersions answer at `version` (v0 for an UNSUPPORTED_VERSION answer); its
/// response header is always v0.
pub(crate) fn encode_api_versions(
    version: i16,
    correlation_id: i32,
    body: &ApiVersionsResponse,
) -> Result<Vec<Bytes>, EncodeError> {
    let mut w = ChunkedWriter::with_capacity(256);
    write_header(&mut w, ApiKey::ApiVersions, version, correlation_id)?;
    body.encode(&mut w, version)?;
    finish(w)
}

fn write_header(
    w: &mut ChunkedWriter,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<(), EncodeError> {
    ResponseHeader {
        correlation_id,
        unknown_tagged_fields: Default::default(),
    }
    .encode(w, api_key.response_header_version(version))
}

fn finish(w: ChunkedWriter) -> Result<Vec<Bytes>, EncodeError> {
    let len = i32::try_from(w.len()).map_err(|_| EncodeError::TooLong {
        what: "response frame",
        length: w.len(),
    })?;
    let mut chunks = Vec::with_capacity(4);
    chunks.push(Bytes::copy_from_slice(&len.to_be_bytes()));
    chunks.extend(w.into_chunks());
    Ok(chunks)
}

/// Writes every chunk, in order, with vectored writes; the chunks are not copied. Fails with
/// [`std::io::ErrorKind::TimedOut`] when one write makes no progress for `stall_timeout`.
pub(crate) async fn write_chunks<W: AsyncWrite + Unpin>(
    w: &mut W,
    chunks: Vec<Bytes>,
    stall_timeout: Duration,
) -> std::io::Result<()> {
    let mut chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
    crate::metrics::record_bytes_out(chunks.iter().map(Bytes::len).sum());
    while !chunks.is_empty() {
        let written = {
            let slices: Vec<IoSlice<'_>> = chunks
                .iter()
                .take(MAX_IO_SLICES)
                .map(|c| IoSlice::new(c))
                .collect();
            // Most writes complete at once: only a write that has to wait arms the stall
            // timer (one timer entry less per response).
            match w.write_vectored(&slices).now_or_never() {
                Some(written) => written?,
                None => {
                    match tokio::time::timeout(stall_timeout, w.write_vectored(&slices)).await {
                        Ok(written) => written?,
                        Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                    }
                }
            }
        };
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let mut left = written;
        while left > 0 {
            let Some(front) = chunks.front_mut() else {
                break;
            };
            if front.len() <= left {
                left -= front.len();
                chunks.pop_front();
            } else {
                front.advance(left);
                left = 0;
            }
        }
    }
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_wire::messages::FetchResponse;

    #[test]
    fn api_versions_frames_use_response_header_v0_even_when_flexible() {
        let chunks = encode_api_versions(3, 77, &ApiVersionsResponse::default()).unwrap();
        let frame: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
        let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(size, frame.len() - 4);
        assert_eq!(&frame[4..8], &77i32.to_be_bytes());
        // error code 0 follows the correlation id directly: no tagged-field byte (header v0)
        assert_eq!(&frame[8..10], &[0, 0]);
    }

    #[test]
    fn fetch_frames_use_response_header_v1_from_v12() {
        let body = ResponseBody::Fetch(FetchResponse::default());
        let v11: usize = encode_response(ApiKey::Fetch, 11, 1, &body)
            .unwrap()
            .iter()
            .map(Bytes::len)
            .sum();
        let chunks = encode_response(ApiKey::Fetch, 12, 1, &body).unwrap();
        let frame: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
        assert_eq!(frame[8], 0, "empty tagged fields of response header v1");
        assert!(v11 > 0);
    }

    #[test]
    fn fetch_record_data_is_a_chunk_of_its_own_not_a_copy() {
        use kafka_wire::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        let records = Bytes::from(vec![9u8; 4096]);
        let body = ResponseBody::Fetch(FetchResponse {
            responses: vec![FetchableTopicResponse {
                topic: "t".into(),
                partitions: vec![PartitionData {
                    records: Some(records.clone()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let chunks = encode_response(ApiKey::Fetch, 12, 5, &body).unwrap();
        assert!(chunks
            .iter()
            .any(|c| c.as_ptr() == records.as_ptr() && c.len() == records.len()));
    }

    #[tokio::test]
    async fn write_chunks_writes_every_byte_in_order() {
        let chunks: Vec<Bytes> = (0..200u8)
            .map(|i| Bytes::from(vec![i; usize::from(i % 7)]))
            .collect();
        let expected: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
        let mut out = Vec::new();
        write_chunks(&mut out, chunks, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(out, expected);
    }
}
