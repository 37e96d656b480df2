//! The ZooKeeper session of a command, from the common options.

use zk_recipes::{LossPolicy, Session, SessionOptions};

use crate::args::{Policy, ZkArgs};
use crate::exit::{self, Failure};

/// The connect string: `--connect`, else `ZK_CONNECT` (clap reads both); refused when empty.
pub fn connect_string(zk: &ZkArgs) -> Result<String, Failure> {
    match zk.connect.as_deref().map(str::trim) {
        Some(connect) if !connect.is_empty() => Ok(connect.to_owned()),
        _ => Err(Failure::new(
            exit::USAGE,
            "no ZooKeeper ensemble: give --connect HOST:PORT[,...][/chroot] or set ZK_CONNECT",
        )),
    }
}

/// Opens a session (waiting at most `--connect-timeout`).
pub async fn session(zk: &ZkArgs, policy: Policy, owner: Option<&str>) -> Result<Session, Failure> {
    session_to(zk, connect_string(zk)?, policy, owner).await
}

/// Opens a session on `connect` rather than the common options' ensemble, with their
/// credentials and timeouts (`inspect`'s session pinned to one server, `host:port`).
pub async fn session_to(
    zk: &ZkArgs,
    connect: String,
    policy: Policy,
    owner: Option<&str>,
) -> Result<Session, Failure> {
    let mut options = SessionOptions::new(connect)
        .session_timeout(zk.session_timeout)
        .connection_timeout(zk.connect_timeout)
        .loss_policy(match policy {
            Policy::Expiry => LossPolicy::Expiry,
            Policy::Suspension => LossPolicy::Suspension,
        });
    if let Some(owner) = owner {
        options = options.owner(owner);
    }
    options = credentials(zk, options)?;
    Session::connect(options).await.map_err(Failure::from)
}

/// The digest, TLS and SASL settings of the common options. The pairs are checked here, not
/// by clap: a global option's `requires` sees the environment's half but not a flag given after
/// the subcommand.
fn credentials(zk: &ZkArgs, mut options: SessionOptions) -> Result<SessionOptions, Failure> {
    let usage = |message: &str| Err(Failure::new(exit::USAGE, message));
    if let Some(digest) = &zk.digest {
        let Some((user, password)) = digest.0.split_once(':').filter(|(u, _)| !u.is_empty()) else {
            return usage("--digest (ZK_DIGEST) is USER:PASSWORD");
        };
        options = options.digest_auth(user, password);
    }
    #[cfg(feature = "tls")]
    {
        let client = match (&zk.tls_cert, &zk.tls_key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => return usage("--tls-cert (ZK_TLS_CERT) and --tls-key (ZK_TLS_KEY) go together"),
        };
        match (&zk.tls_ca, client) {
            (Some(ca), client) => {
                let mut tls = zk_recipes::TlsConfig::from_ca_file(ca).map_err(Failure::from)?;
                if let Some((cert, key)) = client {
                    tls = tls
                        .with_client_cert_files(cert, key)
                        .map_err(Failure::from)?;
                }
                options = options.tls(tls);
            }
            (None, Some(_)) => {
                return usage(
                    "--tls-cert needs --tls-ca (ZK_TLS_CA): the CA that signed the servers' \
                     certificates",
                )
            }
            (None, None) => {}
        }
    }
    #[cfg(not(feature = "tls"))]
    unsupported(&["ZK_TLS_CA", "ZK_TLS_CERT", "ZK_TLS_KEY"], "tls")?;
    #[cfg(feature = "sasl-digest-md5")]
    match (&zk.sasl_user, &zk.sasl_password) {
        (Some(user), Some(password)) => options = options.sasl_digest_md5(user, &password.0),
        (None, None) => {}
        _ => {
            return usage(
                "--sasl-user (ZK_SASL_USER) and --sasl-password (ZK_SASL_PASSWORD) go together",
            )
        }
    }
    #[cfg(not(feature = "sasl-digest-md5"))]
    unsupported(&["ZK_SASL_USER", "ZK_SASL_PASSWORD"], "sasl-digest-md5")?;
    Ok(options)
}

