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
use kafka_replication::isr::BrokerId;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_wire::frame::{decode_frame, encode_frame, DEFAULT_MAX_FRAME_SIZE};
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
            if let Some(f) = decode_frame(&mut self.read_buf, self.max_frame_size)? {
                break f;
            }
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
