//! `ha-admin`: ZooKeeper-mode Kafka's admin tools for an ha-blocks cluster — topics, partition
//! reassignment, preferred leader election and the broker list. With `--zookeeper` they are
//! written to and read from the coordination store, where the controller picks them up through
//! its watches; with `--bootstrap-server host:port` the same verbs go through the brokers'
//! administration APIs (CreateTopics, DeleteTopics, Metadata, AlterPartitionReassignments,
//! ListPartitionReassignments, ElectLeaders, DescribeCluster), as `kafka-topics
//! --bootstrap-server` does.
//!
//! ```text
//! ha-admin --bootstrap-server 127.0.0.1:9092 create-topic orders --partitions 3 --replication-factor 3
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
use kafka_broker::admin_client::AdminClient;
use kafka_broker::node::{endpoint_of, LISTENER};
use kafka_controller::admin;
use kafka_controller::assignment::AssignmentStart;
use kafka_controller::context::TopicPartition;
use kafka_controller::zk_data::KafkaZkClient;

/// Admin requests on an ha-blocks cluster, through its coordination store or its brokers.
#[derive(Debug, Parser)]
#[command(name = "ha-admin", version)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["zookeeper", "bootstrap_server"])))]
struct Args {
    /// The ZooKeeper ensemble, `host:port[,host:port…][/chroot]`.
    #[arg(long)]
    zookeeper: Option<String>,
    /// A broker, `host:port`: the requests go through the administration APIs.
    #[arg(long)]
    bootstrap_server: Option<String>,
    /// How long a request through a broker may take (ms).
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
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
        /// random; here it is fixed so that assignments are reproducible). Only with
        /// `--zookeeper`: through a broker, the broker assigns.
        #[arg(long)]
        start_index: Option<usize>,
        /// A topic config override, `key=value` (repeatable).
        #[arg(long = "config")]
        configs: Vec<String>,
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

fn parse_configs(configs: &[String]) -> Result<Vec<(String, String)>, String> {
    configs
        .iter()
        .map(|c| {
            c.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| format!("not key=value: {c:?}"))
        })
        .collect()
}

