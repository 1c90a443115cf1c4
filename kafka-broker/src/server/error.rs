//! [`ServerError`]: why the server could not start, and why a connection was closed.

use thiserror::Error;

/// Why starting the server failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerError {
    /// Binding or reading the listening socket failed.
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
    /// A count in [`super::ServerConfig`] is zero.
    #[error("invalid server config: {0}")]
    Config(&'static str),
}

/// Why the server closed a connection (logged, never returned to a caller).
#[derive(Debug, Error)]
pub(crate) enum CloseReason {
    /// The client closed its side.
    #[error("closed by the client")]
    PeerClosed,
    /// Reading or writing failed, or a frame's size prefix was negative or too large.
    #[error("frame: {0}")]
    Frame(#[from] kafka_wire::frame::FrameError),
    /// Writing a response failed.
    #[error("write: {0}")]
    Write(std::io::Error),
    /// The request header or body could not be decoded.
    #[error("undecodable request: {0}")]
    Decode(#[from] kafka_wire::DecodeError),
    /// An API key outside the supported set.
    #[error("unsupported api key {0}")]
    UnknownApiKey(i16),
    /// A version outside the supported range of an API other than ApiVersions.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
    /// The handler's response could not be encoded.
    #[error("response not encodable: {0}")]
    Encode(#[from] kafka_wire::EncodeError),
    /// The handler answered with a body of another API.
    #[error("handler answered api key {request} with a body of api key {response}")]
    WrongResponseApi {
        /// The request's API key.
        request: i16,
        /// The API key of the body the handler returned.
        response: i16,
    },
    /// The handler panicked on a request of this connection.
    #[error("request handler panicked")]
    HandlerPanicked,
    /// No complete request and nothing in flight for the idle timeout.
    #[error("idle timeout")]
    Idle,
    /// A started frame was not completed within the read timeout.
    #[error("read timeout")]
    ReadTimeout,
    /// A response could not be written within the write timeout.
    #[error("write timeout")]
    WriteTimeout,
    /// A server invariant did not hold (a bug); the connection is closed rather than served
    /// wrongly.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// The server is shutting down.
    #[error("server shutdown")]
    Shutdown,
}
