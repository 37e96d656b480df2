#![doc = include_str!("../README.md")]
//!
//! # More
//!
//! The harness of zk-recipes' integration tests. The containers are configured through the
//! official image's variables (`ZOO_*`, `JVMFLAGS`, `/data`, `/datalog`), which the local
//! images speak too.
//!
//! ## A server per test
//!
//! ```no_run
//! use zk_testcontainers::{chroot, test_server};
//! use zookeeper_client::{Acls, Client, CreateMode};
//!
//! #[tokio::test]
//! async fn creates_and_reads() {
//!     // ZK_CONNECT, if set, else a fresh container (removed when `zk` drops).
//!     let zk = test_server().await.unwrap();
//!     // A private directory, so that tests sharing a server do not meet.
//!     let root = chroot(&zk.connect_string(), "creates_and_reads").await.unwrap();
//!     let client = Client::connect(&root).await.unwrap();
//!     let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
//!     client.create("/a", b"1", &options).await.unwrap();
//!     assert_eq!(client.get_data("/a").await.unwrap().0, b"1");
//! }
//! ```
//!
//! ## With the testcontainers API
//!
//! [`ZooKeeper`] implements `testcontainers`' `Image`, so a test can start a server the usual
//! way (`ZooKeeper::default().start().await`) and still use [`expire_session`] and
//! [`FaultProxy`] on it.
//!
//! ## Faults
//!
//! A [`ZkServer`], standalone or a member of a [`ZkEnsemble`] (one type for both; [`ZkMember`]
//! is another name for it), offers [`stop`](ZkServer::stop) /
//! [`start_again`](ZkServer::start_again) (same data, same connect string),
//! [`kill`](ZkServer::kill), [`pause`](ZkServer::pause) / [`unpause`](ZkServer::unpause),
//! [`disconnect`](ZkServer::disconnect) / [`reconnect`](ZkServer::reconnect) and
//! [`four_letter`](ZkServer::four_letter) words.
//! [`expire_session`] expires a client's session on demand. A [`FaultProxy`] between a
//! client and a server drops connections, blackholes or delays traffic, and loses the reply
//! to a chosen request.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_testcontainers::{scaled, ZkEnsemble};
//!
//! # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
//! let ensemble = ZkEnsemble::start(3).await?;
//! ensemble.leader().await?.kill().await?;
//! ensemble.wait_for_quorum(scaled(Duration::from_secs(30))).await?;
//! # Ok(()) }
//! ```
//!
//! ## TLS and SASL
//!
//! [`ServerOptions::with_tls`] adds a TLS client port (`secureClientPort`, served by Netty,
//! with a PEM key store and trust store copied into `/conf/tls`) beside the plain one;
//! [`TestCa`] makes the certificates in the test. [`ServerOptions::with_sasl`] turns on SASL
//! DIGEST-MD5 (a JAAS file with the users copied to `/conf/jaas.conf`), optionally required of
//! every session. Both are configured through the images' official interface (`ZOO_CFG_EXTRA`,
//! `JVMFLAGS`, files in `/conf`), so they work with the official image too.
//!
//! ```no_run
//! use zk_testcontainers::{ServerOptions, ServerSasl, ServerTls, TestCa, ZkServer};
//!
//! # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
//! let ca = TestCa::new("test CA");
//! let cert = ca.server_cert(&["127.0.0.1", "localhost"]);
//! let opts = ServerOptions::default()
//!     .with_tls(ServerTls::new(cert.keystore_pem(), ca.cert_pem()))
//!     .with_sasl(ServerSasl::digest_md5([("bob", "bob-secret")]).required(true));
//! let server = ZkServer::start_with(opts).await?;
//! let tls = server.secure_connect_string().unwrap(); // 127.0.0.1:<port>, TLS
//! # let _ = tls; Ok(()) }
//! ```
//!
//! ## Environment
//!
//! | variable | effect |
//! |---|---|
//! | `ZK_CONNECT` | [`test_server`] returns this connect string instead of starting a container; ensemble tests cannot run ([`ensemble_unavailable_reason`]) |
//! | `ZK_IMAGE` | image to run (default [`DEFAULT_IMAGE`]; see [`configured_image`] about the official `zookeeper` image) |
//! | `ZK_VERSION` | `3.8` (default) or `3.9`: which local image to build and run when `ZK_IMAGE` is unset |
//! | `ZK_TEST_TIMEOUT_SCALE` | multiplies every timeout ([`scaled`]), e.g. `3` on a slow CI machine |
//!
//! ## Docker
//!
//! Containers are created through `testcontainers` (the harness's own `bollard` calls go
//! through the same client) on the local Docker Engine. Images are never pulled when present;
//! the default image is built locally from Debian packages by `image/build.sh` the first time
//! it is needed (once, even with many test processes), and rebuilt when `image/` has changed
//! since (its `revision` file). Each server publishes only its client port, on `127.0.0.1`, at a
//! host port fixed for its lifetime, and keeps its data on an anonymous volume, as the official
//! image does: a server syncs its log on every write, and a container's own layer can make that
//! much slower (a FUSE storage driver, for one). Everything, volumes included, is removed when
//! the handles drop; what a killed test process leaves behind is removed by the next run.

#![warn(missing_docs)]

mod docker;
mod ensemble;
mod env;
mod error;
mod expire;
mod image;
mod module;
mod network;
mod proxy;
mod server;
mod session;
mod tls;

pub use ensemble::ZkEnsemble;
pub use env::{
    ensemble_unavailable_reason, scaled, test_server, TestZk, TIMEOUT_SCALE_VAR, ZK_CONNECT_VAR,
};
pub use error::HarnessError;
pub use expire::expire_session;
pub use image::{
    configured_image, ensure_image, DEFAULT_IMAGE, LOCAL_IMAGE_3_9, ZK_IMAGE_VAR, ZK_VERSION_VAR,
};
pub use module::{ZooKeeper, CLIENT_PORT};
pub use proxy::{opcode, Direction, FaultProxy, Request};
pub use server::{
    ClientAuth, ServerMode, ServerOptions, ServerSasl, ServerTls, ZkMember, ZkServer,
    SECURE_CLIENT_PORT,
};
pub use session::{chroot, CHROOT_ROOT};
pub use tls::{TestCa, TestCert};
