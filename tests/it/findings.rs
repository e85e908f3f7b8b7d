//! Findings of a review of the one-verdict work and the config dialects: each test states what
//! should happen and fails on the code it was written against.

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::json;

use crate::support::Host;
use crate::support::hostile::{self, Reply, text_result, tool};

const WAIT: Duration = Duration::from_secs(10);

/// Goose's extension entry (`"type": "streamable_http"`, `available_tools`, `envs`, `bundled`:
/// docs/configuration.md's table, Goose rows) writes `timeout` in **seconds** (Goose's default
/// is 300). The table reads `timeout` as the call deadline, "downward only", and Goose's entry
/// is recognised for `available_tools`, so a Goose `"timeout": 1800` (30 minutes) must leave
/// the call deadline at the Pack's own (a note says it is capped): a tool answering in 2 s is
/// served. What happens: without one of Cline's marks a `timeout` of 1000 or more is read as
/// milliseconds, so the Goose entry's calls end after 1.8 s with a deadline error.
#[tokio::test]
async fn a_goose_entrys_timeout_in_seconds_is_not_read_as_milliseconds() {
    let server = hostile::serve_tools(vec![tool("slow", "answers in 2 s")], |req| {
        let answer = serde_json::to_vec(&text_result(&req.id(), "served")).unwrap();
        Reply::stream(
            200,
            "application/json",
            stream::once(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok(Bytes::from(answer))
            })
            .boxed(),
        )
    })
    .await;
    let host = Host::new(json!({"goose": {
        "url": server.url,
        "type": "streamable_http",
        "timeout": 1800,
        "available_tools": ["slow"],
        "envs": {},
        "bundled": false,
    }}));
    host.ready("goose", WAIT).await;
    assert_eq!(
        tokio::time::timeout(WAIT, host.call_tool("goose", "slow"))
            .await
            .expect("answered within 10 s"),
        Ok("served".to_string())
    );
}
