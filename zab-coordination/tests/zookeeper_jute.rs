//! The ZooKeeper client-port codec against bytes written by hand from `zookeeper.jute` (what
//! a ZooKeeper 3.8 Java client and server put on the wire), ZooKeeper's decoding rules for
//! `multi` / `multiRead` and the connect handshake, and round trips of every request and
//! response variant (proptest).
//!
//! The tests sit in a `zookeeper` module so that `cargo test -p zab-coordination zookeeper` runs them.

mod zookeeper {

    use proptest::prelude::*;
    use zab_coordination::zookeeper::jute::{JuteError, Reader, Writer, MAX_PACKET};
    use zab_coordination::zookeeper::proto::{
        decode_frame_body, encode_notification, encode_reply, split_frame_body, split_reply,
        ClientInfo, ConnectRequest, ConnectResponse, CreateRequest, MultiReadResult, MultiResult,
        ReplyHeader, Request, RequestHeader, Response, WatcherEvent, NO_TTL,
    };
    use zab_coordination::zookeeper::types::{
        op, xid, Acl, AddWatchMode, ErrorCode, EventType, Id, Stat, WatcherType,
        STATE_SYNC_CONNECTED,
    };

    /// Builds expected bytes field by field, as `zookeeper.jute` lays them out.
    #[derive(Default)]
    struct Bytes(Vec<u8>);

    impl Bytes {
        fn int(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn long(mut self, v: i64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn boolean(mut self, v: bool) -> Self {
            self.0.push(u8::from(v));
            self
        }
        fn raw(mut self, b: &[u8]) -> Self {
            self.0.extend_from_slice(b);
            self
        }
        fn ustring(self, s: &str) -> Self {
            let len = s.len() as i32;
            self.int(len).raw(s.as_bytes())
        }
        fn stat(self, s: &Stat) -> Self {
            self.long(s.czxid)
                .long(s.mzxid)
                .long(s.ctime)
                .long(s.mtime)
                .int(s.version)
                .int(s.cversion)
                .int(s.aversion)
                .long(s.ephemeral_owner)
                .int(s.data_length)
                .int(s.num_children)
                .long(s.pzxid)
        }
        /// The frame: a 4-byte length, then the bytes.
        fn framed(self) -> Vec<u8> {
            let mut out = (self.0.len() as i32).to_be_bytes().to_vec();
            out.extend_from_slice(&self.0);
            out
        }
    }

    fn sample_stat() -> Stat {
        Stat {
            czxid: 0x1_0000_0002,
            mzxid: 0x1_0000_0003,
            ctime: 1_700_000_000_000,
            mtime: 1_700_000_000_500,
            version: 1,
            cversion: 2,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 5,
            num_children: 2,
            pzxid: 0x1_0000_0004,
        }
    }

    // ---- the handshake ----

    #[test]
    fn connect_request_of_a_3_8_java_client_decodes_byte_exact() {
        // ClientCnxn.primeConnection: ConnectRequest(0, lastZxid, timeout, sessionId, passwd) and
        // then the readOnly flag, in one frame.
        let frame = Bytes::default()
            .int(0)
            .long(0x5_0000_0007)
            .int(30_000)
            .long(0x1234_5678_9abc)
            .int(16)
            .raw(&[7; 16])
            .boolean(true)
            .framed();
        assert_eq!(frame.len(), 4 + 45);
        assert_eq!(&frame[..4], &[0, 0, 0, 45]);
        let req = ConnectRequest::decode(&frame[4..]).unwrap();
        assert_eq!(
            req,
            ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0x5_0000_0007,
                timeout: 30_000,
                session_id: 0x1234_5678_9abc,
                passwd: vec![7; 16],
                read_only: true,
                omits_read_only: false,
            }
        );
        assert_eq!(req.encode_frame(), frame);
    }

    #[test]
    fn connect_request_without_read_only_flag_is_accepted() {
        let frame = Bytes::default()
            .int(0)
            .long(0)
            .int(10_000)
            .long(0)
            .int(16)
            .raw(&[0; 16])
            .framed();
        assert_eq!(&frame[..4], &[0, 0, 0, 44]);
        let req = ConnectRequest::decode(&frame[4..]).unwrap();
        assert!(req.omits_read_only);
        assert!(!req.read_only);
        assert_eq!(req.timeout, 10_000);
        // Re-encoded as sent: still without the flag.
        assert_eq!(req.encode_frame(), frame);
    }

    #[test]
    fn connect_request_with_a_null_password_reads_an_empty_one() {
        let body = Bytes::default()
            .int(0)
            .long(0)
            .int(4000)
            .long(0)
            .int(-1)
            .boolean(false);
        let req = ConnectRequest::decode(&body.0).unwrap();
        assert!(req.passwd.is_empty());
        assert!(!req.omits_read_only);
    }

