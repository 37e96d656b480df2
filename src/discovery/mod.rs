//! Service discovery on `curator-x-discovery`'s layout, so that Rust and Java services find
//! each other: each instance a node `{base}/{name}/{id}` holding its [`ServiceInstance`] JSON
//! (`instance.rs`, the JSON and its payload), registered on a [`ZkKeptNode`](crate::ZkKeptNode)
//! so it comes back after a session expiry or a deletion (`registry.rs`), and found by a query
//! or through a [`ZkServiceProvider`], a cache on watches that picks an instance round-robin or
//! at random (`provider.rs`).
//!
//! What Curator's `ServiceDiscovery` does that this does too: the same nodes and JSON (its
//! default `JsonInstanceSerializer`, `enabled` left out), a `DYNAMIC` instance ephemeral and a
//! `STATIC` or `PERMANENT` one persistent, the service's directory a container, re-registration
//! after a new session. Differences: a registration never deletes a node someone else made at
//! its path (Curator's deletes it and makes its own) but fails with
//! [`Error::MemberIdTaken`]; `DYNAMIC_SEQUENTIAL` instances are
//! read but not registered; the base path's own parents are persistent nodes.
//!
//! # Example
//!
//! ```no_run
//! use zk_recipes::discovery::{ServiceInstance, Strategy, ZkServiceDiscovery};
//!
//! # async fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
//! let discovery = ZkServiceDiscovery::new(session, "/services")?;
//! let mut me = ServiceInstance::new("billing", "billing-7");
//! me.address = Some("10.0.0.7".into());
//! me.port = Some(8080);
//! let registration = discovery.register(&me).await?;
//!
//! let provider = discovery.provider("billing", Strategy::RoundRobin).await?;
//! if let Some(instance) = provider.instance() {
//!     println!("call {}:{:?}", instance.address.unwrap_or_default(), instance.port);
//! }
//! registration.unregister().await?;
//! # Ok(()) }
//! ```

mod instance;
mod provider;
mod registry;

pub use instance::{ServiceInstance, ServiceType, UriPart, UriSpec};
pub use provider::{Strategy, ZkServiceProvider};
pub use registry::ZkServiceRegistration;

use std::fmt;

use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result};
use crate::ops::OrMissing;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

/// Service discovery under one base path (Curator's `ServiceDiscovery` with its default
/// serializer): [`register`](ZkServiceDiscovery::register) an instance, query the names and
/// the instances, or follow a service through a [`provider`](ZkServiceDiscovery::provider).
///
/// ```no_run
/// # async fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// let discovery = zk_recipes::discovery::ZkServiceDiscovery::new(session, "/services")?;
/// for name in discovery.query_names().await? {
///     println!("{name}: {} instances", discovery.query_instances(&name).await?.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ZkServiceDiscovery {
    session: Session,
    base: ZkPath,
}

impl fmt::Debug for ZkServiceDiscovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkServiceDiscovery")
            .field("base", &self.base.as_str())
            .finish()
    }
}

