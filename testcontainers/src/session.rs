//! A fresh chroot per test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::{Acls, Client, CreateMode};

use crate::{scaled, HarnessError};

/// Root under which [`chroot`] creates per-test directories.
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let root = zk_testcontainers::chroot("127.0.0.1:2181", "t").await?;
/// assert!(root.starts_with(&format!("127.0.0.1:2181{}/t-", zk_testcontainers::CHROOT_ROOT)));
/// # Ok(()) }
/// ```
pub const CHROOT_ROOT: &str = "/zk-tests";

/// Creates a fresh, empty directory `/zk-tests/<name>-<unique>` on the server and returns
/// the connect string rooted there, `"<connect_string>/zk-tests/<name>-<unique>"`. Tests
/// that share a server (e.g. through `ZK_CONNECT`) then cannot see each other's nodes.
///
/// A chroot already in `connect_string` is kept: the directory is created below it.
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let zk = zk_testcontainers::test_server().await?;
/// let root = zk_testcontainers::chroot(&zk.connect_string(), "lock-fairness").await?;
/// let client = zookeeper_client::Client::connect(&root).await.unwrap();
/// // "/" is now /zk-tests/lock-fairness-<unique> on the server.
/// # Ok(()) }
/// ```
pub async fn chroot(connect_string: &str, name: &str) -> Result<String, HarnessError> {
    let (hosts, base) = match connect_string.find('/') {
        Some(i) => (
            &connect_string[..i],
            connect_string[i..].trim_end_matches('/'),
        ),
        None => (connect_string, ""),
    };
    let path = format!("{base}{CHROOT_ROOT}/{}-{}", sanitize(name), unique_suffix());
    let limit = scaled(Duration::from_secs(30));
    let work = async {
        let client = Client::connect(hosts)
            .await
            .map_err(|e| HarnessError::Zk(format!("connecting to {hosts}"), e))?;
        client
            .mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all()))
            .await
            .map_err(|e| HarnessError::Zk(format!("creating {path} on {hosts}"), e))
    };
    tokio::time::timeout(limit, work).await.map_err(|_| {
        HarnessError::Timeout(format!("creating {path} on {hosts} took over {limit:?}"))
    })??;
    Ok(format!("{hosts}{path}"))
}

fn sanitize(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c == '/' || c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if name.is_empty() || name == "." || name == ".." {
        format!("test{name}")
    } else {
        name
    }
}

/// Unique across processes and calls: pid, a counter, and the clock.
fn unique_suffix() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{}-{}-{:x}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        nanos & 0xffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe() {
        assert_eq!(sanitize("a/b c"), "a_b_c");
        assert_eq!(sanitize(""), "test");
        assert_eq!(sanitize(".."), "test..");
        assert_ne!(unique_suffix(), unique_suffix());
    }
}
