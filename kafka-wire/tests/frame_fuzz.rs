//! Bounded randomized fuzzing (bolero) of the frame decoder and the request header peek: no
//! input panics, frames come out the same however the bytes are split, and the decoder never
//! reserves much more than the bytes it has been given.

use bytes::BytesMut;
use kafka_wire::frame::{decode_frame, peek_request_header};

#[test]
fn fuzz_frame_decoder_is_split_independent_and_never_panics() {
    bolero::check!()
        .with_iterations(20_000)
        .with_max_len(2048)
        .for_each(|input: &[u8]| {
            let max = 1024;
            // All at once.
            let mut whole = BytesMut::from(input);
            let mut frames_whole = Vec::new();
            let mut err_whole = false;
            loop {
                match decode_frame(&mut whole, max) {
                    Ok(Some(f)) => {
                        let _ = peek_request_header(&f);
                        frames_whole.push(f);
                    }
                    Ok(None) => break,
                    Err(_) => {
                        err_whole = true;
                        break;
                    }
                }
            }
            // In chunks whose sizes come from the input itself.
            let mut src = BytesMut::new();
            let mut frames = Vec::new();
            let mut err = false;
            let mut pos = 0;
            while pos < input.len() && !err {
                let step = 1 + usize::from(input[pos]) % 7;
                let end = (pos + step).min(input.len());
                src.extend_from_slice(&input[pos..end]);
                pos = end;
                loop {
                    match decode_frame(&mut src, max) {
                        Ok(Some(f)) => frames.push(f),
                        Ok(None) => break,
                        Err(_) => {
                            err = true;
                            break;
                        }
                    }
                }
                assert!(src.capacity() <= 2 * (input.len() + 64 * 1024));
            }
            assert_eq!(frames, frames_whole);
            assert_eq!(err, err_whole);
        });
}