    #[test]
    fn truncated_connect_request_is_an_error() {
        let body = Bytes::default()
            .int(0)
            .long(0)
            .int(4000)
            .long(0)
            .int(16)
            .raw(&[0; 3]);
        assert!(matches!(
            ConnectRequest::decode(&body.0),
            Err(JuteError::LengthTooLong {
                len: 16,
                remaining: 3
            })
        ));
    }

    #[test]
    fn connect_response_is_written_as_finish_session_init_writes_it() {
        let rsp = ConnectResponse {
            protocol_version: 0,
            timeout: 4000,
            session_id: 0x100_0000_0001,
            passwd: vec![9; 16],
            read_only: false,
            omits_read_only: false,
        };
        let expected = Bytes::default()
            .int(0)
            .int(4000)
            .long(0x100_0000_0001)
            .int(16)
            .raw(&[9; 16])
            .boolean(false)
            .framed();
        assert_eq!(rsp.encode_frame(), expected);
        assert_eq!(ConnectResponse::decode(&expected[4..]).unwrap(), rsp);

        // To an old client: no flag.
        let old = ConnectResponse {
            omits_read_only: true,
            ..rsp
        };
        let frame = old.encode_frame();
        assert_eq!(frame.len(), expected.len() - 1);
        assert_eq!(ConnectResponse::decode(&frame[4..]).unwrap(), old);
    }

    // ---- requests ----

    #[test]
    fn create_with_acl_decodes_byte_exact() {
        // RequestHeader(xid 1, create) + CreateRequest("/a", "hi", [ACL(ALL, world:anyone)], 1).
        let frame = Bytes::default()
            .int(1)
            .int(op::CREATE)
            .ustring("/a")
            .int(2)
            .raw(b"hi")
            .int(1)
            .int(31)
            .ustring("world")
            .ustring("anyone")
            .int(1)
            .framed();
        assert_eq!(&frame[..4], &[0, 0, 0, 51]);
        let (header, req) = decode_frame_body(&frame[4..]).unwrap();
        assert_eq!(
            header,
            RequestHeader {
                xid: 1,
                op: op::CREATE
            }
        );
        let expected = Request::Create(CreateRequest {
            path: "/a".into(),
            data: Some(b"hi".to_vec()),
            acl: Acl::open_unsafe(),
            flags: 1,
            ttl: NO_TTL,
        });
        assert_eq!(req, expected);
        assert_eq!(expected.encode_frame(1), frame);
    }

    #[test]
    fn create_ttl_carries_its_ttl_after_the_flags() {
        let body = Bytes::default()
            .ustring("/t")
            .int(-1)
            .int(1)
            .int(31)
            .ustring("world")
            .ustring("anyone")
            .int(5)
            .long(60_000);
        let req = Request::decode(op::CREATE_TTL, &body.0).unwrap();
        assert_eq!(
            req,
            Request::CreateTtl(CreateRequest {
                path: "/t".into(),
                data: None,
                acl: Acl::open_unsafe(),
                flags: 5,
                ttl: 60_000,
            })
        );
        assert_eq!(req.encode(), (op::CREATE_TTL, body.0));
    }

    #[test]
    fn null_data_is_kept_distinct_from_empty_data() {
        let null = Bytes::default().ustring("/n").int(-1).int(7);
        let empty = Bytes::default().ustring("/n").int(0).int(7);
        assert_eq!(
            Request::decode(op::SET_DATA, &null.0).unwrap(),
            Request::SetData {
                path: "/n".into(),
                data: None,
                version: 7
            }
        );
        assert_eq!(
            Request::decode(op::SET_DATA, &empty.0).unwrap(),
            Request::SetData {
                path: "/n".into(),
                data: Some(vec![]),
                version: 7
            }
        );
    }

    #[test]
    fn null_path_is_an_error() {
        let body = Bytes::default().int(-1).boolean(false);
        assert_eq!(
            Request::decode(op::GET_DATA, &body.0),
            Err(JuteError::NullString)
        );
    }

    #[test]
    fn set_watches2_decodes_byte_exact() {
        // ClientCnxn.primeConnection on reconnection: RequestHeader(-8, setWatches2) + SetWatches2.
        let frame = Bytes::default()
            .int(xid::SET_WATCHES)
            .int(op::SET_WATCHES2)
            .long(0x22)
            .int(1)
            .ustring("/d")
            .int(0)
            .int(2)
            .ustring("/c1")
            .ustring("/c2")
            .int(1)
            .ustring("/p")
            .int(0)
            .framed();
        let (header, req) = decode_frame_body(&frame[4..]).unwrap();
        assert_eq!(header.xid, -8);
        let expected = Request::SetWatches2 {
            relative_zxid: 0x22,
            data: vec!["/d".into()],
            exist: vec![],
            child: vec!["/c1".into(), "/c2".into()],
            persistent: vec!["/p".into()],
            persistent_recursive: vec![],
        };
        assert_eq!(req, expected);
        assert_eq!(expected.encode_frame(xid::SET_WATCHES), frame);
    }

