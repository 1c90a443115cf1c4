//! Bounded fuzzing (bolero) of the ZooKeeper client-port decoders: `Request::decode` for
//! every op code, `decode_frame_body`, `ConnectRequest::decode`, `ConnectResponse::decode`,
//! `WatcherEvent::decode` and `Response::decode`, on arbitrary bytes and on mutated valid
//! records. No input panics, no decode allocates much more than its input, and whatever
//! decodes re-encodes to bytes that decode to the same value.
//!
//! The tests sit in a `zookeeper` module so that `cargo test -p zab-coordination zookeeper` runs them.

mod zookeeper {

    use std::alloc::System;
    use std::sync::{Mutex, MutexGuard, PoisonError};

    use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
    use zab_coordination::zookeeper::jute::Writer;
    use zab_coordination::zookeeper::proto::{
        decode_frame_body, ConnectRequest, ConnectResponse, CreateRequest, MultiResult, Request,
        Response, WatcherEvent, NO_TTL,
    };
    use zab_coordination::zookeeper::types::{op, Acl, ErrorCode, Stat, WatcherType};

    #[global_allocator]
    static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

    /// The allocation counter is process-wide: the tests of this file run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every op code ZooKeeper 3.8 knows, and a few it does not.
    const OPS: [i32; 36] = [
        op::NOTIFICATION,
        op::CREATE,
        op::DELETE,
        op::EXISTS,
        op::GET_DATA,
        op::SET_DATA,
        op::GET_ACL,
        op::SET_ACL,
        op::GET_CHILDREN,
        op::SYNC,
        op::PING,
        op::GET_CHILDREN2,
        op::CHECK,
        op::MULTI,
        op::CREATE2,
        op::RECONFIG,
        op::CHECK_WATCHES,
        op::REMOVE_WATCHES,
        op::CREATE_CONTAINER,
        op::DELETE_CONTAINER,
        op::CREATE_TTL,
        op::MULTI_READ,
        op::AUTH,
        op::SET_WATCHES,
        op::SASL,
        op::GET_EPHEMERALS,
        op::GET_ALL_CHILDREN_NUMBER,
        op::SET_WATCHES2,
        op::ADD_WATCH,
        op::WHO_AM_I,
        op::CREATE_SESSION,
        op::CLOSE_SESSION,
        op::ERROR,
        10,
        23,
        i32::MAX,
    ];

    /// A decode may allocate at most this many bytes per input byte (the decoded values are
    /// larger than their encodings: a 4-byte empty string is a 24-byte `String`) plus a slack.
    const ALLOC_PER_BYTE: usize = 32;
    const ALLOC_SLACK: usize = 64 * 1024;

    /// Runs `decode` on `bytes`, checking how much it allocates.
    fn bounded<T>(bytes: &[u8], decode: impl FnOnce() -> T) -> T {
        let region = Region::new(GLOBAL);
        let out = decode();
        let allocated = region.change().bytes_allocated;
        assert!(
            allocated <= bytes.len() * ALLOC_PER_BYTE + ALLOC_SLACK,
            "decoding {} bytes allocated {allocated}",
            bytes.len()
        );
        out
    }

    fn check_request(o: i32, bytes: &[u8]) {
        if let Ok(req) = bounded(bytes, || Request::decode(o, bytes)) {
            let (o2, again) = req.encode();
            assert_eq!(o2, o, "{req:?}");
            assert_eq!(Request::decode(o2, &again), Ok(req));
        }
    }

    fn check_frame_body(bytes: &[u8]) {
        if let Ok((header, req)) = bounded(bytes, || decode_frame_body(bytes)) {
            assert_eq!(header.op, req.op());
            let frame = req.encode_frame(header.xid);
            assert_eq!(decode_frame_body(&frame[4..]), Ok((header, req)));
        }
    }

    fn check_connect(bytes: &[u8]) {
        if let Ok(req) = bounded(bytes, || ConnectRequest::decode(bytes)) {
            assert_eq!(ConnectRequest::decode(&req.encode_frame()[4..]), Ok(req));
        }
        if let Ok(rsp) = bounded(bytes, || ConnectResponse::decode(bytes)) {
            assert_eq!(ConnectResponse::decode(&rsp.encode_frame()[4..]), Ok(rsp));
        }
        if let Ok(event) = bounded(bytes, || WatcherEvent::decode(bytes)) {
            let mut w = Writer::new();
            event.write(&mut w);
            assert_eq!(WatcherEvent::decode(w.as_bytes()), Ok(event));
        }
    }

    fn check_response(o: i32, bytes: &[u8]) {
        if let Ok(rsp) = bounded(bytes, || Response::decode(o, bytes)) {
            let mut w = Writer::new();
            rsp.encode(&mut w);
            assert_eq!(Response::decode(o, w.as_bytes()), Ok(rsp));
        }
    }

    /// Everything fed to every decoder.
    fn check_all(o: i32, bytes: &[u8]) {
        check_request(o, bytes);
        check_response(o, bytes);
        check_frame_body(bytes);
        check_connect(bytes);
    }