async fn run(args: Args) -> Result<(), String> {
    if let Some(bootstrap) = &args.bootstrap_server {
        let timeout = Duration::from_millis(args.timeout_ms);
        let client = AdminClient::connect(bootstrap, timeout)
            .await
            .map_err(|e| format!("cannot reach the broker at {bootstrap}: {e}"))?;
        return through_broker(&client, args.command).await;
    }
    let zookeeper = args.zookeeper.clone().unwrap_or_default();
    let options = ZooKeeperOptions::new().with_session_timeout(Duration::from_secs(10));
    let coord: Arc<dyn Coordination> = Arc::new(
        ZooKeeperCoordination::connect_with(&zookeeper, options)
            .await
            .map_err(|e| format!("cannot connect to ZooKeeper at {zookeeper}: {e}"))?,
    );
    let zk = KafkaZkClient::new(coord.clone());
    match args.command {
        Command::CreateTopic {
            name,
            partitions,
            replication_factor,
            start_index,
            configs,
        } => {
            let assignment = admin::create_topic(
                coord.as_ref(),
                &name,
                partitions,
                replication_factor,
                AssignmentStart::fixed(start_index.unwrap_or(0)),
            )
            .await
            .map_err(|e| e.to_string())?;
            let configs: BTreeMap<String, String> = parse_configs(&configs)?.into_iter().collect();
            if !configs.is_empty() {
                admin::change_topic_config(coord.as_ref(), &name, &configs)
                    .await
                    .map_err(|e| e.to_string())?;
            }
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

/// The verbs through a broker's administration APIs.
async fn through_broker(client: &AdminClient, command: Command) -> Result<(), String> {
    let e = |e: kafka_broker::admin_client::AdminClientError| e.to_string();
    match command {
        Command::CreateTopic {
            name,
            partitions,
            replication_factor,
            start_index,
            configs,
        } => {
            if start_index.is_some() {
                return Err(
                    "--start-index needs --zookeeper: through a broker, the broker \
                            assigns the replicas"
                        .into(),
                );
            }
            let configs = parse_configs(&configs)?;
            let rf = i16::try_from(replication_factor)
                .map_err(|_| format!("replication factor {replication_factor} too large"))?;
            client
                .create_topic(&name, partitions, rf, &configs)
                .await
                .map_err(e)?;
            // The controller's broker answered once every partition had a leader in its
            // metadata: show the assignment from there.
            let m = client
                .controller_metadata(Some(std::slice::from_ref(&name)))
                .await
                .map_err(e)?;
            let mut shown: Vec<(i32, String)> = m
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| {
                    (
                        p.partition_index,
                        format!("{}:[{}]", p.partition_index, ids(&p.replica_nodes)),
                    )
                })
                .collect();
            shown.sort();
            let shown: Vec<String> = shown.into_iter().map(|(_, s)| s).collect();
            println!("Created topic {name}: {}", shown.join(" "));
        }
        Command::Describe { topic } => {
            let only = topic.map(|t| vec![t]);
            let m = client.metadata(only.as_deref()).await.map_err(e)?;
            let moving = client.list_reassignments().await.map_err(e)?;
            let mut moves: BTreeMap<(String, i32), (Vec<i32>, Vec<i32>)> = BTreeMap::new();
            for t in &moving.topics {
                for p in &t.partitions {
                    moves.insert(
                        (t.name.to_string(), p.partition_index),
                        (p.adding_replicas.to_vec(), p.removing_replicas.to_vec()),
                    );
                }
            }
            let mut topics = m.topics.clone();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            for t in topics {
                let name = t.name.as_deref().unwrap_or("").to_owned();
                if t.error_code != 0 {
                    return Err(format!(
                        "topic {name}: {}",
                        kafka_wire::error_code::ErrorCode::from(t.error_code)
                    ));
                }
                let mut parts = t.partitions.clone();
                parts.sort_by_key(|p| p.partition_index);
                let rf = parts
                    .iter()
                    .map(|p| p.replica_nodes.len())
                    .max()
                    .unwrap_or(0);
                println!(
                    "Topic: {name}\tPartitionCount: {}\tReplicationFactor: {rf}\tTopicId: {}",
                    parts.len(),
                    kafka_controller::zk_data::encode_topic_id(t.topic_id)
                );
                for p in parts {
                    let leader = if p.leader_id >= 0 {
                        p.leader_id.to_string()
                    } else {
                        "none".to_owned()
                    };
                    let mut line = format!(
                        "\tTopic: {name}\tPartition: {}\tLeader: {leader}\tLeaderEpoch: {}\tReplicas: {}\tIsr: {}",
                        p.partition_index,
                        p.leader_epoch,
                        ids(&p.replica_nodes),
                        ids(&p.isr_nodes)
                    );
                    if let Some((adding, removing)) = moves.get(&(name.clone(), p.partition_index))
                    {
                        if !adding.is_empty() {
                            line.push_str(&format!("\tAddingReplicas: {}", ids(adding)));
                        }
                        if !removing.is_empty() {
                            line.push_str(&format!("\tRemovingReplicas: {}", ids(removing)));
                        }
                    }
                    println!("{line}");
                }
            }
        }
        Command::DeleteTopic { name } => {
            client.delete_topic(&name).await.map_err(e)?;
            println!("Topic {name} is deleted.");
        }
        Command::Reassign {
            topic,
            partition,
            replicas,
        } => {
            let replicas = parse_ids(&replicas)?;
            client
                .reassign(&topic, partition, &replicas)
                .await
                .map_err(e)?;
            println!(
                "Reassignment of {topic}-{partition} to [{}] requested.",
                ids(&replicas)
            );
        }
        Command::PreferredElection { topic, partition } => {
            let partitions: Option<Vec<(String, i32)>> = match (topic, partition) {
                (Some(t), Some(p)) => Some(vec![(t, p)]),
                (Some(t), None) => {
                    let m = client
                        .metadata(Some(std::slice::from_ref(&t)))
                        .await
                        .map_err(e)?;
                    Some(
                        m.topics
                            .iter()
                            .flat_map(|x| x.partitions.iter())
                            .map(|p| (t.clone(), p.partition_index))
                            .collect(),
                    )
                }
                (None, _) => None,
            };
            let (moved, not_needed) = client
                .preferred_election(partitions.as_deref())
                .await
                .map_err(e)?;
            println!(
                "Preferred replica election: {moved} partition(s) moved to their preferred leader, \
                 {not_needed} already there."
            );
        }
        Command::ListBrokers => {
            let c = client.describe_cluster().await.map_err(e)?;
            for b in &c.brokers {
                let role = if b.broker_id == c.controller_id {
                    "\tcontroller"
                } else {
                    ""
                };
                println!(
                    "Broker: {}\tEndpoint: {}:{}\tRack: {}{role}",
                    b.broker_id,
                    b.host,
                    b.port,
                    b.rack.as_deref().unwrap_or("-")
                );
            }
            if c.controller_id < 0 {
                println!("No active controller");
            }
        }
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
