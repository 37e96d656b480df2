//! [`ZooKeeper`]: the `testcontainers` crate's [`Image`] for a ZooKeeper server, for tests that
//! start containers with the ordinary testcontainers API (`image.start().await`), as the
//! testcontainers-modules crates do.

use std::borrow::Cow;

use testcontainers::core::{ContainerPort, WaitFor};
use testcontainers::Image;

use crate::image::{configured_image, split_reference};

/// ZooKeeper's client port.
pub const CLIENT_PORT: ContainerPort = ContainerPort::Tcp(2181);

/// A standalone ZooKeeper server as a `testcontainers` [`Image`]: by default the image the
/// harness runs ([`configured_image`]: the local 3.8 image, 3.9 with `ZK_VERSION=3.9`, or
/// `ZK_IMAGE`), configured through the official image's variables, with every four-letter
/// word allowed and a 200 ms tick (sessions can expire in well under a second).
///
/// The harness's fault helpers work on its containers: [`expire_session`](crate::expire_session)
/// and [`FaultProxy`](crate::FaultProxy) need only the connect string, and testcontainers'
/// own `pause`, `unpause`, `stop` and `start` freeze and restart the server.
///
/// ```no_run
/// use testcontainers::runners::AsyncRunner;
/// use zk_testcontainers::{ensure_image, ZooKeeper, CLIENT_PORT};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let image = ZooKeeper::default();
/// ensure_image(&image.reference()).await?; // builds the local image if missing; never pulls
/// let server = image.start().await?;
/// let port = server.get_host_port_ipv4(CLIENT_PORT).await?;
/// let client = zookeeper_client::Client::connect(&format!("127.0.0.1:{port}")).await?;
/// # let _ = client; Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ZooKeeper {
    name: String,
    tag: String,
    env: Vec<(String, String)>,
}

impl Default for ZooKeeper {
    fn default() -> Self {
        ZooKeeper::with_image(&configured_image())
    }
}

impl ZooKeeper {
    /// The server from `image` (`name[:tag]`, for example `zookeeper:3.9`).
    ///
    /// ```
    /// let image = zk_testcontainers::ZooKeeper::with_image("zookeeper:3.9");
    /// assert_eq!(image.reference(), "zookeeper:3.9");
    /// ```
    pub fn with_image(image: &str) -> Self {
        let (name, tag) = split_reference(image);
        ZooKeeper {
            name: name.to_owned(),
            tag: tag.to_owned(),
            env: vec![
                ("ZOO_TICK_TIME".into(), "200".into()),
                ("ZOO_4LW_COMMANDS_WHITELIST".into(), "*".into()),
                ("ZOO_ADMINSERVER_ENABLED".into(), "false".into()),
                ("ZOO_MAX_CLIENT_CNXNS".into(), "0".into()),
                ("ZOO_CFG_EXTRA".into(), "maxSessionTimeout=60000".into()),
            ],
        }
    }

    /// Sets (or replaces) an environment variable of the container, e.g. `JVMFLAGS` or
    /// `ZOO_CFG_EXTRA`.
    ///
    /// ```
    /// let image = zk_testcontainers::ZooKeeper::default().with_env("JVMFLAGS", "-Xmx128m");
    /// # let _ = image;
    /// ```
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.env.retain(|(n, _)| *n != name);
        self.env.push((name, value.into()));
        self
    }

    /// `name:tag`, as [`ensure_image`](crate::ensure_image) takes it.
    ///
    /// ```
    /// # if std::env::var_os("ZK_IMAGE").is_none() && std::env::var_os("ZK_VERSION").is_none() {
    /// assert_eq!(zk_testcontainers::ZooKeeper::default().reference(), "zk-recipes/zookeeper:3.8");
    /// # }
    /// ```
    pub fn reference(&self) -> String {
        format!("{}:{}", self.name, self.tag)
    }
}

impl Image for ZooKeeper {
    fn name(&self) -> &str {
        &self.name
    }

    fn tag(&self) -> &str {
        &self.tag
    }

    fn ready_conditions(&self) -> Vec<WaitFor> {
        // Logged once the client port is bound, by the local and the official image alike.
        vec![WaitFor::message_on_either_std("binding to port")]
    }

    fn env_vars(
        &self,
    ) -> impl IntoIterator<Item = (impl Into<Cow<'_, str>>, impl Into<Cow<'_, str>>)> {
        self.env.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn expose_ports(&self) -> &[ContainerPort] {
        &[CLIENT_PORT]
    }
}
