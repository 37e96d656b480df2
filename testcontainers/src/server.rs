//! One ZooKeeper server in a container: starting it, and the per-server operations (stop,
//! kill, pause, network cuts, four-letter words) shared by standalone servers and ensemble
//! members.

use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::time::{Duration, Instant};

use testcontainers::bollard::models::{
    NetworkConnectRequest, NetworkDisconnectRequest, PortBinding,
};
use testcontainers::core::{IntoContainerPort, Mount};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{docker, image, scaled, HarnessError};

/// The client port inside the container.
pub(crate) const CLIENT_PORT: u16 = 2181;
/// Network of standalone servers.
const DEFAULT_NETWORK: &str = "bridge";
/// How long one four-letter-word exchange may take by default (before scaling).
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one poll of a server may take while waiting for it (before scaling).
pub(crate) const POLL_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between polls while waiting for a server.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Settings of the servers the harness starts. Start from `ServerOptions::default()` and
/// adjust with the `with_*` methods.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_testcontainers::{ServerOptions, ZkServer};
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let opts = ServerOptions::default()
///     .with_tick_time(Duration::from_millis(100))
///     .with_session_timeouts(Duration::from_millis(200), Duration::from_secs(10));
/// let server = ZkServer::start_with(opts).await?;
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Image to run; `None` means [`configured_image`](crate::configured_image) (`ZK_IMAGE`
    /// or the default image).
    pub image: Option<String>,
    /// ZooKeeper's `tickTime`. Default 200 ms, so that sessions can expire quickly.
    pub tick_time: Duration,
    /// `minSessionTimeout`; `None`: the server's default (2 × tick time).
    pub min_session_timeout: Option<Duration>,
    /// `maxSessionTimeout`; `None`: the image's default (60 s for the default image).
    pub max_session_timeout: Option<Duration>,
    /// How long a server (or an ensemble's quorum) may take to come up, before
    /// [`scaled`](crate::scaled). Default 60 s.
    pub startup_timeout: Duration,
    /// Ensembles: how long followers may take to connect and sync to a new leader
    /// (`initLimit`, in ticks after [`scaled`](crate::scaled)). Default 5 s. A leader that
    /// waits in vain for its followers gives up after this long and a new election starts.
    pub init_limit: Duration,
    /// Ensembles: how long a follower may lag or be silent before the leader drops it, and
    /// a silent leader before its followers drop it (`syncLimit`, in ticks after
    /// [`scaled`](crate::scaled)). Default 3 s: a member cut off by
    /// [`disconnect`](ZkMember::disconnect) is noticed this fast.
    pub sync_limit: Duration,
    /// Extra environment variables for the container (they win over the harness's own).
    pub env: Vec<(String, String)>,
    /// Keep the server's data (snapshots and transaction log) in memory, on a `tmpfs`, instead
    /// of on a volume. Default `false`. See [`with_data_in_memory`](Self::with_data_in_memory).
    pub data_in_memory: bool,
}

/// Where images keep ZooKeeper's data: the default image's data directory, and the official
/// image's data and log directories.
const DATA_DIRS: [&str; 2] = ["/data", "/datalog"];

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            image: None,
            tick_time: Duration::from_millis(200),
            min_session_timeout: None,
            max_session_timeout: None,
            startup_timeout: Duration::from_secs(60),
            init_limit: Duration::from_secs(5),
            sync_limit: Duration::from_secs(3),
            env: Vec::new(),
            data_in_memory: false,
        }
    }
}

impl ServerOptions {
    /// Runs `image` instead of the configured one.
    ///
    /// ```
    /// let opts = zk_testcontainers::ServerOptions::default().with_image("zookeeper:3.8");
    /// assert_eq!(opts.image.as_deref(), Some("zookeeper:3.8"));
    /// ```
    pub fn with_image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// Sets ZooKeeper's `tickTime` (whole milliseconds).
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = zk_testcontainers::ServerOptions::default().with_tick_time(Duration::from_millis(500));
    /// assert_eq!(opts.tick_time, Duration::from_millis(500));
    /// ```
    pub fn with_tick_time(mut self, tick: Duration) -> Self {
        self.tick_time = tick;
        self
    }

