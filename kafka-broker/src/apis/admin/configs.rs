//! Topic configs: the keys a topic may override (a subset of Kafka's `LogConfig`, with
//! Kafka's defaults and broker synonyms), their validation (Kafka's `LogConfig.validate`:
//! an unknown key or a bad value is INVALID_CONFIG), and the DescribeConfigs /
//! IncrementalAlterConfigs APIs on `/config/topics/<t>` (with the change notification, as
//! `AdminZkClient.changeTopicConfig` writes it). Broker resources are described from the
//! broker's static configs, read-only; altering them is refused.

use std::collections::BTreeMap;

use kafka_controller::admin::{self, AdminError};
use kafka_controller::zk_data::paths;
use kafka_replication::isr::IsrWriter;
use kafka_replication::log::LogStorage;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::create_topics_response::CreatableTopicConfigs;
use kafka_wire::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_wire::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_wire::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};

use super::{no_store, refusal, AdminState, KafkaApis, Refusal};

/// `ConfigResource.Type` TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type` BROKER.
pub const RESOURCE_BROKER: i8 = 4;

/// `ConfigSource` TOPIC_CONFIG (a topic override).
pub const SOURCE_TOPIC_CONFIG: i8 = 1;
/// `ConfigSource` STATIC_BROKER_CONFIG (the broker's `server.properties`).
pub const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
/// `ConfigSource` DEFAULT_CONFIG (Kafka's default).
pub const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// `AlterConfigOp.OpType` of IncrementalAlterConfigs.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// The value type of a config (`ConfigDef.Type`, as DescribeConfigs v3+ reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigType {
    /// `true` / `false`.
    Boolean,
    /// Any string (restricted by the key's own check).
    String,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A floating-point number.
    Double,
    /// A comma-separated list.
    List,
}

impl ConfigType {
    /// The wire value (`DescribeConfigsResponse.ConfigType`).
    pub fn wire(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }
}

/// A topic config key this broker knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicConfigKey {
    /// The topic-level name.
    pub name: &'static str,
    /// Kafka's default value.
    pub default: &'static str,
    /// The value type.
    pub kind: ConfigType,
    /// The broker config whose value is the topic's default.
    pub broker_synonym: &'static str,
    /// The smallest value a number may take.
    pub at_least: Option<i64>,
    /// The values a string or each list element may take (empty: any).
    pub one_of: &'static [&'static str],
    /// What it does (DescribeConfigs `include_documentation`).
    pub doc: &'static str,
}

const fn key(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    broker_synonym: &'static str,
    at_least: Option<i64>,
    one_of: &'static [&'static str],
    doc: &'static str,
) -> TopicConfigKey {
    TopicConfigKey {
        name,
        default,
        kind,
        broker_synonym,
        at_least,
        one_of,
        doc,
    }
}