    #[test]
    fn auth_packet_decodes_byte_exact() {
        let frame = Bytes::default()
            .int(xid::AUTH)
            .int(op::AUTH)
            .int(0)
            .ustring("digest")
            .int(9)
            .raw(b"user:pass")
            .framed();
        let (header, req) = decode_frame_body(&frame[4..]).unwrap();
        assert_eq!(header, RequestHeader { xid: -4, op: 100 });
        assert_eq!(
            req,
            Request::Auth {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"user:pass".to_vec()
            }
        );
    }

    #[test]
    fn ping_and_close_session_are_a_bare_header() {
        let ping = Bytes::default().int(xid::PING).int(op::PING).framed();
        assert_eq!(Request::Ping.encode_frame(xid::PING), ping);
        assert_eq!(
            decode_frame_body(&ping[4..]).unwrap(),
            (RequestHeader { xid: -2, op: 11 }, Request::Ping)
        );
        let close = Bytes::default().int(9).int(op::CLOSE_SESSION);
        assert_eq!(
            decode_frame_body(&close.0).unwrap().1,
            Request::CloseSession
        );
    }

    #[test]
    fn frame_shorter_than_a_request_header_is_an_error() {
        assert!(matches!(
            split_frame_body(&[0, 0, 0, 1, 0]),
            Err(JuteError::Truncated { .. })
        ));
    }

    #[test]
    fn unknown_op_code_is_an_error_and_known_unserved_ones_are_unsupported() {
        for unknown in [0, 10, 23, 99, 108, -1, -12] {
            assert_eq!(
                Request::decode(unknown, &[]),
                Err(JuteError::UnknownOp(unknown))
            );
        }
        for known in [
            op::RECONFIG,
            op::SASL,
            op::DELETE_CONTAINER,
            op::CREATE_SESSION,
        ] {
            assert_eq!(
                Request::decode(known, &[1, 2, 3]),
                Ok(Request::Unsupported { op: known })
            );
        }
    }

    #[test]
    fn watcher_types_beyond_zookeeper_3_8_and_bad_add_watch_modes_are_errors() {
        let body = Bytes::default().ustring("/w").int(9);
        assert_eq!(
            Request::decode(op::REMOVE_WATCHES, &body.0),
            Err(JuteError::BadEnum {
                field: "watcher type",
                value: 9
            })
        );
        // ZooKeeper 3.9's persistent watcher types: 3.8 answers MarshallingError.
        for persistent in [4, 5] {
            let body = Bytes::default().ustring("/w").int(persistent);
            assert!(matches!(
                Request::decode(op::CHECK_WATCHES, &body.0),
                Err(JuteError::BadEnum { .. })
            ));
        }
        let body = Bytes::default().ustring("/w").int(2);
        assert!(matches!(
            Request::decode(op::ADD_WATCH, &body.0),
            Err(JuteError::BadEnum { value: 2, .. })
        ));
        let body = Bytes::default().ustring("/w").int(1);
        assert_eq!(
            Request::decode(op::ADD_WATCH, &body.0),
            Ok(Request::AddWatch {
                path: "/w".into(),
                mode: AddWatchMode::PersistentRecursive
            })
        );
    }

    #[test]
    fn trailing_bytes_after_a_request_are_ignored_as_zookeeper_ignores_them() {
        let body = Bytes::default().ustring("/x").boolean(true).raw(&[1, 2, 3]);
        assert_eq!(
            Request::decode(op::EXISTS, &body.0),
            Ok(Request::Exists {
                path: "/x".into(),
                watch: true
            })
        );
        let mut r = Reader::new(&body.0);
        Request::read(op::EXISTS, &mut r).unwrap();
        assert_eq!(r.finish(), Err(JuteError::TrailingBytes(3)));
    }

    // ---- multi ----

    fn multi_op(b: Bytes, ty: i32) -> Bytes {
        b.int(ty).boolean(false).int(-1)
    }

    fn multi_end(b: Bytes) -> Bytes {
        b.int(-1).boolean(true).int(-1)
    }

    #[test]
    fn multi_request_decodes_byte_exact() {
        // MultiOperationRecord: MultiHeader(type, false, -1) + record per op, MultiHeader(-1, true, -1).
        let b = multi_op(Bytes::default(), op::CREATE)
            .ustring("/a")
            .int(0)
            .int(1)
            .int(31)
            .ustring("world")
            .ustring("anyone")
            .int(0);
        let b = multi_op(b, op::DELETE).ustring("/b").int(3);
        let b = multi_op(b, op::CHECK).ustring("/c").int(-1);
        let b = multi_op(b, op::SET_DATA)
            .ustring("/d")
            .int(1)
            .raw(b"x")
            .int(2);
        let body = multi_end(b).0;
        let expected = Request::Multi(vec![
            Request::Create(CreateRequest {
                path: "/a".into(),
                data: Some(vec![]),
                acl: Acl::open_unsafe(),
                flags: 0,
                ttl: NO_TTL,
            }),
            Request::Delete {
                path: "/b".into(),
                version: 3,
            },
            Request::Check {
                path: "/c".into(),
                version: -1,
            },
            Request::SetData {
                path: "/d".into(),
                data: Some(b"x".to_vec()),
                version: 2,
            },
        ]);
        assert_eq!(Request::decode(op::MULTI, &body).unwrap(), expected);
        assert_eq!(expected.encode(), (op::MULTI, body));
    }

