//! [`AdminClient`]: a small administration client over the Kafka wire (what `ha-admin
//! --bootstrap-server` uses): it finds the cluster through a bootstrap broker's Metadata,
//! sends the controller-only requests (CreateTopics, DeleteTopics, ElectLeaders, the partition
//! reassignments) to the controller it names, and negotiates each API's version with
//! ApiVersions. One request at a time; no retries.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_wire::messages::create_topics_request::CreatableTopic;
use kafka_wire::messages::elect_leaders_request::TopicPartitions;
use kafka_wire::messages::{
    AlterPartitionReassignmentsRequest, ApiVersionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeClusterResponse, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, MetadataRequest,
    MetadataResponse,
};
use kafka_wire::{ApiKey, RequestBody, ResponseBody};

use crate::{KafkaConnection, LinkError};

/// Why an admin request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminClientError {
    /// The broker could not be reached or answered nonsense.
    #[error("{addr}: {error}")]
    Link {
        /// The broker.
        addr: String,
        /// What failed.
        error: LinkError,
    },
    /// No broker address could be resolved.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// The broker does not answer this API.
    #[error("the broker does not support {0:?}")]
    Unsupported(ApiKey),
    /// The cluster has no active controller.
    #[error("no active controller")]
    NoController,
    /// The broker refused the request.
    #[error("{what}: {code}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Refused {
        /// What was refused (a topic, a partition, the request).
        what: String,
        /// The error.
        code: ErrorCode,
        /// The broker's message.
        message: Option<String>,
    },
}

/// An administration client of one cluster.
pub struct AdminClient {
    bootstrap: SocketAddr,
    timeout: Duration,
    versions: BTreeMap<i16, (i16, i16)>,
}

fn refused(what: impl Into<String>, code: i16, message: Option<&str>) -> AdminClientError {
    AdminClientError::Refused {
        what: what.into(),
        code: ErrorCode::from(code),
        message: message.filter(|m| !m.is_empty()).map(str::to_owned),
    }
}

impl AdminClient {
    /// Connects to `bootstrap` (`host:port`) and reads its API versions; each request waits
    /// up to `timeout` (also the timeout the broker is given).
    pub async fn connect(bootstrap: &str, timeout: Duration) -> Result<Self, AdminClientError> {
        let addr = tokio::net::lookup_host(bootstrap)
            .await
            .map_err(|_| AdminClientError::Resolve(bootstrap.to_owned()))?
            .next()
            .ok_or_else(|| AdminClientError::Resolve(bootstrap.to_owned()))?;
        let mut client = AdminClient {
            bootstrap: addr,
            timeout,
            versions: BTreeMap::new(),
        };
        let body = RequestBody::ApiVersions(ApiVersionsRequest {
            client_software_name: "ha-admin".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        });
        let ResponseBody::ApiVersions(r) = client.send_to(addr, 3, body).await? else {
            return Err(client.link(addr, LinkError::UnexpectedResponse));
        };
        if r.error_code != 0 {
            return Err(refused("ApiVersions", r.error_code, None));
        }
        client.versions = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(client)
    }

    fn link(&self, addr: SocketAddr, error: LinkError) -> AdminClientError {
        AdminClientError::Link {
            addr: addr.to_string(),
            error,
        }
    }