/// The topic configs a topic may override, sorted by name.
pub const TOPIC_CONFIGS: &[TopicConfigKey] = &[
    key(
        "cleanup.policy",
        "delete",
        ConfigType::List,
        "log.cleanup.policy",
        None,
        &["delete", "compact"],
        "The retention policy of old log segments: delete, compact or both.",
    ),
    key(
        "compression.type",
        "producer",
        ConfigType::String,
        "compression.type",
        None,
        &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        "The compression of the topic's data; producer keeps the producer's.",
    ),
    key(
        "delete.retention.ms",
        "86400000",
        ConfigType::Long,
        "log.cleaner.delete.retention.ms",
        Some(0),
        &[],
        "How long delete tombstones are kept in compacted topics.",
    ),
    key(
        "file.delete.delay.ms",
        "60000",
        ConfigType::Long,
        "log.segment.delete.delay.ms",
        Some(0),
        &[],
        "The wait before a deleted segment's file is removed.",
    ),
    key(
        "max.message.bytes",
        "1048588",
        ConfigType::Int,
        "message.max.bytes",
        Some(0),
        &[],
        "The largest record batch size allowed.",
    ),
    key(
        "message.timestamp.type",
        "CreateTime",
        ConfigType::String,
        "log.message.timestamp.type",
        None,
        &["CreateTime", "LogAppendTime"],
        "Whether record timestamps are the producer's or the append time.",
    ),
    key(
        "min.cleanable.dirty.ratio",
        "0.5",
        ConfigType::Double,
        "log.cleaner.min.cleanable.ratio",
        Some(0),
        &[],
        "The dirty share of a log above which the cleaner compacts it.",
    ),
    key(
        "min.compaction.lag.ms",
        "0",
        ConfigType::Long,
        "log.cleaner.min.compaction.lag.ms",
        Some(0),
        &[],
        "The minimum time a record stays uncompacted.",
    ),
    key(
        "min.insync.replicas",
        "1",
        ConfigType::Int,
        "min.insync.replicas",
        Some(1),
        &[],
        "The in-sync replicas an acks=all produce needs.",
    ),
    key(
        "retention.bytes",
        "-1",
        ConfigType::Long,
        "log.retention.bytes",
        None,
        &[],
        "The size a partition's log may reach before old segments go (-1: no limit).",
    ),
    key(
        "retention.ms",
        "604800000",
        ConfigType::Long,
        "log.retention.ms",
        Some(-1),
        &[],
        "How long a segment is kept before it goes (-1: no limit).",
    ),
    key(
        "segment.bytes",
        "1073741824",
        ConfigType::Int,
        "log.segment.bytes",
        Some(14),
        &[],
        "The size of one log segment file.",
    ),
    key(
        "segment.ms",
        "604800000",
        ConfigType::Long,
        "log.roll.ms",
        Some(1),
        &[],
        "The time after which a new segment is rolled.",
    ),
    key(
        "unclean.leader.election.enable",
        "false",
        ConfigType::Boolean,
        "unclean.leader.election.enable",
        None,
        &[],
        "Whether a replica outside the ISR may become leader, losing data.",
    ),
];

/// The known topic config `name`.
pub fn topic_config_key(name: &str) -> Option<&'static TopicConfigKey> {
    TOPIC_CONFIGS.iter().find(|k| k.name == name)
}

/// Checks one topic config value (`LogConfig.validate`).
fn validate_value(key: &TopicConfigKey, value: &str) -> Result<(), String> {
    let bad = |why: &str| {
        format!(
            "Invalid value {value} for configuration {}: {why}",
            key.name
        )
    };
    let v = value.trim();
    let number = match key.kind {
        ConfigType::Boolean => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(bad("Expected value to be either true or false"));
            }
            None
        }
        ConfigType::Int => Some(
            v.parse::<i32>()
                .map(i64::from)
                .map_err(|_| bad("Not a number of type INT"))?,
        ),
        ConfigType::Long => Some(
            v.parse::<i64>()
                .map_err(|_| bad("Not a number of type LONG"))?,
        ),
        ConfigType::Double => {
            let d = v
                .parse::<f64>()
                .map_err(|_| bad("Not a number of type DOUBLE"))?;
            if let Some(min) = key.at_least {
                if d < min as f64 {
                    return Err(bad(&format!("Value must be at least {min}")));
                }
            }
            None
        }
        ConfigType::String => {
            if !key.one_of.is_empty() && !key.one_of.contains(&v) {
                return Err(bad(&format!(
                    "String must be one of: {}",
                    key.one_of.join(", ")
                )));
            }
            None
        }
        ConfigType::List => {
            for item in v.split(',').map(str::trim) {
                if !key.one_of.is_empty() && !key.one_of.contains(&item) {
                    return Err(bad(&format!(
                        "List values must be in: {}",
                        key.one_of.join(", ")
                    )));
                }
            }
            None
        }
    };
    match (number, key.at_least) {
        (Some(n), Some(min)) if n < min => Err(bad(&format!("Value must be at least {min}"))),
        _ => Ok(()),
    }
}