    fn create_record(b: Bytes, flags: i32) -> Bytes {
        b.ustring("/n").int(-1).int(0).int(flags)
    }

    #[test]
    fn multi_types_a_create_by_its_flags_as_zookeeper_op_create_does() {
        // create2 with persistent flags: a plain create (answered without a stat).
        let body = multi_end(create_record(multi_op(Bytes::default(), op::CREATE2), 0)).0;
        assert!(matches!(
            Request::decode(op::MULTI, &body).unwrap(),
            Request::Multi(ops) if matches!(ops[..], [Request::Create(_)])
        ));
        // create with the container flag: a container create.
        let body = multi_end(create_record(multi_op(Bytes::default(), op::CREATE), 4)).0;
        assert!(matches!(
            Request::decode(op::MULTI, &body).unwrap(),
            Request::Multi(ops) if matches!(ops[..], [Request::CreateContainer(_)])
        ));
        // createTTL with ephemeral flags: a plain create, its TTL dropped.
        let body =
            multi_end(create_record(multi_op(Bytes::default(), op::CREATE_TTL), 1).long(500)).0;
        let Request::Multi(ops) = Request::decode(op::MULTI, &body).unwrap() else {
            panic!("not a multi")
        };
        assert_eq!(
            ops,
            vec![Request::Create(CreateRequest {
                path: "/n".into(),
                data: None,
                acl: vec![],
                flags: 1,
                ttl: NO_TTL
            })]
        );
        // createTTL with a TTL mode: kept, with its TTL.
        let body =
            multi_end(create_record(multi_op(Bytes::default(), op::CREATE_TTL), 6).long(500)).0;
        assert!(matches!(
            Request::decode(op::MULTI, &body).unwrap(),
            Request::Multi(ops) if matches!(&ops[..], [Request::CreateTtl(c)] if c.ttl == 500)
        ));
    }

    #[test]
    fn multi_create_with_a_ttl_mode_but_no_ttl_is_an_error() {
        let body = multi_end(create_record(multi_op(Bytes::default(), op::CREATE), 5)).0;
        assert!(matches!(
            Request::decode(op::MULTI, &body),
            Err(JuteError::BadEnum { value: 5, .. })
        ));
    }

    #[test]
    fn multi_with_a_read_or_a_nested_multi_is_an_error() {
        let body = multi_end(
            multi_op(Bytes::default(), op::GET_DATA)
                .ustring("/a")
                .boolean(false),
        )
        .0;
        assert_eq!(
            Request::decode(op::MULTI, &body),
            Err(JuteError::OpNotAllowed {
                op: op::GET_DATA,
                context: "multi"
            })
        );
        let inner = multi_end(Bytes::default());
        let body = multi_end(multi_op(Bytes::default(), op::MULTI).raw(&inner.0)).0;
        assert!(matches!(
            Request::decode(op::MULTI, &body),
            Err(JuteError::OpNotAllowed { op: 14, .. })
        ));
    }

    #[test]
    fn multi_without_its_end_marker_is_an_error() {
        let body = multi_op(Bytes::default(), op::DELETE)
            .ustring("/b")
            .int(3)
            .0;
        assert!(matches!(
            Request::decode(op::MULTI, &body),
            Err(JuteError::Truncated { .. })
        ));
    }

    #[test]
    fn multi_read_drops_watch_flags_and_refuses_writes() {
        let b = multi_op(Bytes::default(), op::GET_CHILDREN)
            .ustring("/a")
            .boolean(true);
        let body = multi_end(multi_op(b, op::GET_DATA).ustring("/b").boolean(true)).0;
        assert_eq!(
            Request::decode(op::MULTI_READ, &body).unwrap(),
            Request::MultiRead(vec![
                Request::GetChildren {
                    path: "/a".into(),
                    watch: false
                },
                Request::GetData {
                    path: "/b".into(),
                    watch: false
                },
            ])
        );
        let body = multi_end(multi_op(Bytes::default(), op::DELETE).ustring("/b").int(3)).0;
        assert!(matches!(
            Request::decode(op::MULTI_READ, &body),
            Err(JuteError::OpNotAllowed { op: 2, .. })
        ));
    }

