//! Registrations and grants on disk, so a sign-in survives Host restarts.
//!
//! Owns the files: one JSON file per server and client (named by a SHA-256 of the server URL
//! and the client key) under `$PLUGIN_MCP_OAUTH_DIR`, else `<data dir>/plugin-mcp/oauth` (the
//! user's data directory: `$XDG_DATA_HOME` or `~/.local/share` on Linux). The directory is
//! created `0700` and each file `0600`; a file is written to a temporary file in the same
//! directory and renamed over the old one, so a reader (another Host sharing the directory)
//! sees the old or the new file whole, never a mix. An existing directory is tightened to
//! `0700`. A file names its server by a SHA-256 of the URL, never the URL (it may hold a
//! secret). A file that is not a regular file of at most 64 KiB, is not valid, or belongs to
//! another server or client, is ignored with a warning.
//!
//! A refresh holds an advisory lock on `<file>.lock` beside the file ([`Store::lock`]), so Hosts
//! sharing the directory never send the same refresh token twice.
//!
//! A DPoP-bound grant is stored with its key pair (PKCS #8, base64url): its tokens and its
//! refresh need the key, so a grant whose key does not read is ignored.
//!
//! The files hold tokens, keys and secrets in plain text, protected by their modes, like the
//! credential files of other OAuth clients. The I/O is synchronous: files are a few hundred
//! bytes, written once per sign-in or refresh.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::client::{AuthMethod, ClientIdSource, ClientIdentity};
use super::dpop::DpopKey;
use super::flow::{Binding, Grant};
use super::{Error, ErrorKind};

/// The environment variable that moves the store.
pub(crate) const DIR_VARIABLE: &str = "PLUGIN_MCP_OAUTH_DIR";

/// The cross-process lock of one store file, held until dropped (see [`Store::lock`]).
#[derive(Debug)]
pub(crate) struct StoreLock {
    _file: std::fs::File,
}

/// The `format` of a store file.
const FORMAT: &str = "plugin-mcp-oauth/1";

/// Where the files are.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

/// The file of one server and client. Its `Debug` shows the file name only: a server URL may
/// hold a secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct StoreKey {
    server: String,
    client: String,
    file: String,
    /// The file an older version kept this entry's sign-in in (keyed by the server and client
    /// alone, shared by every entry with the same url): claimed by the first entry that loads
    /// it ([`Store::load`]).
    legacy: Option<String>,
}

impl std::fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreKey({})", self.file)
    }
}

impl StoreKey {
    /// The key of the server at `server` (its URL as configured; a secret URL never reaches the
    /// file name, only its hash) and the client `client` (the configured client id or metadata
    /// URL; empty for a registered client).
    pub(crate) fn new(server: &Url, client: &str) -> StoreKey {
        Self::hashed(server, client, None)
    }

    /// The key of the entry `namespace` for the server at `server` and the client `client`:
    /// two entries with the same url (two accounts on one server) sign in on their own. The
    /// file is named by SHA-256 over the URL, a NUL, the client, a NUL and the namespace; the
    /// file of an older version ([`StoreKey::new`]'s) is claimed when this one does not exist.
    pub(crate) fn for_entry(server: &Url, client: &str, namespace: &str) -> StoreKey {
        let legacy = Self::new(server, client).file;
        StoreKey {
            legacy: Some(legacy),
            ..Self::hashed(server, client, Some(namespace))
        }
    }

