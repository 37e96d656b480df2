//! One ZooKeeper server in a container: [`ServerOptions`] (`options.rs`), the container and
//! its operations, one type for standalone servers and ensemble members ([`ZkServer`],
//! `member.rs`), four-letter words and server modes (`mode.rs`), and starting a standalone
//! server (here).

mod member;
mod mode;
mod options;

pub use member::ZkServer;
pub(crate) use member::{launch, Launch};
pub use mode::ServerMode;
pub use options::{ClientAuth, ServerOptions, ServerSasl, ServerTls, SECURE_CLIENT_PORT};

use std::time::Duration;

use crate::{docker, image, scaled, HarnessError};

/// The client port inside the container.
pub(crate) const CLIENT_PORT: u16 = 2181;
/// Network of standalone servers.
pub(super) const DEFAULT_NETWORK: &str = "bridge";
/// How long one four-letter-word exchange may take by default (before scaling).
pub(super) const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one poll of a server may take while waiting for it (before scaling).
pub(crate) const POLL_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between polls while waiting for a server.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The old name of [`ZkServer`], which a standalone server and an ensemble's member now share.
///
/// ```
/// fn same(server: &zk_testcontainers::ZkServer) -> &zk_testcontainers::ZkMember {
///     server
/// }
/// ```
pub type ZkMember = ZkServer;

impl ZkServer {
    /// Starts a standalone server with the default [`ServerOptions`] and waits until it
    /// serves (`srvr` reports `Mode: standalone`).
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
        Ok(member)
    }
}