    fn timeout_ms(&self) -> i32 {
        i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX)
    }

    /// The highest version of `key` both sides speak.
    fn version(&self, key: ApiKey) -> Result<i16, AdminClientError> {
        let (_, ours) = key.versions();
        match self.versions.get(&key.as_i16()) {
            Some((lo, hi)) if *lo <= ours => Ok(ours.min(*hi)),
            _ => Err(AdminClientError::Unsupported(key)),
        }
    }

    async fn send_to(
        &self,
        addr: SocketAddr,
        version: i16,
        body: RequestBody,
    ) -> Result<ResponseBody, AdminClientError> {
        let mut conn = KafkaConnection::connect(addr, "ha-admin")
            .await
            .map_err(|e| self.link(addr, e))?;
        match tokio::time::timeout(
            self.timeout + Duration::from_secs(5),
            conn.send(version, &body),
        )
        .await
        {
            Ok(r) => r.map_err(|e| self.link(addr, e)),
            Err(_) => Err(self.link(addr, LinkError::Timeout)),
        }
    }

    async fn send(
        &self,
        addr: SocketAddr,
        body: RequestBody,
    ) -> Result<ResponseBody, AdminClientError> {
        let version = self.version(body.api_key())?;
        self.send_to(addr, version, body).await
    }

    /// The Metadata of every topic (`topics: None`) or of the named ones.
    pub async fn metadata(
        &self,
        topics: Option<&[String]>,
    ) -> Result<MetadataResponse, AdminClientError> {
        self.metadata_at(self.bootstrap, topics).await
    }

    /// Metadata of `topics` from the active controller's broker: the one whose cache already
    /// holds what a CreateTopics or CreatePartitions it answered made (the other brokers learn
    /// it from the controller's UpdateMetadata a moment later, as in Kafka).
    pub async fn controller_metadata(
        &self,
        topics: Option<&[String]>,
    ) -> Result<MetadataResponse, AdminClientError> {
        let addr = self.controller().await?;
        self.metadata_at(addr, topics).await
    }

    /// Metadata of `topics` (`None`: all of them) from the broker at `addr`.
    async fn metadata_at(
        &self,
        addr: SocketAddr,
        topics: Option<&[String]>,
    ) -> Result<MetadataResponse, AdminClientError> {
        let body = RequestBody::Metadata(MetadataRequest {
            topics: topics.map(|t| {
                t.iter()
                    .map(
                        |name| kafka_wire::messages::metadata_request::MetadataRequestTopic {
                            name: Some(name.as_str().into()),
                            ..Default::default()
                        },
                    )
                    .collect()
            }),
            allow_auto_topic_creation: false,
            ..Default::default()
        });
        match self.send(addr, body).await? {
            ResponseBody::Metadata(m) => Ok(m),
            _ => Err(self.link(addr, LinkError::UnexpectedResponse)),
        }
    }

    /// The address of the active controller, from the bootstrap broker's Metadata.
    async fn controller(&self) -> Result<SocketAddr, AdminClientError> {
        let m = self.metadata(Some(&[])).await?;
        let b = m
            .brokers
            .iter()
            .find(|b| b.node_id == m.controller_id)
            .ok_or(AdminClientError::NoController)?;
        tokio::net::lookup_host((b.host.as_ref(), b.port as u16))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| AdminClientError::Resolve(format!("{}:{}", b.host, b.port)))
    }

    /// DescribeCluster on the bootstrap broker.
    pub async fn describe_cluster(&self) -> Result<DescribeClusterResponse, AdminClientError> {
        let body = RequestBody::DescribeCluster(DescribeClusterRequest::default());
        match self.send(self.bootstrap, body).await? {
            ResponseBody::DescribeCluster(r) if r.error_code != 0 => Err(refused(
                "DescribeCluster",
                r.error_code,
                r.error_message.as_deref(),
            )),
            ResponseBody::DescribeCluster(r) => Ok(r),
            _ => Err(self.link(self.bootstrap, LinkError::UnexpectedResponse)),
        }
    }

    /// CreateTopics on the controller: `partitions` partitions of `replication_factor`
    /// replicas (-1: the broker's defaults) with `configs`; returns the partition count and
    /// replication factor the broker reports (-1 when its version does not say).
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> Result<(i32, i16), AdminClientError> {
        let body = RequestBody::CreateTopics(CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: name.into(),
                num_partitions: partitions,
                replication_factor,
                configs: configs
                    .iter()
                    .map(|(k, v)| {
                        kafka_wire::messages::create_topics_request::CreatableTopicConfig {
                            name: k.as_str().into(),
                            value: Some(v.as_str().into()),
                            ..Default::default()
                        }
                    })
                    .collect(),
                ..Default::default()
            }],
            timeout_ms: self.timeout_ms(),
            ..Default::default()
        });
        let addr = self.controller().await?;
        let ResponseBody::CreateTopics(r) = self.send(addr, body).await? else {
            return Err(self.link(addr, LinkError::UnexpectedResponse));
        };
        let t = r
            .topics
            .first()
            .ok_or_else(|| self.link(addr, LinkError::UnexpectedResponse))?;
        if t.error_code != 0 {
            return Err(refused(name, t.error_code, t.error_message.as_deref()));
        }
        Ok((t.num_partitions, t.replication_factor))
    }

    /// DeleteTopics on the controller.
    pub async fn delete_topic(&self, name: &str) -> Result<(), AdminClientError> {
        let version = self.version(ApiKey::DeleteTopics)?;
        let mut request = DeleteTopicsRequest {
            timeout_ms: self.timeout_ms(),
            ..Default::default()
        };
        if version >= 6 {
            request.topics = vec![
                kafka_wire::messages::delete_topics_request::DeleteTopicState {
                    name: Some(name.into()),
                    ..Default::default()
                },
            ];
        } else {
            request.topic_names = vec![name.into()];
        }
        let addr = self.controller().await?;
        let ResponseBody::DeleteTopics(r) = self
            .send_to(addr, version, RequestBody::DeleteTopics(request))
            .await?
        else {
            return Err(self.link(addr, LinkError::UnexpectedResponse));
        };
        match r.responses.first() {
            Some(t) if t.error_code != 0 => {
                Err(refused(name, t.error_code, t.error_message.as_deref()))
            }
            Some(_) => Ok(()),
            None => Err(self.link(addr, LinkError::UnexpectedResponse)),
        }
    }

    /// AlterPartitionReassignments on the controller: `topic`-`partition` to `replicas`.
    pub async fn reassign(
        &self,
        topic: &str,
        partition: i32,
        replicas: &[i32],
    ) -> Result<(), AdminClientError> {
        let body = RequestBody::AlterPartitionReassignments(AlterPartitionReassignmentsRequest {
            timeout_ms: self.timeout_ms(),
            topics: vec![ReassignableTopic {
                name: topic.into(),
                partitions: vec![ReassignablePartition {
                    partition_index: partition,
                    replicas: Some(replicas.iter().copied().collect()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let addr = self.controller().await?;
        let ResponseBody::AlterPartitionReassignments(r) = self.send(addr, body).await? else {
            return Err(self.link(addr, LinkError::UnexpectedResponse));
        };
        if r.error_code != 0 {
            return Err(refused(
                "AlterPartitionReassignments",
                r.error_code,
                r.error_message.as_deref(),
            ));
        }
        for t in &r.responses {
            for p in &t.partitions {
                if p.error_code != 0 {
                    return Err(refused(
                        format!("{}-{}", t.name, p.partition_index),
                        p.error_code,
                        p.error_message.as_deref(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// ListPartitionReassignments on the controller (all partitions).
    pub async fn list_reassignments(
        &self,
    ) -> Result<ListPartitionReassignmentsResponse, AdminClientError> {
        let body = RequestBody::ListPartitionReassignments(ListPartitionReassignmentsRequest {
            timeout_ms: self.timeout_ms(),
            topics: None,
            ..Default::default()
        });
        let addr = self.controller().await?;
        match self.send(addr, body).await? {
            ResponseBody::ListPartitionReassignments(r) if r.error_code != 0 => Err(refused(
                "ListPartitionReassignments",
                r.error_code,
                r.error_message.as_deref(),
            )),
            ResponseBody::ListPartitionReassignments(r) => Ok(r),
            _ => Err(self.link(addr, LinkError::UnexpectedResponse)),
        }
    }

    /// ElectLeaders (preferred) on the controller, for `partitions` (`None`: all); returns the
    /// partitions whose leader moved and those that needed no election. Any other
    /// per-partition error fails.
    pub async fn preferred_election(
        &self,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<(usize, usize), AdminClientError> {
        let topic_partitions = partitions.map(|list| {
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in list {
                by_topic.entry(t.as_str()).or_default().push(*p);
            }
            by_topic
                .into_iter()
                .map(|(t, ps)| TopicPartitions {
                    topic: t.into(),
                    partitions: ps.into_iter().collect(),
                    ..Default::default()
                })
                .collect()
        });
        let body = RequestBody::ElectLeaders(ElectLeadersRequest {
            election_type: 0,
            topic_partitions,
            timeout_ms: self.timeout_ms(),
            ..Default::default()
        });
        let addr = self.controller().await?;
        let ResponseBody::ElectLeaders(r) = self.send(addr, body).await? else {
            return Err(self.link(addr, LinkError::UnexpectedResponse));
        };
        if r.error_code != 0 {
            return Err(refused("ElectLeaders", r.error_code, None));
        }
        let (mut moved, mut not_needed) = (0, 0);
        for t in &r.replica_election_results {
            for p in &t.partition_result {
                match ErrorCode::from(p.error_code) {
                    ErrorCode::None => moved += 1,
                    ErrorCode::ElectionNotNeeded => not_needed += 1,
                    _ => {
                        return Err(refused(
                            format!("{}-{}", t.topic, p.partition_id),
                            p.error_code,
                            p.error_message.as_deref(),
                        ))
                    }
                }
            }
        }
        Ok((moved, not_needed))
    }
}