impl ZkServiceDiscovery {
    /// Discovery under `base` (relative to the session's chroot). Nothing is sent here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let discovery = zk_recipes::discovery::ZkServiceDiscovery::new(session, "/services")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, base: &str) -> Result<ZkServiceDiscovery> {
        Ok(ZkServiceDiscovery {
            session: session.clone(),
            base: ZkPath::new(base)?,
        })
    }

    /// The base path.
    ///
    /// ```no_run
    /// # fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) {
    /// assert_eq!(discovery.base_path(), "/services");
    /// # }
    /// ```
    pub fn base_path(&self) -> &str {
        self.base.as_str()
    }

    /// A service's directory, `{base}/{name}` (the name one node name).
    fn service_dir(&self, name: &str) -> Result<ZkPath> {
        let path = match self.base.as_str() {
            "/" => format!("/{name}"),
            base => format!("{base}/{name}"),
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::InvalidInstance {
                path,
                reason: "a service's name is one node name".into(),
            });
        }
        ZkPath::new(path)
    }

    /// The names of the services registered (the base's children); none when it is missing.
    ///
    /// # Errors
    ///
    /// [`Error::NoAuth`], [`Error::SessionExpired`], [`Error::SessionClosed`],
    /// [`Error::ConnectionLost`] or [`Error::Unreachable`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) -> Result<(), zk_recipes::Error> {
    /// let names = discovery.query_names().await?;
    /// # Ok(()) }
    /// ```
    pub async fn query_names(&self) -> Result<Vec<String>> {
        let epoch = self.session.epoch().await?;
        let base = self.base.as_str();
        let mut names = epoch
            .retry(
                base,
                |c| async move { c.list_children(base).await.or_missing() },
            )
            .await?
            .unwrap_or_default();
        names.sort();
        Ok(names)
    }

    /// The instances of service `name`, by id (its children read in one pipelined burst);
    /// none when the service is missing. A node whose data is no instance JSON is left out
    /// (a WARN event names it).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInstance`] for a name that is not one node name, and as
    /// [`query_names`](ZkServiceDiscovery::query_names).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) -> Result<(), zk_recipes::Error> {
    /// for instance in discovery.query_instances("billing").await? {
    ///     println!("{} at {:?}", instance.id, instance.address);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_instances(&self, name: &str) -> Result<Vec<ServiceInstance>> {
        let dir = self.service_dir(name)?;
        let span = debug_span!("query_instances", path = %dir);
        async {
            let epoch = self.session.epoch().await?;
            Ok(read_service(&epoch, &dir, false).await?.0)
        }
        .instrument(span)
        .await
    }

    /// Instance `id` of service `name`, if it is registered.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInstance`] for a name or id that is not one node name, or a node whose
    /// data is no instance JSON, and as [`query_names`](ZkServiceDiscovery::query_names).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) -> Result<(), zk_recipes::Error> {
    /// let instance = discovery.query_instance("billing", "billing-7").await?;
    /// # Ok(()) }
    /// ```
    pub async fn query_instance(&self, name: &str, id: &str) -> Result<Option<ServiceInstance>> {
        let path = instance_path(&self.service_dir(name)?, id)?;
        let epoch = self.session.epoch().await?;
        match crate::ops::read(&epoch, path.as_str()).await? {
            None => Ok(None),
            Some((data, _)) => parse(path.as_str(), &data).map(Some),
        }
    }

    /// Registers `instance` at `{base}/{name}/{id}` and returns once its node exists: a
    /// [`ZkKeptNode`](crate::ZkKeptNode) (ephemeral for [`ServiceType::Dynamic`], persistent
    /// for `Static` and `Permanent`), made again after a session expiry or a deletion, until
    /// [`unregister`](ZkServiceRegistration::unregister) or the registration is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInstance`] for a name or id that is not one node name or a
    /// `DYNAMIC_SEQUENTIAL` instance, [`Error::TooLarge`], [`Error::MemberIdTaken`] when
    /// another session's node (or a node someone else made) is at the path, or another
    /// registration of this session has it, [`Error::NoAuth`], [`Error::SessionExpired`],
    /// [`Error::SessionClosed`], [`Error::ConnectionLost`] or [`Error::Unreachable`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a node already made when the future is dropped is deleted in the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) -> Result<(), zk_recipes::Error> {
    /// let me = zk_recipes::discovery::ServiceInstance::new("billing", "billing-7");
    /// let registration = discovery.register(&me).await?;
    /// # Ok(()) }
    /// ```
    pub async fn register(&self, instance: &ServiceInstance) -> Result<ZkServiceRegistration> {
        let path = instance_path(&self.service_dir(&instance.name)?, &instance.id)?;
        registry::register(&self.session, path, instance).await
    }

    /// A provider of service `name`'s instances: a cache on watches, its first view read
    /// before it returns, picking instances by `strategy` (Curator's `ServiceProvider`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInstance`] for a name that is not one node name, and as
    /// [`query_names`](ZkServiceDiscovery::query_names) for the first view.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (and leaves one-shot watches behind).
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::discovery::Strategy;
    /// let provider = discovery.provider("billing", Strategy::Random).await?;
    /// # Ok(()) }
    /// ```
    pub async fn provider(&self, name: &str, strategy: Strategy) -> Result<ZkServiceProvider> {
        let dir = self.service_dir(name)?;
        provider::start(&self.session, dir, strategy).await
    }
}

