//! The integration tests, one binary with one module per behaviour, each driving the Pack through
//! the `runvil-plugin` contract exactly as a Host would. The servers they talk to are in
//! [`support`], all on loopback. To find where a behaviour is tested, read the line above its
//! `mod`; filter by module: `cargo test --test it listing::`.
//!
//! The ignored tests are run by CI on purpose: `cargo test --test it schedules:: -- --ignored`
//! (the long generated schedules; `.ci/run` step "generated session schedules") and
//! `cargo test --test it interop:: -- --ignored` (real peers installed by
//! `.ci/interop-setup.sh`; `.ci/interop.sh`). Two targets of their own share this binary's [`support`]:
//! tests/spans.rs (the request spans a `tracing` layer sees; a subscriber's interest is
//! process-wide, so log captures here would hide them) and tests/traces.rs (trace context and an
//! OpenTelemetry exporter, built only with `--features opentelemetry`: `.ci/run` step "traces").

// The Host's view: install, construct, the two tools, errors a model acts on, awaited shutdown.
mod host;
// The config as written: other clients' tool filters, placeholders, disabled entries.
mod config;
// Other clients' mcp.json keys: read, mapped or refused by name; notes; per-server timeouts.
mod dialects;
// The one reader of JSON text (config and server bodies): nesting bound, surrogates, repeated keys.
mod reader;
// Starting a server: `initialize` answers, refused connections, retries, lasting failures.
mod start;
// Listing and pagination: cursors, tool caps, malformed and omitted tools, `ttl`, relisting.
mod listing;
// Finding a tool: search by what it does, exact names first, batch lookup, bad arguments.
mod search;
// Call results and errors: schemas, `isError`, "Invalid params", odd or empty results.
mod results;
// Deadlines and bounds: start and call deadlines, body and event caps, background requests.
mod bounds;
// Protocol eras: `server/discover`, the modern era's headers and listen, fallbacks, re-probes.
mod eras;
// The wire: headers sent, versions, JSON and SSE replies, compression, redirects, HTTP errors.
mod wire;
// Sessions and cancellation: every request and cancel on its own session, renewals, reuse.
mod sessions;
// One verdict per answer: each session, era, resend and cancel rule on every path.
mod verdicts;
// Event streams: resumption, the standalone `GET` stream, server requests inside a call.
mod streams;
// Closing: the Pack's drop deletes every session, cancels before `DELETE`, bounded cleanup.
mod close;
// Rate limits' named waits on the paths that ask again on their own (the change stream's loop).
mod rate_waits;
// Generated schedules of calls, drops and restarts; the `_long` runs are `.ci/run`'s.
mod schedules;
// Load: a thousand concurrent calls, and half of 200 in-flight calls dropped.
mod load;
// Signing in (OAuth): the link, the browser, stored grants, refresh, step-up, host login.
mod signin;
// Signing in against what real authorization servers send: odd token answers, `iss`, logout.
mod signin_real_servers;
// Sign-in redirects and links, checked as received.
mod redirects;
// DPoP (RFC 9449): proofs, nonces and keys against hostile servers.
mod dpop;
// The Host-only requests `mcp/logout` and `mcp/sign_in_state`, never offered as tools.
mod host_logout;
// Secrets: no header, env value, token or proof in any output or log line.
mod secrets;
// The exit gate: every answer, error, listing and spec scrubbed once at the boundary, JSON kept valid.
mod secrets_gate;
// A real peer in-process: the official Rust SDK's (rmcp) Streamable HTTP server.
mod rmcp_peer;
// Real peers nobody here wrote (ignored; `.ci/interop.sh` runs them).
mod interop;
// Cancels and answers to server requests act on the verdict of their refusal.
mod background;
// What the tests share: the minimal Host and the fake servers, all on loopback.
mod support;
