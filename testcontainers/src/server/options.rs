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
    /// A TLS client port beside the plain one. Default `None`. See
    /// [`with_tls`](Self::with_tls).
    pub tls: Option<ServerTls>,
    /// SASL DIGEST-MD5 users, and whether the server requires SASL. Default `None`. See
    /// [`with_sasl`](Self::with_sasl).
    pub sasl: Option<ServerSasl>,
    /// Files copied into the container before it starts: (path in the container, contents).
    /// See [`with_file`](Self::with_file).
    pub files: Vec<(String, Vec<u8>)>,
}

/// The TLS client port inside the container (ZooKeeper's `secureClientPort`).
pub const SECURE_CLIENT_PORT: u16 = 2281;

/// Where the harness puts the TLS key store and trust store in the container.
const TLS_DIR: &str = "/conf/tls";
/// Where the harness puts the JAAS file in the container.
const JAAS_FILE: &str = "/conf/jaas.conf";
/// The JVM options the images use when `JVMFLAGS` is unset; kept when the harness has to set
/// `JVMFLAGS` itself (the JAAS file of [`ServerSasl`]).
const DEFAULT_JVMFLAGS: &str = "-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1";

/// A TLS client port (`secureClientPort`, served by Netty) in ZooKeeper's PEM form: the server's
/// key store (its private key and certificate chain) and trust store (the CAs whose client
/// certificates it accepts). The harness copies both into the container; the plain client port
/// stays, for the harness's own four-letter words.
///
/// ```
/// use zk_testcontainers::{ClientAuth, ServerOptions, ServerTls, TestCa};
///
/// let ca = TestCa::new("test CA");
/// let server = ca.server_cert(&["127.0.0.1", "localhost"]);
/// let tls = ServerTls::new(server.keystore_pem(), ca.cert_pem()).with_client_auth(ClientAuth::Want);
/// let opts = ServerOptions::default().with_tls(tls);
/// assert!(opts.tls.is_some());
/// ```
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The server's private key (PKCS#8 PEM) followed by its certificate chain (PEM).
    pub keystore_pem: String,
    /// The CA certificates (PEM) the server trusts for client certificates.
    pub truststore_pem: String,
    /// Whether clients must present a certificate (`ssl.clientAuth`).
    pub client_auth: ClientAuth,
}

impl ServerTls {
    /// A TLS port with this key store and trust store that requires client certificates
    /// ([`ClientAuth::Need`], ZooKeeper's default).
    ///
    /// ```
    /// let ca = zk_testcontainers::TestCa::new("test CA");
    /// let cert = ca.server_cert(&["127.0.0.1"]);
    /// let tls = zk_testcontainers::ServerTls::new(cert.keystore_pem(), ca.cert_pem());
    /// assert_eq!(tls.client_auth, zk_testcontainers::ClientAuth::Need);
    /// ```
    pub fn new(keystore_pem: impl Into<String>, truststore_pem: impl Into<String>) -> ServerTls {
        ServerTls {
            keystore_pem: keystore_pem.into(),
            truststore_pem: truststore_pem.into(),
            client_auth: ClientAuth::Need,
        }
    }

    /// Sets whether clients must present a certificate.
    ///
    /// ```
    /// use zk_testcontainers::{ClientAuth, ServerTls};
    /// let tls = ServerTls::new("", "").with_client_auth(ClientAuth::None);
    /// assert_eq!(tls.client_auth, ClientAuth::None);
    /// ```
    pub fn with_client_auth(mut self, client_auth: ClientAuth) -> ServerTls {
        self.client_auth = client_auth;
        self
    }
}

/// ZooKeeper's `ssl.clientAuth`: whether a TLS client must present a certificate.
///
/// ```
/// assert_eq!(zk_testcontainers::ClientAuth::default(), zk_testcontainers::ClientAuth::Need);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client certificate signed by a trusted CA is required (ZooKeeper's default).
    #[default]
    Need,
    /// A client certificate is asked for; a client without one is let in too.
    Want,
    /// No client certificate is asked for.
    None,
}

impl ClientAuth {
    fn config_value(self) -> &'static str {
        match self {
            ClientAuth::Need => "need",
            ClientAuth::Want => "want",
            ClientAuth::None => "none",
        }
    }
}

/// SASL on the server: DIGEST-MD5 users in a JAAS file's `Server` section (copied into the
/// container, named by `-Djava.security.auth.login.config` in `JVMFLAGS`), the SASL
/// authentication provider, and, if required, `enforce.auth.enabled=true` with
/// `enforce.auth.schemes=sasl`: the server then closes every session that has not
/// authenticated by SASL at its first request.
///
/// ```
/// let sasl = zk_testcontainers::ServerSasl::digest_md5([("admin", "admin-secret")]).required(true);
/// assert!(sasl.required);
/// assert_eq!(sasl.users[0].0, "admin");
/// ```
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ServerSasl {
    /// DIGEST-MD5 users and their passwords.
    pub users: Vec<(String, String)>,
    /// Whether every session must authenticate by SASL.
    pub required: bool,
}