    #[test]
    fn failed_multi_reply_carries_every_result_with_err_zero_in_its_header() {
        // create /a (rolled back: Ok), delete /b (NoNode), check /c (not tried:
        // RuntimeInconsistency); MultiResponse: MultiHeader(-1, false, err) + ErrorResponse(err).
        let header = ReplyHeader {
            xid: 7,
            zxid: 0x1_0000_0005,
            err: ErrorCode::Ok,
        };
        let body = Response::Multi(vec![
            MultiResult::Error(ErrorCode::Ok),
            MultiResult::Error(ErrorCode::NoNode),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ]);
        let expected = Bytes::default()
            .int(7)
            .long(0x1_0000_0005)
            .int(0)
            .int(-1)
            .boolean(false)
            .int(0)
            .int(0)
            .int(-1)
            .boolean(false)
            .int(-101)
            .int(-101)
            .int(-1)
            .boolean(false)
            .int(-2)
            .int(-2)
            .int(-1)
            .boolean(true)
            .int(-1)
            .framed();
        assert_eq!(encode_reply(&header, Some(&body)), expected);
        let (h, rest) = split_reply(&expected[4..]).unwrap();
        assert_eq!(h, header);
        assert_eq!(Response::decode(op::MULTI, rest).unwrap(), body);
    }

    #[test]
    fn successful_multi_reply_gives_creates_with_a_stat_the_create2_type() {
        let stat = sample_stat();
        let body = Response::Multi(vec![
            MultiResult::Create {
                path: "/a0000000001".into(),
            },
            MultiResult::Create2 {
                path: "/c".into(),
                stat,
            },
            MultiResult::Delete,
            MultiResult::SetData { stat },
            MultiResult::Check,
        ]);
        let expected = Bytes::default()
            .int(op::CREATE)
            .boolean(false)
            .int(0)
            .ustring("/a0000000001")
            .int(op::CREATE2)
            .boolean(false)
            .int(0)
            .ustring("/c")
            .stat(&stat)
            .int(op::DELETE)
            .boolean(false)
            .int(0)
            .int(op::SET_DATA)
            .boolean(false)
            .int(0)
            .stat(&stat)
            .int(op::CHECK)
            .boolean(false)
            .int(0)
            .int(-1)
            .boolean(true)
            .int(-1);
        let mut w = Writer::new();
        body.encode(&mut w);
        assert_eq!(w.as_bytes(), &expected.0[..]);
        assert_eq!(Response::decode(op::MULTI, &expected.0).unwrap(), body);
    }

    // ---- replies ----

    #[test]
    fn watcher_event_notification_is_written_byte_exact() {
        let event = WatcherEvent {
            event_type: EventType::NodeDataChanged,
            state: STATE_SYNC_CONNECTED,
            path: "/a".into(),
        };
        let expected = Bytes::default()
            .int(-1)
            .long(-1)
            .int(0)
            .int(3)
            .int(3)
            .ustring("/a")
            .framed();
        assert_eq!(&expected[..4], &[0, 0, 0, 30]);
        assert_eq!(encode_notification(&event), expected);
        let (h, rest) = split_reply(&expected[4..]).unwrap();
        assert_eq!((h.xid, h.zxid, h.err), (-1, -1, ErrorCode::Ok));
        assert_eq!(WatcherEvent::decode(rest).unwrap(), event);
    }

    #[test]
    fn unknown_watcher_event_type_is_an_error() {
        let body = Bytes::default().int(42).int(3).ustring("/a");
        assert!(matches!(
            WatcherEvent::decode(&body.0),
            Err(JuteError::BadEnum { value: 42, .. })
        ));
    }

    #[test]
    fn get_children2_reply_is_written_byte_exact() {
        let stat = sample_stat();
        let header = ReplyHeader {
            xid: 5,
            zxid: 0x10,
            err: ErrorCode::Ok,
        };
        let body = Response::GetChildren2 {
            children: vec!["x".into(), "yy".into()],
            stat,
        };
        let expected = Bytes::default()
            .int(5)
            .long(0x10)
            .int(0)
            .int(2)
            .ustring("x")
            .ustring("yy")
            .stat(&stat)
            .framed();
        assert_eq!(encode_reply(&header, Some(&body)), expected);
        let (_, rest) = split_reply(&expected[4..]).unwrap();
        assert_eq!(Response::decode(op::GET_CHILDREN2, rest).unwrap(), body);
    }

    #[test]
    fn failed_request_reply_is_the_bare_header() {
        let header = ReplyHeader {
            xid: 12,
            zxid: 0x44,
            err: ErrorCode::NoNode,
        };
        let expected = Bytes::default().int(12).long(0x44).int(-101).framed();
        assert_eq!(encode_reply(&header, None), expected);
        assert_eq!(encode_reply(&header, Some(&Response::Empty)), expected);
    }

    #[test]
    fn add_watch_reply_carries_an_error_response_of_zero() {
        let header = ReplyHeader {
            xid: 3,
            zxid: 9,
            err: ErrorCode::Ok,
        };
        let expected = Bytes::default().int(3).long(9).int(0).int(0).framed();
        assert_eq!(encode_reply(&header, Some(&Response::AddWatch)), expected);
        assert_eq!(
            Response::decode(op::ADD_WATCH, &[0, 0, 0, 0]),
            Ok(Response::AddWatch)
        );
        assert!(Response::decode(op::ADD_WATCH, &[]).is_err());
    }

