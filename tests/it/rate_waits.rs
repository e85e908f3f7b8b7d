//! A rate limit's named wait (`429`/`503` with `Retry-After`, RFC 6585 §4) on the paths that
//! ask again on their own: the change stream's loop stays away at least the wait the server
//! named, on a modern route's `subscriptions/listen` as on a legacy session's `GET`
//! (docs/connection.md "Verdicts").

use std::time::Duration;

use serde_json::json;

use crate::support::Host;
use crate::support::answers::modern_with;
use crate::support::hostile::{Reply, entry};

const WAIT: Duration = Duration::from_secs(10);

/// A modern server refuses `subscriptions/listen` `429` with `Retry-After: 20`: the loop does
/// not ask again within the 20 seconds (its own backoff would ask after 1 s and 3 s).
#[tokio::test]
async fn a_modern_listen_refused_429_waits_the_named_wait_before_asking_again() {
    let server =
        modern_with(|_| Reply::raw(429, "text/plain", "slow down").header("retry-after", "20"))
            .await;
    let host = Host::new(json!({ "m": entry(&server.url) }));
    host.ready("m", WAIT).await;
    server
        .wait_until(WAIT, "the first listen", |r| {
            r.iter().any(|r| r.method() == "subscriptions/listen")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(
        server.count("subscriptions/listen"),
        1,
        "listens within 4.5 s of a Retry-After: 20"
    );
    drop(host);
}