    fn hashed(server: &Url, client: &str, namespace: Option<&str>) -> StoreKey {
        let mut hash = Sha256::new();
        hash.update(server.as_str().as_bytes());
        hash.update([0]);
        hash.update(client.as_bytes());
        if let Some(namespace) = namespace {
            hash.update([0]);
            hash.update(namespace.as_bytes());
        }
        let digest = hash.finalize();
        let file = digest[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
            + ".json";
        // The file names the server by a hash of its URL: a URL may hold a secret (a key in
        // its query, from `${env:...}`), which must not land on disk.
        let server = Sha256::digest(server.as_str().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        StoreKey {
            server: format!("sha256:{server}"),
            client: client.to_string(),
            file,
            legacy: None,
        }
    }
}

/// What is stored for one server and client.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoredCredentials {
    /// A dynamically registered client, reused by later sign-ins.
    pub(crate) client: Option<ClientIdentity>,
    pub(crate) grant: Option<Grant>,
    /// A file was there but ignored (not a regular file, unreadable, not valid, or another
    /// server's or client's): what it holds is unknown, not empty.
    pub(crate) ignored: bool,
}

impl StoredCredentials {
    fn ignored() -> StoredCredentials {
        StoredCredentials {
            ignored: true,
            ..StoredCredentials::default()
        }
    }
}

#[derive(Serialize, Deserialize)]
struct File {
    format: String,
    server: String,
    client_key: String,
    #[serde(default)]
    client: Option<ClientRecord>,
    #[serde(default)]
    grant: Option<GrantRecord>,
}

#[derive(Serialize, Deserialize)]
struct ClientRecord {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: String,
    token_endpoint: Option<String>,
    redirect_uri: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct GrantRecord {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    /// The token's `expires_in`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifetime: Option<u64>,
    #[serde(default)]
    scopes: Vec<String>,
    /// The authorization server that issued the grant; absent in files of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    /// The DPoP key of a grant with one (RFC 9449): PKCS #8, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dpop_key: Option<String>,
    /// With `dpop_key`: the access token is `Bearer` and only refreshes prove the key
    /// ([`Binding::RefreshOnly`]); absent or `false`, the access token is `DPoP` too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dpop_refresh_only: bool,
}

impl Store {
    /// The store at `dir`.
    pub(crate) fn at(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The store at `$PLUGIN_MCP_OAUTH_DIR`, else under the user's data directory.
    ///
    /// # Errors
    /// [`ErrorKind::Storage`] when neither is known.
    pub(crate) fn from_env() -> Result<Store, Error> {
        if let Some(dir) = std::env::var_os(DIR_VARIABLE).filter(|d| !d.is_empty()) {
            return Ok(Store::at(dir));
        }
        dirs::data_dir()
            .map(|d| Store::at(d.join("plugin-mcp").join("oauth")))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Storage,
                    format!("no data directory is known to store sign-ins in; set {DIR_VARIABLE}"),
                )
            })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &StoreKey) -> PathBuf {
        self.dir.join(&key.file)
    }

