//! The search section: finding a tool by what it does (`get_dynamic_tools {"query": ...}`),
//! measured through the Pack exactly as a Host calls it, beside plain BM25 (over name + title +
//! description + parameter names, the method Codex's `tool_search` uses) on the same catalog.
//!
//! - recall@1/5/10 of both rankers on `data/queries.json` (user-phrased requests written
//!   before the ranker was tuned; even queries are the tuning half, odd ones the test half),
//!   over the 13 servers of `data/catalog.json` served on loopback;
//! - the size of a `limit: 10` answer (median over the queries);
//! - client CPU per search over 10,000 tools (10 servers of 1,000), p50 and p99;
//! - the index's bytes against the listing's own (`tools/list` results) bytes, read from the
//!   Pack's `search index built` debug event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

use crate::catalog;
use crate::contenders::{our_pack, wait_ready};
use crate::metrics::{median, thread_cpu_ns};
use crate::report::{Row, r2};

const QUERIES: &str = include_str!("../data/queries.json");

/// One server's `tools/list` result, as served.
struct Listed {
    tools: Value,
}

/// The tools of one catalog server as `tools/list` gives them, each parameter a described
/// string.
fn wire_tools(server: &Value) -> Vec<Value> {
    catalog::wire_tools(
        server,
        |p| json!({"type": "string", "description": format!("The {p}.")}),
    )
}

async fn mcp(State(listed): State<Arc<Listed>>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = request.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match request["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "catalog", "version": "1"}
        }),
        "tools/list" => json!({"tools": listed.tools}),
        _ => {
            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
            return ([("content-type", "application/json")], error.to_string()).into_response();
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    ([("content-type", "application/json")], answer.to_string()).into_response()
}

/// Serves each `(namespace, tools)` on its own loopback port from a thread of its own; returns
/// each namespace's url and the bytes of its `tools/list` result.
fn serve(servers: Vec<(String, Vec<Value>)>) -> Vec<(String, String, usize)> {
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut out = Vec::new();
            for (namespace, tools) in servers {
                let listing_bytes = json!({"tools": tools}).to_string().len();
                let listed = Arc::new(Listed {
                    tools: Value::Array(tools),
                });
                let app = Router::new()
                    .route(
                        "/mcp",
                        post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
                    )
                    .with_state(listed);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("http://{}/mcp", listener.local_addr().unwrap());
                tokio::spawn(async move { axum::serve(listener, app).await });
                out.push((namespace, url, listing_bytes));
            }
            sent.send(out).unwrap();
            std::future::pending::<()>().await;
        });
    });
    received.recv().unwrap()
}

/// The words plain BM25 reads: lowercase runs of letters and digits.
fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Plain BM25 (k1 1.2, b 0.75) over each tool's name, title, description and parameter names
/// as one bag of words: the baseline.
struct Bm25 {
    docs: Vec<(String, HashMap<String, f32>, f32)>,
    df: HashMap<String, f32>,
    average: f32,
}

impl Bm25 {
    fn new(catalog: &Value) -> Bm25 {
        let mut docs = Vec::new();
        let mut df: HashMap<String, f32> = HashMap::new();
        for server in catalog["servers"].as_array().unwrap() {
            let ns = server["namespace"].as_str().unwrap();
            for t in server["tools"].as_array().unwrap() {
                let mut words = plain_words(t["name"].as_str().unwrap());
                words.extend(plain_words(t["description"].as_str().unwrap()));
                for p in t["params"].as_array().unwrap() {
                    words.extend(plain_words(p.as_str().unwrap()));
                }
                let mut tf: HashMap<String, f32> = HashMap::new();
                for w in &words {
                    *tf.entry(w.clone()).or_default() += 1.0;
                }
                for w in tf.keys() {
                    *df.entry(w.clone()).or_default() += 1.0;
                }
                docs.push((
                    format!("{ns}/{}", t["name"].as_str().unwrap()),
                    tf,
                    words.len() as f32,
                ));
            }
        }
        let average = docs.iter().map(|d| d.2).sum::<f32>() / docs.len() as f32;
        Bm25 { docs, df, average }
    }

    fn rank(&self, query: &str, limit: usize) -> Vec<&str> {
        let n = self.docs.len() as f32;
        let words = plain_words(query);
        let mut scored: Vec<(f32, usize)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, (_, tf, len))| {
                let score = words
                    .iter()
                    .map(|w| {
                        let (Some(df), Some(f)) = (self.df.get(w), tf.get(w)) else {
                            return 0.0;
                        };
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len / self.average))
                    })
                    .sum::<f32>();
                (score, i)
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored
            .into_iter()
            .take(limit)
            .map(|(_, i)| self.docs[i].0.as_str())
            .collect()
    }
}

