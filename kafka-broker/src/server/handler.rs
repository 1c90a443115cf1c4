//! The business-logic side of the server: the [`RequestHandler`] trait handler workers call,
//! the [`RequestContext`] they pass, the version ranges a handler declares
//! ([`SupportedApis`]) and the ApiVersions answer built from them.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use async_trait::async_trait;
use kafka_wire::api::UNSUPPORTED_VERSION;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::api_versions_response::ApiVersion;
use kafka_wire::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};

/// Where a request came from, handed to [`RequestHandler::handle`] beside the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The id of the broker this server belongs to.
    pub broker: i32,
    /// A number unique to the connection among this server's connections.
    pub connection_id: u64,
    /// The client's address.
    pub peer: SocketAddr,
    /// The index of the processor owning the connection.
    pub processor: usize,
}

/// The API logic behind the network server (Kafka's `KafkaApis`), run by the handler workers.
///
/// The server only ever calls [`RequestHandler::handle`] with an API key and version inside
/// [`RequestHandler::supported_apis`]; anything else is refused by the processor before it
/// reaches the request channel (see the `server` module).
#[async_trait]
pub trait RequestHandler: Send + Sync + 'static {
    /// The APIs and version ranges this handler implements. Read once when the server starts;
    /// it is also what [`SupportedApis::api_versions_response`] advertises.
    fn supported_apis(&self) -> SupportedApis;

    /// Answers one request. `body` was decoded at `header.request_api_version`; the returned
    /// body must be of the same API and is encoded at that version. `None` sends nothing
    /// back (a produce with `acks=0`); later responses on the connection still go out.
    async fn handle(
        &self,
        ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody>;
}

/// The API keys and `[min, max]` version ranges a handler implements.
///
/// Ranges are always clipped to what `kafka-wire` can decode and encode
/// ([`ApiKey::versions`]), so every advertised version can really be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SupportedApis {
    ranges: BTreeMap<ApiKey, (i16, i16)>,
}

impl SupportedApis {
    /// No API at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every API `kafka-wire` implements, at every version it implements.
    pub fn all() -> Self {
        ApiKey::ALL
            .iter()
            .fold(Self::new(), |s, k| s.with(*k, i16::MIN, i16::MAX))
    }

    /// Adds (or replaces) `api_key` with versions `min..=max`, clipped to `kafka-wire`'s own
    /// range; an empty range after clipping removes the key.
    pub fn with(mut self, api_key: ApiKey, min: i16, max: i16) -> Self {
        let (lo, hi) = api_key.versions();
        let (min, max) = (min.max(lo), max.min(hi));
        if min <= max {
            self.ranges.insert(api_key, (min, max));
        } else {
            self.ranges.remove(&api_key);
        }
        self
    }

    /// The declared range of `api_key`, if it is supported at all.
    pub fn range(&self, api_key: ApiKey) -> Option<(i16, i16)> {
        self.ranges.get(&api_key).copied()
    }