    /// What is stored for `key`; empty when there is no file, and (with a warning) when the
    /// file cannot be read, is not valid, or belongs to another server or client.
    pub(crate) fn load(&self, key: &StoreKey) -> StoredCredentials {
        let path = self.path(key);
        self.claim_legacy(key, &path);
        let text = match read_bounded(&path) {
            Ok(Some(text)) => text,
            Ok(None) => {
                tracing::warn!(file = %path.display(), "a stored sign-in is not a regular file of at most {MAX_FILE_BYTES} bytes and is ignored");
                return StoredCredentials::ignored();
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return StoredCredentials::default();
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), "a stored sign-in could not be read: {}", e.kind());
                return StoredCredentials::ignored();
            }
        };
        let file: File = match crate::json::from_server(&text) {
            Ok(file) => file,
            Err(_) => {
                tracing::warn!(file = %path.display(), "a stored sign-in is not valid and is ignored");
                return StoredCredentials::ignored();
            }
        };
        if file.format != FORMAT || file.server != key.server || file.client_key != key.client {
            tracing::warn!(file = %path.display(), "a stored sign-in belongs to another server or client and is ignored");
            return StoredCredentials::ignored();
        }
        StoredCredentials {
            client: file.client.and_then(|c| {
                Some(ClientIdentity {
                    client_id: c.client_id,
                    client_secret: c.client_secret.map(SecretString::from),
                    auth_method: AuthMethod::parse(&c.token_endpoint_auth_method)?,
                    source: ClientIdSource::Registered,
                    token_endpoint: c.token_endpoint,
                    redirect_uri: c.redirect_uri,
                })
            }),
            grant: file.grant.and_then(|g| {
                // A bound grant whose key does not read is of no use: its tokens need the key.
                let binding = match g.dpop_key.map(SecretString::from) {
                    Some(stored) => match DpopKey::from_stored(&stored) {
                        Some(key) if g.dpop_refresh_only => Binding::RefreshOnly(Arc::new(key)),
                        Some(key) => Binding::Dpop(Arc::new(key)),
                        None => {
                            tracing::warn!(file = %path.display(), "a stored sign-in's DPoP key is not valid; the grant is ignored");
                            return None;
                        }
                    },
                    None => Binding::Unbound,
                };
                Some(Grant {
                    access_token: SecretString::from(g.access_token),
                    refresh_token: g.refresh_token.map(SecretString::from),
                    expires_at: g.expires_at,
                    lifetime: g.lifetime,
                    scopes: g.scopes,
                    issuer: g.issuer,
                    binding,
                })
            }),
            ignored: false,
        }
    }

    /// Replaces what is stored for `key` (atomically; the file `0600` in a `0700` directory).
    ///
    /// # Errors
    /// [`ErrorKind::Storage`] naming the step that failed (never a token).
    pub(crate) fn save(&self, key: &StoreKey, stored: &StoredCredentials) -> Result<(), Error> {
        let file = File {
            format: FORMAT.to_string(),
            server: key.server.clone(),
            client_key: key.client.clone(),
            client: stored.client.as_ref().map(|c| ClientRecord {
                client_id: c.client_id.clone(),
                client_secret: c
                    .client_secret
                    .as_ref()
                    .map(|s| s.expose_secret().to_string()),
                token_endpoint_auth_method: c.auth_method.as_str().to_string(),
                token_endpoint: c.token_endpoint.clone(),
                redirect_uri: c.redirect_uri.clone(),
            }),
            grant: stored.grant.as_ref().map(|g| GrantRecord {
                access_token: g.access_token.expose_secret().to_string(),
                refresh_token: g
                    .refresh_token
                    .as_ref()
                    .map(|t| t.expose_secret().to_string()),
                expires_at: g.expires_at,
                lifetime: g.lifetime,
                scopes: g.scopes.clone(),
                issuer: g.issuer.clone(),
                dpop_key: g
                    .binding
                    .key()
                    .map(|k| k.stored().expose_secret().to_string()),
                dpop_refresh_only: matches!(g.binding, Binding::RefreshOnly(_)),
            }),
        };
        let text = serde_json::to_vec_pretty(&file)
            .map_err(|_| Error::new(ErrorKind::Storage, "a sign-in could not be encoded"))?;
        self.create_dir()?;
        let path = self.path(key);
        let temp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            key.file,
            std::process::id(),
            unique()
        ));
        let written = write_private(&temp, &text).and_then(|()| std::fs::rename(&temp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(Error::new(
                ErrorKind::Storage,
                format!(
                    "a sign-in could not be saved in {}: {}",
                    self.dir.display(),
                    e.kind()
                ),
            ));
        }
        Ok(())
    }

    /// Takes the cross-process lock of `key`'s file: an exclusive advisory lock (`flock` on
    /// Unix, `LockFileEx` on Windows) on `<file>.lock` beside it, created `0600`. Hosts sharing
    /// the directory hold it from reading a grant to saving its refresh, so no two of them send
    /// the same refresh token (a rotated refresh token sent twice is refused, and an
    /// authorization server may then revoke the whole grant, OAuth 2.1 §4.3.1). Waits up to
    /// `limit`, polling every 20 ms; the lock is released when the returned value is dropped or
    /// its process ends.
    ///
    /// Returns `None` (with a warning) when the lock file cannot be made or the lock is not
    /// taken in time: the caller goes on unlocked, as a store on a file system without locks
    /// would.
    ///
    /// # Cancel safety
    /// Cancel safe: a lock taken is released when the future is dropped.
    pub(crate) async fn lock(
        &self,
        key: &StoreKey,
        limit: std::time::Duration,
    ) -> Option<StoreLock> {
        let opened = self.create_dir().ok().and_then(|()| {
            let mut options = std::fs::OpenOptions::new();
            options.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            options
                .open(self.dir.join(format!("{}.lock", key.file)))
                .map_err(|e| {
                    tracing::warn!(
                        "the sign-in store's lock file could not be opened: {}",
                        e.kind()
                    )
                })
                .ok()
        });
        let file = opened?;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Called by path: Rust 1.89's `File::try_lock` has another error type.
            match fs4::FileExt::try_lock(&file) {
                Ok(()) => return Some(StoreLock { _file: file }),
                Err(fs4::TryLockError::WouldBlock) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(fs4::TryLockError::WouldBlock) => {
                    tracing::warn!(
                        "the sign-in store stayed locked by another process for {} s; going on without the lock",
                        limit.as_secs()
                    );
                    return None;
                }
                Err(fs4::TryLockError::Error(e)) => {
                    tracing::warn!("the sign-in store could not be locked: {}", e.kind());
                    return None;
                }
            }
        }
    }

    /// Deletes what is stored for `key` (a logout): `true` when a file was deleted, `false`
    /// when none was there.
    ///
    /// # Errors
    /// [`ErrorKind::Storage`] when the file exists and cannot be deleted.
    pub(crate) fn delete(&self, key: &StoreKey) -> Result<bool, Error> {
        let path = self.path(key);
        self.claim_legacy(key, &path);
        match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::new(
                ErrorKind::Storage,
                format!("a stored sign-in could not be deleted: {}", e.kind()),
            )),
        }
    }

    /// Renames the file an older version kept `key`'s sign-in in to `path` when `path` does
    /// not exist: the first entry of that server and client to load it claims it (a rename is
    /// atomic; another entry with the same url then finds nothing and signs in on its own).
    fn claim_legacy(&self, key: &StoreKey, path: &Path) {
        let Some(legacy) = &key.legacy else {
            return;
        };
        if path.exists() {
            return;
        }
        let old = self.dir.join(legacy);
        if std::fs::symlink_metadata(&old).is_ok_and(|m| m.is_file()) {
            match std::fs::rename(&old, path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), "a stored sign-in of an older version was moved to its entry's file")
                }
                Err(e) => tracing::debug!(
                    "a stored sign-in of an older version was not moved: {}",
                    e.kind()
                ),
            }
        }
    }

    fn create_dir(&self) -> Result<(), Error> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&self.dir).map_err(|e| {
            Error::new(
                ErrorKind::Storage,
                format!(
                    "the sign-in directory {} could not be created: {}",
                    self.dir.display(),
                    e.kind()
                ),
            )
        })?;
        // A directory that existed before keeps its mode unless tightened here.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let loose = std::fs::metadata(&self.dir)
                .map(|m| m.permissions().mode() & 0o077 != 0)
                .unwrap_or(false);
            if loose {
                std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(|e| {
                        Error::new(
                            ErrorKind::Storage,
                            format!(
                                "the sign-in directory {} could not be made private (0700): {}",
                                self.dir.display(),
                                e.kind()
                            ),
                        )
                    })?;
            }
        }
        Ok(())
    }
}

