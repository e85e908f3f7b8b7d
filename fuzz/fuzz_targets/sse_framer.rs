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

/// Everything the framer produced: the events (or the error that stopped it), the last event id
/// and the reconnection time at the end.
type Outcome = (
    Vec<sse::Event>,
    Option<sse::SseError>,
    String,
    Option<std::time::Duration>,
);

fn frame(stream: &Bytes, sizes: &[usize]) -> Outcome {
    let mut framer = sse::Framer::new();
    let mut events = Vec::new();
    let mut at = 0;
    let mut turn = 0;
    while at < stream.len() {
        let size = sizes[turn % sizes.len()].min(stream.len() - at);
        turn += 1;
        framer.feed(stream.slice(at..at + size));
        at += size;
        loop {
            assert!(framer.held() <= limits::MAX_MESSAGE_BYTES);
            match framer.next() {
                Ok(Some(event)) => {
                    assert!(event.data.len() <= limits::MAX_MESSAGE_BYTES);
                    assert!(!event.event.is_empty());
                    let _ = event.text();
                    events.push(event);
                }
                Ok(None) => break,
                Err(error) => {
                    return (
                        events,
                        Some(error),
                        framer.last_event_id().to_string(),
                        framer.retry(),
                    );
                }
            }
        }
    }
    (events, None, framer.last_event_id().to_string(), framer.retry())
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
