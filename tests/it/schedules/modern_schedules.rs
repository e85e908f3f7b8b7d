//! Generated schedules against a server of the modern era (MCP 2026-07-28): calls answered as
//! JSON, as SSE, held, or cut before their answer (re-issued once), calls dropped while they run
//! (their response stream closes: the modern cancellation), tool-list changes announced on
//! `subscriptions/listen`, listen streams dropped, and restarts, some onto another era. After
//! each schedule the Pack is dropped and the whole wire trail is checked against the invariants
//! in [`check`].

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use proptest::prelude::*;
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::entry;
use crate::support::modern::{Call, Era, MODERN, Modern, Step};

const WAIT: Duration = Duration::from_secs(10);
/// How long the `hold` tool's answer is held.
const HOLD: Duration = Duration::from_millis(300);

/// The tools of the fake and how each is answered.
const TOOLS: [&str; 5] = ["echo", "sse", "hold", "cut_first", "cut_always"];

fn behaviour(tool: &str) -> Call {
    match tool {
        "echo" => Call::Echo,
        "sse" => Call::Sse,
        "hold" => Call::Hold(HOLD),
        "cut_first" => Call::CutFirst,
        _ => Call::CutAlways,
    }
}

fn listed(name: &str) -> Value {
    json!({"name": name, "description": name, "inputSchema": {"type": "object"}})
}

#[derive(Clone, Debug)]
enum Op {
    /// A call of `TOOLS[tool]`, dropped after `drop_after` ms when given.
    Call {
        tool: usize,
        drop_after: Option<u64>,
    },
    Wait(u64),
    /// The server lists one more tool and says so on every open listen stream.
    AddTool,
    /// The server ends every listen stream.
    DropListens,
    /// The server restarts onto `era`: every connection cut, every stream ended.
    Restart(Era),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..TOOLS.len(), prop_oneof![2 => Just(None), 1 => (0u64..400).prop_map(Some)])
            .prop_map(|(tool, drop_after)| Op::Call { tool, drop_after }),
        2 => (0u64..200).prop_map(Op::Wait),
        1 => Just(Op::AddTool),
        1 => Just(Op::DropListens),
        1 => prop_oneof![3 => Just(Era::Modern), 2 => Just(Era::Dual), 1 => Just(Era::Legacy)]
            .prop_map(Op::Restart),
    ]
}

/// How a call of the schedule ended.
#[derive(Debug)]
enum Ended {
    Resolved(Result<String, ToolError>),
    Dropped,
}

fn spawn_call(
    future: BoxFuture<'static, Result<String, ToolError>>,
    drop_after: Option<u64>,
) -> tokio::task::JoinHandle<Ended> {
    tokio::spawn(async move {
        match drop_after {
            Some(after) => tokio::select! {
                outcome = future => Ended::Resolved(outcome),
                () = tokio::time::sleep(Duration::from_millis(after)) => Ended::Dropped,
            },
            None => Ended::Resolved(future.await),
        }
    })
}

/// One generated schedule: the era the server starts in, whether it declares
/// `tools.listChanged`, the ops, and how long to wait before the Pack's drop.
#[derive(Clone, Debug)]
struct Schedule {
    start: Era,
    list_changed: bool,
    ops: Vec<Op>,
    wait_before_drop: u64,
}

fn schedules() -> impl Strategy<Value = Schedule> {
    (
        prop_oneof![Just(Era::Modern), Just(Era::Dual)],
        any::<bool>(),
        prop::collection::vec(op(), 1..8),
        0u64..300,
    )
        .prop_map(|(start, list_changed, ops, wait_before_drop)| Schedule {
            start,
            list_changed,
            ops,
            wait_before_drop,
        })
}

