//! `ha-admin`: ZooKeeper-mode Kafka's admin tools for an ha-blocks cluster — topics, partition
//! reassignment, preferred leader election and the broker list — written to and read from the
//! coordination store, where the controller picks them up through its watches.
//!
//! ```text
//! ha-admin --zookeeper 127.0.0.1:2181 create-topic orders --partitions 3 --replication-factor 3
//! ha-admin --zookeeper 127.0.0.1:2181 describe [orders]
//! ha-admin --zookeeper 127.0.0.1:2181 delete-topic orders
//! ha-admin --zookeeper 127.0.0.1:2181 reassign orders 0 2,3,4
//! ha-admin --zookeeper 127.0.0.1:2181 preferred-election [orders 0]
//! ha-admin --zookeeper 127.0.0.1:2181 list-brokers
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ha_coordination::{Coordination, ZooKeeperCoordination, ZooKeeperOptions};
use kafka_broker::node::{endpoint_of, LISTENER};
use kafka_controller::admin;
use kafka_controller::assignment::AssignmentStart;
use kafka_controller::context::TopicPartition;
use kafka_controller::zk_data::KafkaZkClient;

/// Admin requests on the coordination store of an ha-blocks cluster.
#[derive(Debug, Parser)]
#[command(name = "ha-admin", version)]
struct Args {
    /// The ZooKeeper ensemble, `host:port[,host:port…][/chroot]`.
    #[arg(long)]
    zookeeper: String,
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Creates a topic over the live brokers (K2.2).
    CreateTopic {
        /// The topic name.
        name: String,
        /// Number of partitions.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Replicas per partition.
        #[arg(long, default_value_t = 1)]
        replication_factor: i32,
        /// Index of partition 0's first replica among the sorted brokers (Kafka picks it at
        /// random; here it is fixed so that assignments are reproducible).
        #[arg(long, default_value_t = 0)]
        start_index: usize,
    },
    /// Prints each partition's leader, leader epoch, replicas and ISR.
    Describe {
        /// Only this topic.
        topic: Option<String>,
    },
    /// Requests the deletion of a topic (K2.1).
    DeleteTopic {
        /// The topic name.
        name: String,
    },
    /// Moves a partition to new replicas (K7; `/admin/reassign_partitions`).
    Reassign {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The new replicas, preferred leader first: `b1,b2,…`.
        replicas: String,
    },
    /// Moves leadership back to the preferred replica, of one partition or of all.
    PreferredElection {
        /// The topic (all partitions of all topics when absent).
        topic: Option<String>,
        /// The partition.
        #[arg(requires = "topic")]
        partition: Option<i32>,
    },
    /// Lists the registered brokers and the controller.
    ListBrokers,
}

