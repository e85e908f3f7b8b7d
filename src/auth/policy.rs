//! Which URLs and addresses the sign-in may reach (MCP 2025-11-25 "Security Best Practices",
//! server-side request forgery).
//!
//! Owns the one rule for every URL that comes from a server: protected resource metadata,
//! authorization server metadata, and the endpoints they name. Such URLs are untrusted, so:
//! - the scheme is `https`; `http` only when the MCP server itself is on loopback (a local
//!   development server and its local authorization server);
//! - the host is not a loopback, private, link-local, shared (CGNAT) or unspecified address,
//!   unless the MCP server's own host is one (then the user chose a local network on purpose);
//! - the host is never a cloud metadata service (`169.254.169.254`, `fd00:ec2::254`,
//!   `100.100.100.200`, `metadata.google.internal` and the IPv6 forms embedding those IPv4
//!   addresses), whatever the MCP server's own host is.
//!
//! The rule is checked twice: on the URL (literal addresses and well-known metadata host
//! names), and on every address a host name resolves to ([`PolicyResolver`]), so a public name
//! that resolves to `169.254.169.254` is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;

/// Host names of cloud metadata services (GCP, Azure's `metadata` alias).
const METADATA_HOSTS: [&str; 3] = ["metadata.google.internal", "metadata", "metadata.goog"];

/// The URL policy of one MCP server's sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UrlPolicy {
    /// `http` URLs are allowed (the MCP server is on loopback).
    allow_http: bool,
    /// Restricted addresses are allowed (the MCP server's own host is one).
    allow_restricted: bool,
}

impl UrlPolicy {
    /// The policy for the MCP server at `server`: what its own host allows.
    pub(crate) fn for_server(server: &Url) -> UrlPolicy {
        let host = Host::of(server);
        UrlPolicy {
            allow_http: host.is_loopback(),
            allow_restricted: host.is_restricted(),
        }
    }

    /// Checks a URL that came from a server.
    ///
    /// # Errors
    /// A sentence naming `what` (e.g. `the token endpoint`) and the rule broken. The URL itself
    /// is not quoted: it comes from a server.
    pub(crate) fn check(&self, url: &Url, what: &str) -> Result<(), String> {
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            "http" => {
                return Err(format!(
                    "{what} uses http; only https is allowed for a server that is not on loopback"
                ));
            }
            _ => return Err(format!("{what} is not an https URL")),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("{what} carries credentials in its URL"));
        }
        let host = Host::of(url);
        if matches!(host, Host::None) {
            return Err(format!("{what} has no host"));
        }
        if host.is_metadata_service() || (host.is_restricted() && !self.allow_restricted) {
            return Err(format!(
                "{what} points at a loopback, private, link-local or metadata-service address"
            ));
        }
        Ok(())
    }

    /// Whether a resolved address may be connected to.
    pub(crate) fn allows(&self, ip: IpAddr) -> bool {
        !is_metadata_service(ip) && (self.allow_restricted || !is_restricted(ip))
    }
}

/// The host of a URL, classified.
enum Host {
    None,
    Ip(IpAddr),
    Name(String),
}

impl Host {
    fn of(url: &Url) -> Host {
        match url.host() {
            None => Host::None,
            Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) => {
                Host::Name(name.trim_end_matches('.').to_ascii_lowercase())
            }
        }
    }

    fn is_loopback(&self) -> bool {
        match self {
            Host::Ip(ip) => canonical(*ip).is_loopback(),
            Host::Name(name) => name == "localhost" || name.ends_with(".localhost"),
            Host::None => false,
        }
    }

    fn is_metadata_service(&self) -> bool {
        match self {
            Host::Ip(ip) => is_metadata_service(*ip),
            Host::Name(name) => METADATA_HOSTS.contains(&name.as_str()),
            Host::None => false,
        }
    }

    fn is_restricted(&self) -> bool {
        match self {
            Host::Ip(ip) => is_restricted(*ip),
            Host::Name(name) => self.is_loopback() || METADATA_HOSTS.contains(&name.as_str()),
            Host::None => false,
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Whether `ip` is loopback, private (RFC 1918, RFC 4193), link-local (which holds the
/// `169.254.169.254` metadata service), shared address space (RFC 6598, which holds Alibaba's
/// `100.100.100.200`), unspecified, broadcast or multicast.
pub(crate) fn is_restricted(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => is_restricted_v4(v4),
        IpAddr::V6(v6) => is_restricted_v6(v6),
    }
}

/// The cloud metadata services' addresses: AWS, GCP and Azure's `169.254.169.254`, AWS's IPv6
/// `fd00:ec2::254`, Alibaba's `100.100.100.200`.
const METADATA_V4: [Ipv4Addr; 2] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(100, 100, 100, 200),
];
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

/// Whether `ip` is a cloud metadata service, also in an IPv4-mapped, IPv4-compatible, NAT64 or
/// 6to4 form: refused even when the MCP server's own host is on a private network.
pub(crate) fn is_metadata_service(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => METADATA_V4.contains(&v4),
        IpAddr::V6(v6) => {
            v6 == METADATA_V6 || embedded_v4(v6).is_some_and(|v4| METADATA_V4.contains(&v4))
        }
    }
}

fn is_restricted_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
}

fn is_restricted_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique local fc00::/7 (holds AWS's fd00:ec2::254 metadata service).
        || (first & 0xfe00) == 0xfc00
        // Link-local fe80::/10.
        || (first & 0xffc0) == 0xfe80
        // Site-local fec0::/10 (deprecated by RFC 3879, still private where used).
        || (first & 0xffc0) == 0xfec0
        // IPv4-compatible, NAT64 and 6to4 forms of a restricted IPv4 address.
        || embedded_v4(ip).is_some_and(is_restricted_v4)
}

