//! [`ZkMember`]: one ZooKeeper server in a container, launched and operated on (stop, kill,
//! pause, network cuts, four-letter words), standalone or in an ensemble.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use testcontainers::bollard::models::{
    NetworkConnectRequest, NetworkDisconnectRequest, PortBinding,
};
use testcontainers::core::{IntoContainerPort, Mount};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use crate::{docker, image, network, scaled, HarnessError};

use super::mode::four_letter_at;
use super::options::{environment, DATA_DIRS, SECURE_CLIENT_PORT};
use super::ServerMode;
use super::ServerOptions;
use super::{CLIENT_PORT, DEFAULT_NETWORK, FOUR_LETTER_TIMEOUT, POLL_INTERVAL, POLL_TIMEOUT};

/// How many times [`ZkServer::pause`] asks the runtime to freeze a server before it gives up.
const PAUSE_ATTEMPTS: u32 = 5;

/// One ZooKeeper server in a container, with the fault-injection operations, removed when
/// this value is dropped (also when the test panics): a standalone server
/// ([`ZkServer::start`]) or a member of an ensemble
/// ([`ZkEnsemble::member`](crate::ZkEnsemble::member)), one type for both (as Curator's
/// `TestingServer` and `TestingCluster`'s instances), so the operations below work the same
/// on either. [`ZkMember`](crate::ZkMember) is another name for it.
///
/// The client port is published on `127.0.0.1` at a host port chosen once, so the connect
/// string survives [`stop`](Self::stop)/[`start_again`](Self::start_again) and
/// [`disconnect`](Self::disconnect)/[`reconnect`](Self::reconnect).
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
/// let member = ensemble.member(0);
/// member.pause().await?;
/// member.unpause().await?;
/// println!("{}", member.four_letter("srvr").await?);
/// # Ok(()) }
/// ```
pub struct ZkServer {
    container: ContainerAsync<GenericImage>,
    name: String,
    host_port: u16,
    secure_host_port: Option<u16>,
    network: String,
    /// The fixed address of an ensemble's member on its network (`network.rs`).
    address: Option<String>,
    server_id: Option<u32>,
    startup_timeout: Duration,
}

impl fmt::Debug for ZkServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkServer")
            .field("container", &self.name)
            .field("id", &self.container.id())
            .field("host_port", &self.host_port)
            .field("secure_host_port", &self.secure_host_port)
            .field("network", &self.network)
            .field("server_id", &self.server_id)
            .finish()
    }
}

/// What [`launch`] needs to know beyond the options.
pub(crate) struct Launch<'a> {
    pub(crate) opts: &'a ServerOptions,
    pub(crate) image: &'a str,
    pub(crate) name: String,
    /// `None`: the default bridge network (standalone).
    pub(crate) network: Option<&'a str>,
    /// `Some((id, servers))` for an ensemble member: its id and the `server.N=...` lines.
    pub(crate) member: Option<(u32, &'a str)>,
}

