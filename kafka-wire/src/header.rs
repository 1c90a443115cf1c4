//! Request and response headers: RequestHeader v0–v2 and ResponseHeader v0–v1.
//!
//! Which header version a message uses follows from its API and version:
//! [`crate::api::ApiKey::request_header_version`] and
//! [`crate::api::ApiKey::response_header_version`].

use bytes::Buf;
use bytestring::ByteString;

use crate::encode::WireWrite;
use crate::primitives::{
    get_i16, get_i32, get_nullable_string, get_unknown_tagged_fields, put_nullable_string,
    put_unknown_tagged_fields, RawTaggedField,
};
use crate::{DecodeError, EncodeError};

/// The header in front of every request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// The API key of the request.
    pub request_api_key: i16,
    /// The API version of the request.
    pub request_api_version: i16,
    /// Echoed in the response so the client can match it to this request.
    pub correlation_id: i32,
    /// The client id (header v1+); always a non-compact nullable string, even in v2.
    pub client_id: Option<ByteString>,
    /// Tagged fields of header v2 (none are known).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl RequestHeader {
    /// Reads a request header of header version `header_version` (0, 1 or 2).
    pub fn decode<B: Buf>(buf: &mut B, header_version: i16) -> Result<Self, DecodeError> {
        if !(0..=2).contains(&header_version) {
            return Err(DecodeError::UnsupportedVersion {
                api_key: -1,
                version: header_version,
            });
        }
        let mut h = RequestHeader {
            request_api_key: get_i16(buf)?,
            request_api_version: get_i16(buf)?,
            correlation_id: get_i32(buf)?,
            ..Default::default()
        };
        if header_version >= 1 {
            h.client_id = get_nullable_string(buf, false, "client_id")?;
        }
        if header_version >= 2 {
            h.unknown_tagged_fields = get_unknown_tagged_fields(buf)?;
        }
        Ok(h)
    }

    /// Writes this header as header version `header_version` (0, 1 or 2).
    pub fn encode<W: WireWrite>(&self, w: &mut W, header_version: i16) -> Result<(), EncodeError> {
        if !(0..=2).contains(&header_version) {
            return Err(EncodeError::UnsupportedVersion {
                api_key: -1,
                version: header_version,
            });
        }
        w.write_i16(self.request_api_key);
        w.write_i16(self.request_api_version);
        w.write_i32(self.correlation_id);
        if header_version >= 1 {
            put_nullable_string(w, self.client_id.as_deref(), false, "client_id")?;
        }
        if header_version >= 2 {
            put_unknown_tagged_fields(w, &self.unknown_tagged_fields)?;
        }
        Ok(())
    }

    /// Reads a request header whose version follows from the API key and version it
    /// carries (the dispatch path of a server). Unknown API keys fall back to header v1.
    pub fn decode_auto<B: Buf>(buf: &mut B) -> Result<Self, DecodeError> {
        let chunk = buf.chunk();
        let peek = if chunk.len() >= 4 {
            Some((
                i16::from_be_bytes([chunk[0], chunk[1]]),
                i16::from_be_bytes([chunk[2], chunk[3]]),
            ))
        } else {
            None
        };
        let header_version = match peek {
            Some((key, version)) => crate::api::ApiKey::try_from(key)
                .map(|k| k.request_header_version(version))
                .unwrap_or(1),
            None => 1,
        };
        Self::decode(buf, header_version)
    }
}

/// The header in front of every response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseHeader {
    /// The correlation id of the request this answers.
    pub correlation_id: i32,
    /// Tagged fields of header v1 (none are known).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl ResponseHeader {
    /// Reads a response header of header version `header_version` (0 or 1).
    pub fn decode<B: Buf>(buf: &mut B, header_version: i16) -> Result<Self, DecodeError> {
        if !(0..=1).contains(&header_version) {
            return Err(DecodeError::UnsupportedVersion {
                api_key: -1,
                version: header_version,
            });
        }
        let mut h = ResponseHeader {
            correlation_id: get_i32(buf)?,
            ..Default::default()
        };
        if header_version >= 1 {
            h.unknown_tagged_fields = get_unknown_tagged_fields(buf)?;
        }
        Ok(h)
    }

    /// Writes this header as header version `header_version` (0 or 1).
    pub fn encode<W: WireWrite>(&self, w: &mut W, header_version: i16) -> Result<(), EncodeError> {
        if !(0..=1).contains(&header_version) {
            return Err(EncodeError::UnsupportedVersion {
                api_key: -1,
                version: header_version,
            });
        }
        w.write_i32(self.correlation_id);
        if header_version >= 1 {
            put_unknown_tagged_fields(w, &self.unknown_tagged_fields)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn request_header_v2_keeps_client_id_non_compact_and_unknown_tags() {
        let h = RequestHeader {
            request_api_key: 1,
            request_api_version: 12,
            correlation_id: 7,
            client_id: Some(ByteString::from_static("c")),
            unknown_tagged_fields: vec![RawTaggedField {
                tag: 9,
                data: bytes::Bytes::from_static(b"xy"),
            }],
        };
        let mut b = BytesMut::new();
        h.encode(&mut b, 2).unwrap();
        assert_eq!(&b[8..11], &[0, 1, b'c']);
        let back = RequestHeader::decode_auto(&mut b.freeze()).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn response_header_versions_round_trip() {
        for v in 0..=1 {
            let h = ResponseHeader {
                correlation_id: -3,
                unknown_tagged_fields: vec![],
            };
            let mut b = BytesMut::new();
            h.encode(&mut b, v).unwrap();
            assert_eq!(b.len(), 4 + v as usize);
            assert_eq!(ResponseHeader::decode(&mut b.freeze(), v).unwrap(), h);
        }
    }
}