/// The largest store file read: a few hundred bytes are usual.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The bytes of the regular file at `path` (symbolic links followed); `None` when it is not a
/// regular file (a FIFO or a device would block or never end) or holds more than
/// [`MAX_FILE_BYTES`]. On Unix a file with group or other permissions is made `0600` first,
/// and one that group or others could write is an error of kind `PermissionDenied`.
fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    // Checked before opening: opening a FIFO blocks until a writer comes.
    if !std::fs::metadata(path)?.is_file() {
        return Ok(None);
    }
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    // A file others may read is made private, as the store writes it (0600); one others may
    // write could hold a grant they planted, so it is not read.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        if mode & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "writable by others",
            ));
        }
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// A number no other temporary file of this process uses.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Writes `bytes` to the new file `path`, created `0600`, and syncs it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(access: &str) -> Grant {
        Grant {
            access_token: SecretString::from(access.to_string()),
            refresh_token: Some(SecretString::from("refresh-token-stored-1")),
            expires_at: Some(1234),
            lifetime: Some(3600),
            scopes: vec!["a".into(), "b".into()],
            issuer: Some("https://as.example.com".into()),
            binding: Binding::Unbound,
        }
    }

    /// An entry holding only a grant whose access token is `access`.
    fn holding(access: &str) -> StoredCredentials {
        StoredCredentials {
            client: None,
            grant: Some(grant(access)),
            ignored: false,
        }
    }

    /// The key of the entry for `url` without a client.
    fn key_for(url: &str) -> StoreKey {
        StoreKey::new(&Url::parse(url).unwrap(), "")
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "plugin-mcp-store-{name}-{}-{}",
            std::process::id(),
            unique()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn round_trip_with_private_modes() {
        let dir = temp_dir("modes").join("nested");
        let store = Store::at(&dir);
        let key = key_for("https://mcp.example.com/mcp");
        assert!(store.load(&key).grant.is_none());
        let stored = StoredCredentials {
            client: Some(ClientIdentity {
                client_id: "registered-1".into(),
                client_secret: Some(SecretString::from("client-secret-1")),
                auth_method: AuthMethod::ClientSecretPost,
                source: ClientIdSource::Registered,
                token_endpoint: Some("https://a.example.com/token".into()),
                redirect_uri: Some("http://127.0.0.1:4444/callback".into()),
            }),
            grant: Some(grant("access-token-stored-1")),
            ignored: false,
        };
        store.save(&key, &stored).unwrap();
        store.save(&key, &stored).unwrap();
        let back = store.load(&key);
        let client = back.client.unwrap();
        assert_eq!(client.client_id, "registered-1");
        assert_eq!(
            client.client_secret.unwrap().expose_secret(),
            "client-secret-1"
        );
        assert_eq!(client.auth_method, AuthMethod::ClientSecretPost);
        assert_eq!(
            client.redirect_uri.as_deref(),
            Some("http://127.0.0.1:4444/callback")
        );
        let g = back.grant.unwrap();
        assert_eq!(g.access_token.expose_secret(), "access-token-stored-1");
        assert_eq!(g.expires_at, Some(1234));
        assert_eq!(g.scopes, ["a", "b"]);
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            std::slice::from_ref(&key.file),
            "no temporary file is left"
        );
        assert_eq!(key.file.len(), 32 + ".json".len());
        assert_eq!(format!("{key:?}"), format!("StoreKey({})", key.file));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(&dir.join(&key.file)), 0o600);
        }
        assert!(store.delete(&key).unwrap());
        assert!(!store.delete(&key).unwrap());
        assert!(store.load(&key).grant.is_none());
        let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    }

    #[test]
    fn a_bound_grant_keeps_its_key_and_one_whose_key_does_not_read_is_ignored() {
        let dir = temp_dir("dpop");
        let store = Store::at(&dir);
        let key = key_for("https://mcp.example.com/mcp");
        let dpop = Arc::new(DpopKey::generate().unwrap());
        // Each keyed binding comes back as it was saved, with the same key; the last saved is
        // `Dpop`.
        let round_trip = |binding: Binding| {
            let mut stored = holding("access-token-bound-1");
            stored.grant.as_mut().unwrap().binding = binding;
            store.save(&key, &stored).unwrap();
            store.load(&key).grant.unwrap().binding
        };
        let stored_form = |k: &DpopKey| k.stored().expose_secret().to_string();
        match round_trip(Binding::RefreshOnly(Arc::clone(&dpop))) {
            Binding::RefreshOnly(back) => assert_eq!(stored_form(&back), stored_form(&dpop)),
            other => panic!("the grant came back as {other:?}"),
        }
        match round_trip(Binding::Dpop(Arc::clone(&dpop))) {
            Binding::Dpop(back) => assert_eq!(stored_form(&back), stored_form(&dpop)),
            other => panic!("the grant came back as {other:?}"),
        }
        // The file holds the key under `dpop_key`; a value that is no key drops the grant.
        let path = dir.join(&key.file);
        let mut file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            file["grant"]["dpop_key"].as_str(),
            Some(dpop.stored().expose_secret())
        );
        file["grant"]["dpop_key"] = "not-a-key".into();
        std::fs::write(&path, file.to_string()).unwrap();
        assert!(store.load(&key).grant.is_none());
        // A Bearer grant has no `dpop_key` at all.
        store.save(&key, &holding("access-token-plain-1")).unwrap();
        let file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(file["grant"].get("dpop_key"), None);
        assert_eq!(file["grant"].get("dpop_refresh_only"), None);
        assert!(matches!(
            store.load(&key).grant.unwrap().binding,
            Binding::Unbound
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_lock_is_held_by_one_taker_at_a_time() {
        let dir = temp_dir("lock");
        let store = Store::at(&dir);
        let key = key_for("https://mcp.example/mcp");
        let other = key_for("https://other.example/mcp");
        let short = std::time::Duration::from_millis(100);
        let held = store
            .lock(&key, short)
            .await
            .expect("the first taker locks");
        // A second open of the lock file (another Host) waits, then gives up; another
        // server's file is not locked.
        assert!(store.lock(&key, short).await.is_none());
        assert!(store.lock(&other, short).await.is_some());
        drop(held);
        assert!(store.lock(&key, short).await.is_some());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(format!("{}.lock", key.file)))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn corrupt_and_foreign_files_are_ignored() {
        let dir = temp_dir("foreign");
        let store = Store::at(&dir);
        let url = Url::parse("https://mcp.example.com/mcp").unwrap();
        let key = StoreKey::new(&url, "");
        let other = StoreKey::new(&url, "client-x");
        assert_ne!(key.file, other.file);
        store.save(&other, &holding("access-token-other")).unwrap();
        // A file copied over another server's name belongs to another client: ignored.
        std::fs::copy(dir.join(&other.file), dir.join(&key.file)).unwrap();
        assert!(store.load(&key).grant.is_none());
        std::fs::write(dir.join(&key.file), b"{not json").unwrap();
        assert!(store.load(&key).grant.is_none());
        std::fs::write(dir.join(&key.file), br#"{"format":"other/9"}"#).unwrap();
        assert!(store.load(&key).grant.is_none());
        assert!(store.load(&other).grant.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_loose_store_file_is_made_private_and_one_others_could_write_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("loose-file");
        let store = Store::at(&dir);
        let key = key_for("https://mcp.example.com/mcp");
        let path = dir.join(&key.file);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        store
            .save(&key, &holding("access-token-loose-file-1"))
            .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let read = store.load(&key).grant.is_some();
        let after_read = mode(&path);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let planted = store.load(&key);
        let after_planted = mode(&path);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(read, "a file others may only read is still read");
        assert_eq!(format!("{after_read:o}"), "600");
        assert!(planted.grant.is_none() && planted.ignored);
        assert_eq!(format!("{after_planted:o}"), "600");
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_loose_directory_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("loose");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = Store::at(&dir);
        let key = key_for("https://mcp.example.com/mcp");
        store.save(&key, &holding("access-token-loose-1")).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(format!("{mode:o}"), "700");
    }

    #[test]
    fn a_secret_in_the_server_url_is_not_written_to_the_store() {
        let dir = temp_dir("url-secret");
        let store = Store::at(&dir);
        let key = key_for("https://mcp.example.com/mcp?api_key=sk-live-url-secret-123");
        store.save(&key, &holding("access-token-url-1")).unwrap();
        let text = std::fs::read_to_string(dir.join(&key.file)).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let leaked: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("sk-live-url-secret-123"))
            .collect();
        assert_eq!(leaked, Vec::<&str>::new());
    }

    #[cfg(unix)]
    #[test]
    fn a_store_file_that_never_ends_is_ignored() {
        let dir = temp_dir("fifo");
        std::fs::create_dir_all(&dir).unwrap();
        let key = key_for("https://mcp.example.com/mcp");
        let path = dir.join(&key.file);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let store = Store::at(&dir);
        let (sent, got) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let _ = sent.send(store.load(&key).grant.is_none());
        });
        let outcome = got.recv_timeout(std::time::Duration::from_secs(5));
        // Release a reader still blocked on the FIFO: a writer that opens and closes it.
        // Opened read-write, a FIFO opens at once (Linux), whether or not a reader waits.
        drop(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path),
        );
        reader.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(outcome, Ok(true));
    }
}