/// Creates and starts the container (not waiting for ZooKeeper), retrying with another
/// host port if the chosen one was taken in the meantime.
pub(crate) async fn launch(l: Launch<'_>) -> Result<ZkServer, HarnessError> {
    const ATTEMPTS: usize = 4;
    let docker = docker::client().await?;
    docker::sweep_once(&docker).await;
    let (repo, tag) = image::split_reference(l.image);
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let port = docker::free_port()?;
        let secure_port = match l.opts.tls {
            Some(_) => Some(loop {
                let other = docker::free_port()?;
                if other != port {
                    break other;
                }
            }),
            None => None,
        };
        // Same name on every attempt: ensemble peers know each other by it.
        let name = l.name.clone();
        let image = GenericImage::new(repo, tag).with_exposed_port(CLIENT_PORT.tcp());
        let image = match secure_port {
            Some(_) => image.with_exposed_port(SECURE_CLIENT_PORT.tcp()),
            None => image,
        };
        let request = image
            .with_container_name(name.clone())
            .with_label(docker::OWNER_LABEL, docker::owner())
            .with_startup_timeout(scaled(l.opts.startup_timeout))
            .with_host_config_modifier(move |host| {
                // testcontainers would publish every exposed port on 0.0.0.0: publish only
                // the client ports, on loopback, at the ports chosen up front.
                host.publish_all_ports = Some(false);
                let binding = |port: u16| {
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(port.to_string()),
                    }])
                };
                let mut bindings = HashMap::from([(format!("{CLIENT_PORT}/tcp"), binding(port))]);
                if let Some(secure) = secure_port {
                    bindings.insert(format!("{SECURE_CLIENT_PORT}/tcp"), binding(secure));
                }
                host.port_bindings = Some(bindings);
            });
        let request = l
            .opts
            .container_files()
            .into_iter()
            .fold(request, |r, (path, contents)| {
                r.with_copy_to(path, contents)
            });
        let request = environment(&l)
            .into_iter()
            .fold(request, |r, (k, v)| r.with_env_var(k, v));
        let request = match l.network {
            Some(network) => request.with_network(network),
            None => request,
        };
        let request = if l.opts.data_in_memory {
            DATA_DIRS
                .into_iter()
                .fold(request, |r, dir| r.with_mount(Mount::tmpfs_mount(dir)))
        } else {
            request
        };
        match request.start().await {
            Ok(container) => {
                return Ok(ZkServer {
                    container,
                    name,
                    host_port: port,
                    secure_host_port: secure_port,
                    network: l.network.unwrap_or(DEFAULT_NETWORK).to_owned(),
                    address: None,
                    server_id: l.member.map(|(id, _)| id),
                    startup_timeout: l.opts.startup_timeout,
                });
            }
            Err(e) => {
                // A container that was created but failed to start has no handle to remove
                // it on drop: remove it by name.
                docker::remove_container(&docker, &name).await;
                last = e.to_string();
                if docker::is_port_conflict(&last) && attempt < ATTEMPTS {
                    tracing::debug!("host port {port} was taken meanwhile; retrying");
                    continue;
                }
                if last.contains("failed to pull the image") {
                    return Err(HarnessError::ImageMissing {
                        image: l.image.to_owned(),
                        reason: format!(
                            "it is not present locally and pulling it failed ({last}); \
                             load it into Docker, or unset ZK_IMAGE to use {}",
                            image::DEFAULT_IMAGE
                        ),
                    });
                }
                break;
            }
        }
    }
    Err(HarnessError::docker(
        format!("starting container {} from {}", l.name, l.image),
        last,
    ))
}

