//! The HTTP clients a Pack's servers share.

use crate::limits;

use super::Error;

/// The HTTP clients a Pack's servers share, each built on first use: constructing the Pack does
/// no I/O, and the system's certificate store is read once, and only when a server uses https.
/// hyper pools connections per host, so each server still keeps its own warm connections.
///
/// Both refuse redirects, set no overall timeout (the start and call deadlines govern) and turn
/// Nagle off. Both offer gzip, br and zstd in `Accept-Encoding` on every request and decode such a
/// reply as it is read (removing its `Content-Encoding`), so the 16 MiB message limit counts
/// decoded bytes, enforced while decoding (RFC 9110 §8.4, §12.5.3). Any other encoding is
/// refused by the reply reader.
#[derive(Default)]
pub(crate) struct Clients {
    plain: std::sync::OnceLock<reqwest::Client>,
    tls: std::sync::OnceLock<reqwest::Client>,
}

impl Clients {
    /// The client for `https` URLs or for plain `http` ones.
    ///
    /// # Errors
    /// The client could not be built (e.g. no usable TLS configuration).
    pub(crate) fn get(&self, https: bool) -> Result<&reqwest::Client, Error> {
        let cell = if https { &self.tls } else { &self.plain };
        if let Some(client) = cell.get() {
            return Ok(client);
        }
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits::CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .gzip(true)
            .brotli(true)
            .zstd(true);
        // A client for http:// URLs never does TLS (redirects are refused), so it skips loading
        // the system's certificate store, which costs milliseconds.
        let builder = if https {
            builder
        } else {
            builder.tls_certs_only(std::iter::empty())
        };
        let client = builder.build().map_err(Error::builder)?;
        Ok(cell.get_or_init(|| client))
    }
}