/// Records the `index_bytes` of each `search index built` event, by namespace.
struct IndexBytes(Arc<Mutex<HashMap<String, u64>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for IndexBytes {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            built: bool,
            namespace: Option<String>,
            bytes: Option<u64>,
        }
        impl tracing::field::Visit for Fields {
            fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
                if field.name() == "index_bytes" {
                    self.bytes = Some(value);
                }
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "namespace" {
                    self.namespace = Some(value.to_string());
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" && format!("{value:?}") == "search index built" {
                    self.built = true;
                }
            }
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let (true, Some(namespace), Some(bytes)) = (fields.built, fields.namespace, fields.bytes)
        {
            self.0.lock().unwrap().insert(namespace, bytes);
        }
    }
}

/// recall@1, @5 and @10 of `ranked` (per query, the `namespace/name`s in order) against the
/// expected answers.
fn recall(ranked: &[Vec<String>], expected: &[Vec<String>]) -> [f64; 3] {
    let mut hits = [0usize; 3];
    for (got, want) in ranked.iter().zip(expected) {
        let at = got.iter().position(|g| want.contains(g));
        for (k, cut) in [1, 5, 10].into_iter().enumerate() {
            if at.is_some_and(|p| p < cut) {
                hits[k] += 1;
            }
        }
    }
    hits.map(|h| h as f64 / ranked.len().max(1) as f64)
}

