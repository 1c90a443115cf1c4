//! The client-port codec against a real ZooKeeper 3.8 server (Debian's `zookeeper`, started
//! by `ha_testkit`): requests encoded here are accepted, and every reply decodes to exactly
//! its bytes (nothing left over), with the bodies `Response` documents — none for a failed
//! request, a `MultiResponse` with `err` 0 for a failed `multi`, an `ErrorResponse` for
//! `addWatch`, a `Create2Response` for `createContainer`, notifications with zxid -1.
//!
//! Fails (does not skip) when ZooKeeper is missing and `CI` is set.
//!
//! The tests sit in a `zookeeper` module so that `cargo test -p zab-coordination zookeeper`
//! runs them.

mod zookeeper {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use ha_testkit::{require_zookeeper, ZkEnsemble};
    use zab_coordination::zookeeper::jute::{frame_length, Reader, Writer};
    use zab_coordination::zookeeper::proto::{
        decode_frame_body, split_reply, ConnectRequest, ConnectResponse, CreateRequest,
        MultiReadResult, MultiResult, ReplyHeader, Request, RequestHeader, Response, WatcherEvent,
        NO_TTL,
    };
    use zab_coordination::zookeeper::types::{
        xid, Acl, AddWatchMode, ErrorCode, EventType, WatcherType, STATE_SYNC_CONNECTED,
    };

    struct Client {
        stream: TcpStream,
        next_xid: i32,
        notifications: Vec<WatcherEvent>,
    }

    impl Client {
        fn read_frame(&mut self) -> Vec<u8> {
            let mut prefix = [0u8; 4];
            self.stream.read_exact(&mut prefix).expect("frame length");
            let len = frame_length(prefix).expect("frame length in range");
            let mut body = vec![0; len];
            self.stream.read_exact(&mut body).expect("frame body");
            body
        }

        fn connect(port: u16) -> (Client, ConnectResponse) {
            let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            stream
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let mut c = Client {
                stream,
                next_xid: 1,
                notifications: Vec::new(),
            };
            let req = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout: 30_000,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: false,
                omits_read_only: false,
            };
            c.stream.write_all(&req.encode_frame()).unwrap();
            let body = c.read_frame();
            let rsp = ConnectResponse::decode(&body).expect("connect response");
            // Exactly the record and the flag.
            assert_eq!(rsp.encode_frame()[4..], body[..]);
            (c, rsp)
        }

        /// Sends `req` and returns the reply's header and record bytes, keeping the
        /// notifications that arrive before it.
        fn call_with_xid(&mut self, xid: i32, req: &Request) -> (ReplyHeader, Vec<u8>) {
            self.stream.write_all(&req.encode_frame(xid)).unwrap();
            loop {
                let body = self.read_frame();
                let (header, rest) = split_reply(&body).expect("reply header");
                if header.xid == xid::NOTIFICATION {
                    assert_eq!(header.zxid, -1, "a notification's zxid");
                    let mut r = Reader::new(rest);
                    self.notifications
                        .push(WatcherEvent::read(&mut r).expect("notification"));
                    r.finish().expect("nothing after the event");
                    continue;
                }
                assert_eq!(header.xid, xid);
                return (header, rest.to_vec());
            }
        }

        fn call(&mut self, req: &Request) -> (ReplyHeader, Vec<u8>) {
            let xid = self.next_xid;
            self.next_xid += 1;
            self.call_with_xid(xid, req)
        }

        /// Sends `req`, expects success and decodes the reply's record, checking it used every
        /// byte.
        fn ok(&mut self, req: &Request) -> Response {
            let (header, body) = self.call(req);
            assert_eq!(header.err, ErrorCode::Ok, "{req:?}");
            let mut r = Reader::new(&body);
            let rsp = Response::read(req.op(), &mut r).expect("response record");
            r.finish().expect("nothing after the record");
            rsp
        }