    /// Sets `minSessionTimeout` and `maxSessionTimeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = zk_testcontainers::ServerOptions::default()
    ///     .with_session_timeouts(Duration::from_millis(400), Duration::from_secs(30));
    /// assert_eq!(opts.max_session_timeout, Some(Duration::from_secs(30)));
    /// ```
    pub fn with_session_timeouts(mut self, min: Duration, max: Duration) -> Self {
        self.min_session_timeout = Some(min);
        self.max_session_timeout = Some(max);
        self
    }

    /// Sets how long startup may take (before [`scaled`](crate::scaled)).
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = zk_testcontainers::ServerOptions::default().with_startup_timeout(Duration::from_secs(120));
    /// assert_eq!(opts.startup_timeout, Duration::from_secs(120));
    /// ```
    pub fn with_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets `initLimit` and `syncLimit` as durations (see the fields).
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = zk_testcontainers::ServerOptions::default()
    ///     .with_limits(Duration::from_secs(10), Duration::from_secs(5));
    /// assert_eq!(opts.sync_limit, Duration::from_secs(5));
    /// ```
    pub fn with_limits(mut self, init: Duration, sync: Duration) -> Self {
        self.init_limit = init;
        self.sync_limit = sync;
        self
    }

    /// Adds an environment variable to the container, e.g. `JVMFLAGS` (the JVM's options, in
    /// both the local and the official image).
    ///
    /// ```
    /// let opts = zk_testcontainers::ServerOptions::default().with_env("JVMFLAGS", "-Xmx128m");
    /// assert_eq!(opts.env.len(), 1);
    /// ```
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Keeps the server's data in memory (a `tmpfs` over its data directories), so that a
    /// write no longer waits for a disk: each write still syncs the transaction log, but the
    /// sync costs next to nothing. That is not how a production server runs; it shows what a
    /// client costs on top of the server's own work, and it suits tests that write a lot.
    ///
    /// Docker drops a `tmpfs` when its container stops, so the data does not survive
    /// [`ZkMember::stop`](crate::ZkMember::stop) or [`ZkMember::kill`](crate::ZkMember::kill)
    /// followed by `start_again`: the server comes back empty.
    ///
    /// ```
    /// let opts = zk_testcontainers::ServerOptions::default().with_data_in_memory(true);
    /// assert!(opts.data_in_memory);
    /// ```
    pub fn with_data_in_memory(mut self, in_memory: bool) -> Self {
        self.data_in_memory = in_memory;
        self
    }

    fn image(&self) -> String {
        self.image.clone().unwrap_or_else(image::configured_image)
    }
}

/// What a server says about itself in the `Mode:` line of `srvr`.
///
/// ```no_run
/// use zk_testcontainers::{ServerMode, ZkServer};
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let server = ZkServer::start().await?;
/// assert_eq!(server.mode().await?, ServerMode::Standalone);
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerMode {
    /// A standalone server, serving.
    Standalone,
    /// The leader of a serving ensemble.
    Leader,
    /// A follower of a serving ensemble.
    Follower,
    /// An observer of a serving ensemble.
    Observer,
    /// Up, but not serving requests (an ensemble member without quorum, or still starting).
    NotServing,
}

impl ServerMode {
    /// Whether the server answers client requests in this mode.
    ///
    /// ```
    /// use zk_testcontainers::ServerMode;
    /// assert!(ServerMode::Leader.is_serving());
    /// assert!(!ServerMode::NotServing.is_serving());
    /// ```
    pub fn is_serving(self) -> bool {
        self != ServerMode::NotServing
    }

    /// Reads the mode from a `srvr` (or `stat`) answer; `None` if the text has none.
    pub(crate) fn parse(srvr: &str) -> Option<ServerMode> {
        if srvr.contains("not currently serving requests") {
            return Some(ServerMode::NotServing);
        }
        let mode = srvr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Mode:"))?
            .trim();
        match mode {
            "standalone" => Some(ServerMode::Standalone),
            "leader" => Some(ServerMode::Leader),
            "follower" => Some(ServerMode::Follower),
            "observer" => Some(ServerMode::Observer),
            _ => None,
        }
    }
}

