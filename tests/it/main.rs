//! The integration tests, one binary with one module per concern, each driving the Pack through
//! the `runvil-plugin` contract exactly as a Host would. The servers they talk to are in
//! [`support`], all on loopback.
//!
//! Filter by module: `cargo test --test it wire::`. The ignored tests are run by CI on purpose:
//! `cargo test --test it sessions:: -- --ignored` (the long generated schedules) and
//! `cargo test --test it interop:: -- --ignored` (real peers, installed by `.ci/interop-setup.sh`).

mod attack;
mod attack2;
mod attack3;
mod attack4;
mod attack5;
mod attack6;
mod bounds;
mod config;
mod dpop;
mod host_author;
mod host_logout;
mod hostile;
mod interop;
mod load;
mod machine;
mod modern;
mod pack;
mod redirects;
mod review;
mod rmcp_peer;
mod schemas;
mod secrets;
// The exit gate: one JSON-aware scrub of everything the Pack shows, and its property test.
mod secrets_gate;
mod sessions;
mod signin;
mod streams;
mod support;
mod wire;