/// Checks a set of topic overrides: every key known, every value valid (INVALID_CONFIG).
pub(crate) fn validate_topic_config(config: &BTreeMap<String, String>) -> Result<(), Refusal> {
    for (name, value) in config {
        let Some(key) = topic_config_key(name) else {
            return Err(refusal(
                ErrorCode::InvalidConfig,
                format!("Unknown topic config name: {name}"),
            ));
        };
        validate_value(key, value).map_err(|m| refusal(ErrorCode::InvalidConfig, m))?;
    }
    Ok(())
}

/// One topic config as DescribeConfigs reports it.
pub(crate) struct DescribedConfig {
    /// The name reported: the topic key, or for the broker resource its broker synonym.
    pub name: String,
    pub key: &'static TopicConfigKey,
    pub value: String,
    pub source: i8,
    /// The synonyms, most significant first: the override, the broker's static config,
    /// the default.
    pub synonyms: Vec<(String, String, i8)>,
}

impl AdminState {
    /// Every known topic config of a topic with `overrides`: the override, else the broker's
    /// static synonym, else Kafka's default.
    pub(crate) fn describe_topic_config(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Vec<DescribedConfig> {
        TOPIC_CONFIGS
            .iter()
            .map(|key| {
                let mut synonyms = Vec::new();
                if let Some(v) = overrides.get(key.name) {
                    synonyms.push((key.name.to_owned(), v.clone(), SOURCE_TOPIC_CONFIG));
                }
                if let Some(v) = self.settings.broker_configs.get(key.broker_synonym) {
                    synonyms.push((
                        key.broker_synonym.to_owned(),
                        v.clone(),
                        SOURCE_STATIC_BROKER_CONFIG,
                    ));
                }
                synonyms.push((
                    key.broker_synonym.to_owned(),
                    key.default.to_owned(),
                    SOURCE_DEFAULT_CONFIG,
                ));
                let (_, value, source) = synonyms[0].clone();
                DescribedConfig {
                    name: key.name.to_owned(),
                    key,
                    value,
                    source,
                    synonyms,
                }
            })
            .collect()
    }

    /// The configs CreateTopics v5+ returns for a topic with `overrides`.
    pub(crate) fn creatable_configs(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Vec<CreatableTopicConfigs> {
        self.describe_topic_config(overrides)
            .into_iter()
            .map(|c| CreatableTopicConfigs {
                name: c.name.as_str().into(),
                value: Some(c.value.into()),
                read_only: false,
                config_source: c.source,
                is_sensitive: false,
                ..Default::default()
            })
            .collect()
    }

    /// The topic's overrides (`/config/topics/<t>`; none when absent).
    async fn topic_overrides(&self, topic: &str) -> Result<BTreeMap<String, String>, Refusal> {
        match self.zk.topic_config(topic).await {
            Ok(c) => Ok(c.map(|c| c.config).unwrap_or_default()),
            Err(e) => Err(refusal(ErrorCode::UnknownServerError, e.to_string())),
        }
    }

    /// Whether `/brokers/topics/<t>` exists.
    async fn topic_exists(&self, topic: &str) -> Result<bool, Refusal> {
        match self.store.exists(&paths::topic(topic), false).await {
            Ok(s) => Ok(s.is_some()),
            Err(e) => Err(refusal(ErrorCode::UnknownServerError, e.to_string())),
        }
    }
}

/// The value a key is reported with, with its source, from a synonym list.
fn synonyms_wire(synonyms: &[(String, String, i8)]) -> Vec<DescribeConfigsSynonym> {
    synonyms
        .iter()
        .map(|(name, value, source)| DescribeConfigsSynonym {
            name: name.as_str().into(),
            value: Some(value.as_str().into()),
            source: *source,
            ..Default::default()
        })
        .collect()
}

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// DescribeConfigs for topics (every known topic config: the override from
    /// `/config/topics/<t>` as TOPIC_CONFIG, else the broker's static config, else Kafka's
    /// default as DEFAULT_CONFIG with `is_default`) and for this broker (its static configs,
    /// read-only). `configuration_keys` filters; synonyms (v1+) and documentation (v3+) on
    /// request. A topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION; another broker's
    /// id, INVALID_REQUEST.
    pub async fn describe_configs(
        &self,
        version: i16,
        request: &DescribeConfigsRequest,
    ) -> DescribeConfigsResponse {
        let state = self.admin_state();
        let mut response = DescribeConfigsResponse::default();
        for resource in &request.resources {
            let mut result = DescribeConfigsResult {
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.clone(),
                ..Default::default()
            };
            let wanted = |name: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| &**k == name))
            };
            let described = match &state {
                None => Err(no_store()),
                Some(s) => {
                    self.describe_resource(s, resource.resource_type, &resource.resource_name)
                        .await
                }
            };
            match described {
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = message.map(Into::into);
                }
                Ok((configs, read_only)) => {
                    for c in configs.into_iter().filter(|c| wanted(&c.name)) {
                        result.configs.push(DescribeConfigsResourceResult {
                            name: c.name.as_str().into(),
                            value: Some(c.value.into()),
                            read_only,
                            // v0 only; later versions tell it by the source.
                            is_default: version == 0 && c.source == SOURCE_DEFAULT_CONFIG,
                            config_source: if version == 0 { -1 } else { c.source },
                            is_sensitive: false,
                            synonyms: if request.include_synonyms {
                                synonyms_wire(&c.synonyms)
                            } else {
                                Vec::new()
                            },
                            config_type: c.key.kind.wire(),
                            documentation: request.include_documentation.then(|| c.key.doc.into()),
                            ..Default::default()
                        });
                    }
                }
            }
            response.results.push(result);
        }
        response
    }

    /// The configs of one resource and whether they are read-only.
    async fn describe_resource(
        &self,
        state: &AdminState,
        resource_type: i8,
        name: &str,
    ) -> Result<(Vec<DescribedConfig>, bool), Refusal> {
        match resource_type {
            RESOURCE_TOPIC => {
                if !paths::is_valid_topic_name(name) {
                    return Err(refusal(
                        ErrorCode::InvalidTopicException,
                        format!("Topic name {name:?} is illegal"),
                    ));
                }
                if !state.topic_exists(name).await? {
                    return Err(refusal(
                        ErrorCode::UnknownTopicOrPartition,
                        format!("Topic {name} does not exist."),
                    ));
                }
                let overrides = state.topic_overrides(name).await?;
                Ok((state.describe_topic_config(&overrides), false))
            }
            RESOURCE_BROKER => {
                if !name.is_empty() && name.parse::<i32>().ok() != Some(self.broker) {
                    return Err(refusal(
                        ErrorCode::InvalidRequest,
                        format!(
                            "Unexpected broker id, expected {} or empty string, but received {name}",
                            self.broker
                        ),
                    ));
                }
                // The broker synonyms of the topic configs, as this broker runs them.
                let mut seen = std::collections::BTreeSet::new();
                let configs = state
                    .describe_topic_config(&BTreeMap::new())
                    .into_iter()
                    .filter(|c| seen.insert(c.key.broker_synonym))
                    .map(|mut c| {
                        c.name = c.key.broker_synonym.to_owned();
                        c.synonyms.retain(|(n, _, _)| n == c.key.broker_synonym);
                        c
                    })
                    .collect::<Vec<_>>();
                Ok((configs, true))
            }
            other => Err(refusal(
                ErrorCode::InvalidRequest,
                format!("Unsupported resource type {other}"),
            )),
        }
    }

    /// IncrementalAlterConfigs (KIP-339) for topics: SET, DELETE, APPEND and SUBTRACT (the
    /// last two on list configs only, starting from the current value or the default) applied
    /// to the overrides in `/config/topics/<t>`, validated, then written with a change
    /// notification unless `validate_only`. A duplicate key is INVALID_REQUEST, an unknown
    /// key or bad value INVALID_CONFIG, a missing topic UNKNOWN_TOPIC_OR_PARTITION. Broker
    /// resources: dynamic broker configs are not supported (INVALID_REQUEST).
    pub async fn incremental_alter_configs(
        &self,
        request: &IncrementalAlterConfigsRequest,
    ) -> IncrementalAlterConfigsResponse {
        let state = self.admin_state();
        let mut response = IncrementalAlterConfigsResponse::default();
        for resource in &request.resources {
            let outcome = match &state {
                None => Err(no_store()),
                Some(s) => alter_resource(s, resource, request.validate_only).await,
            };
            let (code, message) = match outcome {
                Ok(()) => (ErrorCode::None, None),
                Err(r) => r,
            };
            response.responses.push(AlterConfigsResourceResponse {
                error_code: code.code(),
                error_message: message.map(Into::into),
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.clone(),
                ..Default::default()
            });
        }
        response
    }
}