/// The IPv4 address an IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`, RFC 6052) or
/// 6to4 (`2002::/16`, RFC 3056) address embeds.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    if s[..6] == [0, 0, 0, 0, 0, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]))
    } else {
        None
    }
}

/// A DNS resolver for the sign-in's HTTP client that drops every address the policy refuses,
/// failing the lookup when none is left.
#[derive(Debug)]
pub(crate) struct PolicyResolver {
    pub(crate) policy: UrlPolicy,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|addr| policy.allows(addr.ip()))
                .collect();
            if found.is_empty() {
                return Err(
                    "the host resolves to no address the sign-in may reach (loopback, private, \
                     link-local and metadata-service addresses are refused)"
                        .into(),
                );
            }
            let addrs: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    /// What a token endpoint at a restricted address is told.
    const RESTRICTED: &str = "the token endpoint points at a loopback, private, link-local or \
                              metadata-service address";

    /// Cloud metadata services, refused to every server.
    const METADATA_SERVICES: [&str; 3] = [
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00:ec2::254]/",
        "https://metadata.google.internal/computeMetadata",
    ];

    /// Asserts `policy` refuses each of `targets` as [`RESTRICTED`].
    fn all_restricted<'a>(policy: &UrlPolicy, targets: impl IntoIterator<Item = &'a str>) {
        for target in targets {
            assert_eq!(
                policy.check(&url(target), "the token endpoint"),
                Err(RESTRICTED.to_string()),
                "{target}"
            );
        }
    }

    #[test]
    fn restricted_addresses() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "ff02::1",
        ] {
            assert!(
                is_restricted(ip.parse().unwrap()),
                "{ip} must be restricted"
            );
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!is_restricted(ip.parse().unwrap()), "{ip} must be allowed");
        }
    }

    #[test]
    fn a_public_server_allows_only_public_https() {
        let policy = UrlPolicy::for_server(&url("https://mcp.example.com/mcp"));
        assert_eq!(
            policy.check(&url("https://auth.example.com/token"), "the token endpoint"),
            Ok(())
        );
        let refused = |u: &str| policy.check(&url(u), "the token endpoint").unwrap_err();
        assert_eq!(
            refused("http://auth.example.com/token"),
            "the token endpoint uses http; only https is allowed for a server that is not on \
             loopback"
        );
        assert_eq!(
            refused("ftp://auth.example.com/token"),
            "the token endpoint is not an https URL"
        );
        all_restricted(&policy, METADATA_SERVICES);
        all_restricted(
            &policy,
            [
                "https://10.0.0.5/token",
                "https://127.0.0.1/token",
                "https://[::ffff:127.0.0.1]/token",
                "https://localhost/token",
                "https://METADATA.google.internal./x",
            ],
        );
        assert_eq!(
            refused("https://user:pw@auth.example.com/"),
            "the token endpoint carries credentials in its URL"
        );
        assert!(policy.allows("93.184.216.34".parse().unwrap()));
        assert!(!policy.allows("169.254.169.254".parse().unwrap()));
        assert!(!policy.allows("192.168.0.10".parse().unwrap()));
    }

    #[test]
    fn a_loopback_server_allows_http_and_local_addresses() {
        for server in [
            "http://127.0.0.1:3000/mcp",
            "http://localhost:8080/mcp",
            "http://[::1]/",
        ] {
            let policy = UrlPolicy::for_server(&url(server));
            assert_eq!(policy.check(&url("http://127.0.0.1:9/token"), "x"), Ok(()));
            assert_eq!(policy.check(&url("https://10.0.0.1/token"), "x"), Ok(()));
            assert!(policy.allows("127.0.0.1".parse().unwrap()));
        }
    }

    #[test]
    fn a_private_network_server_allows_private_addresses_but_not_http() {
        let policy = UrlPolicy::for_server(&url("https://10.0.0.7/mcp"));
        assert_eq!(policy.check(&url("https://10.0.0.8/token"), "x"), Ok(()));
        assert_eq!(
            policy
                .check(&url("http://10.0.0.8/token"), "x")
                .unwrap_err(),
            "x uses http; only https is allowed for a server that is not on loopback"
        );
    }

    #[test]
    fn six_to_four_and_site_local_forms_of_restricted_addresses_are_restricted() {
        // 2002::/16 embeds the IPv4 address in segments 1-2 (RFC 3056);
        // site-local fec0::/10 is private (RFC 3879 deprecated it, not its use).
        let missed: Vec<&str> = [
            "2002:a9fe:a9fe::", // 6to4 of 169.254.169.254
            "2002:7f00:1::",    // 6to4 of 127.0.0.1
            "2002:a00:1::1",    // 6to4 of 10.0.0.1
            "fec0::1",          // site-local (deprecated, still private)
        ]
        .into_iter()
        .filter(|ip| !is_restricted(ip.parse().unwrap()))
        .collect();
        assert_eq!(missed, Vec::<&str>::new());
    }

    #[test]
    fn a_private_network_server_still_may_not_reach_the_metadata_service() {
        let policy = UrlPolicy::for_server(&url("https://10.0.0.7/mcp"));
        all_restricted(&policy, METADATA_SERVICES);
        all_restricted(
            &policy,
            [
                "https://100.100.100.200/latest",
                "https://[::ffff:169.254.169.254]/",
                "https://[64:ff9b::6464:64c8]/",
                "https://[2002:a9fe:a9fe::]/",
            ],
        );
        assert!(!policy.allows("169.254.169.254".parse().unwrap()));
        assert!(!policy.allows("fd00:ec2::254".parse().unwrap()));
        assert!(policy.allows("10.0.0.8".parse().unwrap()));
        assert!(policy.allows("169.254.169.253".parse().unwrap()));
    }
}
