//! The four-letter words of `zab_coordination::zookeeper::four_letter` against a real server:
//! for a standalone server and each member of a three-server ensemble, the answers of the
//! server must have the structure of the module's answers for a snapshot in the same mode
//! (`srvr`, `stat`, `cons`, `wchs`: the same lines with numbers masked; `mntr`: every key the
//! module prints is one the server prints; `conf`: equal but for the directory sizes, the
//! module's configuration read by `ZkConfig::load` from the server's own `zoo.cfg`;
//! `ruok`, `isro`, a word off the whitelist: equal). Against Apache ZooKeeper 3.8 this checks
//! the module; against `ha-zookeeper` (the `ha_zookeeper_*` test), the server.
//!
//! Needs ZooKeeper (fails under `CI` when it is missing, skips otherwise).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use ha_coordination::{Coordination, CreateMode, ZooKeeperCoordination, ZooKeeperOptions};
use ha_testkit::{ServerMode, ZkEnsemble};
use support::Flavour;
use zab_coordination::zookeeper::config::ZkConfig;
use zab_coordination::zookeeper::four_letter::{
    answer, ConfSnapshot, ConnectionStats, FourLetterWhitelist, LatencyStats, LeaderStats,
    ServerSnapshot, ServerState, SessionStats,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Keys every `mntr` of ours and of the server must have (ZooKeeper's documented ones).
const CORE_MNTR_KEYS: &[&str] = &[
    "zk_version",
    "zk_server_state",
    "zk_avg_latency",
    "zk_max_latency",
    "zk_min_latency",
    "zk_packets_received",
    "zk_packets_sent",
    "zk_num_alive_connections",
    "zk_outstanding_requests",
    "zk_znode_count",
    "zk_watch_count",
    "zk_ephemerals_count",
    "zk_approximate_data_size",
    "zk_open_file_descriptor_count",
    "zk_max_file_descriptor_count",
];

/// Keys the leader's `mntr` must have besides [`CORE_MNTR_KEYS`].
const LEADER_MNTR_KEYS: &[&str] = &["zk_learners", "zk_synced_followers", "zk_pending_syncs"];

/// A line's structure: every number (decimal, signed, or hex after `0x`) becomes `N`, the version
/// string `V`, the last operation `lop=OP`.
fn shape(line: &str, version: &str) -> String {
    let line = line.replace(version, "V");
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '0' && chars.peek() == Some(&'x') {
            chars.next();
            while chars.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                chars.next();
            }
            out.push_str("0xN");
        } else if c.is_ascii_digit() || (c == '-' && chars.peek().is_some_and(char::is_ascii_digit))
        {
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || *c == '.')
            {
                chars.next();
            }
            out.push('N');
        } else {
            out.push(c);
        }
    }
    match out.find("lop=") {
        Some(i) => {
            let end = out[i..].find(',').map_or(out.len(), |e| i + e);
            format!("{}lop=OP{}", &out[..i], &out[end..])
        }
        None => out,
    }
}

/// The shapes of an answer's lines; `sorted` for lists whose order is a hash order.
fn shapes(text: &str, version: &str, sorted: bool) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(|l| shape(l, version)).collect();
    if sorted {
        v.sort();
    }
    v
}

fn mntr_keys(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split_once('\t').map(|(k, _)| k.to_string()))
        .collect()
}

