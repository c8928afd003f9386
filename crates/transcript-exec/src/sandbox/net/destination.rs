//! A destination a step may reach: a literal `host:port` of its workflow's `network:` list.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One `host:port` a step may reach: a DNS name (compared without case), an IPv4 address or
/// a bracketed IPv6 address, and a port (1–65535).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Destination {
    /// The host: a lowercase DNS name, or an IP address as the standard library prints it.
    host: String,
    port: u16,
}

impl Destination {
    /// `host` and `port`, checked as [`std::str::FromStr`] checks them.
    ///
    /// # Errors
    /// The host is not a DNS name or an IP address, or the port is 0.
    pub fn new(host: &str, port: u16) -> Result<Self, String> {
        if port == 0 {
            return Err("port 0 is not a destination".into());
        }
        Ok(Self {
            host: normal_host(host)?,
            port,
        })
    }

    /// The host (a lowercase DNS name or an IP address, IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the host is this machine's loopback (`localhost`, `127.0.0.0/8`, `::1`): such
    /// a destination is also reachable directly at the same address inside the namespace.
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.ip().is_some_and(|ip| ip.is_loopback())
    }

    /// The host as an IP address, when it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl std::str::FromStr for Destination {
    type Err = String;

    /// `host:port`: `api.github.com:443`, `127.0.0.1:8080`, `[::1]:8080`. Never a template,
    /// a scheme, a path, a wildcard or a port range.
    fn from_str(s: &str) -> Result<Self, String> {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} is not host:port"))?;
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{s:?}: the port must be a number"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{s:?}: the port must be at most 65535"))?;
        let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6
                .parse::<Ipv6Addr>()
                .map(|ip| ip.to_string())
                .map_err(|_| format!("{s:?}: {v6:?} is not an IPv6 address"))?,
            None if host.contains(':') => {
                return Err(format!(
                    "{s:?}: write an IPv6 address in brackets, [::1]:port"
                ));
            }
            None => host.to_owned(),
        };
        Self::new(&host, port).map_err(|e| format!("{s:?}: {e}"))
    }
}

/// `host` lowercased and checked: an IP address (printed canonically) or a DNS name of
/// letters, digits and hyphens in dot-separated labels.
fn normal_host(host: &str) -> Result<String, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'))
        && let Ok(ip) = v6.parse::<Ipv6Addr>()
    {
        return Ok(ip.to_string());
    }
    let lower = host.to_ascii_lowercase();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if lower.is_empty() || lower.len() > 253 || !lower.split('.').all(label_ok) {
        return Err(format!(
            "{host:?} is not a host name or an IP address (no scheme, path, wildcard or template)"
        ));
    }
    // A name made only of digits and dots is an IPv4 address written oddly (`0127.1`):
    // refused rather than guessed.
    if lower
        .split('.')
        .all(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("{host:?} is not a valid IPv4 address"));
    }
    Ok(lower)
}

/// `127.0.0.1`.
pub(crate) const LOOPBACK_V4: Ipv4Addr = Ipv4Addr::LOCALHOST;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn literal_host_and_port_forms_parse_and_print_back() {
        for (given, shown) in [
            ("api.github.com:443", "api.github.com:443"),
            ("API.GitHub.com:443", "api.github.com:443"),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("[::1]:8080", "[::1]:8080"),
            ("[0:0:0:0:0:0:0:1]:1", "[::1]:1"),
            ("localhost:65535", "localhost:65535"),
        ] {
            let d: Destination = given.parse().unwrap();
            assert_eq!(d.to_string(), shown, "{given}");
        }
        assert!("localhost:1".parse::<Destination>().unwrap().is_loopback());
        assert!("127.0.0.2:1".parse::<Destination>().unwrap().is_loopback());
        assert!(
            !"example.com:1"
                .parse::<Destination>()
                .unwrap()
                .is_loopback()
        );
    }

    #[test]
    fn anything_but_a_literal_host_and_port_is_refused() {
        for bad in [
            "api.github.com",
            "api.github.com:",
            "api.github.com:0",
            "api.github.com:65536",
            "api.github.com:+443",
            "https://api.github.com:443",
            "api.github.com/x:443",
            "*.github.com:443",
            "{{ inputs.host }}:443",
            "::1:80",
            "[nope]:80",
            "-bad.com:80",
            "a..b:80",
            "0127.1:80",
            "user@host:80",
            ":80",
            "host:80-90",
        ] {
            assert!(bad.parse::<Destination>().is_err(), "{bad} accepted");
        }
    }
}