impl fmt::Display for ServerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerMode::Standalone => "standalone",
            ServerMode::Leader => "leader",
            ServerMode::Follower => "follower",
            ServerMode::Observer => "observer",
            ServerMode::NotServing => "not serving",
        })
    }
}

/// One ZooKeeper server in a container, with the fault-injection operations. This is what
/// [`ZkEnsemble::member`](crate::ZkEnsemble::member) returns, and what a [`ZkServer`]
/// dereferences to: the operations below work the same on both.
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
pub struct ZkMember {
    container: ContainerAsync<GenericImage>,
    name: String,
    host_port: u16,
    network: String,
    server_id: Option<u32>,
    startup_timeout: Duration,
}

impl fmt::Debug for ZkMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkMember")
            .field("container", &self.name)
            .field("id", &self.container.id())
            .field("host_port", &self.host_port)
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
pub(crate) async fn launch(l: Launch<'_>) -> Result<ZkMember, HarnessError> {
    const ATTEMPTS: usize = 4;
    let docker = docker::client().await?;
    docker::sweep_once(&docker).await;
    let (repo, tag) = image::split_reference(l.image);
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let port = docker::free_port()?;
        // Same name on every attempt: ensemble peers know each other by it.
        let name = l.name.clone();
        let request = GenericImage::new(repo, tag)
            .with_exposed_port(CLIENT_PORT.tcp())
            .with_container_name(name.clone())
            .with_label(docker::OWNER_LABEL, docker::owner())
            .with_startup_timeout(scaled(l.opts.startup_timeout))
            .with_host_config_modifier(move |host| {
                // testcontainers would publish every exposed port on 0.0.0.0: publish only
                // the client port, on loopback, at the port chosen up front.
                host.publish_all_ports = Some(false);
                host.port_bindings = Some(HashMap::from([(
                    format!("{CLIENT_PORT}/tcp"),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(port.to_string()),
                    }]),
                )]));
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
                return Ok(ZkMember {
                    container,
                    name,
                    host_port: port,
                    network: l.network.unwrap_or(DEFAULT_NETWORK).to_owned(),
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

/// The container's environment, in the official `zookeeper` image's interface (`ZOO_*`,
/// `JVMFLAGS`), which the local image speaks too: one code path for either image.
fn environment(l: &Launch<'_>) -> Vec<(String, String)> {
    let o = l.opts;
    let ms = |d: Duration| d.as_millis().to_string();
    // A limit in ticks, at least 2.
    let ticks = |d: Duration| {
        let tick = o.tick_time.as_millis().max(1);
        scaled(d).as_millis().div_ceil(tick).max(2).to_string()
    };
    let (id, servers) = l.member.unwrap_or((1, ""));
    let mut env = vec![
        ("ZOO_MY_ID", id.to_string()),
        ("ZOO_TICK_TIME", ms(o.tick_time)),
        ("ZOO_INIT_LIMIT", ticks(o.init_limit)),
        ("ZOO_SYNC_LIMIT", ticks(o.sync_limit)),
        ("ZOO_4LW_COMMANDS_WHITELIST", "*".to_owned()),
        ("ZOO_ADMINSERVER_ENABLED", "false".to_owned()),
        ("ZOO_MAX_CLIENT_CNXNS", "0".to_owned()),
    ];
    // Peers connect within a Docker network in well under a millisecond. ZooKeeper's default
    // of 5 s for these connections stalls elections whenever a member is unreachable (the
    // election messages to everyone wait behind the blocked connect).
    let mut extra = vec![
        "quorumListenOnAllIPs=true".to_owned(),
        "reconfigEnabled=false".to_owned(),
        format!("cnxTimeout={}", ms(scaled(Duration::from_secs(1)))),
        format!(
            "maxSessionTimeout={}",
            ms(o.max_session_timeout.unwrap_or(Duration::from_secs(60)))
        ),
    ];
    if let Some(min) = o.min_session_timeout {
        extra.push(format!("minSessionTimeout={}", ms(min)));
    }
    if l.member.is_some() {
        env.push(("ZOO_SERVERS", servers.to_owned()));
        env.push(("ZOO_STANDALONE_ENABLED", "false".to_owned()));
    }
    env.push(("ZOO_CFG_EXTRA", extra.join(" ")));
    let mut env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    env.extend(o.env.iter().cloned());
    env
}

/// Sends a four-letter word to `127.0.0.1:port` and reads the answer to the end.
pub(crate) async fn four_letter_at(
    port: u16,
    cmd: &str,
    limit: Duration,
) -> Result<String, HarnessError> {
    let what = || format!("four-letter word {cmd:?} to 127.0.0.1:{port}");
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(cmd.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(Ok(answer)) => Ok(String::from_utf8_lossy(&answer).into_owned()),
        Ok(Err(e)) => Err(HarnessError::Io(what(), e)),
        Err(_) => Err(HarnessError::Timeout(format!(
            "{} got no answer within {limit:?}",
            what()
        ))),
    }
}

impl ZkMember {
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
    /// let leader = ensemble.leader().await?;
    /// ensemble.member(leader).kill().await?;
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
    pub async fn pause(&self) -> Result<(), HarnessError> {
        self.container
            .pause()
            .await
            .map_err(|e| self.error("pausing", e))
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
            endpoint_config: None,
        };
        docker
            .connect_network(&self.network, request)
            .await
            .map_err(|e| self.error(&format!("connecting to {}", self.network), e))?;
        self.wait_until_up(scaled(self.startup_timeout)).await
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
        let answer = self.four_letter("srvr").await?;
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

/// A standalone ZooKeeper server in a container, removed when this value is dropped (also
/// when the test panics).
///
/// All per-server operations ([`stop`](ZkMember::stop), [`start_again`](ZkMember::start_again),
/// [`kill`](ZkMember::kill), [`pause`](ZkMember::pause), [`unpause`](ZkMember::unpause),
/// [`disconnect`](ZkMember::disconnect), [`reconnect`](ZkMember::reconnect),
/// [`four_letter`](ZkMember::four_letter), [`connect_string`](ZkMember::connect_string)...)
/// come from [`ZkMember`], which a `ZkServer` dereferences to.
///
/// ```no_run
/// use zk_testcontainers::ZkServer;
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let server = ZkServer::start().await?;
/// let client = zookeeper_client::Client::connect(&server.connect_string()).await.unwrap();
/// server.stop().await?;
/// server.start_again().await?; // same connect string, same data
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZkServer {
    member: ZkMember,
}

impl ZkServer {
    /// Starts a standalone server with the default [`ServerOptions`] and waits until it
    /// serves (`srvr` reports `Mode: standalone`).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let server = zk_testcontainers::ZkServer::start().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start() -> Result<ZkServer, HarnessError> {
        Self::start_with(ServerOptions::default()).await
    }

    /// Starts a standalone server with the given options and waits until it serves.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_testcontainers::{ServerOptions, ZkServer};
    ///
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let opts = ServerOptions::default().with_tick_time(Duration::from_millis(100));
    /// let server = ZkServer::start_with(opts).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_with(opts: ServerOptions) -> Result<ZkServer, HarnessError> {
        let image = opts.image();
        let present = image::prepare(&image).await?;
        if !present {
            tracing::info!("{image} is not present locally; Docker will try to pull it");
        }
        let member = launch(Launch {
            opts: &opts,
            image: &image,
            name: docker::unique_name(),
            network: None,
            member: None,
        })
        .await?;
        member.wait_until_up(scaled(opts.startup_timeout)).await?;
        Ok(ZkServer { member })
    }
}

impl Deref for ZkServer {
    type Target = ZkMember;

    fn deref(&self) -> &ZkMember {
        &self.member
    }
}

#[cfg(test)]
mod tests {
    use super::ServerMode;

    #[test]
    fn modes_are_parsed() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(ServerMode::parse(srvr), Some(ServerMode::Follower));
        assert_eq!(
            ServerMode::parse("Mode: leader\n"),
            Some(ServerMode::Leader)
        );
        assert_eq!(
            ServerMode::parse("This ZooKeeper instance is not currently serving requests\n"),
            Some(ServerMode::NotServing)
        );
        assert_eq!(ServerMode::parse(""), None);
    }
}
