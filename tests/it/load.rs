//! Load: many concurrent calls over many servers each get their own answer, and dropped calls
//! are cancelled on their server while the others complete.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::support::Host;
use crate::support::hostile::{
    Received, Reply, Server, rpc_error, serve, sse_event, standard, text_result, tool, tools_page,
};
use serde_json::{Value, json};

/// A small deterministic generator (xorshift64*), seeded per run and printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    nanos | 1
}

/// A server whose tool `echo` answers `echo:<server>:<token>` after a short delay derived from
/// the token, alternately as JSON and as an event stream; each event stream first carries a
/// response to another request id (which the Pack must ignore).
async fn echo_server(index: usize) -> Server {
    serve(move |req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        match req.method() {
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("echo", "echoes")], None)),
            "tools/call" => echo(index, &req).await,
            _ => Reply::json(&rpc_error(&req.id(), -32601, "Method not found")),
        }
    })
    .await
}

/// The answer of server `index`'s tool `echo` to the call `req`.
async fn echo(index: usize, req: &Received) -> Reply {
    let id = req.id();
    let token = req.rpc["params"]["arguments"]["token"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(token % 20)).await;
    let answer = text_result(&id, &format!("echo:{index}:{token}"));
    if token.is_multiple_of(2) {
        Reply::json(&answer)
    } else {
        let decoy = text_result(&json!(id.as_u64().unwrap() + 1), "not yours");
        Reply::raw(
            200,
            "text/event-stream",
            format!("{}{}", sse_event(&decoy), sse_event(&answer)),
        )
    }
}

fn call_args(server: usize, token: u64) -> Value {
    json!({"namespace": format!("s{server}"), "toolName": "echo", "arguments": {"token": token}})
}

/// 1,000 concurrent `call_dynamic_tool` calls over 10 servers: none lost, none crossed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_each_get_their_own_answer() {
    let mut servers = Vec::new();
    let mut config = serde_json::Map::new();
    for i in 0..10 {
        let server = echo_server(i).await;
        config.insert(format!("s{i}"), json!({"url": server.url}));
        servers.push(server);
    }
    let host = Host::new(Value::Object(config));
    for i in 0..10 {
        host.ready(&format!("s{i}"), Duration::from_secs(20)).await;
    }
    let mut rng = Rng(seed());
    let mut calls = Vec::new();
    for token in 0..1000u64 {
        let server = (rng.next() % 10) as usize;
        let call = host
            .pack
            .call("mcp/call_dynamic_tool", call_args(server, token));
        calls.push((server, token, tokio::spawn(call)));
    }
    let mut per_server = [0usize; 10];
    for (server, token, call) in calls {
        let answer = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .expect("every call finishes within 60 s")
            .expect("no call panics");
        assert_eq!(answer, Ok(format!("echo:{server}:{token}")));
        per_server[server] += 1;
    }
    for (i, server) in servers.iter().enumerate() {
        assert_eq!(server.count("tools/call"), per_server[i], "server s{i}");
        assert_eq!(server.count("notifications/cancelled"), 0, "server s{i}");
    }
    assert_eq!(per_server.iter().sum::<usize>(), 1000);
}

/// 200 calls in flight on 2 servers (each held until released); 100 chosen at random are
/// dropped: each dropped one is cancelled on its server with its own request id, and the other
/// 100 complete with their own answers once released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_half_of_200_in_flight_calls_cancels_exactly_those() {
    let (release, released) = tokio::sync::watch::channel(false);
    let mut servers = Vec::new();
    let mut config = serde_json::Map::new();
    for i in 0..2 {
        let released = released.clone();
        let server = serve(move |req| {
            let mut released = released.clone();
            async move {
                if let Some(reply) = standard(&req) {
                    return reply;
                }
                let id = req.id();
                match req.method() {
                    "tools/list" => {
                        Reply::json(&tools_page(&id, vec![tool("echo", "echoes")], None))
                    }
                    _ => {
                        let token = req.rpc["params"]["arguments"]["token"].as_u64().unwrap();
                        let _ = released.wait_for(|r| *r).await;
                        Reply::sse(&[text_result(&id, &format!("echo:{i}:{token}"))])
                    }
                }
            }
        })
        .await;
        config.insert(format!("s{i}"), json!({"url": server.url}));
        servers.push(server);
    }
    let host = Host::new(Value::Object(config));
    host.ready("s0", Duration::from_secs(20)).await;
    host.ready("s1", Duration::from_secs(20)).await;

    let seed = seed();
    let mut rng = Rng(seed);
    let mut calls = Vec::new();
    for token in 0..200u64 {
        let server = (token % 2) as usize;
        let call = host
            .pack
            .call("mcp/call_dynamic_tool", call_args(server, token));
        calls.push((server, token, tokio::spawn(call)));
    }
    for server in &servers {
        server
            .wait_until(Duration::from_secs(30), "100 calls in flight", |r| {
                r.iter().filter(|r| r.method() == "tools/call").count() == 100
            })
            .await;
    }
    // The request id each token was sent with, per server.
    let ids: BTreeMap<(usize, u64), u64> = servers
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.with_method("tools/call").into_iter().map(move |r| {
                let token = r.rpc["params"]["arguments"]["token"].as_u64().unwrap();
                ((i, token), r.id().as_u64().unwrap())
            })
        })
        .collect();
    assert_eq!(ids.len(), 200);

    // Choose 100 at random (partial Fisher–Yates) and drop them.
    let mut order: Vec<usize> = (0..200).collect();
    for i in 0..100 {
        let j = i + (rng.next() % (200 - i) as u64) as usize;
        order.swap(i, j);
    }
    let dropped: BTreeSet<usize> = order[..100].iter().copied().collect();
    let mut expected_cancelled: [BTreeSet<u64>; 2] = Default::default();
    let mut kept = Vec::new();
    for (index, (server, token, call)) in calls.into_iter().enumerate() {
        if dropped.contains(&index) {
            call.abort();
            assert!(call.await.unwrap_err().is_cancelled());
            expected_cancelled[server].insert(ids[&(server, token)]);
        } else {
            kept.push((server, token, call));
        }
    }
    for (i, server) in servers.iter().enumerate() {
        let want = expected_cancelled[i].len();
        let requests = server
            .wait_until(Duration::from_secs(10), "the cancellations", |r| {
                r.iter()
                    .filter(|r| r.method() == "notifications/cancelled")
                    .count()
                    >= want
            })
            .await;
        let cancelled: BTreeSet<u64> = requests
            .iter()
            .filter(|r| r.method() == "notifications/cancelled")
            .map(|r| {
                assert_eq!(
                    r.rpc["params"]["reason"], "the client dropped the call",
                    "seed {seed}"
                );
                r.rpc["params"]["requestId"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(cancelled, expected_cancelled[i], "server s{i}, seed {seed}");
    }

    release.send(true).unwrap();
    for (server, token, call) in kept {
        let answer = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .expect("every kept call finishes")
            .expect("no call panics");
        assert_eq!(answer, Ok(format!("echo:{server}:{token}")), "seed {seed}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (i, server) in servers.iter().enumerate() {
        assert_eq!(
            server.count("notifications/cancelled"),
            expected_cancelled[i].len(),
            "no completed call is cancelled (server s{i}, seed {seed})"
        );
    }
}
