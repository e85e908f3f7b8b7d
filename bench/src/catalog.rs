//! The bench catalog (`bench/data/catalog.json`): tool sets modeled on public MCP servers, each
//! tool a name, a description and the names of its parameters. Read by the bench's search
//! section and by the integration tests of search (`tests/it/support` includes this file).

use serde_json::{Value, json};

/// The catalog: `{"about": ..., "servers": [{"namespace", "description", "tools": [{"name",
/// "description", "params": [names]}]}]}`.
pub fn catalog() -> Value {
    serde_json::from_str(include_str!("../data/catalog.json")).expect("the catalog is JSON")
}

/// The tools of one catalog `server` as `tools/list` gives them (MCP `Tool`: `name`,
/// `description`, an object `inputSchema`), each parameter a property whose schema is
/// `property(name)`.
pub fn wire_tools(server: &Value, property: impl Fn(&str) -> Value) -> Vec<Value> {
    server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let properties: serde_json::Map<String, Value> = t["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .map(|p| (p.to_string(), property(p)))
                .collect();
            json!({
                "name": t["name"],
                "description": t["description"],
                "inputSchema": {"type": "object", "properties": properties}
            })
        })
        .collect()
}