/// `{dir}/{id}` (the id one node name).
fn instance_path(dir: &ZkPath, id: &str) -> Result<ZkPath> {
    let path = format!("{dir}/{id}");
    if id.is_empty() || id.contains('/') || id == "." || id == ".." {
        return Err(Error::InvalidInstance {
            path,
            reason: "an instance's id is one node name".into(),
        });
    }
    ZkPath::new(path)
}

/// An instance node's data read as an instance.
fn parse(path: &str, data: &[u8]) -> Result<ServiceInstance> {
    ServiceInstance::from_json(data).map_err(|e| Error::InvalidInstance {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// One-shot watches waited on together (dropping the set stops waiting; the watches stay on
/// the server until they fire).
pub(crate) struct Watches(tokio::task::JoinSet<zk::EventType>);

impl Watches {
    fn add(&mut self, watcher: zk::OneshotWatcher) {
        self.0
            .spawn(async move { watcher.changed().await.event_type });
    }

    /// The first watch to fire (or nothing, forever, when there is none).
    pub(crate) async fn fired(&mut self) -> Option<zk::EventType> {
        match self.0.join_next().await {
            Some(fired) => fired.ok(),
            None => std::future::pending().await,
        }
    }
}

/// An instance's data on its way: with a watch, or without.
enum Reply<W, P> {
    Watched(W),
    Plain(P),
}

/// A service's instances as they are, by id: one listing, then the instances' data in one
/// pipelined burst; with watches on the listing (or on the directory's creation) and on each
/// instance when `watch` is set.
pub(crate) async fn read_service(
    epoch: &Epoch,
    dir: &ZkPath,
    watch: bool,
) -> Result<(Vec<ServiceInstance>, Watches)> {
    let path = dir.as_str();
    let mut watches = Watches(tokio::task::JoinSet::new());
    let children = if watch {
        let listed = epoch
            .retry(path, |c| async move {
                match c.get_and_watch_children(path).await {
                    Ok((children, _, watcher)) => return Ok((children, watcher)),
                    Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(e),
                }
                // Watch for the directory's creation instead; made meanwhile: list it.
                let (stat, watcher) = c.check_and_watch_stat(path).await?;
                if stat.is_none() {
                    return Ok((Vec::new(), watcher));
                }
                let (children, _, watcher) = c.get_and_watch_children(path).await?;
                Ok((children, watcher))
            })
            .await?;
        watches.add(listed.1);
        listed.0
    } else {
        epoch
            .retry(
                path,
                |c| async move { c.list_children(path).await.or_missing() },
            )
            .await?
            .unwrap_or_default()
    };
    let mut children = children;
    children.sort();
    let mut losses = 0;
    'read: loop {
        let client = epoch.client()?;
        let paths: Vec<String> = children.iter().map(|id| dir.child(id)).collect();
        // zookeeper-client sends a request when it is called: every read is on its way
        // before the first reply is awaited.
        let mut replies = Vec::with_capacity(paths.len());
        for p in &paths {
            replies.push(if watch {
                Reply::Watched(client.get_and_watch_data(p))
            } else {
                Reply::Plain(client.get_data(p))
            });
        }
        let mut instances = Vec::with_capacity(paths.len());
        for (p, reply) in paths.iter().zip(replies) {
            let reply = match reply {
                Reply::Watched(f) => f.await.map(|(d, _, w)| (d, Some(w))),
                Reply::Plain(f) => f.await.map(|(d, _)| (d, None)),
            };
            match reply {
                Ok((data, watcher)) => {
                    if let Some(watcher) = watcher {
                        watches.add(watcher);
                    }
                    match parse(p, &data) {
                        Ok(instance) => instances.push(instance),
                        Err(e) => warn!(error = %e, "not a service instance; left out"),
                    }
                }
                // Gone since the listing: the listing's watch says so.
                Err(zk::Error::NoNode) => {}
                Err(e) if connection_lost(&e) => {
                    epoch.after_loss(&mut losses).await?;
                    continue 'read;
                }
                Err(e) => return Err(epoch.error(e, p)),
            }
        }
        debug!(path, instances = instances.len(), "service read");
        return Ok((instances, watches));
    }
}
