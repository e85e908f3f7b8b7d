//! The runvil Host contract: what a Plugin crate is built against.
//!
//! The real runvil Host is not public, so this crate carries the small, stable part of it that a
//! Plugin needs:
//!
//! - a [`Plugin`] is a function the Host calls once with its [`Packs`] registry and the Host's
//!   plugin config (a JSON object; a Plugin reads its own key, `Null` when absent);
//! - the Plugin inserts [`PackSpec`]s: a name such as `runvil/mcp`, a default id such as `mcp`,
//!   the Pack's config value, and a [`Construct`] function;
//! - the Host calls [`Construct`] with the id the Pack is mounted under, its config and the
//!   [`Services`]. Construction does no I/O; it returns the [`Pack`] or a [`Unavailable`] reason;
//! - the Pack offers tools ([`ToolSpec`]) and runs them with [`Pack::call`]. Dropping the future a
//!   call returns is how a Host cancels it; dropping the Pack stops everything it started.
//!
//! Services are looked up by typed keys; [`TOKIO_RUNTIME`] yields the Host's
//! [`tokio::runtime::Handle`], on which a Pack spawns all of its background work.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

pub use serde_json::Value;

/// A boxed, `'static + Send` future, the return type of [`Pack::call`] and [`Pack::ready`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a Plugin crate exports: called once by the Host with the Pack registry and the Host's
/// plugin config (an object; `config["my_key"]` belongs to the Plugin, `Null` when absent).
pub type Plugin = fn(packs: &mut Packs, config: &Value);

/// Builds a Pack. Called by the Host with the id the Pack is mounted under (e.g. `mcp`), the
/// Pack's config value and the Host's services. Must do no I/O. An `Err` leaves the Pack
/// unavailable, with the reason shown to the user.
pub type Construct =
    fn(id: &str, config: &Value, services: &Services) -> Result<Box<dyn Pack>, Unavailable>;

/// One Pack a Plugin offers the Host.
pub struct PackSpec {
    /// The Pack's name, e.g. `runvil/mcp`.
    pub name: String,
    /// The id the Pack is mounted under unless the Host chooses another, e.g. `mcp`.
    pub default_id: String,
    /// The config value the Plugin passes to [`PackSpec::construct`].
    pub config: Value,
    /// Builds the Pack; see [`Construct`].
    pub construct: Construct,
}

impl fmt::Debug for PackSpec {
    // The config may hold secrets (headers, tokens): never print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackSpec")
            .field("name", &self.name)
            .field("default_id", &self.default_id)
            .finish_non_exhaustive()
    }
}

impl PackSpec {
    /// Calls [`PackSpec::construct`] with this spec's own config, mounted under `id`.
    ///
    /// # Errors
    /// The Pack's [`Unavailable`] reason when it cannot be built.
    pub fn construct(&self, id: &str, services: &Services) -> Result<Box<dyn Pack>, Unavailable> {
        (self.construct)(id, &self.config, services)
    }
}

/// The Host's registry of Packs, filled by Plugins.
#[derive(Debug, Default)]
pub struct Packs {
    specs: Vec<PackSpec>,
}

impl Packs {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a Pack spec; a later spec with the same name replaces the earlier one.
    pub fn insert(&mut self, spec: PackSpec) {
        self.specs.retain(|s| s.name != spec.name);
        self.specs.push(spec);
    }

    /// The spec named `name`, e.g. `runvil/mcp`.
    pub fn get(&self, name: &str) -> Option<&PackSpec> {
        self.specs.iter().find(|s| s.name == name)
    }

    /// Every spec, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &PackSpec> {
        self.specs.iter()
    }
}

/// A typed key for a service in [`Services`].
pub struct ServiceKey<T> {
    name: &'static str,
    _type: PhantomData<fn() -> T>,
}

impl<T> ServiceKey<T> {
    /// A key named `name`; the name must be unique among the Host's services.
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            _type: PhantomData,
        }
    }

    /// The key's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