    #[test]
    fn create_container_and_create_ttl_are_answered_a_create2_response() {
        let stat = sample_stat();
        let body = Bytes::default().ustring("/c").stat(&stat).0;
        for o in [op::CREATE2, op::CREATE_CONTAINER, op::CREATE_TTL] {
            assert_eq!(
                Response::decode(o, &body).unwrap(),
                Response::Create2 {
                    path: "/c".into(),
                    stat
                }
            );
        }
        let body = Bytes::default().ustring("/c").0;
        assert_eq!(
            Response::decode(op::CREATE, &body).unwrap(),
            Response::Create { path: "/c".into() }
        );
    }

    #[test]
    fn who_am_i_reply_is_a_vector_of_client_infos() {
        let body = Bytes::default()
            .int(2)
            .ustring("ip")
            .ustring("127.0.0.1")
            .ustring("digest")
            .ustring("bob")
            .0;
        assert_eq!(
            Response::decode(op::WHO_AM_I, &body).unwrap(),
            Response::WhoAmI(vec![
                ClientInfo {
                    auth_scheme: "ip".into(),
                    user: "127.0.0.1".into()
                },
                ClientInfo {
                    auth_scheme: "digest".into(),
                    user: "bob".into()
                },
            ])
        );
    }

    #[test]
    fn is_write_follows_zookeeper_request_is_quorum() {
        let c = CreateRequest {
            path: "/a".into(),
            data: None,
            acl: vec![],
            flags: 0,
            ttl: NO_TTL,
        };
        let writes = [
            Request::Create(c.clone()),
            Request::Create2(c.clone()),
            Request::CreateContainer(c.clone()),
            Request::CreateTtl(c),
            Request::Delete {
                path: "/a".into(),
                version: -1,
            },
            Request::SetData {
                path: "/a".into(),
                data: None,
                version: -1,
            },
            Request::SetAcl {
                path: "/a".into(),
                acl: vec![],
                version: -1,
            },
            Request::Check {
                path: "/a".into(),
                version: -1,
            },
            Request::Multi(vec![]),
            Request::CloseSession,
            Request::Unsupported { op: op::RECONFIG },
        ];
        for w in &writes {
            assert!(w.is_write(), "{w:?}");
        }
        let reads = [
            Request::Exists {
                path: "/a".into(),
                watch: false,
            },
            Request::Sync { path: "/a".into() },
            Request::Ping,
            Request::MultiRead(vec![]),
            Request::WhoAmI,
            Request::SetWatches {
                relative_zxid: 0,
                data: vec![],
                exist: vec![],
                child: vec![],
            },
            Request::Unsupported { op: op::SASL },
        ];
        for r in &reads {
            assert!(!r.is_write(), "{r:?}");
        }
        assert_eq!(writes[0].path(), Some("/a"));
        assert_eq!(Request::Multi(vec![]).path(), None);
    }

    #[test]
    fn max_packet_is_jute_maxbuffer_default() {
        assert_eq!(MAX_PACKET, 1_048_575);
    }

    // ---- round trips ----

    fn path() -> impl Strategy<Value = String> {
        prop_oneof!["/[a-z0-9/]{0,12}", any::<String>()]
    }

