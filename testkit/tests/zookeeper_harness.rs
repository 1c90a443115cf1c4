//! The harness against the installed ZooKeeper: start, probe, kill, restart, drop.
//! These tests fail under `CI` when ZooKeeper is missing and skip otherwise.

use std::process::Command;
use std::time::Duration;

use ha_testkit::{free_ports, require_zookeeper, ExternalServer, ServerMode, ZkEnsemble};

fn pid_alive(pid: &str) -> bool {
    Command::new("kill")
        .args(["-0", pid])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn standalone_server_answers_srvr_and_is_killed_on_drop() -> Result<(), ha_testkit::TestkitError> {
    if !require_zookeeper("standalone_server_answers_srvr_and_is_killed_on_drop")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let stats = zk.srvr(1)?;
    assert_eq!(stats.mode, ServerMode::Standalone);
    assert!(stats.version.starts_with("3."), "{}", stats.version);
    assert_eq!(zk.four_letter_word(1, "ruok")?.trim(), "imok");
    let port = zk.client_port(1)?;
    assert_eq!(zk.connect_string(), format!("127.0.0.1:{port}"));
    let cfg = std::fs::read_to_string(zk.dir(1)?.join("zoo.cfg")).expect("zoo.cfg");
    assert!(cfg.contains("4lw.commands.whitelist=*"));
    assert!(!cfg.contains("server.1="), "standalone has no member list");
    let root = zk.root().to_path_buf();
    // After drop the server no longer answers and its directory is gone.
    drop(zk);
    assert!(ha_testkit::four_letter_word(port, "ruok", Duration::from_millis(500)).is_err());
    assert!(!root.exists());
    Ok(())
}

#[test]
fn three_servers_elect_a_leader_and_reelect_after_sigkill() -> Result<(), ha_testkit::TestkitError>
{
    if !require_zookeeper("three_servers_elect_a_leader_and_reelect_after_sigkill")? {
        return Ok(());
    }
    let mut zk = ZkEnsemble::builder()
        .servers(3)
        .tick_time(Duration::from_millis(200))
        .start()?;
    assert_eq!(zk.sids(), vec![1, 2, 3]);
    let leader = zk.wait_for_leader(Duration::from_secs(30))?;
    assert_eq!(zk.srvr(leader)?.mode, ServerMode::Leader);
    let followers: Vec<u64> = zk.sids().into_iter().filter(|&s| s != leader).collect();
    for &f in &followers {
        assert_eq!(zk.srvr(f)?.mode, ServerMode::Follower);
    }
    zk.kill(leader)?;
    assert!(!zk.is_running(leader));
    let next = zk.wait_for_leader(Duration::from_secs(30))?;
    assert_ne!(next, leader);
    zk.restart(leader)?;
    let stats = zk.wait_serving(leader, Duration::from_secs(30))?;
    assert_eq!(stats.mode, ServerMode::Follower);
    assert!(
        zk.log(leader).contains("LEADING"),
        "the first leader logged its role"
    );
    Ok(())
}

#[test]
fn stop_is_graceful_and_only_touches_our_process() -> Result<(), ha_testkit::TestkitError> {
    if !require_zookeeper("stop_is_graceful_and_only_touches_our_process")? {
        return Ok(());
    }
    let mut zk = ZkEnsemble::standalone()?;
    zk.stop(1)?;
    assert!(!zk.is_running(1));
    assert!(zk.srvr(1).is_err());
    zk.restart(1)?;
    let stats = zk.wait_serving(1, Duration::from_secs(30))?;
    assert_eq!(stats.mode, ServerMode::Standalone);
    // A bystander process the harness did not start must survive the drop.
    let mut bystander = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    drop(zk);
    assert!(pid_alive(&bystander.id().to_string()));
    let _ = bystander.kill();
    let _ = bystander.wait();
    Ok(())
}

#[test]
fn external_members_are_listed_in_every_config() -> Result<(), ha_testkit::TestkitError> {
    if !require_zookeeper("external_members_are_listed_in_every_config")? {
        return Ok(());
    }
    let ports = free_ports(2)?;
    let zk = ZkEnsemble::builder()
        .servers(2)
        .external(ExternalServer::new(7, "127.0.0.1", ports[0], ports[1]))
        .config("cnxTimeout", "500")
        .start()?;
    for sid in zk.sids() {
        let cfg = std::fs::read_to_string(zk.dir(sid)?.join("zoo.cfg")).expect("zoo.cfg");
        assert!(cfg.contains(&format!("server.7=127.0.0.1:{}:{}", ports[0], ports[1])));
        assert!(cfg.contains("server.1=") && cfg.contains("server.2="));
        assert!(cfg.contains("cnxTimeout=500"));
        let myid = std::fs::read_to_string(zk.dir(sid)?.join("data/myid")).expect("myid");
        assert_eq!(myid.trim(), sid.to_string());
    }
    Ok(())
}

#[test]
fn jvm_arg_reaches_the_server_jvm_before_its_main_class() -> Result<(), ha_testkit::TestkitError> {
    if !require_zookeeper("jvm_arg_reaches_the_server_jvm_before_its_main_class")? {
        return Ok(());
    }
    let zk = ZkEnsemble::builder()
        .jvm_arg("-Djute.maxbuffer=4194304")
        .start()?;
    let pid = zk.pid(1).expect("a running server has a pid");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("the server's cmdline");
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let arg = args.iter().position(|a| a == "-Djute.maxbuffer=4194304");
    let main = args
        .iter()
        .position(|a| a == "org.apache.zookeeper.server.quorum.QuorumPeerMain");
    assert!(
        matches!((arg, main), (Some(a), Some(m)) if a < m),
        "the argument is a JVM option, before the main class: {args:?}"
    );
    assert_eq!(zk.srvr(1)?.mode, ServerMode::Standalone);
    Ok(())
}