/// The Host's Tokio runtime. Packs spawn every background task on it, never on a runtime of
/// their own.
pub const TOKIO_RUNTIME: ServiceKey<tokio::runtime::Handle> = ServiceKey::new("tokio_runtime");

/// Typed service lookup, filled by the Host before it constructs Packs.
#[derive(Default)]
pub struct Services {
    map: HashMap<&'static str, Box<dyn Any + Send + Sync>>,
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.map.keys().collect();
        names.sort();
        f.debug_struct("Services").field("names", &names).finish()
    }
}

impl Services {
    /// No services.
    pub fn new() -> Self {
        Self::default()
    }

    /// Provides `value` under `key`, replacing any earlier value.
    pub fn insert<T: Send + Sync + 'static>(&mut self, key: &ServiceKey<T>, value: T) {
        self.map.insert(key.name, Box::new(value));
    }

    /// The service under `key`, or `None` when the Host provides none.
    pub fn get<T: Send + Sync + 'static>(&self, key: &ServiceKey<T>) -> Option<&T> {
        self.map.get(key.name)?.downcast_ref()
    }
}

/// Why a Pack could not be constructed; shown to the user, so it never holds a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// A sentence naming what is wrong.
    pub reason: String,
}

impl Unavailable {
    /// An unavailable reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Unavailable {}

/// A tool a Pack offers: the model sees its name, description and argument schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The full name, `<pack id>/<tool>`, e.g. `mcp/get_dynamic_tools`.
    pub name: String,
    /// What the tool does, written for a model.
    pub description: String,
    /// The JSON Schema of the argument object.
    pub parameters: Value,
}

/// A running Pack.
pub trait Pack: Send + Sync {
    /// Text the Host adds to a prompt that uses the Pack; `None` when the Pack has none.
    fn prelude(&self) -> Option<String> {
        None
    }

    /// The tools the Pack offers, under their full names.
    fn tools(&self) -> Vec<ToolSpec>;

    /// Resolves when the Pack can take calls.
    fn ready(&self) -> BoxFuture<()>;

    /// Resolves once every backend of the Pack has settled — it is ready, or it failed and
    /// says why (the Pack's own listing tells which) — with [`Settled::All`], or once `within`
    /// has passed with [`Settled::Pending`] naming the backends still starting. A Host awaits
    /// this instead of polling the Pack's tools for a status.
    ///
    /// The default (for a Pack without backends that start on their own) awaits
    /// [`Pack::ready`] and answers [`Settled::All`]; it does not bound that wait by `within`.
    /// A Pack that overrides it must bound the wait and may be polled by any executor.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future only stops the wait.
    fn settled(&self, within: std::time::Duration) -> BoxFuture<Settled> {
        let _ = within;
        let ready = self.ready();
        Box::pin(async move {
            ready.await;
            Settled::All
        })
    }

    /// Resolves once the Pack's cleanup after its drop is done (what dropping it started on the
    /// Host's runtime: the MCP Pack's cancels and session `DELETE`s), within a bound the Pack
    /// documents; never before the drop. Take it before dropping the Pack, so a Host waits for
    /// this Pack's work only, not every task on its runtime:
    /// `let closed = pack.closed(); drop(pack); closed.await;`
    ///
    /// The default (a Pack that leaves no work behind its drop) resolves at once.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future only stops the wait; the cleanup goes on.
    fn closed(&self) -> BoxFuture<()> {
        Box::pin(async {})
    }

    /// Runs the tool named `tool` (a full name from [`Pack::tools`]) with the JSON argument object
    /// `args`. Dropping the returned future cancels the call.
    fn call(&self, tool: &str, args: Value) -> BoxFuture<Result<String, ToolError>>;
}

/// What [`Pack::settled`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every backend settled: ready, or failed with a reason the Pack shows.
    All,
    /// The wait ran out first: the backends still starting, by the Pack's names for them (the
    /// MCP Pack's namespaces), sorted.
    Pending(Vec<String>),
}