fn without_sizes(conf: &str) -> String {
    conf.lines()
        .filter(|l| !l.starts_with("dataDirSize=") && !l.starts_with("dataLogSize="))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Our snapshot of server `sid` of `zk` in `mode`, with a client session connected.
fn snapshot_for(
    zk: &ZkEnsemble,
    sid: u64,
    mode: ServerMode,
    version: &str,
    config: &ZkConfig,
) -> Result<ServerSnapshot, Box<dyn std::error::Error>> {
    let state = match mode {
        ServerMode::Standalone => ServerState::Standalone,
        ServerMode::Leader => ServerState::Leader,
        ServerMode::Follower => ServerState::Follower,
        ServerMode::Observer => ServerState::Observer,
        other => return Err(format!("server {sid} in mode {other:?}").into()),
    };
    let mut s = ServerSnapshot::new(version, state, ConfSnapshot::from_config(config, 0, 0));
    let asking = ConnectionStats::new(format!("127.0.0.1:{}", zk.client_port(sid)?).parse()?);
    let mut client = ConnectionStats::new("127.0.0.1:40000".parse()?);
    let mut session = SessionStats::new(0x1000_0000_0000_0001, 1, 10_000);
    session.last_op = "PING".into();
    session.last_cxid = 1;
    session.last_zxid = 2;
    session.last_response_ms = 3;
    session.latency = LatencyStats::new(0, 1, 1, 2);
    client.session = Some(session);
    s.connections = vec![asking, client];
    if state == ServerState::Leader {
        s.leader = Some(LeaderStats::default());
    }
    if state != ServerState::Standalone {
        s.quorum_size = Some(3);
        s.peer_state = Some("synced".into());
    }
    Ok(s)
}

/// Compares every word's answer of server `sid` with the module's.
fn compare_server(zk: &ZkEnsemble, sid: u64) -> TestResult {
    let srvr = zk.four_letter_word(sid, "srvr")?;
    let stats = ha_testkit::SrvrStats::parse(&srvr)?;
    let version = stats.version.clone();
    let config = ZkConfig::load(&zk.dir(sid)?.join("zoo.cfg"))?;
    let snap = snapshot_for(zk, sid, stats.mode, &version, &config)?;
    let wl = FourLetterWhitelist::all();
    let ours = |word: &str| {
        answer(word, &snap, &wl)
            .text()
            .map(str::to_string)
            .ok_or_else(|| format!("no answer to {word}"))
    };
    let ctx = |word: &str| format!("server {sid} ({:?}) {word}", stats.mode);

    assert_eq!(
        shapes(&srvr, &version, false),
        shapes(&ours("srvr")?, &version, false),
        "{}",
        ctx("srvr")
    );
    for word in ["stat", "cons"] {
        let theirs = zk.four_letter_word(sid, word)?;
        let mine = ours(word)?;
        // Sorted: the server lists its connections in a hash order.
        let (theirs, mine) = (
            shapes(&theirs, &version, true),
            shapes(&mine, &version, true),
        );
        assert_eq!(theirs, mine, "{}", ctx(word));
    }
    assert_eq!(
        shapes(&zk.four_letter_word(sid, "wchs")?, &version, false),
        shapes(&ours("wchs")?, &version, false),
        "{}",
        ctx("wchs")
    );
    let theirs = mntr_keys(&zk.four_letter_word(sid, "mntr")?);
    let mine = mntr_keys(&ours("mntr")?);
    let extra: Vec<_> = mine.difference(&theirs).collect();
    assert!(
        extra.is_empty(),
        "{}: keys the server lacks: {extra:?}",
        ctx("mntr")
    );
    let mut required: Vec<&str> = CORE_MNTR_KEYS.to_vec();
    if stats.mode == ServerMode::Leader {
        required.extend_from_slice(LEADER_MNTR_KEYS);
    }
    for key in required {
        assert!(theirs.contains(key), "{}: server lacks {key}", ctx("mntr"));
        assert!(mine.contains(key), "{}: we lack {key}", ctx("mntr"));
    }
    assert_eq!(
        without_sizes(&zk.four_letter_word(sid, "conf")?),
        without_sizes(&ours("conf")?),
        "{}",
        ctx("conf")
    );
    assert_eq!(zk.four_letter_word(sid, "ruok")?, ours("ruok")?);
    assert_eq!(zk.four_letter_word(sid, "isro")?, ours("isro")?);
    let envi = zk.four_letter_word(sid, "envi")?;
    assert!(
        envi.starts_with("Environment:\nzookeeper.version="),
        "{envi}"
    );
    assert!(envi.lines().skip(1).all(|l| l.contains('=')), "{envi}");
    Ok(())
}

async fn four_letter_words_have_zookeepers_structure(flavour: Flavour, test: &str) -> TestResult {
    let Some(b) = support::builder(flavour, test)? else {
        return Ok(());
    };
    let options = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(15))
        .with_connection_timeout(Duration::from_secs(10));
    for servers in [1, 3] {
        let mut zk = b.clone().servers(servers).start()?;
        zk.wait_for_leader(Duration::from_secs(60))?;
        // One client session on each server (so `cons` shows a session's details), with a
        // data watch.
        let mut clients = Vec::new();
        for sid in zk.sids() {
            let c = ZooKeeperCoordination::connect_with(
                &format!("127.0.0.1:{}", zk.client_port(sid)?),
                options.clone(),
            )
            .await?;
            let path = format!("/four-letter-{sid}");
            c.create(&path, b"x", CreateMode::Ephemeral).await?;
            c.get_data(&path, true).await?;
            clients.push(c);
        }
        for sid in zk.sids() {
            compare_server(&zk, sid)?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_letter_words_have_zookeepers_structure_in_every_mode() -> TestResult {
    four_letter_words_have_zookeepers_structure(
        Flavour::Apache,
        "four_letter_words_have_zookeepers_structure_in_every_mode",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_zookeeper_four_letter_words_have_zookeepers_structure_in_every_mode() -> TestResult {
    four_letter_words_have_zookeepers_structure(
        Flavour::HaZookeeper,
        "ha_zookeeper_four_letter_words_have_zookeepers_structure_in_every_mode",
    )
    .await
}

/// A word off `4lw.commands.whitelist` (the last of two such lines wins, as in a Java
/// properties file) gets ZooKeeper's refusal, and `srvr` is answered anyway.
fn whitelist_refusal(flavour: Flavour, test: &str) -> TestResult {
    let Some(b) = support::builder(flavour, test)? else {
        return Ok(());
    };
    let zk = b.config("4lw.commands.whitelist", "ruok, conf").start()?;
    let sid = zk.sids()[0];
    let config = ZkConfig::load(&zk.dir(sid)?.join("zoo.cfg"))?;
    let srvr = zk.four_letter_word(sid, "srvr")?;
    let version = ha_testkit::SrvrStats::parse(&srvr)?.version;
    let snap = ServerSnapshot::new(
        version,
        ServerState::Standalone,
        ConfSnapshot::from_config(&config, 0, 0),
    );
    for word in ["mntr", "stat", "cons", "envi", "wchs", "isro", "ruok"] {
        let ours = answer(word, &snap, &config.four_letter_whitelist);
        assert_eq!(
            Some(zk.four_letter_word(sid, word)?.as_str()),
            ours.text(),
            "{word}"
        );
    }
    assert_eq!(
        zk.four_letter_word(sid, "mntr")?,
        "mntr is not executed because it is not in the whitelist.\n"
    );
    Ok(())
}

#[test]
fn a_word_off_the_whitelist_is_refused_as_zookeeper_refuses_it() -> TestResult {
    whitelist_refusal(
        Flavour::Apache,
        "a_word_off_the_whitelist_is_refused_as_zookeeper_refuses_it",
    )
}

#[test]
fn ha_zookeeper_a_word_off_the_whitelist_is_refused_as_zookeeper_refuses_it() -> TestResult {
    whitelist_refusal(
        Flavour::HaZookeeper,
        "ha_zookeeper_a_word_off_the_whitelist_is_refused_as_zookeeper_refuses_it",
    )
}