    #[test]
    fn fuzz_arbitrary_bytes_never_panic_nor_allocate_without_bound_and_round_trip() {
        let _serial = serial();
        bolero::check!()
            .with_iterations(20_000)
            .with_max_len(1024)
            .with_type::<(u8, Vec<u8>)>()
            .for_each(|(o, bytes)| check_all(OPS[usize::from(*o) % OPS.len()], bytes));
    }

    fn create(flags: i32, ttl: i64) -> CreateRequest {
        CreateRequest {
            path: "/app/node-".into(),
            data: Some(b"payload".to_vec()),
            acl: Acl::open_unsafe(),
            flags,
            ttl,
        }
    }

    /// One valid request of every kind, encoded, with its op code.
    fn valid_requests() -> Vec<(i32, Vec<u8>)> {
        let reqs = vec![
            Request::Create(create(1, NO_TTL)),
            Request::Create2(create(2, NO_TTL)),
            Request::CreateContainer(create(4, NO_TTL)),
            Request::CreateTtl(create(5, 1000)),
            Request::Delete {
                path: "/a".into(),
                version: 3,
            },
            Request::SetData {
                path: "/a".into(),
                data: None,
                version: -1,
            },
            Request::SetAcl {
                path: "/a".into(),
                acl: Acl::open_unsafe(),
                version: 0,
            },
            Request::GetChildren2 {
                path: "/".into(),
                watch: true,
            },
            Request::Multi(vec![
                Request::Create(create(0, NO_TTL)),
                Request::CreateTtl(create(6, 9)),
                Request::Check {
                    path: "/a".into(),
                    version: 1,
                },
                Request::Delete {
                    path: "/b".into(),
                    version: -1,
                },
            ]),
            Request::MultiRead(vec![
                Request::GetData {
                    path: "/a".into(),
                    watch: false,
                },
                Request::GetChildren {
                    path: "/b".into(),
                    watch: false,
                },
            ]),
            Request::RemoveWatches {
                path: "/a".into(),
                watcher_type: WatcherType::Any,
            },
            Request::SetWatches2 {
                relative_zxid: 77,
                data: vec!["/a".into()],
                exist: vec!["/b".into()],
                child: vec![],
                persistent: vec!["/p".into()],
                persistent_recursive: vec!["/r".into()],
            },
            Request::Auth {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"u:p".to_vec(),
            },
        ];
        reqs.into_iter().map(|r| r.encode()).collect()
    }

    fn valid_responses() -> Vec<(i32, Vec<u8>)> {
        let stat = Stat {
            czxid: 1,
            mzxid: 2,
            data_length: 3,
            ..Stat::default()
        };
        let rsps = [
            (
                op::CREATE2,
                Response::Create2 {
                    path: "/a".into(),
                    stat,
                },
            ),
            (
                op::GET_ACL,
                Response::GetAcl {
                    acl: Acl::open_unsafe(),
                    stat,
                },
            ),
            (
                op::GET_CHILDREN2,
                Response::GetChildren2 {
                    children: vec!["x".into(), "y".into()],
                    stat,
                },
            ),
            (
                op::MULTI,
                Response::Multi(vec![
                    MultiResult::Create { path: "/a".into() },
                    MultiResult::Create2 {
                        path: "/b".into(),
                        stat,
                    },
                    MultiResult::SetData { stat },
                    MultiResult::Error(ErrorCode::NoNode),
                ]),
            ),
        ];
        rsps.into_iter()
            .map(|(o, r)| {
                let mut w = Writer::new();
                r.encode(&mut w);
                (o, w.into_vec())
            })
            .collect()
    }

    fn connect_frame() -> (i32, Vec<u8>) {
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 5,
            timeout: 30_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: false,
            omits_read_only: false,
        };
        (op::NOTIFICATION, req.encode_frame()[4..].to_vec())
    }

    #[test]
    fn fuzz_mutated_valid_records_never_panic_nor_allocate_without_bound_and_round_trip() {
        let _serial = serial();
        let mut valid = valid_requests();
        valid.extend(valid_responses());
        valid.push(connect_frame());
        bolero::check!()
            .with_iterations(20_000)
            .with_type::<(u8, Vec<(u16, u8)>, u16, bool)>()
            .for_each(|(pick, flips, cut, other_op)| {
                let (o, bytes) = &valid[usize::from(*pick) % valid.len()];
                let mut bytes = bytes.clone();
                for (at, x) in flips.iter().take(8) {
                    if !bytes.is_empty() {
                        let at = usize::from(*at) % bytes.len();
                        bytes[at] ^= *x;
                    }
                }
                if !bytes.is_empty() {
                    let keep = bytes.len() - usize::from(*cut) % (bytes.len() + 1).min(8);
                    bytes.truncate(keep);
                }
                let o = if *other_op {
                    OPS[usize::from(*pick) % OPS.len()]
                } else {
                    *o
                };
                check_all(o, &bytes);
            });
    }

    #[test]
    fn huge_claimed_lengths_in_every_position_allocate_nothing_large() {
        let _serial = serial();
        for (o, bytes) in valid_requests() {
            for at in 0..bytes.len().saturating_sub(3) {
                let mut b = bytes.clone();
                b[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
                check_all(o, &b);
            }
        }
    }
}
