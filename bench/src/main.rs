//! Benchmarks of `plugin-mcp` side by side with the official Rust SDK's client (`rmcp`), on the
//! same `rmcp` servers in the same run, with the physical floors measured alongside.
//!
//! `cargo run --release -p bench` runs the full set (a few minutes); `-- --smoke` a reduced one
//! (under a minute). The last line printed is one JSON object with every ratio (`m1` … `m8`,
//! `m7b`, `scrub`).
//! See `BENCHMARKS.md` for what each metric measures and what it means for a user.
//!
//! Layout: the servers run on their own thread (a current-thread Tokio runtime); every client —
//! ours (through the runvil Host contract, exactly as a Host would), rmcp's, and the raw
//! `reqwest` floors — runs on the main thread on another current-thread runtime, so a client's
//! CPU time is that thread's CPU time. Contenders are interleaved in rounds (the starting
//! contender rotates each round), the first round is discarded, and every loop is bounded in
//! count and in time.
//!
//! Modules: `servers` (the rmcp servers under test), `contenders` (ours, rmcp's clients, the
//! floor), `metrics` (allocator, CPU time, histograms, rounds), `report` (plan, rows, summary);
//! this file runs the sections.

mod catalog;
mod contenders;
mod metrics;
mod report;
mod search;
mod servers;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use rmcp::model::{CallToolRequestParams, ListToolsResult};
use serde_json::{Value, json};

use contenders::*;
use metrics::*;
use report::*;
use servers::*;

/// How many `call_dynamic_tool` calls M7 has in flight at once (and M7b makes per burst).
const M7_CONCURRENT: usize = 256;

/// The most calls M7b's caller keeps in flight at once.
const M7B_IN_FLIGHT: usize = 32;

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let mut plan = if smoke { Plan::smoke() } else { Plan::full() };
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--only") {
        plan.only = args
            .get(i + 1)
            .map(|o| o.split(',').map(str::to_string).collect());
    }
    if args.iter().any(|a| a == "--probe-client-build") {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..3 {
                let t = Instant::now();
                let c = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .tcp_nodelay(true)
                    .build()
                    .unwrap();
                eprintln!("reqwest::Client build: {:?}", t.elapsed());
                drop(c);
                let t = Instant::now();
                let c = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .tcp_nodelay(true)
                    .tls_certs_only(std::iter::empty())
                    .build()
                    .unwrap();
                eprintln!(
                    "reqwest::Client build, tls_certs_only([]): {:?}",
                    t.elapsed()
                );
                drop(c);
            }
        });
        return;
    }
    let started = Instant::now();
    let addrs = start_servers();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let mut rows: Vec<Row> = vec![];
    let mut summary = serde_json::Map::new();
    rt.block_on(run(&plan, &addrs, &mut rows, &mut summary));

    println!(
        "plugin-mcp vs rmcp 3.11.0 — {} mode, {:.0} s, listing of the 50 tools: {} bytes",
        if smoke { "smoke" } else { "full" },
        started.elapsed().as_secs_f64(),
        addrs.listing_bytes
    );
    println!("| metric | contender | p50 | p99 | notes |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.metric, r.what, r.p50, r.p99, r.extra
        );
    }
    println!("{}", Value::Object(summary));
    // The server thread runs forever; leave without waiting for it.
    std::process::exit(0);
}