/// The kinds of [`ToolError`], so a Host or a model can tell what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolErrorKind {
    /// The arguments do not fit the tool's schema.
    InvalidArguments,
    /// The named thing (tool, namespace, server tool) does not exist.
    NotFound,
    /// What the call needs is not available now (still loading, failed to start, shut down).
    Unavailable,
    /// The backend answered with an error of its own.
    Backend,
    /// The backend could not be reached or did not answer in time.
    Transport,
}

impl ToolErrorKind {
    /// A short snake_case name: `invalid_arguments`, `not_found`, `unavailable`, `backend`,
    /// `transport`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => "invalid_arguments",
            Self::NotFound => "not_found",
            Self::Unavailable => "unavailable",
            Self::Backend => "backend",
            Self::Transport => "transport",
        }
    }
}

impl fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a model reads when a tool fails: a kind and a message written for a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What went wrong, broadly.
    pub kind: ToolErrorKind,
    /// What went wrong, for a model to read and act on.
    pub message: String,
}

impl ToolError {
    /// A tool error of `kind`.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;

    impl Pack for Nothing {
        fn tools(&self) -> Vec<ToolSpec> {
            Vec::new()
        }
        fn ready(&self) -> BoxFuture<()> {
            Box::pin(async {})
        }
        fn call(&self, tool: &str, _args: Value) -> BoxFuture<Result<String, ToolError>> {
            let message = format!("no tool {tool}");
            Box::pin(async move { Err(ToolError::new(ToolErrorKind::NotFound, message)) })
        }
    }

    fn construct_nothing(
        _: &str,
        config: &Value,
        _: &Services,
    ) -> Result<Box<dyn Pack>, Unavailable> {
        if config.is_null() {
            Ok(Box::new(Nothing))
        } else {
            Err(Unavailable::new("config must be null"))
        }
    }

    #[test]
    fn packs_replace_by_name_and_construct_with_own_config() {
        let mut packs = Packs::new();
        for config in [Value::Bool(true), Value::Null] {
            packs.insert(PackSpec {
                name: "runvil/nothing".into(),
                default_id: "nothing".into(),
                config,
                construct: construct_nothing,
            });
        }
        assert_eq!(packs.iter().count(), 1);
        let spec = packs.get("runvil/nothing").unwrap();
        let pack = spec.construct("nothing", &Services::new()).unwrap();
        assert!(pack.tools().is_empty());
        assert_eq!(pack.prelude(), None);
        assert!(packs.get("runvil/other").is_none());
        let settled = pack.settled(std::time::Duration::ZERO);
        assert_eq!(futures_executor_block_on(settled), Settled::All);
        let closed = pack.closed();
        drop(pack);
        futures_executor_block_on(closed);
    }

    /// Polls `future` to its end on this thread (the futures the contract's defaults return
    /// need no runtime).
    fn futures_executor_block_on<T>(future: BoxFuture<T>) -> T {
        let mut future = future;
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        loop {
            if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut cx) {
                return value;
            }
        }
    }

    #[test]
    fn services_are_typed() {
        const NUMBER: ServiceKey<u32> = ServiceKey::new("number");
        const WRONG: ServiceKey<String> = ServiceKey::new("number");
        let mut services = Services::new();
        assert_eq!(services.get(&NUMBER), None);
        services.insert(&NUMBER, 7);
        assert_eq!(services.get(&NUMBER), Some(&7));
        assert_eq!(services.get(&WRONG), None);
        assert_eq!(format!("{services:?}"), r#"Services { names: ["number"] }"#);
    }

    #[test]
    fn tool_error_displays_kind_and_message() {
        let e = ToolError::new(
            ToolErrorKind::InvalidArguments,
            "namespace must be a string",
        );
        assert_eq!(
            e.to_string(),
            "invalid_arguments: namespace must be a string"
        );
        assert_eq!(ToolErrorKind::Transport.to_string(), "transport");
    }
}