fn ids(list: &[i32]) -> String {
    list.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_ids(list: &str) -> Result<Vec<i32>, String> {
    list.split(',')
        .map(|s| {
            s.trim()
                .parse::<i32>()
                .map_err(|_| format!("not a broker id: {s:?}"))
        })
        .collect()
}

async fn describe(zk: &KafkaZkClient, only: Option<String>) -> Result<(), String> {
    let all = zk.topics(false).await.map_err(|e| e.to_string())?;
    let topics: Vec<String> = match only {
        Some(t) if all.contains(&t) => vec![t],
        Some(t) => return Err(format!("topic {t} does not exist")),
        None => all,
    };
    let deleting = zk
        .topics_to_delete(false)
        .await
        .map_err(|e| e.to_string())?;
    for topic in topics {
        let Some((assignment, _)) = zk
            .topic_assignment(&topic, false)
            .await
            .map_err(|e| e.to_string())?
        else {
            continue;
        };
        let rf = assignment
            .partitions
            .values()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        let mut header = format!(
            "Topic: {topic}\tPartitionCount: {}\tReplicationFactor: {rf}",
            assignment.partitions.len()
        );
        if let Some(id) = &assignment.topic_id {
            header.push_str(&format!("\tTopicId: {id}"));
        }
        if deleting.contains(&topic) {
            header.push_str("\tMarkedForDeletion: true");
        }
        println!("{header}");
        let keys: Vec<(String, i32)> = assignment
            .partitions
            .keys()
            .map(|p| (topic.clone(), *p))
            .collect();
        let states = zk.partition_states(&keys).await;
        for ((_, p), state) in keys.iter().zip(states) {
            let replicas = assignment.partitions.get(p).cloned().unwrap_or_default();
            let mut line = format!("\tTopic: {topic}\tPartition: {p}");
            match state {
                Ok(Some((s, _))) => line.push_str(&format!(
                    "\tLeader: {}\tLeaderEpoch: {}\tReplicas: {}\tIsr: {}",
                    s.leader,
                    s.leader_epoch,
                    ids(&replicas),
                    ids(&s.isr)
                )),
                Ok(None) => line.push_str(&format!(
                    "\tLeader: none\tLeaderEpoch: -\tReplicas: {}\tIsr: (no state yet)",
                    ids(&replicas)
                )),
                Err(e) => line.push_str(&format!("\tstate unreadable: {e}")),
            }
            let adding = assignment
                .adding_replicas
                .as_ref()
                .and_then(|a| a.get(p))
                .filter(|a| !a.is_empty());
            if let Some(a) = adding {
                line.push_str(&format!("\tAddingReplicas: {}", ids(a)));
            }
            let removing = assignment
                .removing_replicas
                .as_ref()
                .and_then(|a| a.get(p))
                .filter(|a| !a.is_empty());
            if let Some(r) = removing {
                line.push_str(&format!("\tRemovingReplicas: {}", ids(r)));
            }
            println!("{line}");
        }
    }
    Ok(())
}

async fn list_brokers(zk: &KafkaZkClient) -> Result<(), String> {
    let controller = zk
        .controller(false)
        .await
        .map_err(|e| e.to_string())?
        .map(|(c, _)| c.brokerid);
    let epoch = zk
        .controller_epoch()
        .await
        .map_err(|e| e.to_string())?
        .map(|e| e.epoch);
    for id in zk.live_broker_ids(false).await.map_err(|e| e.to_string())? {
        let Some((registration, broker_epoch)) = zk.broker(id).await.map_err(|e| e.to_string())?
        else {
            continue;
        };
        let endpoint = endpoint_of(&registration, LISTENER)
            .map(|(h, p)| format!("{h}:{p}"))
            .unwrap_or_else(|| "-".to_owned());
        let rack = registration.rack.as_deref().unwrap_or("-");
        let role = if controller == Some(id) {
            format!("\tcontroller (epoch {})", epoch.unwrap_or(-1))
        } else {
            String::new()
        };
        println!(
            "Broker: {id}\tEndpoint: {endpoint}\tRack: {rack}\tBrokerEpoch: {broker_epoch}{role}"
        );
    }
    if controller.is_none() {
        println!("No active controller");
    }
    Ok(())
}

async fn run(args: Args) -> Result<(), String> {
    let options = ZooKeeperOptions::new().with_session_timeout(Duration::from_secs(10));
    let coord: Arc<dyn Coordination> = Arc::new(
        ZooKeeperCoordination::connect_with(&args.zookeeper, options)
            .await
            .map_err(|e| format!("cannot connect to ZooKeeper at {}: {e}", args.zookeeper))?,
    );
    let zk = KafkaZkClient::new(coord.clone());
    match args.command {
        Command::CreateTopic {
            name,
            partitions,
            replication_factor,
            start_index,
        } => {
            let assignment = admin::create_topic(
                coord.as_ref(),
                &name,
                partitions,
                replication_factor,
                AssignmentStart::fixed(start_index),
            )
            .await
            .map_err(|e| e.to_string())?;
            let shown: Vec<String> = assignment
                .iter()
                .map(|(p, r)| format!("{p}:[{}]", ids(r)))
                .collect();
            println!("Created topic {name}: {}", shown.join(" "));
        }
        Command::Describe { topic } => describe(&zk, topic).await?,
        Command::DeleteTopic { name } => {
            if !zk
                .topics(false)
                .await
                .map_err(|e| e.to_string())?
                .contains(&name)
            {
                return Err(format!("topic {name} does not exist"));
            }
            admin::delete_topic(coord.as_ref(), &name)
                .await
                .map_err(|e| e.to_string())?;
            println!("Topic {name} is marked for deletion.");
        }
        Command::Reassign {
            topic,
            partition,
            replicas,
        } => {
            let replicas = parse_ids(&replicas)?;
            let mut targets = BTreeMap::new();
            targets.insert(
                TopicPartition::new(topic.as_str(), partition),
                replicas.clone(),
            );
            admin::reassign_partitions(coord.as_ref(), &targets)
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "Reassignment of {topic}-{partition} to [{}] requested.",
                ids(&replicas)
            );
        }
        Command::PreferredElection { topic, partition } => {
            let partitions: Vec<TopicPartition> = match (topic, partition) {
                (Some(t), Some(p)) => vec![TopicPartition::new(t.as_str(), p)],
                (only, _) => {
                    let mut all = Vec::new();
                    for t in zk.topics(false).await.map_err(|e| e.to_string())? {
                        if only.as_ref().is_some_and(|o| *o != t) {
                            continue;
                        }
                        if let Some((a, _)) = zk
                            .topic_assignment(&t, false)
                            .await
                            .map_err(|e| e.to_string())?
                        {
                            all.extend(
                                a.partitions
                                    .keys()
                                    .map(|p| TopicPartition::new(t.as_str(), *p)),
                            );
                        }
                    }
                    all
                }
            };
            admin::preferred_replica_election(coord.as_ref(), &partitions)
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "Preferred replica election requested for {} partition(s).",
                partitions.len()
            );
        }
        Command::ListBrokers => list_brokers(&zk).await?,
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("admin: {e}");
            ExitCode::FAILURE
        }
    }
}
