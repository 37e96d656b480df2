//! Docker plumbing: the client, resource names, host ports, and sweeping up what killed test
//! processes left behind.
//!
//! Containers and networks are removed when their handles drop, but a test process killed
//! by a signal (a nextest timeout, Ctrl-C) runs no destructors. Every name therefore carries
//! its owner (a hash of the host name, the pid and the pid's start time); the first server
//! started in a process removes resources whose owner on this host no longer runs.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use testcontainers::bollard::query_parameters::{
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, RemoveContainerOptionsBuilder,
};
use testcontainers::bollard::Docker;

use crate::HarnessError;

/// Prefix of every container and network the harness creates.
pub(crate) const NAME_PREFIX: &str = "zk-tc-";
/// Label put on every container (value: the owner token).
pub(crate) const OWNER_LABEL: &str = "org.zk-recipes.testcontainers.owner";

/// A Docker client (shared with testcontainers), checked to answer.
///
/// API versions: testcontainers 0.28 builds bollard 0.21 clients for API 1.53 and never
/// negotiates, yet works with older engines such as Docker 20.10 (API 1.41), because bollard
/// 0.21.1 sends unversioned paths (`/containers/create`, not `/v1.53/containers/create`)
/// and an engine serves those at its own API version. Should a bollard release start sending
/// the version, an old engine answers "client version 1.53 is too new", which surfaces here
/// as [`HarnessError::DockerUnavailable`].
pub(crate) async fn client() -> Result<Docker, HarnessError> {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .map_err(|e| HarnessError::DockerUnavailable(e.to_string()))?;
    docker
        .ping()
        .await
        .map_err(|e| HarnessError::DockerUnavailable(e.to_string()))?;
    Ok(docker)
}

/// `<host hash>-<pid>-<pid start time>`: unique among live processes of this host.
pub(crate) fn owner() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| {
        let pid = std::process::id();
        format!(
            "{:08x}-{pid}-{}",
            host_hash(),
            process_start(pid).unwrap_or(0)
        )
    })
}

/// A fresh resource name: `zk-tc-<owner>-<n>`.
pub(crate) fn unique_name() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(1);
    format!(
        "{NAME_PREFIX}{}-{}",
        owner(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// FNV-1a of the host name: stable across processes and Rust versions.
fn host_hash() -> u32 {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default();
    name.trim().bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Start time of a process in clock ticks since boot (Linux), to tell a reused pid apart.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22; fields after the parenthesised command name start at field 3.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Whether a resource name belongs to a process of this host that is gone. `None`: not ours
/// to judge (another host, or a name we did not make).
fn owner_is_gone(name: &str) -> Option<bool> {
    let rest = name.trim_start_matches('/').strip_prefix(NAME_PREFIX)?;
    let mut parts = rest.split('-');
    let host = u32::from_str_radix(parts.next()?, 16).ok()?;
    let pid: u32 = parts.next()?.parse().ok()?;
    let start: u64 = parts.next()?.parse().ok()?;
    if host != host_hash() || start == 0 {
        return None;
    }
    Some(process_start(pid) != Some(start))
}

/// Once per process: remove containers, then networks, left by dead test processes.
pub(crate) async fn sweep_once(docker: &Docker) {
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT.get_or_init(|| sweep(docker)).await;
}

async fn sweep(docker: &Docker) {
    if process_start(std::process::id()).is_none() {
        return; // no /proc: cannot tell live owners from dead ones
    }
    let filters = HashMap::from([("name", vec![NAME_PREFIX])]);
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap_or_default();
    for c in containers {
        let (Some(id), Some(names)) = (c.id, c.names) else {
            continue;
        };
        if names.iter().any(|n| owner_is_gone(n) == Some(true)) {
            tracing::info!("removing container {names:?} left by a dead test process");
            remove_container(docker, &id).await;
        }
    }
    let networks = docker
        .list_networks(Some(
            ListNetworksOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap_or_default();
    for n in networks {
        if let Some(name) = n.name.filter(|n| owner_is_gone(n) == Some(true)) {
            tracing::info!("removing network {name} left by a dead test process");
            let _ = docker.remove_network(&name).await;
        }
    }
}

/// Force-removes a container (and its anonymous volumes); errors are ignored.
pub(crate) async fn remove_container(docker: &Docker, id_or_name: &str) {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    let _ = docker.remove_container(id_or_name, Some(options)).await;
}

/// A port on 127.0.0.1 that is free right now, preferably below the usual ephemeral range
/// (so that outgoing connections do not grab it while a server is stopped).
pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    for i in 0..64u64 {
        let port = 20_000 + ((random.wrapping_add(i.wrapping_mul(7919))) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| HarnessError::Io("picking a free port on 127.0.0.1".into(), e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| HarnessError::Io("picking a free port on 127.0.0.1".into(), e))
}

/// Whether a container start failed because its host port was taken meanwhile.
pub(crate) fn is_port_conflict(message: &str) -> bool {
    message.contains("port is already allocated") || message.contains("address already in use")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_names_are_recognised_as_alive() {
        let name = unique_name();
        assert!(name.starts_with(NAME_PREFIX));
        if process_start(std::process::id()).is_some() {
            assert_eq!(owner_is_gone(&name), Some(false));
            assert_eq!(owner_is_gone(&format!("/{name}-3")), Some(false));
        }
    }

    #[test]
    fn port_conflicts_are_recognised() {
        // Docker 20.10's two wordings: another container has the port, another process has it.
        assert!(is_port_conflict(
            "Bind for 127.0.0.1:24998 failed: port is already allocated"
        ));
        assert!(is_port_conflict(
            "Error starting userland proxy: listen tcp4 127.0.0.1:24998: bind: address already in use"
        ));
        assert!(!is_port_conflict("No such image: zookeeper:3.8"));
    }

    #[test]
    fn foreign_names_are_left_alone() {
        assert_eq!(owner_is_gone("zookeeper"), None);
        assert_eq!(owner_is_gone("zk-tc-nothex-1-2-3"), None);
        let other_host = format!("{NAME_PREFIX}{:08x}-1-5-1", host_hash() ^ 1);
        assert_eq!(owner_is_gone(&other_host), None);
    }

    #[test]
    fn dead_owner_is_detected() {
        if process_start(std::process::id()).is_some() {
            // pid 1 exists but did not start at tick 1 (or, in a container, does: then any
            // other start time of it works the same way).
            let start = process_start(1).unwrap_or(0) + 1;
            let name = format!("{NAME_PREFIX}{:08x}-1-{start}-1", host_hash());
            assert_eq!(owner_is_gone(&name), Some(true));
        }
    }
}
