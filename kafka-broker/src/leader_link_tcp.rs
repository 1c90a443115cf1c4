//! [`TcpLeaderLink`]: a follower's [`LeaderLink`] to one leader broker over TCP with
//! `kafka-wire` — Fetch v12 (diverging epochs, KIP-320 epochs) and OffsetForLeaderEpoch v4 —
//! and [`KafkaConnection`], the small request/response client under it.
//!
//! One connection per leader, opened on first use and again after any failure: a failed
//! round trip drops the connection and the next request reconnects, resolving the leader's
//! address anew (it may have moved).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use kafka_replication::data_path::{self, CopyStep};
use kafka_replication::isr::BrokerId;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_wire::frame::{decode_frame, encode_frame, peek_frame_size, DEFAULT_MAX_FRAME_SIZE};
use kafka_wire::messages::{
    FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody, ResponseHeader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The Fetch version a follower sends: the first with diverging epochs in the answer.
pub const FOLLOWER_FETCH_VERSION: i16 = 12;
/// The OffsetForLeaderEpoch version a follower sends.
pub const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;

/// Why a round trip over TCP failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The leader's address is not known.
    #[error("no address known for broker {0}")]
    NoAddress(BrokerId),
    /// Connecting, writing or reading failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The request could not be encoded.
    #[error("encode: {0}")]
    Encode(#[from] kafka_wire::EncodeError),
    /// The response could not be decoded.
    #[error("decode: {0}")]
    Decode(#[from] kafka_wire::DecodeError),
    /// No answer within the request timeout.
    #[error("request timed out")]
    Timeout,
    /// The peer closed the connection.
    #[error("connection closed by the peer")]
    Closed,
    /// The answer was for another request or another API.
    #[error("unexpected response")]
    UnexpectedResponse,
}

/// One TCP connection speaking Kafka requests in order, one at a time.
pub struct KafkaConnection {
    stream: TcpStream,
    read_buf: BytesMut,
    next_correlation_id: i32,
    client_id: String,
    max_frame_size: usize,
}

impl KafkaConnection {
    /// Connects to `addr`; `client_id` goes in every request header.
    pub async fn connect(addr: SocketAddr, client_id: &str) -> Result<Self, LinkError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(KafkaConnection {
            stream,
            read_buf: BytesMut::with_capacity(64 * 1024),
            next_correlation_id: 0,
            client_id: client_id.to_owned(),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
        })
    }

    /// Sends `body` at `version` and waits for its answer (acks=0 produces get none: do not
    /// send them through here).
    pub async fn send(
        &mut self,
        version: i16,
        body: &RequestBody,
    ) -> Result<ResponseBody, LinkError> {
        let api_key = body.api_key();
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader {
            request_api_key: api_key.as_i16(),
            request_api_version: version,
            correlation_id,
            client_id: Some(self.client_id.as_str().into()),
            ..Default::default()
        };
        let mut payload = BytesMut::new();
        header.encode(&mut payload, api_key.request_header_version(version))?;
        body.encode(&mut payload, version)?;
        let mut frame = BytesMut::with_capacity(payload.len() + 4);
        encode_frame(&payload, &mut frame, self.max_frame_size)?;
        self.stream.write_all(&frame).await?;
        let mut response = loop {
            let (at, held) = (self.read_buf.as_ptr(), self.read_buf.len());
            if let Some(f) = decode_frame(&mut self.read_buf, self.max_frame_size)? {
                break f;
            }
            count_moved(at, held, &self.read_buf);
            self.make_room();
            if self.stream.read_buf(&mut self.read_buf).await? == 0 {
                return Err(LinkError::Closed);
            }
        };
        let h = ResponseHeader::decode(&mut response, api_key.response_header_version(version))?;
        if h.correlation_id != correlation_id {
            return Err(LinkError::UnexpectedResponse);
        }
        Ok(ResponseBody::decode(api_key, version, &mut response)?)
    }
}

impl KafkaConnection {
    /// Before a read: room for the whole rest of a frame whose size is known (up to
    /// [`FRAME_RESERVE_MAX`]), so its bytes read so far move at most once, and a fresh
    /// [`READ_RESERVE`] when the buffer is empty (the answers taken before keep their part of
    /// the old one: a follower's log holds the fetched batches as they were read). Counts
    /// the bytes a move copied (`data_path::CopyStep::FetchReadBuffer`).
    fn make_room(&mut self) {
        let buf = &mut self.read_buf;
        let (at, held) = (buf.as_ptr(), buf.len());
        let spare = buf.capacity() - buf.len();
        match peek_frame_size(buf, self.max_frame_size) {
            Ok(Some(size)) => {
                let rest = (FRAME_PREFIX + size).saturating_sub(buf.len());
                if spare < rest {
                    buf.reserve(rest.min(FRAME_RESERVE_MAX));
                }
            }
            _ if buf.is_empty() && spare < READ_RESERVE / 4 => buf.reserve(READ_RESERVE),
            _ => {}
        }
        count_moved(at, held, buf);
    }
}

/// Counts the `held` bytes of a partly read answer as copied when growing the read buffer
/// moved them away from `at`.
fn count_moved(at: *const u8, held: usize, buf: &BytesMut) {
    if held > 0 && buf.as_ptr() != at {
        data_path::count_copy(CopyStep::FetchReadBuffer, held);
    }
}

/// Bytes of a frame's size prefix.
const FRAME_PREFIX: usize = 4;
/// Most bytes reserved at once for the rest of a frame being read.
const FRAME_RESERVE_MAX: usize = 4 << 20;
/// Bytes reserved when the read buffer is empty and nearly full.
const READ_RESERVE: usize = 256 * 1024;

/// Finds a broker's address (from the metadata cache, a static map, ...).
pub type AddressBook = Arc<dyn Fn(BrokerId) -> Option<SocketAddr> + Send + Sync>;

/// A [`LeaderLink`] to one leader broker over TCP.
pub struct TcpLeaderLink {
    leader: BrokerId,
    addresses: AddressBook,
    client_id: String,
    timeout: Duration,
    connection: Option<KafkaConnection>,
}

impl TcpLeaderLink {
    /// A link from broker `local` to broker `leader`, found through `addresses`; a round trip
    /// taking longer than `timeout` fails (give it more than `replica.fetch.wait.max.ms`).
    pub fn new(
        local: BrokerId,
        leader: BrokerId,
        addresses: AddressBook,
        timeout: Duration,
    ) -> Self {
        TcpLeaderLink {
            leader,
            addresses,
            client_id: format!("broker-{local}-fetcher-{leader}"),
            timeout,
            connection: None,
        }
    }

    async fn round_trip(
        &mut self,
        version: i16,
        body: RequestBody,
    ) -> Result<ResponseBody, LinkError> {
        let timeout = self.timeout;
        let result = tokio::time::timeout(timeout, async {
            if self.connection.is_none() {
                let addr =
                    (self.addresses)(self.leader).ok_or(LinkError::NoAddress(self.leader))?;
                self.connection = Some(KafkaConnection::connect(addr, &self.client_id).await?);
            }
            match self.connection.as_mut() {
                Some(c) => c.send(version, &body).await,
                None => Err(LinkError::Closed),
            }
        })
        .await
        .unwrap_or(Err(LinkError::Timeout));
        if result.is_err() {
            // Reconnect on the next request.
            self.connection = None;
        }
        result
    }
}

#[async_trait]
impl LeaderLink for TcpLeaderLink {
    type Error = LinkError;

    async fn fetch(&mut self, request: FetchRequest) -> Result<FetchResponse, LinkError> {
        match self
            .round_trip(FOLLOWER_FETCH_VERSION, RequestBody::Fetch(request))
            .await?
        {
            ResponseBody::Fetch(r) => Ok(r),
            _ => Err(LinkError::UnexpectedResponse),
        }
    }

    async fn offset_for_leader_epoch(
        &mut self,
        request: OffsetForLeaderEpochRequest,
    ) -> Result<OffsetForLeaderEpochResponse, LinkError> {
        let version =
            OFFSET_FOR_LEADER_EPOCH_VERSION.min(ApiKey::OffsetForLeaderEpoch.versions().1);
        match self
            .round_trip(version, RequestBody::OffsetForLeaderEpoch(request))
            .await?
        {
            ResponseBody::OffsetForLeaderEpoch(r) => Ok(r),
            _ => Err(LinkError::UnexpectedResponse),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_wire::messages::api_versions_response::ApiVersion;
    use kafka_wire::messages::{ApiVersionsRequest, ApiVersionsResponse};
    use kafka_wire::Encode;
    use tokio::net::TcpListener;

    /// An answer far larger than the read buffer, written in pieces with pauses between them,
    /// is read whole: the buffer grows for the rest of the frame once its size is known.
    #[tokio::test]
    async fn an_answer_larger_than_the_read_buffer_arriving_in_pieces_is_read_whole() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let answer = ApiVersionsResponse {
            api_keys: (0..60_000)
                .map(|i| ApiVersion {
                    api_key: (i % 30_000) as i16,
                    min_version: 0,
                    max_version: (i % 7) as i16,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let expected = answer.clone();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut buf = BytesMut::new();
            let mut request = loop {
                if let Some(f) = decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE).expect("frame") {
                    break f;
                }
                assert!(s.read_buf(&mut buf).await.expect("read") > 0);
            };
            let h = RequestHeader::decode_auto(&mut request).expect("header");
            let mut payload = BytesMut::new();
            ResponseHeader {
                correlation_id: h.correlation_id,
                ..Default::default()
            }
            .encode(&mut payload, ApiKey::ApiVersions.response_header_version(0))
            .expect("encode header");
            answer.encode(&mut payload, 0).expect("encode body");
            let mut frame = BytesMut::new();
            encode_frame(&payload, &mut frame, DEFAULT_MAX_FRAME_SIZE).expect("frame");
            assert!(frame.len() > 4 * READ_RESERVE / 3);
            // A piece shorter than the size prefix, then uneven pieces.
            let cuts = [2, 3_000, 70_000, 200_000, frame.len()];
            let mut at = 0;
            for cut in cuts {
                s.write_all(&frame[at..cut]).await.expect("write");
                s.flush().await.expect("flush");
                at = cut;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        let mut c = KafkaConnection::connect(addr, "test")
            .await
            .expect("connect");
        let body = RequestBody::ApiVersions(ApiVersionsRequest::default());
        match c.send(0, &body).await.expect("answer") {
            ResponseBody::ApiVersions(got) => assert_eq!(got, expected),
            other => panic!("not an ApiVersions answer: {other:?}"),
        }
        server.await.expect("server");
    }
}
