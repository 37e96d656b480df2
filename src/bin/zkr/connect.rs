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
    let mut options = SessionOptions::new(connect_string(zk)?)
        .session_timeout(zk.session_timeout)
        .connection_timeout(zk.connect_timeout)
        .loss_policy(match policy {
            Policy::Expiry => LossPolicy::Expiry,
            Policy::Suspension => LossPolicy::Suspension,
        });
    if let Some(owner) = owner {
        options = options.owner(owner);
    }
    Session::connect(options).await.map_err(Failure::from)
}

/// The servers of a connect string (`host:port`, chroot dropped; port 2181 when missing), for
/// the four-letter words.
pub fn servers(connect: &str) -> Vec<String> {
    let hosts = connect.split('/').next().unwrap_or_default();
    hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
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

/// The default owner label, as the library writes it: `{hostname}/{pid}`.
pub fn default_label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}/{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_of_a_connect_string() {
        assert_eq!(servers("zk1:2181,zk2:2182/app/x"), ["zk1:2181", "zk2:2182"]);
        assert_eq!(servers("zk1"), ["zk1:2181"]);
        assert_eq!(
            servers("[::1]:2181, 127.0.0.1"),
            ["[::1]:2181", "127.0.0.1:2181"]
        );
        assert!(servers("/chroot").is_empty());
        assert!(default_label().contains('/'));
    }
}
