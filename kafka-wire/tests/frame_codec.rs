//! Size-prefixed framing: whole and partial frames, the maximum size, negative sizes, the
//! request header peek, and the `tokio-util` codec.

use bytes::{Bytes, BytesMut};
use kafka_wire::frame::{
    decode_frame, encode_frame, peek_frame_size, peek_request_header, peek_response_correlation_id,
};
use kafka_wire::DecodeError;

#[test]
fn frames_round_trip_and_partial_frames_wait_for_more_bytes() {
    let mut buf = BytesMut::new();
    encode_frame(b"hello", &mut buf, 100).unwrap();
    encode_frame(b"", &mut buf, 100).unwrap();
    encode_frame(b"world!", &mut buf, 100).unwrap();
    let all = buf.clone().freeze();
    assert_eq!(&all[..4], &[0, 0, 0, 5]);

    // Feed byte by byte: frames come out only when whole.
    let mut src = BytesMut::new();
    let mut out = Vec::new();
    for b in all.iter() {
        src.extend_from_slice(&[*b]);
        while let Some(f) = decode_frame(&mut src, 100).unwrap() {
            out.push(f);
        }
    }
    assert_eq!(
        out,
        vec![
            Bytes::from_static(b"hello"),
            Bytes::new(),
            Bytes::from_static(b"world!")
        ]
    );
    assert!(src.is_empty());
}

#[test]
fn frame_above_the_maximum_is_frame_too_large_in_both_directions() {
    let mut src = BytesMut::from(&[0u8, 0, 1, 0][..]);
    assert_eq!(
        decode_frame(&mut src, 255),
        Err(DecodeError::FrameTooLarge {
            size: 256,
            max: 255
        })
    );
    let mut dst = BytesMut::new();
    assert!(encode_frame(&[0; 256], &mut dst, 255).is_err());
    assert!(dst.is_empty());
}

#[test]
fn negative_frame_size_is_invalid_length() {
    assert!(matches!(
        peek_frame_size(&[0xff, 0xff, 0xff, 0xfe], usize::MAX),
        Err(DecodeError::InvalidLength { .. })
    ));
}

#[test]
fn announced_large_frame_does_not_reserve_its_size() {
    let mut src = BytesMut::from(&[0x06u8, 0, 0, 0][..]);
    assert_eq!(decode_frame(&mut src, usize::MAX), Ok(None));
    assert!(src.capacity() < 128 * 1024, "capacity {}", src.capacity());
}

#[test]
fn request_header_peek_reads_key_version_and_correlation_id() {
    let payload = [
        0x00, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x30, 0x39, 0x00, 0x03, b'a',
    ];
    assert_eq!(peek_request_header(&payload), Ok((1, 12, 12345)));
    assert!(matches!(
        peek_request_header(&payload[..7]),
        Err(DecodeError::Truncated { .. })
    ));
    assert_eq!(peek_response_correlation_id(&payload[4..]), Ok(12345));
}

#[cfg(feature = "tokio")]
#[test]
fn kafka_frame_codec_decodes_and_encodes() {
    use kafka_wire::frame::{FrameError, KafkaFrameCodec};
    use tokio_util::codec::{Decoder, Encoder};

    let mut codec = KafkaFrameCodec::new(16);
    let mut buf = BytesMut::new();
    codec.encode(Bytes::from_static(b"abc"), &mut buf).unwrap();
    codec.encode(&b"de"[..], &mut buf).unwrap();
    assert_eq!(
        codec.decode(&mut buf).unwrap(),
        Some(Bytes::from_static(b"abc"))
    );
    assert_eq!(
        codec.decode(&mut buf).unwrap(),
        Some(Bytes::from_static(b"de"))
    );
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    let mut big = BytesMut::from(&[0u8, 0, 0, 17][..]);
    assert!(matches!(
        codec.decode(&mut big),
        Err(FrameError::Decode(DecodeError::FrameTooLarge {
            size: 17,
            max: 16
        }))
    ));
    assert!(matches!(
        codec.encode(Bytes::from(vec![0; 17]), &mut buf),
        Err(FrameError::Encode(_))
    ));
}
