//! The election port's wire format (ZooKeeper's `QuorumCnxManager`): the initiator's connection header and the
//! `i32`-length framing of messages, as ZooKeeper 3.8's `QuorumCnxManager` speaks them.
//! All integers are big-endian.

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// `PROTOCOL_VERSION_V1` of the connection header (ZooKeeper 3.5+).
pub const PROTOCOL_VERSION_V1: i64 = -65536;
/// `PROTOCOL_VERSION_V2` (multi-address); accepted on read, never sent.
pub const PROTOCOL_VERSION_V2: i64 = -65535;
/// Largest address string in a header (ZooKeeper's `maxBuffer`).
pub const MAX_ADDR_LEN: i32 = 2048;
/// Largest frame payload (ZooKeeper's `PACKETMAXSIZE`).
pub const MAX_FRAME_LEN: i32 = 524_288;

/// The header an initiator sends when it opens an election connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionHeader {
    /// The initiator's sid.
    pub sid: i64,
    /// The initiator's election address, `host:port` (V2: `h1:p1|h2:p2`); `None` for a
    /// legacy (< 3.5) header, which carries only the sid.
    pub addr: Option<String>,
}

/// Why a header or frame was rejected; the connection is closed, nothing else is affected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The peer closed the connection or it failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The header's address length is outside 1..=2048.
    #[error("bad address length {0} in connection header")]
    BadAddrLen(i32),
    /// The header's address is not UTF-8.
    #[error("connection header address is not UTF-8")]
    BadAddr,
    /// The header's protocol version is unknown.
    #[error("unknown protocol version {0} in connection header")]
    BadVersion(i64),
    /// A frame length outside 1..=524288.
    #[error("bad frame length {0}")]
    BadFrameLen(i32),
}

impl ConnectionHeader {
    /// Encodes a V1 header (`-65536`, sid, addrLen, addr).
    pub fn encode(&self) -> Bytes {
        let addr = self.addr.as_deref().unwrap_or("");
        let mut b = BytesMut::with_capacity(20 + addr.len());
        b.put_i64(PROTOCOL_VERSION_V1);
        b.put_i64(self.sid);
        b.put_i32(addr.len() as i32);
        b.put_slice(addr.as_bytes());
        b.freeze()
    }

    /// Reads a header: V1/V2 (`version, sid, addrLen, addr`) or legacy (a non-negative sid alone).
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> Result<Self, WireError> {
        let first = r.read_i64().await?;
        if first >= 0 {
            return Ok(Self {
                sid: first,
                addr: None,
            });
        }
        if first != PROTOCOL_VERSION_V1 && first != PROTOCOL_VERSION_V2 {
            return Err(WireError::BadVersion(first));
        }
        let sid = r.read_i64().await?;
        let len = r.read_i32().await?;
        if !(1..=MAX_ADDR_LEN).contains(&len) {
            return Err(WireError::BadAddrLen(len));
        }
        let mut addr = vec![0u8; len as usize];
        r.read_exact(&mut addr).await?;
        let addr = String::from_utf8(addr).map_err(|_| WireError::BadAddr)?;
        Ok(Self {
            sid,
            addr: Some(addr),
        })
    }
}

/// Reads one `i32`-framed message; a length outside 1..=524288 is an error.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Bytes, WireError> {
    let len = r.read_i32().await?;
    if !(1..=MAX_FRAME_LEN).contains(&len) {
        return Err(WireError::BadFrameLen(len));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf).await?;
    Ok(Bytes::from(buf))
}

/// Writes one `i32`-framed message; refuses a payload outside 1..=524288 bytes.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    payload: &[u8],
) -> Result<(), WireError> {
    let len = i32::try_from(payload.len()).unwrap_or(i32::MAX);
    if !(1..=MAX_FRAME_LEN).contains(&len) {
        return Err(WireError::BadFrameLen(len));
    }
    let mut b = BytesMut::with_capacity(4 + payload.len());
    b.put_i32(len);
    b.put_slice(payload);
    w.write_all(&b).await?;
    w.flush().await?;
    Ok(())
}