    /// Whether `version` of `api_key` is inside the declared range.
    pub fn supports(&self, api_key: ApiKey, version: i16) -> bool {
        self.range(api_key)
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&version))
    }

    /// The declared APIs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (ApiKey, i16, i16)> + '_ {
        self.ranges.iter().map(|(k, (lo, hi))| (*k, *lo, *hi))
    }

    /// The `api_keys` list of an ApiVersions response: exactly the declared ranges.
    pub fn api_version_entries(&self) -> Vec<ApiVersion> {
        self.iter()
            .map(|(k, lo, hi)| ApiVersion {
                api_key: k.as_i16(),
                min_version: lo,
                max_version: hi,
                ..Default::default()
            })
            .collect()
    }

    /// The ApiVersions answer for a request this server supports: error 0 and exactly the
    /// declared ranges. A handler answers ApiVersions with
    /// `ResponseBody::ApiVersions(apis.api_versions_response())`; because the server refuses
    /// versions outside the declared range before the handler sees them, a version inside the
    /// advertised range never gets UNSUPPORTED_VERSION.
    pub fn api_versions_response(&self) -> ApiVersionsResponse {
        ApiVersionsResponse {
            error_code: 0,
            api_keys: self.api_version_entries(),
            ..Default::default()
        }
    }

    /// The whole ApiVersions answer to `request` read at `version`, as Kafka gives it: from
    /// v3 on, a client software name or version that is empty or not of the form
    /// `[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?` gets INVALID_REQUEST (42) without API list;
    /// anything else gets [`SupportedApis::api_versions_response`].
    pub fn answer_api_versions(
        &self,
        version: i16,
        request: &ApiVersionsRequest,
    ) -> ApiVersionsResponse {
        let valid = version < 3
            || (is_software_name_or_version(&request.client_software_name)
                && is_software_name_or_version(&request.client_software_version));
        if valid {
            self.api_versions_response()
        } else {
            ApiVersionsResponse {
                error_code: ErrorCode::InvalidRequest.code(),
                ..Default::default()
            }
        }
    }

    /// The answer to an ApiVersions request of a version outside the declared range:
    /// UNSUPPORTED_VERSION (35) with the declared ranges, to be encoded as v0 (with response
    /// header v0) whatever version was asked for, so the client can read it and retry with a
    /// version it finds in the list.
    pub fn unsupported_version_response(&self) -> ApiVersionsResponse {
        ApiVersionsResponse {
            error_code: UNSUPPORTED_VERSION,
            api_keys: self.api_version_entries(),
            ..Default::default()
        }
    }
}

/// Whether `s` is a valid client software name or version (ApiVersions v3+): ASCII letters
/// and digits, with `-` and `.` allowed inside but not first or last.
fn is_software_name_or_version(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_clipped_to_what_the_codec_implements() {
        let apis = SupportedApis::new()
            .with(ApiKey::ApiVersions, -5, 100)
            .with(ApiKey::Fetch, 20, 30);
        assert_eq!(
            apis.range(ApiKey::ApiVersions),
            Some(ApiKey::ApiVersions.versions())
        );
        assert_eq!(apis.range(ApiKey::Fetch), None);
        assert!(!apis.supports(ApiKey::Produce, 3));
    }

    #[test]
    fn api_versions_response_lists_exactly_the_declared_ranges() {
        let apis =
            SupportedApis::new()
                .with(ApiKey::ApiVersions, 0, 3)
                .with(ApiKey::Metadata, 1, 9);
        let r = apis.api_versions_response();
        assert_eq!(r.error_code, 0);
        let got: Vec<_> = r
            .api_keys
            .iter()
            .map(|a| (a.api_key, a.min_version, a.max_version))
            .collect();
        assert_eq!(got, vec![(3, 1, 9), (18, 0, 3)]);
        assert_eq!(
            apis.unsupported_version_response().error_code,
            UNSUPPORTED_VERSION
        );
    }

    #[test]
    fn api_versions_v3_with_an_invalid_client_software_name_is_invalid_request() {
        let apis = SupportedApis::all();
        let request = |name: &str, version: &str| ApiVersionsRequest {
            client_software_name: name.into(),
            client_software_version: version.into(),
            ..Default::default()
        };
        for (name, version) in [
            ("", "1"),
            ("librdkafka", ""),
            ("-x", "1"),
            ("a b", "1"),
            ("x", "1."),
        ] {
            let answer = apis.answer_api_versions(3, &request(name, version));
            assert_eq!(answer.error_code, 42, "{name:?} {version:?}");
            assert!(answer.api_keys.is_empty());
        }
        for (name, version) in [
            ("librdkafka", "2.3.0"),
            ("apache-kafka-java", "3.9.0"),
            ("a", "1"),
        ] {
            assert_eq!(
                apis.answer_api_versions(3, &request(name, version))
                    .error_code,
                0
            );
        }
        // Before v3 the fields do not exist, so nothing is checked.
        assert_eq!(apis.answer_api_versions(2, &request("", "")).error_code, 0);
    }
}