async fn run(
    plan: &Plan,
    addrs: &Addrs,
    rows: &mut Vec<Row>,
    summary: &mut serde_json::Map<String, Value>,
) {
    let url = format!("http://{}/mcp", addrs.nodelay);
    let plain_url = format!("http://{}/mcp", addrs.plain);
    let sum_args = json!({"a": 1, "b": 2});
    let sum_map = sum_args.as_object().unwrap().clone();
    let url_ref = &url;
    let eight: Value = (0..8)
        .map(|i| (format!("s{i}"), json!({"url": url})))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let mut rmcp_version = String::new();
    // The version the Pack speaks with the bench servers (the namespace listing's
    // `protocolVersion`), read by the argument-check section.
    let mut ours_version = String::new();
    let mut m6_plain = serde_json::Map::new();

    if plan.runs("m1") {
        // ---- M1 + M5: warm call_dynamic_tool round trip, one in flight; client CPU per call.
        eprintln!("M1/M5: warm round trips ...");
        // Every contender speaks 2025-11-25 on one session (`/legacy` refuses 2026-07-28):
        // the floor is a raw POST of that era, so the ratio is the client's cost, not the
        // difference between the server's two eras (M1 modern measures the other path).
        let legacy_url = format!("http://{}/legacy", addrs.nodelay);
        let pack = our_pack(json!({"s": {"url": legacy_url}, "p": {"url": plain_url}}));
        wait_ready(pack.as_ref(), 2, Duration::from_secs(10)).await;
        let rd = rmcp_default(&legacy_url).await;
        let rp = rmcp_pooled(&legacy_url).await;
        let floor = Floor::new(&legacy_url).await;
        let listing = pack
            .call("mcp/get_dynamic_tools", json!({"namespace": "s"}))
            .await
            .expect("listing");
        let listing: Value = serde_json::from_str(&listing).expect("the listing is JSON");
        ours_version = format!(
            "{} (M1)",
            listing["protocolVersion"].as_str().unwrap_or_default()
        );
        rmcp_version = rd
            .peer_info()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        let ours_call = |ns: &'static str| {
            let pack = &pack;
            let args = json!({"namespace": ns, "toolName": "sum", "arguments": sum_args});
            move || {
                let args = args.clone();
                async move {
                    let text = pack.call("mcp/call_dynamic_tool", args).await.expect("sum");
                    assert_eq!(text, "3");
                }
            }
        };
        let rmcp_call = |client: &'static RmcpClient| {
            let map = sum_map.clone();
            move || {
                let params = CallToolRequestParams::new("sum").with_arguments(map.clone());
                async move {
                    let r = client.call_tool(params).await.expect("sum");
                    assert!(r.is_error != Some(true));
                }
            }
        };
        // Leaked so the closures can borrow them for 'static; they live to the end anyway.
        let rd: &'static RmcpClient = Box::leak(Box::new(rd));
        let rp: &'static RmcpClient = Box::leak(Box::new(rp));
        let floor: &'static Floor = Box::leak(Box::new(floor));
        let floor_call = || {
            let body = floor.call_body("sum", &sum_args);
            async move {
                let b = floor.post(body).await;
                assert!(!b.is_empty());
            }
        };
        let mut m1 = [
            Series::new("ours"),
            Series::new("rmcp default (from_uri)"),
            Series::new("rmcp pooled reqwest::Client"),
            Series::new("floor: raw reqwest POST"),
        ];
        let n = plan.m1_calls;
        rounds(&mut m1, plan.m1_rounds, plan.budget, async |c, d| match c {
            0 => block(n, d, false, ours_call("s")).await,
            1 => block(n, d, false, rmcp_call(rd)).await,
            2 => block(n, d, false, rmcp_call(rp)).await,
            _ => block(n, d, false, floor_call).await,
        })
        .await;
        let (v_rd, v_rp, v_fl) = (
            ratio(&m1[0], &m1[1]),
            ratio(&m1[0], &m1[2]),
            ratio(&m1[0], &m1[3]),
        );
        rows.push(row(
            "M1 warm call",
            &m1[0],
            false,
            format!("÷ rmcp default {v_rd:.2}, ÷ rmcp pooled {v_rp:.2}, ÷ floor {v_fl:.2}"),
        ));
        for s in &m1[1..] {
            rows.push(row("M1 warm call", s, false, String::new()));
        }
        summary.insert(
            "m1".into(),
            json!({"vs_rmcp": r2(v_rd), "vs_rmcp_pooled": r2(v_rp), "vs_floor": r2(v_fl)}),
        );
        let cpu = cpu_ratio(&m1[0], &m1[1]);
        let cpu_p = cpu_ratio(&m1[0], &m1[2]);
        rows.push(Row {
            metric: "M5 client CPU/call".into(),
            what: "ours / rmcp default / rmcp pooled / floor".into(),
            p50: format!(
                "{:.1} / {:.1} / {:.1} / {:.1} µs",
                m1[0].cpu_us(),
                m1[1].cpu_us(),
                m1[2].cpu_us(),
                m1[3].cpu_us()
            ),
            p99: "—".into(),
            extra: format!(
                "ours ÷ rmcp default {cpu:.2}, ÷ rmcp pooled {cpu_p:.2}, ÷ floor {:.2}",
                cpu_ratio(&m1[0], &m1[3])
            ),
        });
        summary.insert(
        "m5".into(),
        json!({"vs_rmcp": r2(cpu), "vs_rmcp_pooled": r2(cpu_p), "vs_floor": r2(cpu_ratio(&m1[0], &m1[3])), "ours_us": r2(m1[0].cpu_us())}),
    );

        // ---- M6 (second half): M1 against the server without TCP_NODELAY.
        eprintln!("M6: round trips against the no-nodelay server ...");
        let rdp: &'static RmcpClient = Box::leak(Box::new(rmcp_default(&plain_url).await));
        let rpp: &'static RmcpClient = Box::leak(Box::new(rmcp_pooled(&plain_url).await));
        let mut plain = [
            Series::new("ours (no-nodelay server)"),
            Series::new("rmcp default (no-nodelay server)"),
            Series::new("rmcp pooled (no-nodelay server)"),
        ];
        let n = plan.m6_plain_calls;
        rounds(
            &mut plain,
            plan.m6_plain_rounds,
            plan.budget,
            async |c, d| match c {
                0 => block(n, d, false, ours_call("p")).await,
                1 => block(n, d, false, rmcp_call(rdp)).await,
                _ => block(n, d, false, rmcp_call(rpp)).await,
            },
        )
        .await;
        for s in &plain {
            rows.push(row("M6 call, no-nodelay server", s, false, String::new()));
        }
        let p99_plain = plain[0].p99_us();
        m6_plain.insert("p99_plain_us".into(), r2(p99_plain));
        m6_plain.insert(
            "p99_plain_vs_nodelay".into(),
            r2(p99_plain / m1[0].p99_us()),
        );
        m6_plain.insert(
            "p99_plain_vs_rmcp_pooled".into(),
            r2(p99_plain / plain[2].p99_us()),
        );
        drop(pack);
    }

    if plan.runs("m1modern") {
        // ---- M1 on the modern path: ours (which speaks 2026-07-28 with this server) ÷ raw
        // reqwest POSTs of the same stateless request.
        eprintln!("M1 modern: warm round trips vs the modern floor ...");
        let pack = our_pack(json!({"s": {"url": url}}));
        wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
        let floor = ModernFloor::new(&url);
        let floor = &floor;
        let pack = &pack;
        let args = json!({"namespace": "s", "toolName": "sum", "arguments": sum_args});
        let sum_args = &sum_args;
        let mut m1m = [
            Series::new("ours, 2026-07-28"),
            Series::new("floor: raw reqwest POST, 2026-07-28 stateless"),
        ];
        let n = plan.m1_calls;
        rounds(
            &mut m1m,
            plan.m1_rounds,
            plan.budget,
            async |c, d| match c {
                0 => {
                    block(n, d, false, || {
                        let args = args.clone();
                        async move {
                            let text = pack.call("mcp/call_dynamic_tool", args).await.expect("sum");
                            assert_eq!(text, "3");
                        }
                    })
                    .await
                }
                _ => {
                    block(n, d, false, || async move {
                        let body = floor.call("sum", sum_args).await;
                        assert!(memfind(&body, b"\"result\"").is_some());
                    })
                    .await
                }
            },
        )
        .await;
        let v = ratio(&m1m[0], &m1m[1]);
        rows.push(row(
            "M1 modern path",
            &m1m[0],
            false,
            format!("÷ floor {v:.2}"),
        ));
        rows.push(row("M1 modern path", &m1m[1], false, String::new()));
        if let Some(Value::Object(m1)) = summary.get_mut("m1") {
            m1.insert("modern_vs_floor".into(), r2(v));
        } else {
            summary.insert("m1".into(), json!({"modern_vs_floor": r2(v)}));
        }
    }

    if plan.runs("check") {
        // ---- The argument check's cost: M1 of a tool with a typical inputSchema ÷ M1 of the
        // same tool whose schema is only {"type": "object"}, same arguments, same server.
        eprintln!("check: warm round trips, typed vs open schema ...");
        let checked_url = format!("http://{}/checked", addrs.nodelay);
        let pack = our_pack(json!({"c": {"url": checked_url}}));
        wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
        let listing = pack
            .call("mcp/get_dynamic_tools", json!({"namespace": "c"}))
            .await
            .expect("listing");
        let listing: Value = serde_json::from_str(&listing).expect("the listing is JSON");
        if ours_version.is_empty() {
            ours_version = format!(
                "{} (check)",
                listing["protocolVersion"].as_str().unwrap_or_default()
            );
        }
        let arguments = json!({"owner": "acme", "a": 1, "b": 2, "state": "open",
                               "labels": ["bug", "p1"], "perPage": 30});
        let checked_call = |tool: &'static str| {
            let pack = &pack;
            let args = json!({"namespace": "c", "toolName": tool, "arguments": arguments});
            move || {
                let args = args.clone();
                async move {
                    let text = pack.call("mcp/call_dynamic_tool", args).await.expect("sum");
                    assert_eq!(text, "3");
                }
            }
        };
        let mut check = [
            Series::new("ours, typical inputSchema (checked)"),
            Series::new("ours, inputSchema {\"type\":\"object\"}"),
        ];
        let n = plan.m1_calls;
        rounds(
            &mut check,
            plan.m1_rounds,
            plan.budget,
            async |c, d| match c {
                0 => block(n, d, false, checked_call("sum_typed")).await,
                _ => block(n, d, false, checked_call("sum_open")).await,
            },
        )
        .await;
        let v = ratio(&check[0], &check[1]);
        let cpu = cpu_ratio(&check[0], &check[1]);
        rows.push(row(
            "M1 argument check",
            &check[0],
            false,
            format!(
                "÷ open schema {v:.2}; client CPU/call {:.1} vs {:.1} µs (÷ {cpu:.2})",
                check[0].cpu_us(),
                check[1].cpu_us()
            ),
        ));
        rows.push(row("M1 argument check", &check[1], false, String::new()));
        summary.insert(
            "check".into(),
            json!({"typed_vs_open": r2(v), "cpu_typed_vs_open": r2(cpu)}),
        );
        drop(pack);
    }

    if plan.runs("m8") {
        // ---- M8: cold start to ready by era: construct → `ready` against the same rmcp server
        // code serving 2026-07-28 (/mcp: server/discover + tools/list) and serving only the 2025
        // versions (/legacy: the probe refused with -32022, then initialize +
        // notifications/initialized + tools/list), beside rmcp's client (connect + list_tools).
        eprintln!("M8: cold start by era ...");
        let legacy_url = format!("http://{}/legacy", addrs.nodelay);
        let legacy_ref = &legacy_url;
        let mut m8 = [
            Series::new("ours, modern server: construct → ready"),
            Series::new("ours, legacy-only server: construct → ready"),
            Series::new("rmcp pooled: connect + list_tools"),
            Series::new("floor: new reqwest::Client, server/discover + tools/list"),
        ];
        let n = plan.m2_starts;
        let mut versions = [String::new(), String::new()];
        // Starts and the TCP connections the server accepted during their timed parts, per
        // contender, over every round (round 0 included). (No CPU time here: `wait_ready` spins
        // on the client thread, so ours would count its wait as CPU.)
        let opened = [const { std::cell::Cell::new((0usize, 0usize)) }; 4];
        let opened = &opened;
        // Ends a start's timed part: its wall time and the connections accepted meanwhile.
        let stop = |b: &mut Block, c: usize, start: Instant, accepted: usize| {
            b.samples.push(start.elapsed().as_nanos() as u64);
            let (starts, conns) = opened[c].get();
            let now = NODELAY_ACCEPTED.load(Ordering::Relaxed) - accepted;
            opened[c].set((starts + 1, conns + now));
        };
        rounds(&mut m8, plan.m2_rounds, plan.budget, async |c, d| {
            let mut b = Block::default();
            let cpu = thread_cpu_ns();
            for _ in 0..n {
                let accepted = NODELAY_ACCEPTED.load(Ordering::Relaxed);
                let start = Instant::now();
                if c < 2 {
                    let at = if c == 0 { url_ref } else { legacy_ref };
                    let pack = our_pack(json!({"s": {"url": at}}));
                    wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
                    stop(&mut b, c, start, accepted);
                    if versions[c].is_empty() {
                        let listing = pack
                            .call("mcp/get_dynamic_tools", json!({"namespace": "s"}))
                            .await
                            .expect("listing");
                        let listing: Value = serde_json::from_str(&listing).expect("JSON");
                        versions[c] = listing["protocolVersion"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                    }
                    drop(pack);
                } else if c == 2 {
                    let client = rmcp_pooled(url_ref).await;
                    let tools = client.list_tools(None).await.expect("list_tools");
                    assert_eq!(tools.tools.len(), 52);
                    stop(&mut b, c, start, accepted);
                    let _ = client.cancel().await;
                } else {
                    let listing = modern_start_floor(url_ref).await;
                    stop(&mut b, c, start, accepted);
                    assert!(memfind(&listing, b"\"name\":\"text\"").is_some());
                }
                // Let the goodbye (a legacy DELETE) finish outside the timed part.
                tokio::time::sleep(Duration::from_millis(2)).await;
                if Instant::now() > d {
                    break;
                }
            }
            b.cpu_ns = thread_cpu_ns() - cpu;
            b
        })
        .await;
        let v_legacy = ratio(&m8[0], &m8[1]);
        let v_rmcp = ratio(&m8[0], &m8[2]);
        let v_floor = ratio(&m8[0], &m8[3]);
        rows.push(row(
            "M8 cold start by era",
            &m8[0],
            true,
            format!(
                "÷ legacy {v_legacy:.2}, ÷ rmcp {v_rmcp:.2}, ÷ floor {v_floor:.2}; spoke {} / {}",
                versions[0], versions[1]
            ),
        ));
        let per_start = |c: usize| {
            let (starts, conns) = opened[c].get();
            conns as f64 / starts.max(1) as f64
        };
        let last = rows.len() - 1;
        rows[last].extra += &format!("; {:.1} connections/start", per_start(0));
        for (c, s) in m8.iter().enumerate().skip(1) {
            let note = format!("{:.1} connections/start", per_start(c));
            rows.push(row("M8 cold start by era", s, true, note));
        }
        summary.insert(
            "m8".into(),
            json!({"modern_vs_legacy": r2(v_legacy), "modern_vs_rmcp": r2(v_rmcp),
                   "modern_vs_floor": r2(v_floor)}),
        );
    }

    if plan.runs("m2") {
        // ---- M2: one server's start (initialize + tools/list, decoded into the registry) vs rmcp
        // connect + list_tools.
        eprintln!("M2: one server's start ...");
        let mut m2 = [
            Series::new("ours: construct → ready (1 server)"),
            Series::new("rmcp default: connect + list_tools"),
            Series::new("rmcp pooled: connect + list_tools"),
        ];
        let n = plan.m2_starts;
        rounds(&mut m2, plan.m2_rounds, plan.budget, async |c, d| {
            let mut b = Block::default();
            let cpu = thread_cpu_ns();
            for _ in 0..n {
                let start = Instant::now();
                match c {
                    0 => {
                        let pack = our_pack(json!({"s": {"url": url_ref}}));
                        wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
                        b.samples.push(start.elapsed().as_nanos() as u64);
                        drop(pack);
                    }
                    _ => {
                        let client = if c == 1 {
                            rmcp_default(url_ref).await
                        } else {
                            rmcp_pooled(url_ref).await
                        };
                        let tools = client.list_tools(None).await.expect("list_tools");
                        assert_eq!(tools.tools.len(), 52);
                        b.samples.push(start.elapsed().as_nanos() as u64);
                        let _ = client.cancel().await;
                    }
                }
                // Let the goodbye (DELETE) finish outside the timed part.
                tokio::time::sleep(Duration::from_millis(2)).await;
                if Instant::now() > d {
                    break;
                }
            }
            b.cpu_ns = thread_cpu_ns() - cpu;
            b
        })
        .await;
        let v2 = ratio(&m2[0], &m2[1]);
        let v2p = ratio(&m2[0], &m2[2]);
        rows.push(row(
            "M2 start + tools/list",
            &m2[0],
            true,
            format!("÷ rmcp default {v2:.2}, ÷ rmcp pooled {v2p:.2}"),
        ));
        rows.push(row("M2 start + tools/list", &m2[1], true, String::new()));
        rows.push(row("M2 start + tools/list", &m2[2], true, String::new()));

        // M2 decode-only, on the bytes of a real tools/list result.
        let list_floor = Floor::new(&url).await;
        let sse = list_floor
            .post(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{}}"#,
            ))
            .await;
        let result_text = extract_result(&sse);
        let mut dec = [
            Series::new("decode: ours (borrowed WireTool → Tool)"),
            Series::new("decode: serde IgnoredAny"),
            Series::new("decode: rmcp ListToolsResult"),
        ];
        let n = plan.m2_decodes;
        let text = result_text.as_str();
        rounds(
            &mut dec,
            plan.m2_rounds,
            plan.budget,
            async |c, d| match c {
                0 => {
                    block(n, d, false, || async {
                        let tools = decode_like_ours(text);
                        assert_eq!(tools.len(), 52);
                        std::hint::black_box(tools);
                    })
                    .await
                }
                1 => {
                    block(n, d, false, || async {
                        let v: serde::de::IgnoredAny = serde_json::from_str(text).unwrap();
                        std::hint::black_box(v);
                    })
                    .await
                }
                _ => {
                    block(n, d, false, || async {
                        let v: ListToolsResult = serde_json::from_str(text).unwrap();
                        std::hint::black_box(v);
                    })
                    .await
                }
            },
        )
        .await;
        let vd = ratio(&dec[0], &dec[1]);
        let vdr = ratio(&dec[0], &dec[2]);
        for s in &dec {
            rows.push(row(
                "M2 decode only",
                s,
                false,
                if s.name.contains("ours") {
                    format!(
                        "÷ IgnoredAny {vd:.2}, ÷ rmcp decode {vdr:.2} ({} bytes)",
                        text.len()
                    )
                } else {
                    String::new()
                },
            ));
        }
        summary.insert(
        "m2".into(),
        json!({"vs_rmcp": r2(v2), "vs_rmcp_pooled": r2(v2p), "decode_vs_ignored": r2(vd), "decode_vs_rmcp_decode": r2(vdr)}),
    );
    }

    if plan.runs("m3") {
        // ---- M3: cold start of 8 servers to all ready vs 8 concurrent rmcp clients.
        eprintln!("M3: cold start of 8 servers ...");
        let mut m3 = [
            Series::new("ours: construct → 8 ready"),
            Series::new("rmcp default: 8 × connect + list_tools (JoinSet)"),
        ];
        let n = plan.m3_starts;
        rounds(&mut m3, plan.m3_rounds, plan.budget, async |c, d| {
            let mut b = Block::default();
            for _ in 0..n {
                let start = Instant::now();
                if c == 0 {
                    let pack = our_pack(eight.clone());
                    wait_ready(pack.as_ref(), 8, Duration::from_secs(10)).await;
                    b.samples.push(start.elapsed().as_nanos() as u64);
                    drop(pack);
                } else {
                    let mut set = tokio::task::JoinSet::new();
                    for _ in 0..8 {
                        let url = url_ref.clone();
                        set.spawn(async move {
                            let client = rmcp_default(&url).await;
                            let tools = client.list_tools(None).await.expect("list_tools");
                            assert_eq!(tools.tools.len(), 52);
                            client
                        });
                    }
                    let clients = set.join_all().await;
                    b.samples.push(start.elapsed().as_nanos() as u64);
                    for client in clients {
                        let _ = client.cancel().await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                if Instant::now() > d {
                    break;
                }
            }
            b
        })
        .await;
        let v3 = ratio(&m3[0], &m3[1]);
        rows.push(row(
            "M3 cold start ×8",
            &m3[0],
            true,
            format!("÷ rmcp {v3:.2}"),
        ));
        rows.push(row("M3 cold start ×8", &m3[1], true, String::new()));
        summary.insert("m3".into(), json!({"vs_rmcp": r2(v3)}));
    }

    if plan.runs("m6") {
        // ---- M6 (first half): get_dynamic_tools render for 8 servers × 52 tools.
        eprintln!("M6: render ...");
        let pack8 = our_pack(eight.clone());
        wait_ready(pack8.as_ref(), 8, Duration::from_secs(10)).await;
        let all = pack8
            .call("mcp/get_dynamic_tools", json!({}))
            .await
            .unwrap();
        let one = pack8
            .call("mcp/get_dynamic_tools", json!({"namespace": "s3"}))
            .await
            .unwrap();
        let mut m6 = [
            Series::new("render: get_dynamic_tools {} (8 × 52 names)"),
            Series::new("floor: copy of the same bytes"),
            Series::new("render: get_dynamic_tools {namespace} (52 tools + schemas)"),
            Series::new("floor: copy of the same bytes "),
        ];
        let n = plan.m6_renders / 10;
        let (all_ref, one_ref, p8) = (&all, &one, pack8.as_ref());
        rounds(&mut m6, 11, plan.budget, async |c, d| match c {
            0 => {
                block(n, d, false, || async {
                    let s = p8.call("mcp/get_dynamic_tools", json!({})).await.unwrap();
                    std::hint::black_box(s);
                })
                .await
            }
            1 => {
                block(n, d, false, || async {
                    std::hint::black_box(std::hint::black_box(all_ref).clone());
                })
                .await
            }
            2 => {
                block(n, d, false, || async {
                    let s = p8
                        .call("mcp/get_dynamic_tools", json!({"namespace": "s3"}))
                        .await
                        .unwrap();
                    std::hint::black_box(s);
                })
                .await
            }
            _ => {
                block(n, d, false, || async {
                    std::hint::black_box(std::hint::black_box(one_ref).clone());
                })
                .await
            }
        })
        .await;
        // Each measured render, then its floor (a clone of the same bytes).
        for (at, bytes) in [(0, all.len()), (2, one.len())] {
            let (measured, floor) = (&m6[at], &m6[at + 1]);
            let note = format!("{bytes} bytes; ÷ floor {:.1}", ratio(measured, floor));
            rows.push(row("M6 render", measured, false, note));
            rows.push(row("M6 render", floor, false, String::new()));
        }
        summary.insert(
            "m6".into(),
            json!({
                "render_us": r2(m6[0].p50_us()),
                "render_vs_floor": r2(ratio(&m6[0], &m6[1])),
                "render_namespace_us": r2(m6[2].p50_us()),
            }),
        );
        drop(pack8);
    }

    if plan.runs("m4") {
        // ---- Connection-reuse policies, measured with raw reqwest on both servers.
        if plan.runs("policy") {
            eprintln!("policy: connection reuse ...");
            for (server, addr) in [("nodelay", addrs.nodelay), ("no-nodelay", addrs.plain)] {
                let u = format!("http://{addr}/mcp");
                let pooled = Floor::new(&u).await;
                let fresh = Floor::with_pool(&u, false).await;
                let (pooled, fresh, sa) = (&pooled, &fresh, &sum_args);
                let mut s = [
                    Series::new(format!("{server}: pooled, read to end")),
                    Series::new(format!("{server}: new connection per call")),
                    Series::new(format!("{server}: pooled, stop at answer, drop rest")),
                    Series::new(format!(
                        "{server}: pooled, stop at answer, drain rest in a task"
                    )),
                ];
                let n = plan.m6_plain_calls / 2;
                rounds(
                    &mut s,
                    plan.m6_plain_rounds,
                    plan.budget,
                    async |c, d| match c {
                        0 => {
                            block(n, d, false, || async {
                                pooled.post(pooled.call_body("sum", sa)).await;
                            })
                            .await
                        }
                        1 => {
                            block(n, d, false, || async {
                                fresh.post(fresh.call_body("sum", sa)).await;
                            })
                            .await
                        }
                        2 => {
                            block(n, d, false, || async {
                                pooled
                                    .post_until_answer(pooled.call_body("sum", sa), false)
                                    .await
                            })
                            .await
                        }
                        _ => {
                            block(n, d, false, || async {
                                pooled
                                    .post_until_answer(pooled.call_body("sum", sa), true)
                                    .await
                            })
                            .await
                        }
                    },
                )
                .await;
                for x in &s {
                    rows.push(row("policy (raw reqwest)", x, false, String::new()));
                }
            }
        }

        // ---- M4: one 8 MiB text result as one SSE event, in 1/16/64 KiB frames.
        eprintln!("M4: 8 MiB results ...");
        let mut m4 = serde_json::Map::new();
        let text_args = json!({"n": PAYLOAD});
        for (path, label) in [("f1k", "1k"), ("f16k", "16k"), ("f64k", "64k")] {
            let furl = format!("http://{}/{path}", addrs.nodelay);
            let pack = our_pack(json!({"f": {"url": furl}}));
            wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
            let rc = rmcp_default(&furl).await;
            let fl = Floor::new(&furl).await;
            let (p, rc, fl, ta) = (pack.as_ref(), &rc, &fl, &text_args);
            let mut s = [
                Series::new(format!("ours, {label} frames")),
                Series::new(format!("rmcp default, {label} frames")),
                Series::new(format!("floor: raw bytes(), {label} frames")),
            ];
            let n = plan.m4_calls;
            rounds(&mut s, plan.m4_rounds, plan.budget, async |c, d| match c {
                0 => {
                    block(n, d, true, || async {
                        let args = json!({"namespace": "f", "toolName": "text", "arguments": ta});
                        let t = p.call("mcp/call_dynamic_tool", args).await.expect("text");
                        assert_eq!(t.len(), PAYLOAD);
                    })
                    .await
                }
                1 => {
                    block(n, d, true, || async {
                        let params = CallToolRequestParams::new("text")
                            .with_arguments(ta.as_object().unwrap().clone());
                        let r = rc.call_tool(params).await.expect("text");
                        assert_eq!(r.content.len(), 1);
                    })
                    .await
                }
                _ => {
                    block(n, d, true, || async {
                        let b = fl.post(fl.call_body("text", ta)).await;
                        assert!(b.len() > PAYLOAD);
                    })
                    .await
                }
            })
            .await;
            let (vr, vf) = (ratio(&s[0], &s[1]), ratio(&s[0], &s[2]));
            let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
            rows.push(row(
                "M4 8 MiB result",
                &s[0],
                true,
                format!(
                    "÷ rmcp {vr:.2}, ÷ floor {vf:.2}; peak {:.1} MiB ({:.2}× payload)",
                    mib(s[0].peak),
                    s[0].peak as f64 / PAYLOAD as f64
                ),
            ));
            rows.push(row(
                "M4 8 MiB result",
                &s[1],
                true,
                format!("peak {:.1} MiB", mib(s[1].peak)),
            ));
            rows.push(row(
                "M4 8 MiB result",
                &s[2],
                true,
                format!("peak {:.1} MiB", mib(s[2].peak)),
            ));
            m4.insert(format!("vs_rmcp_{label}"), r2(vr));
            m4.insert(format!("vs_floor_{label}"), r2(vf));
            m4.insert(
                format!("mem_x_payload_{label}"),
                r2(s[0].peak as f64 / PAYLOAD as f64),
            );
            drop(pack);
            let _ = std::hint::black_box(rc);
        }
        summary.insert("m4".into(), Value::Object(m4));
    }

    if plan.runs("m7") {
        // ---- M7: 256 concurrent call_dynamic_tool calls on one (nodelay) server.
        eprintln!("M7: {M7_CONCURRENT} concurrent calls ...");
        let pack = our_pack(json!({"s": {"url": url}}));
        wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
        let pack = &pack;
        let rp: &'static RmcpClient = Box::leak(Box::new(rmcp_pooled(&url).await));
        let args = json!({"namespace": "s", "toolName": "sum", "arguments": sum_args});
        // The most TCP connections one burst of each contender made the server accept (a burst
        // has M7_CONCURRENT requests in flight at once).
        let most = [std::cell::Cell::new(0usize), std::cell::Cell::new(0usize)];
        let most = &most;
        let counted = |c: usize, before: usize| {
            let now = NODELAY_ACCEPTED.load(Ordering::Relaxed) - before;
            most[c].set(most[c].get().max(now));
        };
        let ours_burst = || {
            let calls =
                (0..M7_CONCURRENT).map(|_| pack.call("mcp/call_dynamic_tool", args.clone()));
            let before = NODELAY_ACCEPTED.load(Ordering::Relaxed);
            async move {
                for text in futures_util::future::join_all(calls).await {
                    assert_eq!(text.expect("sum"), "3");
                }
                counted(0, before);
            }
        };
        let rmcp_burst = || {
            let calls = (0..M7_CONCURRENT).map(|_| {
                rp.call_tool(CallToolRequestParams::new("sum").with_arguments(sum_map.clone()))
            });
            let before = NODELAY_ACCEPTED.load(Ordering::Relaxed);
            async move {
                for result in futures_util::future::join_all(calls).await {
                    assert!(result.expect("sum").is_error != Some(true));
                }
                counted(1, before);
            }
        };
        let mut m7 = [
            Series::new(format!("ours: {M7_CONCURRENT} concurrent calls")),
            Series::new(format!("rmcp pooled: {M7_CONCURRENT} concurrent calls")),
        ];
        // TCP connections each contender made the server accept, over all its bursts.
        let mut opened = [0usize; 2];
        let n = plan.m7_bursts;
        rounds(&mut m7, plan.m7_rounds, plan.budget, async |c, d| {
            let before = NODELAY_ACCEPTED.load(Ordering::Relaxed);
            let block = match c {
                0 => block(n, d, false, ours_burst).await,
                _ => block(n, d, false, rmcp_burst).await,
            };
            opened[c] += NODELAY_ACCEPTED.load(Ordering::Relaxed) - before;
            block
        })
        .await;
        let v7 = ratio(&m7[0], &m7[1]);
        rows.push(row(
            "M7 256 concurrent calls",
            &m7[0],
            true,
            format!(
                "÷ rmcp pooled {v7:.2}; {} TCP connections opened, at most {} in one burst",
                opened[0],
                most[0].get()
            ),
        ));
        rows.push(row(
            "M7 256 concurrent calls",
            &m7[1],
            true,
            format!(
                "{} TCP connections opened, at most {} in one burst",
                opened[1],
                most[1].get()
            ),
        ));
        summary.insert(
            "m7".into(),
            json!({"vs_rmcp_pooled": r2(v7), "connections": opened[0], "rmcp_pooled_connections": opened[1],
                   "most_in_one_burst": most[0].get(), "rmcp_most_in_one_burst": most[1].get(),
                   "in_flight": M7_CONCURRENT}),
        );
    }

    if plan.runs("m7b") {
        // ---- M7b: M7's 256 calls with the caller keeping at most M7B_IN_FLIGHT in flight, for
        // ours and rmcp pooled, in each era: wall time per burst and client CPU per call.
        eprintln!("M7b: {M7_CONCURRENT} calls, {M7B_IN_FLIGHT} in flight, both eras ...");
        let mut m7b = serde_json::Map::new();
        m7b.insert("in_flight".into(), json!(M7B_IN_FLIGHT));
        for (era, path) in [("modern", "mcp"), ("legacy", "legacy")] {
            let era_url = format!("http://{}/{path}", addrs.nodelay);
            let pack = our_pack(json!({"s": {"url": era_url}}));
            wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
            let rp = if era == "modern" {
                rmcp_pooled_modern(&era_url).await
            } else {
                rmcp_pooled(&era_url).await
            };
            let spoke = [spoken(pack.as_ref(), "s").await, peer_version(&rp)];
            let (pack, rp) = (pack.as_ref(), &rp);
            let args = json!({"namespace": "s", "toolName": "sum", "arguments": sum_args});
            let args = &args;
            let sum_map = &sum_map;
            let ours_burst = || {
                futures_util::stream::iter(0..M7_CONCURRENT)
                    .map(|_| pack.call("mcp/call_dynamic_tool", args.clone()))
                    .buffer_unordered(M7B_IN_FLIGHT)
                    .for_each(|text| {
                        assert_eq!(text.expect("sum"), "3");
                        std::future::ready(())
                    })
            };
            let rmcp_burst = || {
                futures_util::stream::iter(0..M7_CONCURRENT)
                    .map(|_| {
                        rp.call_tool(
                            CallToolRequestParams::new("sum").with_arguments(sum_map.clone()),
                        )
                    })
                    .buffer_unordered(M7B_IN_FLIGHT)
                    .for_each(|result| {
                        assert!(result.expect("sum").is_error != Some(true));
                        std::future::ready(())
                    })
            };
            let mut m = [
                Series::new(format!(
                    "ours, {era}: {M7_CONCURRENT} calls, {M7B_IN_FLIGHT} in flight"
                )),
                Series::new(format!(
                    "rmcp pooled, {era}: {M7_CONCURRENT} calls, {M7B_IN_FLIGHT} in flight"
                )),
            ];
            let mut opened = [0usize; 2];
            let n = plan.m7_bursts;
            rounds(&mut m, plan.m7_rounds, plan.budget, async |c, d| {
                let before = NODELAY_ACCEPTED.load(Ordering::Relaxed);
                let block = match c {
                    0 => block(n, d, false, ours_burst).await,
                    _ => block(n, d, false, rmcp_burst).await,
                };
                opened[c] += NODELAY_ACCEPTED.load(Ordering::Relaxed) - before;
                block
            })
            .await;
            let wall = ratio(&m[0], &m[1]);
            let cpu = cpu_ratio(&m[0], &m[1]);
            // A sample is a burst, so its CPU time is that of M7_CONCURRENT calls.
            let per_call = |s: &Series| s.cpu_us() / M7_CONCURRENT as f64;
            let metric = format!("M7b {M7_CONCURRENT} calls, {M7B_IN_FLIGHT} in flight");
            rows.push(row(
                &metric,
                &m[0],
                true,
                format!(
                    "÷ rmcp pooled {wall:.2}; client CPU/call {:.1} vs {:.1} µs (÷ {cpu:.2}); \
                     {} TCP connections opened; spoke {} / rmcp {}",
                    per_call(&m[0]),
                    per_call(&m[1]),
                    opened[0],
                    spoke[0],
                    spoke[1]
                ),
            ));
            rows.push(row(
                &metric,
                &m[1],
                true,
                format!("{} TCP connections opened", opened[1]),
            ));
            m7b.insert(format!("vs_rmcp_pooled_{era}"), r2(wall));
            m7b.insert(format!("cpu_vs_rmcp_pooled_{era}"), r2(cpu));
            m7b.insert(format!("ours_cpu_us_{era}"), r2(per_call(&m[0])));
            m7b.insert(format!("rmcp_cpu_us_{era}"), r2(per_call(&m[1])));
            m7b.insert(format!("connections_{era}"), json!(opened[0]));
            m7b.insert(format!("rmcp_connections_{era}"), json!(opened[1]));
        }
        summary.insert("m7b".into(), Value::Object(m7b));
    }

    if plan.runs("search") {
        // ---- search: recall beside plain BM25, answer size, CPU and index size at 10,000 tools.
        search::section(plan.search_rounds, rows, summary).await;
    }

    if plan.runs("scrub") {
        // ---- scrub: a 16 MiB result scrubbed of 64 configured secrets, ours vs the naive way.
        // Ours is the whole `Pack::call`, so its answer passes the Pack's exit gate too.
        eprintln!("scrub: a 16 MiB result with {SCRUB_SECRETS} secrets ...");
        let surl = format!("http://{}/scrub", addrs.nodelay);
        let headers: serde_json::Map<String, Value> = (0..SCRUB_SECRETS)
            .map(|i| (format!("x-bench-secret-{i:02}"), json!(scrub_secret(i))))
            .collect();
        let secret = our_pack(json!({"s": {"url": surl, "headers": headers}}));
        let plain = our_pack(json!({"s": {"url": surl}}));
        wait_ready(secret.as_ref(), 1, Duration::from_secs(10)).await;
        wait_ready(plain.as_ref(), 1, Duration::from_secs(10)).await;
        let forms: Vec<String> = (0..SCRUB_SECRETS)
            .flat_map(|i| secret_forms(&scrub_secret(i)))
            .collect();
        let args = json!({"namespace": "s", "toolName": "secrets_text", "arguments": {}});
        let (sp, pp, forms, args) = (secret.as_ref(), plain.as_ref(), &forms, &args);
        let mut s = [
            Series::new(format!(
                "ours: call through the exit gate, {SCRUB_SECRETS} secrets configured"
            )),
            Series::new("ours: call, no secrets (transport alone)"),
            Series::new(format!(
                "naive: call with no secrets + {} str::replace passes",
                forms.len()
            )),
        ];
        let n = plan.scrub_calls;
        rounds(
            &mut s,
            plan.scrub_rounds,
            plan.budget,
            async |c, d| match c {
                0 => {
                    block(n, d, false, || async {
                        let t = sp.call("mcp/call_dynamic_tool", args.clone()).await;
                        let t = t.expect("secrets_text");
                        assert_eq!(t.matches("[redacted]").count(), SCRUB_SECRETS);
                        std::hint::black_box(t);
                    })
                    .await
                }
                1 => {
                    block(n, d, false, || async {
                        let t = pp.call("mcp/call_dynamic_tool", args.clone()).await;
                        std::hint::black_box(t.expect("secrets_text"));
                    })
                    .await
                }
                _ => {
                    block(n, d, false, || async {
                        let t = pp.call("mcp/call_dynamic_tool", args.clone()).await;
                        let mut t = t.expect("secrets_text");
                        for form in forms {
                            t = t.replace(form.as_str(), "[redacted]");
                        }
                        assert_eq!(t.matches("[redacted]").count(), SCRUB_SECRETS);
                        std::hint::black_box(t);
                    })
                    .await
                }
            },
        )
        .await;
        let vs_naive = ratio(&s[0], &s[2]);
        let ms = |x: &Series| x.p50_us() / 1e3;
        // The scrub alone, estimated as the difference from the call without secrets.
        let (ours_scrub, naive_scrub) = (ms(&s[0]) - ms(&s[1]), ms(&s[2]) - ms(&s[1]));
        rows.push(row(
            "scrub 16 MiB × 64 secrets",
            &s[0],
            true,
            format!(
                "÷ naive {vs_naive:.3}; scrub alone ≈ {ours_scrub:.1} ms vs {naive_scrub:.1} ms"
            ),
        ));
        rows.push(row("scrub 16 MiB × 64 secrets", &s[1], true, String::new()));
        rows.push(row("scrub 16 MiB × 64 secrets", &s[2], true, String::new()));
        summary.insert(
            "scrub".into(),
            json!({
                "vs_naive": r2(vs_naive),
                "ours_ms": r2(ms(&s[0])),
                "transport_ms": r2(ms(&s[1])),
                "naive_ms": r2(ms(&s[2])),
            }),
        );
        drop(secret);
        drop(plain);
    }

    if let Some(Value::Object(m6)) = summary.get_mut("m6") {
        m6.extend(m6_plain);
    } else if !m6_plain.is_empty() {
        summary.insert("m6".into(), Value::Object(m6_plain));
    }
    // Keep key order m1..m7 for readers.
    let mut ordered = serde_json::Map::new();
    for k in [
        "m1", "check", "m2", "m3", "m4", "m5", "m6", "m7", "m7b", "m8", "search", "scrub",
    ] {
        if let Some(v) = summary.remove(k) {
            ordered.insert(k.into(), v);
        }
    }
    *summary = ordered;
    rows.push(Row {
        metric: "info".into(),
        what: format!("rmcp client negotiated protocol {rmcp_version}; ours {ours_version}"),
        p50: String::new(),
        p99: String::new(),
        extra: String::new(),
    });
}