        /// Sends `req`, expects `err` and no record.
        fn fails(&mut self, req: &Request, err: ErrorCode) {
            let (header, body) = self.call(req);
            assert_eq!(header.err, err, "{req:?}");
            assert!(body.is_empty(), "a failed {req:?} carried {body:?}");
        }
    }

    fn create(path: &str, data: &[u8], flags: i32) -> CreateRequest {
        CreateRequest {
            path: path.into(),
            data: Some(data.to_vec()),
            acl: Acl::open_unsafe(),
            flags,
            ttl: NO_TTL,
        }
    }

    #[test]
    fn real_zookeeper_3_8_accepts_our_requests_and_its_replies_decode_exactly() {
        if !require_zookeeper("real_zookeeper_3_8_accepts_our_requests")
            .expect("ZooKeeper is required when CI is set")
        {
            return;
        }
        let zk = ZkEnsemble::standalone().expect("start ZooKeeper");
        let port = zk.client_port(zk.sids()[0]).unwrap();
        let (mut c, session) = Client::connect(port);
        assert_ne!(session.session_id, 0);
        assert_eq!(session.passwd.len(), 16);
        assert!(!session.omits_read_only);

        // create / create2 / createContainer replies.
        assert_eq!(
            c.ok(&Request::Create(create("/jute", b"root", 0))),
            Response::Create {
                path: "/jute".into()
            }
        );
        let Response::Create2 { path, stat } =
            c.ok(&Request::Create2(create("/jute/seq-", b"", 2)))
        else {
            panic!("create2 answers a Create2Response")
        };
        assert_eq!(path, "/jute/seq-0000000000");
        assert_eq!(stat.data_length, 0);
        assert!(matches!(
            c.ok(&Request::CreateContainer(create("/jute/box", b"", 4))),
            Response::Create2 { .. }
        ));
        // createTTL without extended types: Unimplemented, no record.
        let mut ttl = create("/jute/ttl", b"", 5);
        ttl.ttl = 10_000;
        c.fails(&Request::CreateTtl(ttl), ErrorCode::Unimplemented);
        c.fails(
            &Request::Create(create("/jute", b"", 0)),
            ErrorCode::NodeExists,
        );

        // Reads.
        let Response::GetData { data, stat } = c.ok(&Request::GetData {
            path: "/jute".into(),
            watch: true,
        }) else {
            panic!("getData answers a GetDataResponse")
        };
        assert_eq!(data.as_deref(), Some(&b"root"[..]));
        assert_eq!(stat.num_children, 2);
        c.fails(
            &Request::Exists {
                path: "/missing".into(),
                watch: false,
            },
            ErrorCode::NoNode,
        );
        assert!(matches!(
            c.ok(&Request::Exists {
                path: "/jute".into(),
                watch: false
            }),
            Response::Stat(_)
        ));
        let Response::GetChildren2 { mut children, stat } = c.ok(&Request::GetChildren2 {
            path: "/jute".into(),
            watch: false,
        }) else {
            panic!("getChildren2 answers a GetChildren2Response")
        };
        children.sort();
        assert_eq!(children, ["box", "seq-0000000000"]);
        assert_eq!(stat.num_children, 2);
        assert!(matches!(
            c.ok(&Request::GetAcl {
                path: "/jute".into()
            }),
            Response::GetAcl { acl, .. } if acl == Acl::open_unsafe()
        ));
        assert_eq!(
            c.ok(&Request::GetAllChildrenNumber {
                path: "/jute".into()
            }),
            Response::AllChildrenNumber(2)
        );
        assert_eq!(
            c.ok(&Request::Sync {
                path: "/jute".into()
            }),
            Response::Sync {
                path: "/jute".into()
            }
        );

        // A null data node answers a null buffer.
        c.ok(&Request::Create(CreateRequest {
            data: None,
            ..create("/jute/null", b"", 1)
        }));
        assert!(matches!(
            c.ok(&Request::GetData {
                path: "/jute/null".into(),
                watch: false
            }),
            Response::GetData { data: None, .. }
        ));
        assert_eq!(
            c.ok(&Request::GetEphemerals { prefix: "/".into() }),
            Response::Ephemerals(vec!["/jute/null".into()])
        );

        // A failed multi: err 0 in the header, every result an error.
        let (header, body) = c.call(&Request::Multi(vec![
            Request::Create(create("/jute/m1", b"", 0)),
            Request::Delete {
                path: "/jute/nothing".into(),
                version: -1,
            },
            Request::Check {
                path: "/jute".into(),
                version: 0,
            },
        ]));
        assert_eq!(header.err, ErrorCode::Ok);
        let mut r = Reader::new(&body);
        assert_eq!(
            Response::read(14, &mut r).unwrap(),
            Response::Multi(vec![
                MultiResult::Error(ErrorCode::Ok),
                MultiResult::Error(ErrorCode::NoNode),
                MultiResult::Error(ErrorCode::RuntimeInconsistency),
            ])
        );
        r.finish().unwrap();

        // A create with a TTL mode sent as a plain create inside a multi: ZooKeeper fails the
        // whole multi with MarshallingError (no record); our decoder refuses it.
        let ttl_without_ttl = Request::Multi(vec![Request::Create(create("/jute/t", b"", 5))]);
        let (_, bytes) = ttl_without_ttl.encode();
        assert!(Request::decode(14, &bytes).is_err());
        c.fails(&ttl_without_ttl, ErrorCode::MarshallingError);

        // A successful multi: a create2 inside is a plain create; a container create gets a
        // stat.
        let Response::Multi(results) = c.ok(&Request::Multi(vec![
            Request::Create2(create("/jute/m2", b"", 0)),
            Request::CreateContainer(create("/jute/m3", b"", 4)),
            Request::SetData {
                path: "/jute".into(),
                data: Some(b"new".to_vec()),
                version: 0,
            },
            Request::Check {
                path: "/jute".into(),
                version: 1,
            },
            Request::Delete {
                path: "/jute/m2".into(),
                version: 0,
            },
        ])) else {
            panic!("multi answers a MultiResponse")
        };
        assert!(matches!(
            &results[..],
            [
                MultiResult::Create { path: p2 },
                MultiResult::Create2 { path: p3, .. },
                MultiResult::SetData { stat },
                MultiResult::Check,
                MultiResult::Delete,
            ] if p2 == "/jute/m2" && p3 == "/jute/m3" && stat.version == 1
        ));
        // The data watch left by getData fired, with zxid -1.
        assert_eq!(
            c.notifications,
            vec![WatcherEvent {
                event_type: EventType::NodeDataChanged,
                state: STATE_SYNC_CONNECTED,
                path: "/jute".into()
            }]
        );

        // multiRead: each read on its own.
        let Response::MultiRead(results) = c.ok(&Request::MultiRead(vec![
            Request::GetData {
                path: "/jute".into(),
                watch: false,
            },
            Request::GetChildren {
                path: "/nothing".into(),
                watch: false,
            },
        ])) else {
            panic!("multiRead answers a MultiResponse")
        };
        assert!(matches!(
            &results[..],
            [
                MultiReadResult::GetData { data: Some(d), .. },
                MultiReadResult::Error(ErrorCode::NoNode),
            ] if d == b"new"
        ));

        // Watches.
        assert_eq!(
            c.ok(&Request::AddWatch {
                path: "/jute".into(),
                mode: AddWatchMode::PersistentRecursive
            }),
            Response::AddWatch
        );
        assert_eq!(
            c.ok(&Request::CheckWatches {
                path: "/jute".into(),
                watcher_type: WatcherType::Any
            }),
            Response::Empty
        );
        assert_eq!(
            c.ok(&Request::RemoveWatches {
                path: "/jute".into(),
                watcher_type: WatcherType::Any
            }),
            Response::Empty
        );
        c.fails(
            &Request::CheckWatches {
                path: "/jute".into(),
                watcher_type: WatcherType::Data,
            },
            ErrorCode::NoWatcher,
        );
        let (header, body) = c.call_with_xid(
            xid::SET_WATCHES,
            &Request::SetWatches2 {
                relative_zxid: 0,
                data: vec!["/jute".into()],
                exist: vec![],
                child: vec!["/jute".into()],
                persistent: vec![],
                persistent_recursive: vec![],
            },
        );
        assert_eq!((header.err, body.len()), (ErrorCode::Ok, 0));

        // ZooKeeper's leniency, which the decoder shares: bytes after a record are ignored, a
        // vector count below -1 is an empty vector.
        let mut w = Writer::frame();
        RequestHeader { xid: 500, op: 3 }.write(&mut w);
        w.write_string("/jute");
        w.write_bool(false);
        w.write_i64(0x0102_0304_0506_0708);
        let frame = w.finish_frame();
        assert!(matches!(
            decode_frame_body(&frame[4..]),
            Ok((_, Request::Exists { .. }))
        ));
        c.stream.write_all(&frame).unwrap();
        let body = c.read_frame();
        let (header, rest) = split_reply(&body).unwrap();
        assert_eq!((header.xid, header.err), (500, ErrorCode::Ok));
        assert!(matches!(Response::decode(3, rest), Ok(Response::Stat(_))));
        let mut w = Writer::frame();
        RequestHeader {
            xid: xid::SET_WATCHES,
            op: 101,
        }
        .write(&mut w);
        w.write_i64(0);
        for _ in 0..3 {
            w.write_i32(-5);
        }
        let frame = w.finish_frame();
        assert_eq!(
            decode_frame_body(&frame[4..]).unwrap().1,
            Request::SetWatches {
                relative_zxid: 0,
                data: vec![],
                exist: vec![],
                child: vec![]
            }
        );
        c.stream.write_all(&frame).unwrap();
        let body = c.read_frame();
        let (header, rest) = split_reply(&body).unwrap();
        assert_eq!((header.xid, header.err, rest.len()), (-8, ErrorCode::Ok, 0));

        // Session requests.
        let set = c.ok(&Request::SetAcl {
            path: "/jute/box".into(),
            acl: Acl::open_unsafe(),
            version: -1,
        });
        assert!(matches!(set, Response::Stat(s) if s.aversion == 1));
        assert_eq!(set, stat_of(&mut c, "/jute/box"));
        let (header, body) = c.call_with_xid(xid::PING, &Request::Ping);
        assert_eq!((header.err, body.len()), (ErrorCode::Ok, 0));
        let (header, body) = c.call_with_xid(
            xid::AUTH,
            &Request::Auth {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"bob:secret".to_vec(),
            },
        );
        assert_eq!((header.err, header.zxid, body.len()), (ErrorCode::Ok, 0, 0));
        let Response::WhoAmI(infos) = c.ok(&Request::WhoAmI) else {
            panic!("whoAmI answers a WhoAmIResponse")
        };
        assert!(infos
            .iter()
            .any(|i| i.auth_scheme == "digest" && i.user == "bob"));
        // reconfig: encoded without its record, ZooKeeper fails to read it; with a
        // ReconfigRequest (joining, leaving, new members, config id), reconfiguration is
        // disabled.
        c.fails(
            &Request::Unsupported { op: 16 },
            ErrorCode::MarshallingError,
        );
        let mut w = Writer::frame();
        RequestHeader { xid: 999, op: 16 }.write(&mut w);
        w.write_ustring(None);
        w.write_ustring(None);
        w.write_ustring(None);
        w.write_i64(-1);
        c.stream.write_all(&w.finish_frame()).unwrap();
        let body = c.read_frame();
        let (header, rest) = split_reply(&body).unwrap();
        assert_eq!((header.xid, header.err), (999, ErrorCode::Other(-123))); // ReconfigDisabled
        assert!(rest.is_empty());
        assert_eq!(c.ok(&Request::CloseSession), Response::Empty);

        // A client older than 3.4 (no readOnly flag) is answered without the flag.
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut old = Client {
            stream,
            next_xid: 1,
            notifications: Vec::new(),
        };
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: 30_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
            omits_read_only: true,
        };
        old.stream.write_all(&req.encode_frame()).unwrap();
        let body = old.read_frame();
        let rsp = ConnectResponse::decode(&body).unwrap();
        assert!(rsp.omits_read_only);
        assert_ne!(rsp.session_id, 0);

        // An op code ZooKeeper does not know: Unimplemented (zxid -1), then the connection
        // closes.
        let mut w = Writer::frame();
        RequestHeader { xid: 6, op: 10 }.write(&mut w);
        old.stream.write_all(&w.finish_frame()).unwrap();
        let body = old.read_frame();
        let (header, rest) = split_reply(&body).unwrap();
        assert_eq!(
            (header.xid, header.zxid, header.err),
            (6, -1, ErrorCode::Unimplemented)
        );
        assert!(rest.is_empty());
        let mut byte = [0u8; 1];
        assert_eq!(
            old.stream.read(&mut byte).unwrap(),
            0,
            "the connection closes"
        );
    }

    /// The stat of `path`, as a `Response::Stat`.
    fn stat_of(c: &mut Client, path: &str) -> Response {
        c.ok(&Request::Exists {
            path: path.into(),
            watch: false,
        })
    }
}