/// Runs the section: prints the recall table, adds the speed and size rows, and the summary's
/// `search` object.
pub(crate) async fn section(
    rounds: usize,
    rows: &mut Vec<Row>,
    summary: &mut serde_json::Map<String, Value>,
) {
    eprintln!("search: recall, answer size, speed at 10,000 tools ...");
    let catalog = catalog::catalog();
    let queries: Value = serde_json::from_str(QUERIES).unwrap();
    let queries = queries["queries"].as_array().unwrap();
    let servers: Vec<(String, Vec<Value>)> = catalog["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["namespace"].as_str().unwrap().to_string(), wire_tools(s)))
        .collect();
    // 10 servers of 1,000 tools each, made from the catalog's tools.
    let all_tools: Vec<Value> = servers.iter().flat_map(|(_, t)| t.clone()).collect();
    let big: Vec<(String, Vec<Value>)> = (0..10)
        .map(|s| {
            let tools = (0..1000)
                .map(|i| {
                    let mut tool = all_tools[(i + s * 37) % all_tools.len()].clone();
                    tool["name"] = json!(format!("{}_{s}_{i}", tool["name"].as_str().unwrap()));
                    let described = format!(
                        "{} Variant {i} of set {s}.",
                        tool["description"].as_str().unwrap()
                    );
                    tool["description"] = json!(described);
                    tool
                })
                .collect();
            (format!("big{s}"), tools)
        })
        .collect();

    let index_bytes = Arc::new(Mutex::new(HashMap::new()));
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry().with(IndexBytes(Arc::clone(&index_bytes))),
    );

    // Recall and answer size, over the 13 catalog servers.
    let served = serve(servers);
    let config: serde_json::Map<String, Value> = served
        .iter()
        .map(|(ns, url, _)| (ns.clone(), json!({"url": url})))
        .collect();
    let listing_bytes: usize = served.iter().map(|(_, _, b)| b).sum();
    let guard = tracing::dispatcher::set_default(&dispatch);
    let pack = our_pack(Value::Object(config));
    wait_ready(pack.as_ref(), served.len(), Duration::from_secs(30)).await;
    drop(guard);
    let catalog_index: u64 = index_bytes.lock().unwrap().values().sum();
    let bm25 = Bm25::new(&catalog);
    let mut ours = [Vec::new(), Vec::new()];
    let mut theirs = [Vec::new(), Vec::new()];
    let mut expected = [Vec::new(), Vec::new()];
    let mut sizes = Vec::new();
    let mut names_bytes = 0;
    for (i, q) in queries.iter().enumerate() {
        let text = q["q"].as_str().unwrap();
        let answer = pack
            .call("mcp/get_dynamic_tools", json!({"query": text, "limit": 10}))
            .await
            .expect("search");
        sizes.push(answer.len() as f64);
        let answer: Value = serde_json::from_str(&answer).unwrap();
        let got: Vec<String> = answer["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                )
            })
            .collect();
        let half = i % 2;
        ours[half].push(got);
        theirs[half].push(
            bm25.rank(text, 10)
                .into_iter()
                .map(str::to_string)
                .collect(),
        );
        expected[half].push(
            q["expect"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        );
    }
    if let Ok(listing) = pack.call("mcp/get_dynamic_tools", json!({})).await {
        names_bytes = listing.len();
    }
    drop(pack);

    println!(
        "Search recall on {} queries over {} tools of 13 servers (tuning half: even queries, test half: odd):",
        queries.len(),
        all_tools.len()
    );
    println!("| half | ranker | recall@1 | recall@5 | recall@10 |");
    println!("|---|---|---|---|---|");
    let mut table = serde_json::Map::new();
    let mut all_ours = Vec::new();
    let mut all_theirs = Vec::new();
    let mut all_expected = Vec::new();
    for (half, name) in [(0, "tuning"), (1, "test")] {
        let a = recall(&ours[half], &expected[half]);
        let b = recall(&theirs[half], &expected[half]);
        println!(
            "| {name} ({}) | ours | {:.2} | {:.2} | {:.2} |",
            ours[half].len(),
            a[0],
            a[1],
            a[2]
        );
        println!(
            "| {name} ({}) | plain BM25 | {:.2} | {:.2} | {:.2} |",
            ours[half].len(),
            b[0],
            b[1],
            b[2]
        );
        table.insert(
            name.to_string(),
            json!({"ours": a.map(r2), "bm25": b.map(r2)}),
        );
        all_ours.extend(ours[half].clone());
        all_theirs.extend(theirs[half].clone());
        all_expected.extend(expected[half].clone());
    }
    let a = recall(&all_ours, &all_expected);
    let b = recall(&all_theirs, &all_expected);
    println!(
        "| all ({}) | ours | {:.2} | {:.2} | {:.2} |",
        all_ours.len(),
        a[0],
        a[1],
        a[2]
    );
    println!(
        "| all ({}) | plain BM25 | {:.2} | {:.2} | {:.2} |",
        all_ours.len(),
        b[0],
        b[1],
        b[2]
    );
    println!(
        "recall@5 ours / BM25: {:.2}x; limit-10 answer median {:.0} bytes; names-only listing {} bytes; index {} bytes for {} listing bytes",
        a[1] / b[1].max(f64::MIN_POSITIVE),
        median(&mut sizes),
        names_bytes,
        catalog_index,
        listing_bytes
    );
    table.insert("all".into(), json!({"ours": a.map(r2), "bm25": b.map(r2)}));
    table.insert(
        "recall5_ratio".into(),
        r2(a[1] / b[1].max(f64::MIN_POSITIVE)),
    );
    table.insert("answer_bytes_p50".into(), r2(median(&mut sizes)));

    // Speed and index size at 10,000 tools.
    index_bytes.lock().unwrap().clear();
    let served = serve(big);
    let config: serde_json::Map<String, Value> = served
        .iter()
        .map(|(ns, url, _)| (ns.clone(), json!({"url": url})))
        .collect();
    let big_listing: usize = served.iter().map(|(_, _, b)| b).sum();
    let guard = tracing::dispatcher::set_default(&dispatch);
    let pack = our_pack(Value::Object(config));
    wait_ready(pack.as_ref(), served.len(), Duration::from_secs(60)).await;
    drop(guard);
    let big_index: u64 = index_bytes.lock().unwrap().values().sum();
    let mut cpu = Vec::new();
    for _ in 0..rounds {
        for q in queries {
            let args = json!({"query": q["q"], "limit": 10});
            let before = thread_cpu_ns();
            let answer = pack
                .call("mcp/get_dynamic_tools", args)
                .await
                .expect("search");
            cpu.push((thread_cpu_ns() - before) as f64 / 1e3);
            assert!(answer.starts_with("{\"query\""));
        }
    }
    drop(pack);
    cpu.sort_by(f64::total_cmp);
    let p50 = cpu[cpu.len() / 2];
    let p99 = cpu[(cpu.len() * 99 / 100).min(cpu.len() - 1)];
    rows.push(Row {
        metric: "S1 search, 10,000 tools".into(),
        what: "ours: client CPU per get_dynamic_tools {query, limit: 10}".into(),
        p50: format!("{p50:.1} µs"),
        p99: format!("{p99:.1} µs"),
        extra: format!(
            "target p50 <= 1 ms; index {big_index} bytes for {big_listing} listing bytes ({:.2}x; target <= 1x)",
            big_index as f64 / big_listing as f64
        ),
    });
    table.insert("cpu_us_p50_10k".into(), r2(p50));
    table.insert("cpu_us_p99_10k".into(), r2(p99));
    table.insert(
        "index_over_listing_10k".into(),
        r2(big_index as f64 / big_listing as f64),
    );
    table.insert(
        "index_over_listing_catalog".into(),
        r2(catalog_index as f64 / listing_bytes as f64),
    );
    summary.insert("search".into(), Value::Object(table));
}