impl ServerSasl {
    /// DIGEST-MD5 with these users (name, password); SASL not required.
    ///
    /// ```
    /// let sasl = zk_testcontainers::ServerSasl::digest_md5([("bob", "bob-secret")]);
    /// assert!(!sasl.required);
    /// ```
    pub fn digest_md5<U, P>(users: impl IntoIterator<Item = (U, P)>) -> ServerSasl
    where
        U: Into<String>,
        P: Into<String>,
    {
        ServerSasl {
            users: users
                .into_iter()
                .map(|(u, p)| (u.into(), p.into()))
                .collect(),
            required: false,
        }
    }

    /// Whether every session must authenticate by SASL (`enforce.auth.enabled`).
    ///
    /// ```
    /// let sasl = zk_testcontainers::ServerSasl::digest_md5([("bob", "pw")]).required(true);
    /// assert!(sasl.required);
    /// ```
    pub fn required(mut self, required: bool) -> ServerSasl {
        self.required = required;
        self
    }

    /// The JAAS file: a `Server` section with ZooKeeper's DIGEST-MD5 login module.
    fn jaas(&self) -> String {
        let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut jaas = String::from(
            "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required",
        );
        for (user, password) in &self.users {
            jaas.push_str(&format!("\n    user_{user}=\"{}\"", quote(password)));
        }
        jaas.push_str(";\n};\n");
        jaas
    }
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
            tls: None,
            sasl: None,
            files: Vec::new(),
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

    /// Adds a TLS client port ([`ServerTls`]); its host port is
    /// [`ZkMember::secure_host_port`](crate::ZkMember::secure_host_port), its connect string
    /// [`ZkMember::secure_connect_string`](crate::ZkMember::secure_connect_string).
    ///
    /// ```
    /// let ca = zk_testcontainers::TestCa::new("test CA");
    /// let cert = ca.server_cert(&["127.0.0.1"]);
    /// let opts = zk_testcontainers::ServerOptions::default()
    ///     .with_tls(zk_testcontainers::ServerTls::new(cert.keystore_pem(), ca.cert_pem()));
    /// assert!(opts.tls.is_some());
    /// ```
    pub fn with_tls(mut self, tls: ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Turns SASL on ([`ServerSasl`]).
    ///
    /// ```
    /// let opts = zk_testcontainers::ServerOptions::default()
    ///     .with_sasl(zk_testcontainers::ServerSasl::digest_md5([("bob", "pw")]).required(true));
    /// assert!(opts.sasl.unwrap().required);
    /// ```
    pub fn with_sasl(mut self, sasl: ServerSasl) -> Self {
        self.sasl = Some(sasl);
        self
    }

    /// Copies a file into the container before it starts (for example a configuration file
    /// below `/conf`, which both the local and the official image read).
    ///
    /// ```
    /// let opts = zk_testcontainers::ServerOptions::default()
    ///     .with_file("/conf/extra.properties", b"a=1\n".to_vec());
    /// assert_eq!(opts.files.len(), 1);
    /// ```
    pub fn with_file(mut self, path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Self {
        self.files.push((path.into(), contents.into()));
        self
    }

    /// Every file the container gets: [`files`](Self::files) and those of TLS and SASL.
    pub(super) fn container_files(&self) -> Vec<(String, Vec<u8>)> {
        let mut files = Vec::new();
        if let Some(tls) = &self.tls {
            files.push((
                format!("{TLS_DIR}/keystore.pem"),
                tls.keystore_pem.clone().into_bytes(),
            ));
            files.push((
                format!("{TLS_DIR}/truststore.pem"),
                tls.truststore_pem.clone().into_bytes(),
            ));
        }
        if let Some(sasl) = &self.sasl {
            files.push((JAAS_FILE.to_owned(), sasl.jaas().into_bytes()));
        }
        files.extend(self.files.iter().cloned());
        files
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
    let mut jvmflags = None;
    if let Some(tls) = &o.tls {
        // Netty serves both client ports; the plain one stays for the harness's four-letter
        // words. The server does not check client certificates' host names: clients reach it
        // from Docker's gateway address, which no test certificate names.
        extra.extend([
            format!("secureClientPort={SECURE_CLIENT_PORT}"),
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory".to_owned(),
            format!("ssl.keyStore.location={TLS_DIR}/keystore.pem"),
            "ssl.keyStore.type=PEM".to_owned(),
            format!("ssl.trustStore.location={TLS_DIR}/truststore.pem"),
            "ssl.trustStore.type=PEM".to_owned(),
            format!("ssl.clientAuth={}", tls.client_auth.config_value()),
            "ssl.hostnameVerification=false".to_owned(),
        ]);
    }
    if let Some(sasl) = &o.sasl {
        extra.push(
            "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
                .to_owned(),
        );
        if sasl.required {
            extra.push("enforce.auth.enabled=true".to_owned());
            extra.push("enforce.auth.schemes=sasl".to_owned());
        }
        jvmflags = Some(format!(
            "{DEFAULT_JVMFLAGS} -Djava.security.auth.login.config={JAAS_FILE}"
        ));
    }
    if l.member.is_some() {
        env.push(("ZOO_SERVERS", servers.to_owned()));
        env.push(("ZOO_STANDALONE_ENABLED", "false".to_owned()));
    }
    env.push(("ZOO_CFG_EXTRA", extra.join(" ")));
    if let Some(flags) = jvmflags {
        env.push(("JVMFLAGS", flags));
    }
    let mut env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    env.extend(o.env.iter().cloned());
    env
}