/// Refuses credentials this build cannot use rather than connecting without them.
#[cfg(any(not(feature = "tls"), not(feature = "sasl-digest-md5")))]
fn unsupported(vars: &[&str], feature: &str) -> Result<(), Failure> {
    match vars.iter().find(|v| std::env::var_os(v).is_some()) {
        Some(var) => Err(Failure::new(
            exit::USAGE,
            format!(
                "{var} is set, but this zkr was built without the {feature} feature \
                 (one of its default features: cargo install --path zkr)"
            ),
        )),
        None => Ok(()),
    }
}

/// Whether the common options ask for TLS (then every host not written `tcp://` is a TLS port,
/// where the four-letter words in plain text get no answer).
#[cfg(feature = "tls")]
pub fn tls(zk: &ZkArgs) -> bool {
    zk.tls_ca.is_some()
}

/// Whether the common options ask for TLS: never, in a build without the `tls` feature.
#[cfg(not(feature = "tls"))]
pub fn tls(_zk: &ZkArgs) -> bool {
    false
}

/// The credentials `zkr` keeps from CMD: its own session's secrets, not the command's.
pub const SECRETS: [&str; 2] = ["ZK_DIGEST", "ZK_SASL_PASSWORD"];

/// The servers of a connect string that speak plain text (`host:port`, chroot dropped; port
/// 2181 when missing), for the four-letter words, and how many were left out as TLS ports:
/// with `tls`, every host not written `tcp://host:port`, and any written `tcp+tls://`.
pub fn servers(connect: &str, tls: bool) -> (Vec<String>, usize) {
    let mut left_out = 0;
    let mut plain = Vec::new();
    for host in connect.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let (secure, host) = if let Some(rest) = host.strip_prefix("tcp+tls://") {
            (true, rest)
        } else if let Some(rest) = host.strip_prefix("tcp://") {
            (false, rest)
        } else {
            (tls, host)
        };
        // A chroot follows the last host.
        let host = host.split('/').next().unwrap_or_default();
        if host.is_empty() {
            continue;
        }
        if secure {
            left_out += 1;
        } else {
            plain.push(host);
        }
    }
    (with_ports(plain), left_out)
}

/// `host:port`, with 2181 where the port is missing.
fn with_ports(hosts: Vec<&str>) -> Vec<String> {
    hosts
        .into_iter()
        .map(|h| {
            let has_port = match h.rfind(':') {
                // `[::1]:2181` or `host:2181`; a bare IPv6 address has colons but no port.
                Some(i) => h.starts_with('[') && h[..i].ends_with(']') || !h[..i].contains(':'),
                None => false,
            };
            if has_port {
                h.to_owned()
            } else {
                format!("{h}:2181")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_of_a_connect_string() {
        let plain = |c: &str| servers(c, false).0;
        assert_eq!(plain("zk1:2181,zk2:2182/app/x"), ["zk1:2181", "zk2:2182"]);
        assert_eq!(plain("zk1"), ["zk1:2181"]);
        assert_eq!(
            plain("[::1]:2181, 127.0.0.1"),
            ["[::1]:2181", "127.0.0.1:2181"]
        );
        assert!(plain("/chroot").is_empty());
    }

    #[test]
    fn tls_hosts_are_left_out_of_the_four_letter_words() {
        assert_eq!(servers("zk1:2281,zk2:2281/app", true), (vec![], 2));
        assert_eq!(
            servers("tcp://zk1:2181,zk2:2281", true),
            (vec!["zk1:2181".to_owned()], 1)
        );
        assert_eq!(
            servers("tcp+tls://zk1:2281,tcp://zk2:2181/app", false),
            (vec!["zk2:2181".to_owned()], 1)
        );
    }
}