impl ZkServer {
    /// `127.0.0.1:<host port>`: this server alone.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// assert!(server.connect_string().starts_with("127.0.0.1:"));
    /// # Ok(()) }
    /// ```
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.host_port)
    }

    /// `127.0.0.1:<host port>` of the TLS client port, when the server has one
    /// ([`ServerOptions::with_tls`](crate::ServerOptions::with_tls)).
    ///
    /// ```no_run
    /// # async fn demo(opts: zk_testcontainers::ServerOptions) -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start_with(opts).await?;
    /// let tls = server.secure_connect_string().expect("started with_tls");
    /// # Ok(()) }
    /// ```
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_host_port
            .map(|port| format!("127.0.0.1:{port}"))
    }

    /// The host port (on `127.0.0.1`) the TLS client port is published at, when the server
    /// has one; fixed for the life of the container.
    ///
    /// ```no_run
    /// # async fn demo(opts: zk_testcontainers::ServerOptions) -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start_with(opts).await?;
    /// assert!(server.secure_host_port().is_some());
    /// # Ok(()) }
    /// ```
    pub fn secure_host_port(&self) -> Option<u16> {
        self.secure_host_port
    }

    /// The host port (on `127.0.0.1`) the client port is published at; fixed for the life
    /// of the container.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// assert!(server.host_port() > 0);
    /// # Ok(()) }
    /// ```
    pub fn host_port(&self) -> u16 {
        self.host_port
    }

    /// The container's name (also its host name on an ensemble's network).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// println!("docker logs {}", server.container_name());
    /// # Ok(()) }
    /// ```
    pub fn container_name(&self) -> &str {
        &self.name
    }

    /// The container's id.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// assert!(!server.container_id().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn container_id(&self) -> &str {
        self.container.id()
    }

    /// The ZooKeeper server id (`myid`) of an ensemble member; `None` for a standalone server.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// assert_eq!(ensemble.member(0).server_id(), Some(1));
    /// # Ok(()) }
    /// ```
    pub fn server_id(&self) -> Option<u32> {
        self.server_id
    }

    /// Stops the server gracefully (SIGTERM, then SIGKILL after 10 s). The container and its
    /// data are kept; [`start_again`](Self::start_again) brings it back.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// server.stop().await?;
    /// server.start_again().await?;
    /// # Ok(()) }
    /// ```
    pub async fn stop(&self) -> Result<(), HarnessError> {
        self.container
            .stop_with_timeout(Some(10))
            .await
            .map_err(|e| self.error("stopping", e))
    }

    /// Starts a stopped or killed server again: same container, same data, same host port
    /// (hence same connect string), and waits until it answers. A standalone server is
    /// waited for until it serves; an ensemble member only until it is up, since it may
    /// need the others for a quorum (use [`ZkEnsemble::wait_for_quorum`](crate::ZkEnsemble::wait_for_quorum)).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// let before = server.connect_string();
    /// server.kill().await?;
    /// server.start_again().await?;
    /// assert_eq!(server.connect_string(), before);
    /// # Ok(()) }
    /// ```
    pub async fn start_again(&self) -> Result<(), HarnessError> {
        self.container.start().await.map_err(|e| {
            let mut err = self.error("starting again", e);
            if let HarnessError::Container(msg) = &mut err {
                if docker::is_port_conflict(msg) {
                    msg.push_str(" (another process took the host port while it was stopped)");
                }
            }
            err
        })?;
        self.wait_until_up(scaled(self.startup_timeout)).await
    }

    /// Kills the server abruptly (SIGKILL) and waits until the container has exited.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// ensemble.leader().await?.kill().await?;
    /// # Ok(()) }
    /// ```
    pub async fn kill(&self) -> Result<(), HarnessError> {
        let docker = docker::client().await?;
        docker
            .kill_container(self.container.id(), None)
            .await
            .map_err(|e| self.error("killing", e))?;
        let deadline = Instant::now() + scaled(Duration::from_secs(10));
        loop {
            let running = self
                .container
                .is_running()
                .await
                .map_err(|e| self.error("inspecting", e))?;
            if !running {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::Timeout(format!(
                    "container {} still running after SIGKILL",
                    self.name
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Freezes every process of the server (`docker pause`): connections stay open but
    /// nothing answers, as with a hung machine. Clients notice only by their timeouts.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// server.pause().await?;
    /// // ... the client sees SessionState::Disconnected ...
    /// server.unpause().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// The container runtime's freezer can fail to catch every process of a busy server
    /// ("unable to freeze", when a thread sits in the kernel, in an `fsync` for example); it
    /// thaws the container again when it gives up. So a refused freeze is tried again a few
    /// times, a moment apart, before it is reported.
    pub async fn pause(&self) -> Result<(), HarnessError> {
        let mut attempt = 1;
        loop {
            match self.container.pause().await {
                Ok(()) => return Ok(()),
                Err(e)
                    if attempt < PAUSE_ATTEMPTS && e.to_string().contains("unable to freeze") =>
                {
                    tracing::debug!(container = %self.name, attempt, error = %e, "freezing failed; trying again");
                    tokio::time::sleep(Duration::from_millis(100 * attempt as u64)).await;
                    attempt += 1;
                }
                Err(e) => return Err(self.error("pausing", e)),
            }
        }
    }

    /// Thaws a paused server.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// server.pause().await?;
    /// server.unpause().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unpause(&self) -> Result<(), HarnessError> {
        self.container
            .unpause()
            .await
            .map_err(|e| self.error("unpausing", e))
    }

    /// Cuts the server off its network (`docker network disconnect`): its peers lose it, and
    /// so do clients, because the published host port goes with the network (connections
    /// through it are closed, new ones refused).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// server.disconnect().await?;
    /// assert!(server.four_letter("ruok").await.is_err());
    /// server.reconnect().await?;
    /// # Ok(()) }
    /// ```
    pub async fn disconnect(&self) -> Result<(), HarnessError> {
        let docker = docker::client().await?;
        let request = NetworkDisconnectRequest {
            container: self.container.id().to_owned(),
            force: Some(true),
        };
        docker
            .disconnect_network(&self.network, request)
            .await
            .map_err(|e| self.error(&format!("disconnecting from {}", self.network), e))
    }

    /// Reattaches a disconnected server to its network: the same host port is published
    /// again and ensemble peers find it again by name. Waits until the server answers
    /// through the host port (serving, for a standalone server).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// server.disconnect().await?;
    /// server.reconnect().await?;
    /// assert!(server.four_letter("ruok").await?.contains("imok"));
    /// # Ok(()) }
    /// ```
    pub async fn reconnect(&self) -> Result<(), HarnessError> {
        let docker = docker::client().await?;
        let request = NetworkConnectRequest {
            container: self.container.id().to_owned(),
            // An ensemble's member comes back at its own address (see `network.rs`).
            endpoint_config: self.address.as_deref().map(network::at),
        };
        docker
            .connect_network(&self.network, request)
            .await
            .map_err(|e| self.error(&format!("connecting to {}", self.network), e))?;
        self.wait_until_up(scaled(self.startup_timeout)).await
    }

    /// Fixes the member's address on its network to the one it has now (`network.rs`).
    pub(crate) async fn pin_address(&mut self) -> Result<(), HarnessError> {
        self.address = Some(network::pin(self.container.id(), &self.network).await?);
        Ok(())
    }

    /// Sends a four-letter-word command (`srvr`, `mntr`, `ruok`, `stat`, `cons`...) through
    /// the host port and returns the answer. Fails if the server cannot be reached or does
    /// not answer within 5 s (scaled). An empty answer means the connection was closed
    /// without one (e.g. the server is not listening yet).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// let srvr = server.four_letter("srvr").await?;
    /// assert!(srvr.contains("Mode: standalone"));
    /// # Ok(()) }
    /// ```
    pub async fn four_letter(&self, cmd: &str) -> Result<String, HarnessError> {
        four_letter_at(self.host_port, cmd, scaled(FOUR_LETTER_TIMEOUT)).await
    }

    /// The server's current [`ServerMode`], from `srvr`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// let mode = ensemble.member(0).mode().await?;
    /// assert!(mode.is_serving());
    /// # Ok(()) }
    /// ```
    pub async fn mode(&self) -> Result<ServerMode, HarnessError> {
        self.mode_within(scaled(FOUR_LETTER_TIMEOUT)).await
    }

    /// [`mode`](Self::mode), the `srvr` exchange bounded by `limit`.
    pub(crate) async fn mode_within(&self, limit: Duration) -> Result<ServerMode, HarnessError> {
        let answer = four_letter_at(self.host_port, "srvr", limit).await?;
        ServerMode::parse(&answer).ok_or_else(|| {
            HarnessError::Container(format!(
                "{}: no Mode in the srvr answer {answer:?}",
                self.name
            ))
        })
    }

    /// The container's output so far (ZooKeeper logs to stdout), for failure messages.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// eprintln!("{}", server.logs().await?);
    /// # Ok(()) }
    /// ```
    pub async fn logs(&self) -> Result<String, HarnessError> {
        let out = self
            .container
            .stdout_to_vec()
            .await
            .map_err(|e| self.error("reading logs of", e))?;
        let err = self
            .container
            .stderr_to_vec()
            .await
            .map_err(|e| self.error("reading logs of", e))?;
        let mut logs = String::from_utf8_lossy(&out).into_owned();
        logs.push_str(&String::from_utf8_lossy(&err));
        Ok(logs)
    }

    /// Waits until the server answers through the host port: until it serves (standalone)
    /// or until it is up (ensemble member). Fails early, with the logs, if the container
    /// exits.
    pub(crate) async fn wait_until_up(&self, timeout: Duration) -> Result<(), HarnessError> {
        let want_serving = self.server_id.is_none();
        let deadline = Instant::now() + timeout;
        let mut last_check = Instant::now();
        let mut last_answer = String::from("(none)");
        loop {
            match four_letter_at(self.host_port, "srvr", scaled(POLL_TIMEOUT)).await {
                Ok(answer) => {
                    let up = match ServerMode::parse(&answer) {
                        Some(mode) => !want_serving || mode.is_serving(),
                        None => false,
                    };
                    if up {
                        return Ok(());
                    }
                    if !answer.is_empty() {
                        last_answer = answer;
                    }
                }
                Err(e) => last_answer = e.to_string(),
            }
            if last_check.elapsed() >= Duration::from_secs(1) {
                last_check = Instant::now();
                if !self.container.is_running().await.unwrap_or(true) {
                    return Err(HarnessError::Container(format!(
                        "{} exited while starting; its output:\n{}",
                        self.name,
                        self.log_tail().await
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::Timeout(format!(
                    "{} did not come up within {timeout:?}; last srvr answer: {}\n\
                     its output:\n{}",
                    self.name,
                    last_answer.trim(),
                    self.log_tail().await
                )));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// The last lines of the container's output, for error messages.
    pub(crate) async fn log_tail(&self) -> String {
        match self.logs().await {
            Ok(logs) => {
                let lines: Vec<&str> = logs.lines().collect();
                lines[lines.len().saturating_sub(40)..].join("\n")
            }
            Err(e) => format!("(logs unavailable: {e})"),
        }
    }

    fn error(&self, action: &str, err: impl fmt::Display) -> HarnessError {
        HarnessError::docker(format!("{action} container {}", self.name), err)
    }
}
