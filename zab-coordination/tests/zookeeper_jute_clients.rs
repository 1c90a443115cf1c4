//! The client-port codec against real clients: ZooKeeper 3.8's Java client (Debian's
//! `zookeeper`, run as `ZooKeeperMain`, the class behind `zkCli.sh`) and the Rust
//! `zookeeper-client` crate that `ha_coordination::ZooKeeperCoordination` uses. A small
//! scripted server built on the codec decodes every frame a client sends, re-encodes it to
//! exactly the client's bytes, and answers with records the client must decode.
//!
//! The Java client's test fails (does not skip) when ZooKeeper is missing and `CI` is set.
//!
//! The tests sit in a `zookeeper` module so that `cargo test -p zab-coordination zookeeper`
//! runs them.

mod zookeeper {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    use ha_testkit::{require_zookeeper, Installation};
    use zab_coordination::zookeeper::jute::frame_length;
    use zab_coordination::zookeeper::proto::{
        decode_frame_body, encode_notification, encode_reply, ClientInfo, ConnectRequest,
        ConnectResponse, CreateRequest, MultiReadResult, MultiResult, ReplyHeader, Request,
        RequestHeader, Response, WatcherEvent, NO_TTL,
    };
    use zab_coordination::zookeeper::types::{
        xid, Acl, AddWatchMode, ErrorCode, EventType, Stat, STATE_SYNC_CONNECTED,
    };

    const ZXID: i64 = 0x1_0000_0010;

    fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
        let mut prefix = [0u8; 4];
        s.read_exact(&mut prefix).ok()?;
        let len = frame_length(prefix).expect("frame length in range");
        let mut body = vec![0; len];
        s.read_exact(&mut body).expect("frame body");
        Some(body)
    }

    fn stat() -> Stat {
        Stat {
            czxid: ZXID,
            mzxid: ZXID,
            ctime: 1_700_000_000_000,
            mtime: 1_700_000_000_000,
            data_length: 5,
            pzxid: ZXID,
            ..Stat::default()
        }
    }

    /// The scripted answer to `req`: the error and the record.
    fn answer(req: &Request) -> (ErrorCode, Option<Response>) {
        let ok = |r| (ErrorCode::Ok, Some(r));
        match req {
            Request::Create(c) => ok(Response::Create {
                path: c.path.clone(),
            }),
            Request::Create2(c) => ok(Response::Create2 {
                path: c.path.clone(),
                stat: stat(),
            }),
            Request::GetData { .. } => ok(Response::GetData {
                data: Some(b"hello".to_vec()),
                stat: stat(),
            }),
            Request::SetData { .. } | Request::SetAcl { .. } => ok(Response::Stat(stat())),
            Request::GetAcl { .. } => ok(Response::GetAcl {
                acl: Acl::open_unsafe(),
                stat: stat(),
            }),
            Request::GetChildren { .. } => ok(Response::GetChildren {
                children: vec!["x".into()],
            }),
            Request::GetChildren2 { .. } => ok(Response::GetChildren2 {
                children: vec!["x".into()],
                stat: stat(),
            }),
            Request::Exists { path, .. } if path == "/missing" => (ErrorCode::NoNode, None),
            Request::Exists { .. } => ok(Response::Stat(stat())),
            Request::WhoAmI => ok(Response::WhoAmI(vec![ClientInfo {
                auth_scheme: "ip".into(),
                user: "127.0.0.1".into(),
            }])),
            Request::AddWatch { .. } => ok(Response::AddWatch),
            Request::GetEphemerals { .. } => ok(Response::Ephemerals(vec!["/x".into()])),
            Request::GetAllChildrenNumber { .. } => ok(Response::AllChildrenNumber(41)),
            Request::Sync { path } => ok(Response::Sync { path: path.clone() }),
            Request::Multi(ops) => {
                let failing = ops.iter().position(|o| o.path() == Some("/fail"));
                let results = ops
                    .iter()
                    .enumerate()
                    .map(|(i, o)| match failing {
                        Some(f) if i < f => MultiResult::Error(ErrorCode::Ok),
                        Some(f) if i == f => MultiResult::Error(ErrorCode::NoNode),
                        Some(_) => MultiResult::Error(ErrorCode::RuntimeInconsistency),
                        None => match o {
                            Request::Create(c) => MultiResult::Create {
                                path: c.path.clone(),
                            },
                            Request::CreateContainer(c) | Request::CreateTtl(c) => {
                                MultiResult::Create2 {
                                    path: c.path.clone(),
                                    stat: stat(),
                                }
                            }
                            Request::Delete { .. } => MultiResult::Delete,
                            Request::SetData { .. } => MultiResult::SetData { stat: stat() },
                            Request::Check { .. } => MultiResult::Check,
                            other => panic!("{other:?} decoded inside a multi"),
                        },
                    })
                    .collect();
                ok(Response::Multi(results))
            }
            Request::MultiRead(ops) => ok(Response::MultiRead(
                ops.iter()
                    .map(|o| match o {
                        Request::GetData { path, .. } if path == "/missing" => {
                            MultiReadResult::Error(ErrorCode::NoNode)
                        }
                        Request::GetData { .. } => MultiReadResult::GetData {
                            data: Some(b"hello".to_vec()),
                            stat: stat(),
                        },
                        _ => MultiReadResult::GetChildren {
                            children: vec!["x".into()],
                        },
                    })
                    .collect(),
            )),
            Request::Delete { .. } | Request::Ping | Request::CloseSession => ok(Response::Empty),
            _ => (ErrorCode::Unimplemented, None),
        }
    }

    /// Serves one connection; returns the connect request and every request, each checked to
    /// re-encode to the client's exact bytes.
    fn serve(mut s: TcpStream, log: &Mutex<Vec<(RequestHeader, Request)>>) -> ConnectRequest {
        let first = read_frame(&mut s).expect("connect request");
        let connect = ConnectRequest::decode(&first).expect("connect request decodes");
        assert_eq!(
            connect.encode_frame()[4..],
            first[..],
            "connect request bytes"
        );
        let rsp = ConnectResponse {
            protocol_version: 0,
            timeout: connect.timeout,
            session_id: 0x77,
            passwd: vec![3; 16],
            read_only: false,
            omits_read_only: connect.omits_read_only,
        };
        s.write_all(&rsp.encode_frame()).unwrap();
        while let Some(body) = read_frame(&mut s) {
            let (header, req) = decode_frame_body(&body).expect("request decodes");
            let again = req.encode_frame(header.xid);
            if let Request::Multi(_) = req {
                // Decoding types a multi's creates by their flags (a `create2` inside is a
                // `create`), so the bytes may differ; the request may not.
                assert_eq!(decode_frame_body(&again[4..]), Ok((header, req.clone())));
            } else {
                assert_eq!(again[4..], body[..], "{req:?} bytes");
            }
            log.lock().unwrap().push((header, req.clone()));
            let (err, rsp) = answer(&req);
            let reply = ReplyHeader {
                xid: header.xid,
                zxid: ZXID,
                err,
            };
            let body = if err == ErrorCode::Ok {
                rsp.as_ref()
            } else {
                None
            };
            s.write_all(&encode_reply(&reply, body)).unwrap();
            if matches!(req, Request::AddWatch { .. }) {
                let event = WatcherEvent {
                    event_type: EventType::NodeDataChanged,
                    state: STATE_SYNC_CONNECTED,
                    path: "/x".into(),
                };
                s.write_all(&encode_notification(&event)).unwrap();
            }
            if req == Request::CloseSession {
                break;
            }
        }
        connect
    }

    #[test]
    fn java_client_3_8_requests_re_encode_byte_exact_and_it_decodes_our_replies() {
        if !require_zookeeper("java_client_3_8_requests_re_encode_byte_exact")
            .expect("ZooKeeper is required when CI is set")
        {
            return;
        }
        let install = Installation::locate().expect("ZooKeeper installation");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let server_log = Arc::clone(&log);
        let server = thread::spawn(move || {
            let (s, _) = listener.accept().expect("the client connects");
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            serve(s, &server_log)
        });

        let commands = "create /x hello\n\
                        get -s /x\n\
                        ls -s /\n\
                        stat /missing\n\
                        whoami\n\
                        addWatch -m PERSISTENT_RECURSIVE /x\n\
                        getEphemerals\n\
                        getAllChildrenNumber /\n\
                        sync /\n\
                        delete /x\n\
                        quit\n";
        let mut child = Command::new(&install.java)
            .arg("-cp")
            .arg(&install.classpath)
            .arg("-Xmx64m")
            .arg("org.apache.zookeeper.ZooKeeperMain")
            .arg("-server")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the Java client");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(commands.as_bytes())
            .unwrap();
        // Drain both pipes while the client runs, so that its log never blocks it.
        let drain = |mut pipe: Box<dyn Read + Send>| {
            thread::spawn(move || {
                let mut out = Vec::new();
                pipe.read_to_end(&mut out).ok();
                String::from_utf8_lossy(&out).into_owned()
            })
        };
        let stdout = drain(Box::new(child.stdout.take().unwrap()));
        let stderr = drain(Box::new(child.stderr.take().unwrap()));
        let deadline = Instant::now() + Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() >= deadline {
                child.kill().ok();
                panic!("the Java client did not exit");
            }
            thread::sleep(Duration::from_millis(50));
        }
        let stdout = stdout.join().unwrap();
        let stderr = stderr.join().unwrap();
        let connect = server.join().expect("the scripted server");
        let seen = log.lock().unwrap().clone();

        assert_eq!(connect.protocol_version, 0);
        assert_eq!(connect.session_id, 0);
        assert_eq!(connect.passwd, vec![0; 16]);
        assert!(!connect.omits_read_only);

        let reqs: Vec<&Request> = seen.iter().map(|(_, r)| r).collect();
        let context = format!("requests {reqs:#?}\nstdout {stdout}\nstderr {stderr}");
        assert!(
            reqs.contains(&&Request::Create(CreateRequest {
                path: "/x".into(),
                data: Some(b"hello".to_vec()),
                acl: Acl::open_unsafe(),
                flags: 0,
                ttl: NO_TTL,
            })),
            "{context}"
        );
        assert!(
            reqs.contains(&&Request::AddWatch {
                path: "/x".into(),
                mode: AddWatchMode::PersistentRecursive
            }),
            "{context}"
        );
        assert!(reqs.contains(&&Request::WhoAmI), "{context}");
        assert!(
            reqs.contains(&&Request::Delete {
                path: "/x".into(),
                version: -1
            }),
            "{context}"
        );
        assert_eq!(reqs.last(), Some(&&Request::CloseSession), "{context}");
        assert!(
            seen.iter()
                .all(|(h, r)| (h.xid == xid::PING) == (*r == Request::Ping)),
            "{context}"
        );
        for printed in [
            "Created /x",
            "hello",
            "dataLength = 5",
            "[x]",
            "Node does not exist: /missing",
            "ip: 127.0.0.1",
            "type:NodeDataChanged path:/x",
            "[/x]",
            "41",
        ] {
            assert!(
                stdout.contains(printed) || stderr.contains(printed),
                "{printed:?} not printed\n{context}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rust_zookeeper_client_requests_re_encode_byte_exact_and_it_decodes_our_replies() {
        use zookeeper_client as zkc;

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let server_log = Arc::clone(&log);
        let server = thread::spawn(move || {
            let (s, _) = listener.accept().expect("the client connects");
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            serve(s, &server_log)
        });
        let within = Duration::from_secs(30);
        let client = tokio::time::timeout(
            within,
            zkc::Client::connector()
                .with_session_timeout(Duration::from_secs(30))
                .connect(&format!("127.0.0.1:{port}")),
        )
        .await
        .expect("connected in time")
        .expect("connected");
        assert_eq!(client.session_id().0, 0x77);

        let opts = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
        let (stat, _) = client.create("/x", b"hello", &opts).await.unwrap();
        assert_eq!(stat.czxid, ZXID);
        let (data, stat) = client.get_data("/x").await.unwrap();
        assert_eq!((data.as_slice(), stat.data_length), (&b"hello"[..], 5));
        assert_eq!(client.check_stat("/missing").await.unwrap(), None);
        assert_eq!(client.list_children("/").await.unwrap(), vec!["x"]);
        let (children, _) = client.get_children("/").await.unwrap();
        assert_eq!(children, vec!["x"]);
        assert_eq!(client.count_descendants_number("/").await.unwrap(), 41);
        assert_eq!(client.list_ephemerals("/").await.unwrap(), vec!["/x"]);
        let (acl, _) = client.get_acl("/x").await.unwrap();
        assert_eq!(acl.len(), 1);
        client.set_data("/x", b"new", None).await.unwrap();
        client.sync("/x").await.unwrap();
        client.delete("/x", None).await.unwrap();

        // multi, as the brokers' controller uses it.
        let mut w = client.new_multi_writer();
        w.add_create("/m", b"", &opts).unwrap();
        w.add_check_version("/x", 0).unwrap();
        w.add_set_data("/x", b"v", Some(0)).unwrap();
        w.add_delete("/y", None).unwrap();
        let results = w.commit().await.unwrap();
        assert!(matches!(
            &results[..],
            [
                zkc::MultiWriteResult::Create { path, .. },
                zkc::MultiWriteResult::Check,
                zkc::MultiWriteResult::SetData { .. },
                zkc::MultiWriteResult::Delete,
            ] if path == "/m"
        ));
        let mut w = client.new_multi_writer();
        w.add_create("/m", b"", &opts).unwrap();
        w.add_delete("/fail", None).unwrap();
        w.add_check_version("/x", 0).unwrap();
        assert!(matches!(
            w.commit().await,
            Err(zkc::MultiWriteError::OperationFailed {
                index: 1,
                source: zkc::Error::NoNode
            })
        ));
        let mut r = client.new_multi_reader();
        r.add_get_data("/x").unwrap();
        r.add_get_data("/missing").unwrap();
        r.add_get_children("/").unwrap();
        let results = r.commit().await.unwrap();
        assert!(matches!(
            &results[..],
            [
                zkc::MultiReadResult::Data { data, .. },
                zkc::MultiReadResult::Error { err: zkc::Error::NoNode },
                zkc::MultiReadResult::Children { children },
            ] if data == b"hello" && children == &["x"]
        ));
        drop(client);

        let seen: Vec<Request> = log.lock().unwrap().iter().map(|(_, r)| r.clone()).collect();
        assert!(
            seen.iter().any(|r| matches!(r, Request::Create2(c)
                if c.path == "/x" && c.acl == Acl::open_unsafe() && c.data.as_deref() == Some(&b"hello"[..]))),
            "{seen:#?}"
        );
        assert!(seen
            .iter()
            .any(|r| matches!(r, Request::Multi(ops) if ops.len() == 4)));
        assert!(seen
            .iter()
            .any(|r| matches!(r, Request::MultiRead(ops) if ops.len() == 3)));
        if server.is_finished() {
            server.join().expect("the scripted server");
        }
    }
}
