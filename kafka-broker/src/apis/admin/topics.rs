//! CreateTopics, DeleteTopics and CreatePartitions as ZooKeeper-mode Kafka answers them
//! (`ZkAdminManager.createTopics` / `deleteTopics` / `createPartitions`): only the active
//! controller accepts them (NOT_CONTROLLER elsewhere); each becomes the znode writes of
//! `AdminZkClient` (`/config/topics/<t>` and `/brokers/topics/<t>`, `/admin/delete_topics/<t>`,
//! a rewritten `/brokers/topics/<t>`), then waits up to the request's timeout for this
//! broker's metadata to show every partition with a leader (or the topic gone); a timeout of
//! 0 or less answers at once, REQUEST_TIMED_OUT for what was written (as Kafka does).

use std::collections::{BTreeMap, BTreeSet};

use kafka_controller::admin::{self, AdminError};
use kafka_controller::assignment::{
    assign_replicas_to_brokers, AssignmentError, AssignmentStart, BrokerRack,
};
use kafka_controller::zk_data::paths;
use kafka_replication::isr::{IsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_replication::metadata_cache::MetadataCache;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_wire::messages::create_topics_request::CreatableTopic;
use kafka_wire::messages::create_topics_response::CreatableTopicResult;
use kafka_wire::messages::delete_topics_response::DeletableTopicResult;
use kafka_wire::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use kafka_wire::Uuid;

use super::configs::validate_topic_config;
use super::{no_store, refusal, AdminState, KafkaApis, Refusal};

/// The live brokers of the metadata cache, sorted by id, with their racks.
fn live_brokers(cache: &MetadataCache) -> Vec<BrokerRack> {
    let mut brokers: Vec<BrokerRack> = cache
        .live_brokers()
        .map(|b| BrokerRack::new(b.id, b.rack.as_deref()))
        .collect();
    brokers.sort_by_key(|b| b.id);
    brokers
}

/// Whether every partition `0..count` of `topic` has a leader in `cache`.
fn all_led(cache: &MetadataCache, topic: &str, count: i32) -> bool {
    (0..count).all(|p| {
        cache
            .leader(&TopicPartition::new(topic.to_owned(), p))
            .is_some_and(|l| l >= 0)
    })
}

/// Maps an assignment failure to Kafka's error.
fn assignment_refusal(e: &AssignmentError) -> Refusal {
    match e {
        AssignmentError::InvalidPartitions => refusal(
            ErrorCode::InvalidPartitions,
            "Number of partitions must be larger than 0.",
        ),
        AssignmentError::InvalidReplicationFactor {
            replication_factor,
            brokers,
        } if *replication_factor <= 0 => refusal(
            ErrorCode::InvalidReplicationFactor,
            format!(
                "Replication factor must be larger than 0 (asked {replication_factor}, \
                 {brokers} brokers available)."
            ),
        ),
        AssignmentError::InvalidReplicationFactor {
            replication_factor,
            brokers,
        } => refusal(
            ErrorCode::InvalidReplicationFactor,
            format!(
                "Replication factor: {replication_factor} larger than available brokers: \
                 {brokers}."
            ),
        ),
        other => refusal(ErrorCode::InvalidReplicaAssignment, other.to_string()),
    }
}

/// Checks an explicit assignment of a new topic (`AdminZkClient.validateTopicCreate`):
/// partitions numbered 0.., every replica list non-empty, of one length, without duplicates.
/// Unknown brokers are allowed, as in ZooKeeper-mode Kafka.
fn check_explicit_assignment(assignment: &BTreeMap<i32, Vec<i32>>) -> Result<(), Refusal> {
    let bad = |m: String| refusal(ErrorCode::InvalidReplicaAssignment, m);
    if assignment.keys().copied().ne(0..assignment.len() as i32) {
        return Err(bad(
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    let mut sizes = BTreeSet::new();
    for (p, replicas) in assignment {
        if replicas.is_empty() {
            return Err(bad(format!("partition {p} has no replicas")));
        }
        let distinct: BTreeSet<_> = replicas.iter().collect();
        if distinct.len() != replicas.len() {
            return Err(bad(format!(
                "Duplicate replica assignment found: {p} -> {replicas:?}"
            )));
        }
        sizes.insert(replicas.len());
    }
    if sizes.len() > 1 {
        return Err(bad(
            "All partitions should have the same number of replicas".into(),
        ));
    }
    Ok(())
}

/// The plan for one topic of a CreateTopics request.
struct TopicPlan {
    name: String,
    assignment: BTreeMap<i32, Vec<i32>>,
    config: BTreeMap<String, String>,
}

impl AdminState {
    /// Validates one CreateTopics entry and computes its assignment.
    fn plan_topic(
        &self,
        topic: &CreatableTopic,
        cache: &MetadataCache,
        existing: &[String],
    ) -> Result<TopicPlan, Refusal> {
        let name = topic.name.to_string();
        if !paths::is_valid_topic_name(&name) {
            return Err(refusal(
                ErrorCode::InvalidTopicException,
                format!("Topic name {name:?} is illegal"),
            ));
        }
        if cache.topic_id(&name).is_some()
            || cache.partitions().any(|(tp, _)| tp.topic == name)
            || existing.contains(&name)
        {
            return Err(refusal(
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let collides = |t: &String| t.replace('.', "_") == name.replace('.', "_");
        if let Some(other) = existing.iter().find(|t| collides(t)) {
            return Err(refusal(
                ErrorCode::InvalidTopicException,
                format!("Topic '{name}' collides with existing topic: {other}"),
            ));
        }
        if !topic.assignments.is_empty()
            && (topic.num_partitions != -1 || topic.replication_factor != -1)
        {
            return Err(refusal(
                ErrorCode::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set. \
                 Both cannot be used at the same time.",
            ));
        }
        let mut config = BTreeMap::new();
        for c in &topic.configs {
            let Some(value) = &c.value else {
                return Err(refusal(
                    ErrorCode::InvalidConfig,
                    format!("Null value not supported for topic configs: {}", c.name),
                ));
            };
            config.insert(c.name.to_string(), value.to_string());
        }
        let assignment = if topic.assignments.is_empty() {
            let partitions = if topic.num_partitions == -1 {
                self.settings.num_partitions
            } else {
                topic.num_partitions
            };
            let rf = if topic.replication_factor == -1 {
                self.settings.default_replication_factor
            } else {
                topic.replication_factor
            };
            let brokers = live_brokers(cache);
            // Kafka draws the start at random; a hash of the name spreads the leaders the
            // same way and keeps a topic's assignment reproducible.
            let start = if brokers.is_empty() {
                0
            } else {
                name.bytes().map(usize::from).sum::<usize>() % brokers.len()
            };
            assign_replicas_to_brokers(
                &brokers,
                partitions,
                i32::from(rf),
                AssignmentStart::fixed(start),
                0,
            )
            .map_err(|e| assignment_refusal(&e))?
        } else {
            let mut a = BTreeMap::new();
            for entry in &topic.assignments {
                a.insert(entry.partition_index, entry.broker_ids.to_vec());
            }
            check_explicit_assignment(&a)?;
            a
        };
        validate_topic_config(&config)?;
        Ok(TopicPlan {
            name,
            assignment,
            config,
        })
    }
}

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// CreateTopics (KIP-4): `validate_only`, explicit assignments, -1 for the broker's
    /// `num.partitions` / `default.replication.factor`, topic configs (validated, stored in
    /// `/config/topics/<t>`); then waits for the partitions' leaders. v5+ answers with the
    /// partition count, the replication factor and the topic's configs.
    pub async fn create_topics(
        &self,
        version: i16,
        request: &CreateTopicsRequest,
    ) -> CreateTopicsResponse {
        let state = self.admin_state();
        let controller = self.is_active_controller();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &request.topics {
            *counts.entry(&*t.name).or_default() += 1;
        }
        let existing = match &state {
            Some(s) if controller => s.zk.topics(false).await.unwrap_or_default(),
            _ => Vec::new(),
        };
        // Per topic: the plan (and what was written), or the refusal.
        let mut outcomes: Vec<(String, Result<TopicPlan, Refusal>)> = Vec::new();
        for topic in &request.topics {
            let name = topic.name.to_string();
            let outcome = match &state {
                None => Err(no_store()),
                Some(_) if !controller => Err((ErrorCode::NotController, None)),
                Some(_) if counts.get(&*topic.name).copied().unwrap_or(0) > 1 => Err(refusal(
                    ErrorCode::InvalidRequest,
                    "Create topics request from client contains multiple entries for the topic",
                )),
                Some(s) => {
                    let plan = self
                        .driver
                        .with_manager(|m, _| s.plan_topic(topic, m.metadata(), &existing));
                    match plan {
                        Ok(plan) if !request.validate_only => {
                            match admin::create_topic_with_config(
                                s.store.as_ref(),
                                &plan.name,
                                &plan.assignment,
                                &plan.config,
                            )
                            .await
                            {
                                Ok(()) => {
                                    tracing::info!(topic = %plan.name,
                                        partitions = plan.assignment.len(), "topic created");
                                    Ok(plan)
                                }
                                Err(AdminError::TopicExists(_)) => Err(refusal(
                                    ErrorCode::TopicAlreadyExists,
                                    format!("Topic '{name}' already exists."),
                                )),
                                Err(AdminError::InvalidTopicName(_)) => Err(refusal(
                                    ErrorCode::InvalidTopicException,
                                    format!("Topic name {name:?} is illegal"),
                                )),
                                Err(e) => {
                                    Err(refusal(ErrorCode::UnknownServerError, e.to_string()))
                                }
                            }
                        }
                        other => other,
                    }
                }
            };
            outcomes.push((name, outcome));
        }
        // DelayedCreatePartitions: every written topic's partitions have leaders.
        let written: Vec<(String, i32)> = outcomes
            .iter()
            .filter_map(|(n, o)| {
                o.as_ref()
                    .ok()
                    .map(|p| (n.clone(), p.assignment.len() as i32))
            })
            .collect();
        let complete = request.validate_only
            || written.is_empty()
            || (request.timeout_ms > 0
                && self
                    .wait_for_metadata(request.timeout_ms, |c| {
                        written.iter().all(|(t, n)| all_led(c, t, *n))
                    })
                    .await);
        let led: BTreeMap<String, (bool, Uuid)> = self.driver.with_manager(|m, _| {
            written
                .iter()
                .map(|(t, n)| {
                    let cache = m.metadata();
                    (
                        t.clone(),
                        (all_led(cache, t, *n), cache.topic_id(t).unwrap_or_default()),
                    )
                })
                .collect()
        });
        let mut response = CreateTopicsResponse::default();
        for (name, outcome) in outcomes {
            let mut result = CreatableTopicResult {
                name: name.as_str().into(),
                error_message: None,
                configs: None,
                ..Default::default()
            };
            match outcome {
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = message.map(Into::into);
                }
                Ok(plan) => {
                    let (done, id) = led.get(&name).copied().unwrap_or((false, Uuid::ZERO));
                    if !(request.validate_only || complete || done) {
                        result.error_code = ErrorCode::RequestTimedOut.code();
                        result.error_message =
                            Some("the topic was created; its partitions have no leader yet".into());
                    }
                    result.topic_id = id;
                    if version >= 5 {
                        result.num_partitions = plan.assignment.len() as i32;
                        result.replication_factor = plan
                            .assignment
                            .values()
                            .next()
                            .map_or(-1, |r| i16::try_from(r.len()).unwrap_or(i16::MAX));
                        if let Some(s) = &state {
                            result.configs = Some(s.creatable_configs(&plan.config));
                        }
                    }
                }
            }
            response.topics.push(result);
        }
        response
    }

    /// DeleteTopics: by name, or (v6+) by topic id; writes `/admin/delete_topics/<t>` (a
    /// pending deletion is not an error) and waits until the topic is gone from this broker's
    /// metadata. UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID for what the metadata does not
    /// know; TOPIC_DELETION_DISABLED when `delete.topic.enable` is false.
    pub async fn delete_topics(
        &self,
        version: i16,
        request: &DeleteTopicsRequest,
    ) -> DeleteTopicsResponse {
        let state = self.admin_state();
        let controller = self.is_active_controller();
        // (name if known, id, outcome)
        let wanted: Vec<(Option<String>, Uuid)> = if version >= 6 {
            request
                .topics
                .iter()
                .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id))
                .collect()
        } else {
            request
                .topic_names
                .iter()
                .map(|n| (Some(n.to_string()), Uuid::ZERO))
                .collect()
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut results: Vec<(Option<String>, Uuid, Result<(), Refusal>)> = Vec::new();
        for (name, id) in wanted {
            let resolved = self.driver.with_manager(|m, _| {
                let cache = m.metadata();
                match (&name, id) {
                    (Some(_), id) if id != Uuid::ZERO => Err(refusal(
                        ErrorCode::InvalidRequest,
                        "a topic is named by its name or by its id, not both",
                    )),
                    (Some(n), _) => {
                        if cache.partitions().any(|(tp, _)| &tp.topic == n) {
                            Ok(n.clone())
                        } else {
                            Err(refusal(
                                ErrorCode::UnknownTopicOrPartition,
                                "This server does not host this topic-partition.",
                            ))
                        }
                    }
                    (None, id) => cache
                        .partitions()
                        .map(|(tp, _)| tp.topic.clone())
                        .find(|t| cache.topic_id(t) == Some(id))
                        .ok_or_else(|| {
                            refusal(
                                ErrorCode::UnknownTopicId,
                                "This server does not host this topic ID.",
                            )
                        }),
                }
            });
            let topic_id = match &resolved {
                Ok(t) => self
                    .driver
                    .with_manager(|m, _| m.metadata().topic_id(t))
                    .unwrap_or(id),
                Err(_) => id,
            };
            let outcome = match (&state, resolved) {
                (None, _) => Err(no_store()),
                (Some(_), _) if !controller => Err((ErrorCode::NotController, None)),
                (Some(s), _) if !s.settings.delete_topic_enable => Err(refusal(
                    if version >= 3 {
                        ErrorCode::TopicDeletionDisabled
                    } else {
                        ErrorCode::InvalidRequest
                    },
                    "Topic deletion is disabled.",
                )),
                (_, Err(r)) => Err(r),
                (Some(s), Ok(topic)) => {
                    *seen.entry(topic.clone()).or_default() += 1;
                    if seen[&topic] > 1 {
                        Err(refusal(
                            ErrorCode::InvalidRequest,
                            "Duplicate topic in request.",
                        ))
                    } else {
                        match admin::delete_topic(s.store.as_ref(), &topic).await {
                            Ok(()) => {
                                tracing::info!(topic = %topic, "topic deletion requested");
                                Ok(())
                            }
                            Err(e) => Err(refusal(ErrorCode::UnknownServerError, e.to_string())),
                        }
                    }
                }
            };
            let name = match (&outcome, name) {
                (_, Some(n)) => Some(n),
                (Ok(()), None) => self.driver.with_manager(|m, _| {
                    let cache = m.metadata();
                    cache
                        .partitions()
                        .map(|(tp, _)| tp.topic.clone())
                        .find(|t| cache.topic_id(t) == Some(topic_id))
                }),
                (Err(_), None) => None,
            };
            results.push((name, topic_id, outcome));
        }
        let doomed: Vec<String> = results
            .iter()
            .filter(|(_, _, o)| o.is_ok())
            .filter_map(|(n, _, _)| n.clone())
            .collect();
        if request.timeout_ms > 0 && !doomed.is_empty() {
            self.wait_for_metadata(request.timeout_ms, |c| {
                !c.partitions().any(|(tp, _)| doomed.contains(&tp.topic))
            })
            .await;
        }
        let still_there: BTreeSet<String> = self.driver.with_manager(|m, _| {
            m.metadata()
                .partitions()
                .map(|(tp, _)| tp.topic.clone())
                .filter(|t| doomed.contains(t))
                .collect()
        });
        let mut response = DeleteTopicsResponse::default();
        for (name, topic_id, outcome) in results {
            let (code, message) = match outcome {
                Err(r) => r,
                Ok(()) if name.as_ref().is_some_and(|n| still_there.contains(n)) => (
                    ErrorCode::RequestTimedOut,
                    Some("the deletion was requested; the topic is not gone yet".into()),
                ),
                Ok(()) => (ErrorCode::None, None),
            };
            response.responses.push(DeletableTopicResult {
                name: name.map(Into::into),
                topic_id,
                error_code: code.code(),
                error_message: message.map(Into::into),
                ..Default::default()
            });
        }
        response
    }

    /// CreatePartitions (KIP-195): raises a topic's partition count, with the new partitions'
    /// replicas given or assigned as Kafka does (continuing the round robin from partition 0's
    /// first replica); `validate_only`; INVALID_PARTITIONS for a count that is not an increase,
    /// INVALID_REPLICA_ASSIGNMENT for assignments of the wrong number, size or brokers,
    /// REASSIGNMENT_IN_PROGRESS while one of the topic's partitions moves; then waits for the
    /// new partitions' leaders.
    pub async fn create_partitions(
        &self,
        request: &CreatePartitionsRequest,
    ) -> CreatePartitionsResponse {
        let state = self.admin_state();
        let controller = self.is_active_controller();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &request.topics {
            *counts.entry(&*t.name).or_default() += 1;
        }
        let mut outcomes: Vec<(String, i32, Result<(), Refusal>)> = Vec::new();
        for topic in &request.topics {
            let name = topic.name.to_string();
            let outcome = match &state {
                None => Err(no_store()),
                Some(_) if !controller => Err((ErrorCode::NotController, None)),
                Some(_) if counts.get(&*topic.name).copied().unwrap_or(0) > 1 => Err(refusal(
                    ErrorCode::InvalidRequest,
                    "Duplicate topic in request.",
                )),
                Some(s) => self.add_partitions(s, topic, request.validate_only).await,
            };
            outcomes.push((name, topic.count, outcome));
        }
        let grown: Vec<(String, i32)> = outcomes
            .iter()
            .filter(|(_, _, o)| o.is_ok())
            .map(|(n, c, _)| (n.clone(), *c))
            .collect();
        if !request.validate_only && request.timeout_ms > 0 && !grown.is_empty() {
            self.wait_for_metadata(request.timeout_ms, |c| {
                grown.iter().all(|(t, n)| all_led(c, t, *n))
            })
            .await;
        }
        let mut response = CreatePartitionsResponse::default();
        for (name, count, outcome) in outcomes {
            let (code, message) = match outcome {
                Err(r) => r,
                Ok(()) if request.validate_only => (ErrorCode::None, None),
                Ok(()) => {
                    if self
                        .driver
                        .with_manager(|m, _| all_led(m.metadata(), &name, count))
                    {
                        (ErrorCode::None, None)
                    } else {
                        (
                            ErrorCode::RequestTimedOut,
                            Some("the partitions were added; not all have a leader yet".into()),
                        )
                    }
                }
            };
            response.results.push(CreatePartitionsTopicResult {
                name: name.as_str().into(),
                error_code: code.code(),
                error_message: message.map(Into::into),
                ..Default::default()
            });
        }
        response
    }

    /// One topic of CreatePartitions: checks, assigns and (unless `validate_only`) rewrites
    /// `/brokers/topics/<t>`.
    async fn add_partitions(
        &self,
        state: &AdminState,
        topic: &kafka_wire::messages::create_partitions_request::CreatePartitionsTopic,
        validate_only: bool,
    ) -> Result<(), Refusal> {
        let name = topic.name.to_string();
        let server = |e: String| refusal(ErrorCode::UnknownServerError, e);
        let Some((current, _)) = state
            .zk
            .topic_assignment(&name, false)
            .await
            .map_err(|e| server(e.to_string()))?
        else {
            return Err(refusal(
                ErrorCode::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            ));
        };
        let deleting = state
            .store
            .exists(&paths::delete_topic(&name), false)
            .await
            .map_err(|e| server(e.to_string()))?;
        if deleting.is_some() {
            return Err(refusal(
                ErrorCode::InvalidTopicException,
                format!("The topic '{name}' is queued for deletion."),
            ));
        }
        let moving = |m: &Option<BTreeMap<i32, Vec<i32>>>| {
            m.as_ref()
                .is_some_and(|m| m.values().any(|r| !r.is_empty()))
        };
        if moving(&current.adding_replicas) || moving(&current.removing_replicas) {
            return Err(refusal(
                ErrorCode::ReassignmentInProgress,
                format!("A partition reassignment is in progress for the topic '{name}'."),
            ));
        }
        let old = current.partitions.len() as i32;
        if topic.count == old {
            return Err(refusal(
                ErrorCode::InvalidPartitions,
                format!("Topic already has {old} partitions."),
            ));
        }
        if topic.count < old {
            return Err(refusal(
                ErrorCode::InvalidPartitions,
                format!(
                    "Topic currently has {old} partitions, {} would not be an increase.",
                    topic.count
                ),
            ));
        }
        let adding = topic.count - old;
        let rf = current.partitions.get(&0).map_or(0, Vec::len);
        let brokers = self.driver.with_manager(|m, _| live_brokers(m.metadata()));
        let added: BTreeMap<i32, Vec<i32>> = match &topic.assignments {
            Some(given) => {
                let bad = |m: String| refusal(ErrorCode::InvalidReplicaAssignment, m);
                if given.len() as i32 != adding {
                    return Err(bad(format!(
                        "Increasing the number of partitions by {adding} but {} assignments \
                         provided.",
                        given.len()
                    )));
                }
                let live: BTreeSet<i32> = brokers.iter().map(|b| b.id).collect();
                let mut added = BTreeMap::new();
                for (i, a) in given.iter().enumerate() {
                    let p = old + i as i32;
                    let replicas = a.broker_ids.to_vec();
                    let unknown: Vec<i32> = replicas
                        .iter()
                        .copied()
                        .filter(|b| !live.contains(b))
                        .collect();
                    if !unknown.is_empty() {
                        return Err(bad(format!(
                            "Unknown broker(s) in replica assignment: {unknown:?}."
                        )));
                    }
                    if replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len() {
                        return Err(bad(format!(
                            "Duplicate brokers not allowed in replica assignment: {replicas:?} \
                             for partition id {p}."
                        )));
                    }
                    if replicas.len() != rf {
                        return Err(bad(format!(
                            "Inconsistent replication factor between partitions, partition 0 \
                             has {rf} while partition {p} has {}.",
                            replicas.len()
                        )));
                    }
                    added.insert(p, replicas);
                }
                added
            }
            None => {
                let first = current
                    .partitions
                    .get(&0)
                    .and_then(|r| r.first())
                    .copied()
                    .unwrap_or(0);
                let start = brokers.iter().position(|b| b.id >= first).unwrap_or(0);
                assign_replicas_to_brokers(
                    &brokers,
                    adding,
                    rf as i32,
                    AssignmentStart::fixed(start),
                    old,
                )
                .map_err(|e| assignment_refusal(&e))?
            }
        };
        if validate_only {
            return Ok(());
        }
        match admin::add_partitions(state.store.as_ref(), &name, &added).await {
            Ok(()) => {
                tracing::info!(topic = %name, partitions = topic.count, "partitions added");
                Ok(())
            }
            Err(e) => Err(server(e.to_string())),
        }
    }
}
