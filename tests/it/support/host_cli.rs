//! The host example (`examples/host.rs`) run as a child process, as a person runs it: the binary
//! built beside this test binary, its sign-in store in a directory the test chose, no
//! `RUST_LOG`.

use std::path::{Path, PathBuf};
use std::process::Output;

/// `examples/host.rs` as built beside this test binary (`target/<profile>/examples/host`).
pub fn host_example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/host")
}

/// A command for [`host_example`] whose sign-in store (`PLUGIN_MCP_OAUTH_DIR`, README "Signing
/// in") is `store` and whose environment has no `RUST_LOG`; the caller adds the arguments.
pub fn host_command(store: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(host_example());
    command
        .env("PLUGIN_MCP_OAUTH_DIR", store)
        .env_remove("RUST_LOG");
    command
}

/// An exited child's exit code (`None` when a signal ended it) and its stderr as text.
pub fn code_and_stderr(out: &Output) -> (Option<i32>, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