/// What the run saw beside the trail.
struct Run {
    /// Per call tag: the tool and how the call ended.
    calls: HashMap<u64, (&'static str, Ended)>,
    /// The trail length at each restart, with the era it went to.
    restarts: Vec<(usize, Era)>,
}

async fn run_schedule(schedule: Schedule) {
    let server = Modern::start_in(schedule.start).await;
    let mut tools: Vec<Value> = TOOLS.iter().map(|t| listed(t)).collect();
    server.set_tools(tools.clone());
    for tool in TOOLS {
        server.set_call(tool, behaviour(tool));
    }
    if schedule.list_changed {
        server.set_list_changed();
    }
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", WAIT).await;
    let mut handles = Vec::new();
    let mut restarts = Vec::new();
    let mut added = Vec::new();
    for (tag, op) in schedule.ops.iter().enumerate() {
        match op.clone() {
            Op::Call { tool, drop_after } => {
                let name = TOOLS[tool];
                let args = json!({"namespace": "m", "toolName": name, "arguments": {"tag": tag}});
                let future = host.pack.call("mcp/call_dynamic_tool", args);
                handles.push((tag as u64, name, spawn_call(future, drop_after)));
            }
            Op::Wait(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            Op::AddTool => {
                let name = format!("added_{tag}");
                tools.push(listed(&name));
                server.set_tools(tools.clone());
                server.notify_list_changed();
                added.push(name);
            }
            Op::DropListens => server.drop_listens(),
            Op::Restart(era) => {
                restarts.push((server.trail().len(), era));
                server.restart(era);
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(schedule.wait_before_drop)).await;
    // A change announced while a listen stream was open, or one that a re-opened stream could
    // have missed, reaches the listing: every added tool is listed in the end (on a server
    // that stayed modern and declares listChanged).
    let stayed_modern = restarts.iter().all(|(_, era)| *era != Era::Legacy);
    if schedule.list_changed && stayed_modern && !added.is_empty() {
        let listing = host
            .wait_for(WAIT, |l| {
                let names: Vec<&str> = l["servers"][0]["tools"]
                    .as_array()
                    .map(|t| t.iter().filter_map(|t| t.as_str()).collect())
                    .unwrap_or_default();
                added.iter().all(|a| names.contains(&a.as_str()))
            })
            .await;
        assert_eq!(listing["servers"][0]["status"], "ready", "{listing}");
    }
    drop(host);
    let mut calls = HashMap::new();
    for (tag, name, handle) in handles {
        let end = tokio::time::timeout(WAIT, handle)
            .await
            .expect("every call resolves after the Pack's drop")
            .unwrap();
        calls.insert(tag, (name, end));
    }
    let trail = server.settle(Duration::from_millis(300), WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.trail().len(),
        trail.len(),
        "a request after the Pack's drop settled: {:#?}",
        server.lines()
    );
    let run = Run { calls, restarts };
    check(&trail, &run, &schedule);
}

/// The tag of a `tools/call` step (`None` for anything else).
fn tag_of(step: &Step) -> Option<u64> {
    (step.method == "tools/call")
        .then(|| step.params["arguments"]["tag"].as_u64())
        .flatten()
}

fn check(trail: &[Step], run: &Run, schedule: &Schedule) {
    let lines: Vec<String> = trail.iter().map(Step::line).collect();
    let ever_legacy = run.restarts.iter().any(|(_, era)| *era == Era::Legacy);
    for (i, step) in trail.iter().enumerate() {
        if step.session || ever_legacy {
            continue;
        }
        // A server that never went legacy sees only modern POSTs: no GET, no DELETE, no
        // session, no handshake, no ping, no cancel notification.
        assert!(
            step.verb == "POST" || step.verb == "CLOSED",
            "a {} at {i} to a modern server: {lines:#?}",
            step.verb
        );
        assert!(
            ![
                "initialize",
                "notifications/initialized",
                "notifications/cancelled",
                "ping",
                "",
            ]
            .contains(&step.method.as_str()),
            "{} at {i} to a modern server: {lines:#?}",
            step.method
        );
        // The modern request shape: the version in `_meta` and in the header, the method in
        // `Mcp-Method`; the fake answers anything else with a 400.
        assert_eq!(
            step.meta["io.modelcontextprotocol/protocolVersion"], MODERN,
            "at {i}: {lines:#?}"
        );
        assert_eq!(
            step.header("mcp-protocol-version").as_deref(),
            Some(MODERN),
            "at {i}: {lines:#?}"
        );
        assert_eq!(
            step.header("mcp-method").as_deref(),
            Some(step.method.as_str()),
            "at {i}: {lines:#?}"
        );
        assert_eq!(
            step.meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        if step.verb == "POST" && !(step.method == "tools/call" && step.status == 200) {
            // Only a cut call or a restart's cut ends a stream; nothing is refused.
            assert!(
                [200, 202].contains(&step.status),
                "a refused request at {i}: {lines:#?}"
            );
        }
    }
    // `server/discover`: one per life of the server (the start, then one per restart at most).
    let discovers = trail
        .iter()
        .filter(|s| s.verb == "POST" && s.method == "server/discover")
        .count();
    assert!(
        discovers <= 1 + run.restarts.len(),
        "{discovers} discovers for {} restarts: {lines:#?}",
        run.restarts.len()
    );
    if !schedule.list_changed {
        assert!(
            !trail.iter().any(|s| s.method == "subscriptions/listen"),
            "a listen to a server that declares no listChanged: {lines:#?}"
        );
    }
    // Each call goes out at most twice (once, and a re-issue with a new id after a lost answer)
    // per life of the server; each send has an id of its own.
    let mut sends: HashMap<u64, Vec<&Step>> = HashMap::new();
    for step in trail.iter().filter(|s| s.verb == "POST") {
        if let Some(tag) = tag_of(step) {
            sends.entry(tag).or_default().push(step);
        }
    }
    for (tag, sent) in &sends {
        assert!(
            sent.len() <= 2 * (1 + run.restarts.len()),
            "call {tag} sent {} times: {lines:#?}",
            sent.len()
        );
        // A modern re-issue takes a new id (2026-07-28 "Streamable HTTP"); a resend on a new
        // legacy session may keep its id, since ids are scoped to a session.
        let stateless: Vec<String> = sent
            .iter()
            .filter(|s| !s.session)
            .map(|s| s.id.to_string())
            .collect();
        let mut ids = stateless.clone();
        ids.sort();
        ids.dedup();
        assert_eq!(
            ids.len(),
            stateless.len(),
            "call {tag} re-used an id: {lines:#?}"
        );
    }
    let quiet = run.restarts.is_empty();
    let shut_down = ToolError {
        kind: ToolErrorKind::Transport,
        message: "the call to server \"m\" was stopped because the mcp Pack was shut down".into(),
    };
    for (tag, (tool, end)) in &run.calls {
        let sent = sends.get(tag).map_or(0, Vec::len);
        match end {
            // Still running when the Pack was dropped: stopped, with the reason that says so.
            Ended::Resolved(Err(error)) if *error == shut_down => {}
            Ended::Resolved(outcome) if quiet => {
                let echo = format!("echo {tool} {}", json!({"tag": tag}));
                match *tool {
                    "echo" | "sse" | "hold" => {
                        assert_eq!(outcome.as_ref(), Ok(&echo), "call {tag}: {lines:#?}");
                        assert_eq!(sent, 1, "call {tag}: {lines:#?}");
                    }
                    "cut_first" => {
                        // Only the first call of the tool is cut; it is re-issued once.
                        assert_eq!(outcome.as_ref(), Ok(&echo), "call {tag}: {lines:#?}");
                        assert!(sent <= 2, "call {tag}: {lines:#?}");
                    }
                    _ => {
                        let error = outcome.as_ref().expect_err("a stream that always breaks");
                        assert_eq!(error.kind, ToolErrorKind::Transport, "{error:?}");
                        assert_eq!(sent, 2, "call {tag} re-issued once: {lines:#?}");
                    }
                }
            }
            Ended::Dropped if quiet && *tool == "hold" && sent == 1 => {
                // A held call dropped well before its answer was due: its response stream was
                // closed (the modern cancellation; nothing else is sent).
                let Op::Call {
                    drop_after: Some(after),
                    ..
                } = schedule.ops[*tag as usize]
                else {
                    unreachable!("a dropped call has a drop time")
                };
                if Duration::from_millis(after + 100) < HOLD {
                    let id = &sends[tag][0].id;
                    assert!(
                        trail
                            .iter()
                            .any(|s| s.verb == "CLOSED" && s.method == "tools/call" && s.id == *id),
                        "call {tag} dropped after {after} ms, its stream never closed: {lines:#?}"
                    );
                }
            }
            _ => {}
        }
    }
}

fn run_cases(cases: u32) {
    super::run_generated(cases, schedules(), run_schedule);
}

#[test]
fn generated_modern_schedules_keep_the_invariants() {
    run_cases(6);
}

#[test]
#[ignore = "long run; .ci/run step 'generated session schedules' runs it"]
fn generated_modern_schedules_keep_the_invariants_long() {
    run_cases(150);
}

/// The listen path of the model, pinned: a change announced, the stream dropped, a change made
/// while no stream is open; both added tools are listed in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_while_the_listen_stream_is_down_is_listed() {
    run_schedule(Schedule {
        start: Era::Modern,
        list_changed: true,
        ops: vec![
            Op::AddTool,
            Op::Wait(100),
            Op::DropListens,
            Op::AddTool,
            Op::Call {
                tool: 0,
                drop_after: None,
            },
        ],
        wait_before_drop: 0,
    })
    .await;
}

/// The cancellation path of the model, pinned: a held call dropped after 50 ms closes its
/// stream, and a call cut once is re-issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_held_call_closes_its_stream_and_a_cut_call_is_reissued() {
    run_schedule(Schedule {
        start: Era::Dual,
        list_changed: false,
        ops: vec![
            Op::Call {
                tool: 2,
                drop_after: Some(50),
            },
            Op::Call {
                tool: 3,
                drop_after: None,
            },
            Op::Call {
                tool: 4,
                drop_after: None,
            },
            Op::Wait(400),
        ],
        wait_before_drop: 0,
    })
    .await;
}
