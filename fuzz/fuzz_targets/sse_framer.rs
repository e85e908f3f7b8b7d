//! Fuzzes the SSE framer (src/sse.rs) on its own, no I/O: the input is cut into chunks and fed
//! in order, and the same input is framed again as one chunk.
//!
//! Input: the first 4 bytes choose the chunk sizes (each byte gives one size, 1 to 64, used in
//! turn); the rest is the stream.
//!
//! Run (bounded):
//!   cd fuzz && cargo +nightly fuzz run -s none sse_framer corpus/sse_framer seeds/sse_framer \
//!       -- -max_total_time=300
//!
//! A finding is a panic, or a broken invariant: the events, the last event id, the reconnection
//! time and any error do not depend on where the chunks are cut, and the bytes the framer holds
//! never exceed the message limit.
#![no_main]

#[allow(dead_code)]
#[path = "../../src/limits.rs"]
mod limits;
#[allow(dead_code)]
#[path = "../../src/sse.rs"]
mod sse;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

/// Frames `stream` in chunks of `sizes`, checking the bounds at every step.
fn frame(stream: &Bytes, sizes: &[usize]) -> sse::Framed {
    sse::frame_in_chunks(stream, sizes, |framer, event| {
        assert!(framer.held() <= limits::MAX_MESSAGE_BYTES);
        if let Some(event) = event {
            assert!(event.data.len() <= limits::MAX_MESSAGE_BYTES);
            assert!(!event.event.is_empty());
            let _ = event.text();
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let head = data.len().min(4);
    let sizes: Vec<usize> = if head == 0 {
        vec![1]
    } else {
        data[..head].iter().map(|b| usize::from(b % 64) + 1).collect()
    };
    let stream = Bytes::copy_from_slice(&data[head..]);
    let cut = frame(&stream, &sizes);
    let whole = frame(&stream, &[stream.len().max(1)]);
    assert_eq!(cut, whole, "the outcome depends on the chunk cuts");
});