async fn alter_resource(
    state: &AdminState,
    resource: &kafka_wire::messages::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let topic = &*resource.resource_name;
    match resource.resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => {
            return Err(refusal(
                ErrorCode::InvalidRequest,
                "dynamic broker configs are not supported: broker configs are static \
                 (server.properties)",
            ))
        }
        other => {
            return Err(refusal(
                ErrorCode::InvalidRequest,
                format!("Unsupported resource type {other}"),
            ))
        }
    }
    let mut names = std::collections::BTreeSet::new();
    if resource.configs.iter().any(|c| !names.insert(&*c.name)) {
        return Err(refusal(
            ErrorCode::InvalidRequest,
            "Error due to duplicate config keys",
        ));
    }
    if !paths::is_valid_topic_name(topic) {
        return Err(refusal(
            ErrorCode::InvalidTopicException,
            format!("Topic name {topic:?} is illegal"),
        ));
    }
    if !state.topic_exists(topic).await? {
        return Err(refusal(
            ErrorCode::UnknownTopicOrPartition,
            format!("Topic {topic} does not exist."),
        ));
    }
    let mut config = state.topic_overrides(topic).await?;
    for op in &resource.configs {
        let name = op.name.to_string();
        let Some(key) = topic_config_key(&name) else {
            return Err(refusal(
                ErrorCode::InvalidConfig,
                format!("Unknown topic config name: {name}"),
            ));
        };
        let value = op.value.as_deref().unwrap_or("");
        match op.config_operation {
            OP_SET => {
                config.insert(name, value.to_owned());
            }
            OP_DELETE => {
                config.remove(&name);
            }
            OP_APPEND | OP_SUBTRACT => {
                if key.kind != ConfigType::List {
                    let verb = if op.config_operation == OP_APPEND {
                        "append"
                    } else {
                        "subtract"
                    };
                    return Err(refusal(
                        ErrorCode::InvalidConfig,
                        format!("Config value {verb} is not allowed for config key: {name}"),
                    ));
                }
                let current = config
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| key.default.to_owned());
                let mut list: Vec<String> = current
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
                let items = value.split(',').map(str::trim).filter(|s| !s.is_empty());
                if op.config_operation == OP_APPEND {
                    for item in items {
                        if !list.iter().any(|x| x == item) {
                            list.push(item.to_owned());
                        }
                    }
                } else {
                    let gone: Vec<&str> = items.collect();
                    list.retain(|x| !gone.contains(&x.as_str()));
                }
                config.insert(name, list.join(","));
            }
            other => {
                return Err(refusal(
                    ErrorCode::InvalidRequest,
                    format!("Unknown config operation {other}"),
                ))
            }
        }
    }
    validate_topic_config(&config)?;
    if validate_only {
        return Ok(());
    }
    match admin::change_topic_config(state.store.as_ref(), topic, &config).await {
        Ok(()) => {
            tracing::info!(topic, "topic config changed");
            Ok(())
        }
        Err(AdminError::UnknownTopic(_)) => Err(refusal(
            ErrorCode::UnknownTopicOrPartition,
            format!("Topic {topic} does not exist."),
        )),
        Err(e) => Err(refusal(ErrorCode::UnknownServerError, e.to_string())),
    }
}
