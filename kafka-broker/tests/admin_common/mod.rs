//! A cluster of in-process [`BrokerNode`]s on the in-memory store, and the administration
//! requests the admin tests send it.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, MemoryTree};
use kafka_broker::node::{BrokerNode, LogPlacement, NodeConfig};
use kafka_broker::KafkaConnection;
use kafka_wire::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_wire::messages::CreateTopicsRequest;
use kafka_wire::{RequestBody, ResponseBody};

/// Brokers 1..=n on one in-memory store.
pub struct AdminCluster {
    pub tree: MemoryTree,
    pub nodes: Vec<Option<BrokerNode>>,
}

impl AdminCluster {
    /// Starts `n` nodes and waits for an active controller.
    pub async fn start(n: i32) -> AdminCluster {
        let tree = MemoryTree::new();
        let mut cluster = AdminCluster {
            tree,
            nodes: Vec::new(),
        };
        for id in 1..=n {
            let node = cluster.start_node(id).await;
            cluster.nodes.push(Some(node));
        }
        cluster
            .eventually("an active controller that sees every broker", async |c| {
                c.controller_id().is_some()
                    && c.with_controller_metadata(|m| m.brokers.len() == n as usize)
                        .await
            })
            .await;
        cluster
    }

    /// Starts node `id` (memory logs) on its own session.
    pub async fn start_node(&self, id: i32) -> BrokerNode {
        let mut c = NodeConfig::new(id, "127.0.0.1:0".parse().expect("address"));
        c.logs = LogPlacement::Memory;
        c.broker.partition.replica_lag_time_max_ms = 3_000;
        BrokerNode::start(c, Arc::new(self.tree.connect()))
            .await
            .expect("node starts")
    }

    /// Stops node `id`.
    pub async fn stop(&mut self, id: i32) {
        if let Some(node) = self.nodes[(id - 1) as usize].take() {
            node.shutdown().await;
        }
    }

    /// Starts node `id` again.
    pub async fn restart(&mut self, id: i32) {
        let node = self.start_node(id).await;
        self.nodes[(id - 1) as usize] = Some(node);
    }

    /// A client of the store.
    pub fn store(&self) -> Arc<dyn Coordination> {
        Arc::new(self.tree.connect())
    }

    /// The node `id`.
    pub fn node(&self, id: i32) -> &BrokerNode {
        self.nodes[(id - 1) as usize].as_ref().expect("node runs")
    }

    /// The id of the broker whose controller is active.
    pub fn controller_id(&self) -> Option<i32> {
        self.nodes
            .iter()
            .flatten()
            .find(|n| n.controller().status().active_epoch.is_some())
            .map(|n| n.id())
    }

    /// A broker that is not the controller.
    pub fn other_than_controller(&self) -> i32 {
        let c = self.controller_id().expect("a controller");
        self.nodes
            .iter()
            .flatten()
            .map(|n| n.id())
            .find(|id| *id != c)
            .expect("another broker")
    }

    /// Sends `body` at `version` to broker `id`.
    pub async fn send(&self, id: i32, version: i16, body: RequestBody) -> ResponseBody {
        let mut conn = KafkaConnection::connect(self.node(id).local_addr(), "admin-test")
            .await
            .expect("connects");
        tokio::time::timeout(Duration::from_secs(30), conn.send(version, &body))
            .await
            .expect("answered in time")
            .expect("answered")
    }

    /// Sends `body` to the active controller.
    pub async fn send_controller(&self, version: i16, body: RequestBody) -> ResponseBody {
        let id = self.controller_id().expect("a controller");
        self.send(id, version, body).await
    }

    /// `f` on the controller broker's Metadata answer for every topic.
    pub async fn with_controller_metadata(
        &self,
        f: impl FnOnce(&kafka_wire::messages::MetadataResponse) -> bool,
    ) -> bool {
        let Some(id) = self.controller_id() else {
            return false;
        };
        self.with_metadata(id, f).await
    }

    /// `f` on broker `id`'s Metadata answer for every topic.
    pub async fn with_metadata(
        &self,
        id: i32,
        f: impl FnOnce(&kafka_wire::messages::MetadataResponse) -> bool,
    ) -> bool {
        let body = RequestBody::Metadata(kafka_wire::messages::MetadataRequest {
            topics: None,
            ..Default::default()
        });
        match self.send(id, 9, body).await {
            ResponseBody::Metadata(m) => f(&m),
            other => panic!("not a metadata response: {other:?}"),
        }
    }

    /// Waits (up to 30 s) for `ok`.
    pub async fn eventually(&self, what: &str, mut ok: impl AsyncFnMut(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline {
            if ok(self).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// The leader of `topic`-`partition` in broker `id`'s metadata (-1: none).
    pub async fn leader(&self, id: i32, topic: &str, partition: i32) -> i32 {
        let mut leader = -1;
        self.with_metadata(id, |m| {
            leader = m
                .topics
                .iter()
                .filter(|t| t.name.as_deref() == Some(topic))
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == partition)
                .map_or(-1, |p| p.leader_id);
            true
        })
        .await;
        leader
    }
}

/// A CreateTopics request for one topic.
pub fn create_topic(
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> RequestBody {
    RequestBody::CreateTopics(CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor,
            configs: configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig {
                    name: (*k).into(),
                    value: Some((*v).into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 20_000,
        validate_only,
        ..Default::default()
    })
}

/// A CreateTopics request for one topic with an explicit assignment.
pub fn create_topic_assigned(name: &str, assignment: &[&[i32]]) -> RequestBody {
    RequestBody::CreateTopics(CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: assignment
                .iter()
                .enumerate()
                .map(|(p, r)| CreatableReplicaAssignment {
                    partition_index: p as i32,
                    broker_ids: r.iter().copied().collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 20_000,
        ..Default::default()
    })
}

/// The one topic result of a CreateTopics answer.
pub fn created(
    r: ResponseBody,
) -> kafka_wire::messages::create_topics_response::CreatableTopicResult {
    let ResponseBody::CreateTopics(mut r) = r else {
        panic!("not a create topics response: {r:?}");
    };
    r.topics.pop().expect("one topic")
}