    fn data() -> impl Strategy<Value = Option<Vec<u8>>> {
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16))
    }

    fn strings() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(path(), 0..4)
    }

    fn stat() -> impl Strategy<Value = Stat> {
        (
            (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
            (any::<i32>(), any::<i32>(), any::<i32>()),
            any::<i64>(),
            (any::<i32>(), any::<i32>()),
            any::<i64>(),
        )
            .prop_map(
                |(
                    (czxid, mzxid, ctime, mtime),
                    (version, cversion, aversion),
                    eo,
                    (dl, nc),
                    pzxid,
                )| {
                    Stat {
                        czxid,
                        mzxid,
                        ctime,
                        mtime,
                        version,
                        cversion,
                        aversion,
                        ephemeral_owner: eo,
                        data_length: dl,
                        num_children: nc,
                        pzxid,
                    }
                },
            )
    }

    fn acls() -> impl Strategy<Value = Vec<Acl>> {
        proptest::collection::vec(
            (any::<i32>(), "[a-z]{0,6}", any::<String>()).prop_map(|(perms, scheme, id)| Acl {
                perms,
                id: Id::new(scheme, id),
            }),
            0..3,
        )
    }

    fn error_code() -> impl Strategy<Value = ErrorCode> {
        any::<i32>().prop_map(ErrorCode::from_code)
    }

    fn create(
        flags: impl Strategy<Value = i32>,
        ttl: bool,
    ) -> impl Strategy<Value = CreateRequest> {
        (path(), data(), acls(), flags, any::<i64>()).prop_map(
            move |(path, data, acl, flags, t)| CreateRequest {
                path,
                data,
                acl,
                flags,
                ttl: if ttl { t } else { NO_TTL },
            },
        )
    }

    fn watcher_type() -> impl Strategy<Value = WatcherType> {
        prop_oneof![
            Just(WatcherType::Children),
            Just(WatcherType::Data),
            Just(WatcherType::Any),
        ]
    }

    /// Operations inside a `multi`, as decoding types them.
    fn multi_write_op() -> impl Strategy<Value = Request> {
        prop_oneof![
            create((0..4i32).prop_union(7..100), false).prop_map(Request::Create),
            create(Just(4), false).prop_map(Request::CreateContainer),
            create(5..=6i32, true).prop_map(Request::CreateTtl),
            (path(), any::<i32>()).prop_map(|(path, version)| Request::Delete { path, version }),
            (path(), data(), any::<i32>()).prop_map(|(path, data, version)| Request::SetData {
                path,
                data,
                version
            }),
            (path(), any::<i32>()).prop_map(|(path, version)| Request::Check { path, version }),
        ]
    }

    fn multi_read_op() -> impl Strategy<Value = Request> {
        prop_oneof![
            path().prop_map(|path| Request::GetData { path, watch: false }),
            path().prop_map(|path| Request::GetChildren { path, watch: false }),
        ]
    }

    fn request() -> impl Strategy<Value = Request> {
        prop_oneof![
            create(any::<i32>(), false).prop_map(Request::Create),
            create(any::<i32>(), false).prop_map(Request::Create2),
            create(any::<i32>(), false).prop_map(Request::CreateContainer),
            create(any::<i32>(), true).prop_map(Request::CreateTtl),
            (path(), any::<i32>()).prop_map(|(path, version)| Request::Delete { path, version }),
            (path(), any::<bool>()).prop_map(|(path, watch)| Request::Exists { path, watch }),
            (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetData { path, watch }),
            (path(), data(), any::<i32>()).prop_map(|(path, data, version)| Request::SetData {
                path,
                data,
                version
            }),
            path().prop_map(|path| Request::GetAcl { path }),
            (path(), acls(), any::<i32>()).prop_map(|(path, acl, version)| Request::SetAcl {
                path,
                acl,
                version
            }),
            (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetChildren { path, watch }),
            (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetChildren2 { path, watch }),
            path().prop_map(|path| Request::Sync { path }),
            Just(Request::Ping),
            (path(), any::<i32>()).prop_map(|(path, version)| Request::Check { path, version }),
            proptest::collection::vec(multi_write_op(), 0..5).prop_map(Request::Multi),
            proptest::collection::vec(multi_read_op(), 0..5).prop_map(Request::MultiRead),
            (path(), watcher_type())
                .prop_map(|(path, watcher_type)| Request::CheckWatches { path, watcher_type }),
            (path(), watcher_type())
                .prop_map(|(path, watcher_type)| Request::RemoveWatches { path, watcher_type }),
            (
                path(),
                prop_oneof![
                    Just(AddWatchMode::Persistent),
                    Just(AddWatchMode::PersistentRecursive)
                ]
            )
                .prop_map(|(path, mode)| Request::AddWatch { path, mode }),
            (any::<i64>(), strings(), strings(), strings()).prop_map(|(z, d, e, c)| {
                Request::SetWatches {
                    relative_zxid: z,
                    data: d,
                    exist: e,
                    child: c,
                }
            }),
            (
                any::<i64>(),
                strings(),
                strings(),
                strings(),
                strings(),
                strings()
            )
                .prop_map(|(z, d, e, c, p, pr)| Request::SetWatches2 {
                    relative_zxid: z,
                    data: d,
                    exist: e,
                    child: c,
                    persistent: p,
                    persistent_recursive: pr,
                }),
            (
                any::<i32>(),
                any::<String>(),
                proptest::collection::vec(any::<u8>(), 0..16)
            )
                .prop_map(|(auth_type, scheme, auth)| Request::Auth {
                    auth_type,
                    scheme,
                    auth
                }),
            path().prop_map(|prefix| Request::GetEphemerals { prefix }),
            path().prop_map(|path| Request::GetAllChildrenNumber { path }),
            Just(Request::WhoAmI),
            Just(Request::CloseSession),
            prop_oneof![
                Just(op::RECONFIG),
                Just(op::SASL),
                Just(op::DELETE_CONTAINER),
                Just(op::CREATE_SESSION)
            ]
            .prop_map(|op| Request::Unsupported { op }),
        ]
    }

    /// A response and an op whose reply it is.
    fn response() -> impl Strategy<Value = (i32, Response)> {
        prop_oneof![
            path().prop_map(|path| (op::CREATE, Response::Create { path })),
            (
                prop_oneof![
                    Just(op::CREATE2),
                    Just(op::CREATE_CONTAINER),
                    Just(op::CREATE_TTL)
                ],
                path(),
                stat()
            )
                .prop_map(|(o, path, stat)| (o, Response::Create2 { path, stat })),
            (
                prop_oneof![Just(op::EXISTS), Just(op::SET_DATA), Just(op::SET_ACL)],
                stat()
            )
                .prop_map(|(o, s)| (o, Response::Stat(s))),
            (data(), stat())
                .prop_map(|(data, stat)| (op::GET_DATA, Response::GetData { data, stat })),
            (acls(), stat()).prop_map(|(acl, stat)| (op::GET_ACL, Response::GetAcl { acl, stat })),
            strings().prop_map(|children| (op::GET_CHILDREN, Response::GetChildren { children })),
            (strings(), stat()).prop_map(|(children, stat)| (
                op::GET_CHILDREN2,
                Response::GetChildren2 { children, stat }
            )),
            path().prop_map(|path| (op::SYNC, Response::Sync { path })),
            any::<i32>()
                .prop_map(|n| (op::GET_ALL_CHILDREN_NUMBER, Response::AllChildrenNumber(n))),
            strings().prop_map(|e| (op::GET_EPHEMERALS, Response::Ephemerals(e))),
            proptest::collection::vec(
                (any::<String>(), any::<String>())
                    .prop_map(|(auth_scheme, user)| ClientInfo { auth_scheme, user }),
                0..3
            )
            .prop_map(|infos| (op::WHO_AM_I, Response::WhoAmI(infos))),
            proptest::collection::vec(
                prop_oneof![
                    path().prop_map(|path| MultiResult::Create { path }),
                    (path(), stat()).prop_map(|(path, stat)| MultiResult::Create2 { path, stat }),
                    Just(MultiResult::Delete),
                    stat().prop_map(|stat| MultiResult::SetData { stat }),
                    Just(MultiResult::Check),
                    error_code().prop_map(MultiResult::Error),
                ],
                0..5
            )
            .prop_map(|r| (op::MULTI, Response::Multi(r))),
            proptest::collection::vec(
                prop_oneof![
                    (data(), stat())
                        .prop_map(|(data, stat)| MultiReadResult::GetData { data, stat }),
                    strings().prop_map(|children| MultiReadResult::GetChildren { children }),
                    error_code().prop_map(MultiReadResult::Error),
                ],
                0..5
            )
            .prop_map(|r| (op::MULTI_READ, Response::MultiRead(r))),
            Just((op::ADD_WATCH, Response::AddWatch)),
            prop_oneof![
                Just(op::DELETE),
                Just(op::PING),
                Just(op::CHECK),
                Just(op::CHECK_WATCHES),
                Just(op::REMOVE_WATCHES),
                Just(op::AUTH),
                Just(op::SET_WATCHES),
                Just(op::SET_WATCHES2),
                Just(op::CLOSE_SESSION)
            ]
            .prop_map(|o| (o, Response::Empty)),
        ]
    }

    proptest! {
        #[test]
        fn every_request_variant_round_trips(req in request(), xid in any::<i32>()) {
            let (o, bytes) = req.encode();
            prop_assert_eq!(o, req.op());
            let mut r = Reader::new(&bytes);
            prop_assert_eq!(&Request::read(o, &mut r).unwrap(), &req);
            prop_assert!(r.is_empty());
            let frame = req.encode_frame(xid);
            prop_assert_eq!(frame.len() - 4, i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize);
            let (header, decoded) = decode_frame_body(&frame[4..]).unwrap();
            prop_assert_eq!(header, RequestHeader { xid, op: o });
            prop_assert_eq!(decoded, req);
        }

        #[test]
        fn every_response_variant_round_trips((o, rsp) in response(), xid in any::<i32>(), zxid in any::<i64>()) {
            let header = ReplyHeader { xid, zxid, err: ErrorCode::Ok };
            let frame = encode_reply(&header, Some(&rsp));
            let (h, rest) = split_reply(&frame[4..]).unwrap();
            prop_assert_eq!(h, header);
            let mut r = Reader::new(rest);
            prop_assert_eq!(Response::read(o, &mut r).unwrap(), rsp);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn connect_records_round_trip(
            (pv, z, t, s) in (any::<i32>(), any::<i64>(), any::<i32>(), any::<i64>()),
            passwd in proptest::collection::vec(any::<u8>(), 0..20),
            (read_only, omits) in (any::<bool>(), any::<bool>()),
        ) {
            let req = ConnectRequest {
                protocol_version: pv,
                last_zxid_seen: z,
                timeout: t,
                session_id: s,
                passwd: passwd.clone(),
                read_only: read_only && !omits,
                omits_read_only: omits,
            };
            prop_assert_eq!(ConnectRequest::decode(&req.encode_frame()[4..]).unwrap(), req);
            let rsp = ConnectResponse {
                protocol_version: pv,
                timeout: t,
                session_id: s,
                passwd,
                read_only: read_only && !omits,
                omits_read_only: omits,
            };
            prop_assert_eq!(ConnectResponse::decode(&rsp.encode_frame()[4..]).unwrap(), rsp);
        }

        #[test]
        fn reply_headers_round_trip_any_error_code(xid in any::<i32>(), zxid in any::<i64>(), err in error_code()) {
            let header = ReplyHeader { xid, zxid, err };
            let frame = encode_reply(&header, None);
            prop_assert_eq!(frame.len(), 4 + 16);
            prop_assert_eq!(split_reply(&frame[4..]).unwrap(), (header, &[][..]));
        }
    }
}
