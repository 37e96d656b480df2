//! [`ServerOptions`] and their mapping to the container's environment: the official
//! `zookeeper` image's interface (`ZOO_*`, `JVMFLAGS`), which the local image speaks too.

use std::time::Duration;

use crate::{image, scaled};

use super::member::Launch;

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
    /// [`disconnect`](crate::ZkMember::disconnect) is noticed this fast.
    pub sync_limit: Duration,
    /// Extra environment variables for the container (they win over the harness's own).
    pub env: Vec<(String, String)>,
    /// Keep the server's data (snapshots and transaction log) in memory, on a `tmpfs`, instead
    /// of on a volume. Default `false`. See [`with_data_in_memory`](Self::with_data_in_memory).
    pub data_in_memory: bool,
}

/// Where images keep ZooKeeper's data: the default image's data directory, and the official
/// image's data and log directories.
pub(super) const DATA_DIRS: [&str; 2] = ["/data", "/datalog"];

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

    pub(crate) fn image(&self) -> String {
        self.image.clone().unwrap_or_else(image::configured_image)
    }
}

/// The container's environment, in the official `zookeeper` image's interface (`ZOO_*`,
/// `JVMFLAGS`), which the local image speaks too: one code path for either image.
pub(super) fn environment(l: &Launch<'_>) -> Vec<(String, String)> {
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
