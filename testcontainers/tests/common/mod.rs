//! Helpers shared by the harness's own tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::time::Duration;

use testcontainers::bollard::errors::Error as DockerError;
use zk_testcontainers::{ensemble_unavailable_reason, scaled};
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, SessionState, StateWatcher};

pub const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());

/// A client with the given session timeout (scaled), connected within a scaled deadline.
pub async fn connect(connect: &str, session_timeout: Duration) -> Client {
    let attempt = Client::connector()
        .with_session_timeout(scaled(session_timeout))
        .connect(connect);
    tokio::time::timeout(scaled(Duration::from_secs(30)), attempt)
        .await
        .unwrap_or_else(|_| panic!("connecting to {connect} timed out"))
        .unwrap_or_else(|e| panic!("connecting to {connect}: {e}"))
}

/// Waits until the watcher reports `want`; panics (with what it saw) after `limit`.
pub async fn wait_for_state(watcher: &mut StateWatcher, want: SessionState, limit: Duration) {
    let mut seen = vec![watcher.peek_state()];
    let wait = async {
        if watcher.state() == want {
            return;
        }
        loop {
            let state = watcher.changed().await;
            seen.push(state);
            if state == want {
                return;
            }
        }
    };
    if tokio::time::timeout(limit, wait).await.is_err() {
        panic!("client did not reach {want:?} within {limit:?}; states seen: {seen:?}");
    }
}

/// Retries an operation that may fail while the client reconnects, until it succeeds.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zookeeper_client::Error>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let err = match tokio::time::timeout(left, op()).await {
            Ok(Ok(value)) => return value,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".to_owned(),
        };
        if tokio::time::Instant::now() >= deadline {
            panic!("{what} did not succeed within {limit:?}: {err}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether Docker still knows a container by this name or id.
pub async fn container_exists(name: &str) -> bool {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .unwrap();
    match docker.inspect_container(name, None).await {
        Ok(_) => true,
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => false,
        Err(e) => panic!("inspecting container {name}: {e}"),
    }
}

/// The names of the volumes mounted in a container.
pub async fn container_volumes(name: &str) -> Vec<String> {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .unwrap();
    let container = docker
        .inspect_container(name, None)
        .await
        .unwrap_or_else(|e| panic!("inspecting container {name}: {e}"));
    container
        .mounts
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.name)
        .collect()
}

/// Whether Docker still knows a volume by this name.
pub async fn volume_exists(name: &str) -> bool {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .unwrap();
    match docker.inspect_volume(name).await {
        Ok(_) => true,
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => false,
        Err(e) => panic!("inspecting volume {name}: {e}"),
    }
}

/// Whether Docker still knows a network by this name.
pub async fn network_exists(name: &str) -> bool {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .unwrap();
    match docker.inspect_network(name, None).await {
        Ok(_) => true,
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => false,
        Err(e) => panic!("inspecting network {name}: {e}"),
    }
}

/// `true` (after saying so) when the test cannot run: `ZK_CONNECT` is set, so there are no
/// containers of our own to break.
pub fn not_run() -> bool {
    match ensemble_unavailable_reason() {
        Some(reason) => {
            eprintln!("NOT RUN: {reason}");
            true
        }
        None => false,
    }
}
