//! A registered instance: its JSON on a [`ZkKeptNode`], made again after a session expiry or a
//! deletion, updated in place, deleted when unregistered or dropped.

use std::fmt;
use std::sync::Mutex;

use tracing::info;

use super::{ServiceInstance, ServiceType};
use crate::error::{Error, Result};
use crate::kept::{KeptMode, KeptState, Options, ZkKeptNode};
use crate::path::ZkPath;
use crate::session::Session;

/// A registered service instance, from
/// [`ZkServiceDiscovery::register`](super::ZkServiceDiscovery::register): its node is kept
/// (made again in each new session and after a deletion, with the latest instance) until
/// [`unregister`](ZkServiceRegistration::unregister), or until it is dropped (the node is then
/// deleted in the background).
///
/// ```no_run
/// # async fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) -> Result<(), zk_recipes::Error> {
/// let mut instance = registration.instance();
/// instance.payload = Some(serde_json::json!({"state": "draining"}));
/// registration.update(&instance).await?;
/// registration.unregister().await?;
/// # Ok(()) }
/// ```
pub struct ZkServiceRegistration {
    node: ZkKeptNode,
    instance: Mutex<ServiceInstance>,
}

impl fmt::Debug for ZkServiceRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkServiceRegistration")
            .field("path", &self.node.path())
            .field("state", &self.node.state())
            .finish()
    }
}

/// Registers `instance` at `path` and waits until its node exists.
pub(super) async fn register(
    session: &Session,
    path: ZkPath,
    instance: &ServiceInstance,
) -> Result<ZkServiceRegistration> {
    let mode = match instance.service_type {
        ServiceType::Dynamic => KeptMode::Ephemeral,
        ServiceType::Static | ServiceType::Permanent => KeptMode::Persistent,
        ServiceType::DynamicSequential => {
            return Err(Error::InvalidInstance {
                path: path.as_str().to_owned(),
                reason: "DYNAMIC_SEQUENTIAL instances are not registered here".into(),
            })
        }
    };
    let options = Options {
        parent_data: Vec::new(),
        patient: false,
        what: "a service instance's node",
    };
    // A dropped registration drops the kept node, whose keeper deletes what it made.
    let node = ZkKeptNode::start_with(session, path, mode, &instance.to_json(), options)?;
    node.created().await?;
    info!(path = node.path(), "service instance registered");
    Ok(ZkServiceRegistration {
        node,
        instance: Mutex::new(instance.clone()),
    })
}

impl ZkServiceRegistration {
    /// The instance as last registered or updated.
    ///
    /// ```no_run
    /// # fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) {
    /// println!("{}", registration.instance().id);
    /// # }
    /// ```
    pub fn instance(&self) -> ServiceInstance {
        self.lock().clone()
    }

    /// The instance's node, `{base}/{name}/{id}`.
    ///
    /// ```no_run
    /// # fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) {
    /// assert_eq!(registration.path(), "/services/billing/billing-7");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// Whether the node exists as ours right now (`false` between a session expiry or a
    /// deletion and the node being made again).
    ///
    /// ```no_run
    /// # fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) {
    /// if !registration.is_registered() { println!("not findable right now"); }
    /// # }
    /// ```
    pub fn is_registered(&self) -> bool {
        matches!(self.node.state(), KeptState::Created(_))
    }

    /// The kept node under the registration (its state to watch).
    ///
    /// ```no_run
    /// # fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) {
    /// let state = registration.node().watch_state();
    /// # }
    /// ```
    pub fn node(&self) -> &ZkKeptNode {
        &self.node
    }

    /// Replaces the registered instance (Curator's `updateService`): the node's data now, and
    /// what it is made with from now on. The name, id and service type stay.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInstance`] for another name, id or service type (nothing changes), and
    /// as [`ZkKeptNode::set_data`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a write already sent may land after the future is dropped;
    /// the kept instance is the new one either way.
    ///
    /// ```no_run
    /// # async fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) -> Result<(), zk_recipes::Error> {
    /// let mut instance = registration.instance();
    /// instance.port = Some(9090);
    /// registration.update(&instance).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update(&self, instance: &ServiceInstance) -> Result<()> {
        {
            let current = self.lock();
            if (&current.name, &current.id, current.service_type)
                != (&instance.name, &instance.id, instance.service_type)
            {
                return Err(Error::InvalidInstance {
                    path: self.node.path().to_owned(),
                    reason: "an update keeps the instance's name, id and service type".into(),
                });
            }
        }
        *self.lock() = instance.clone();
        self.node.set_data(&instance.to_json()).await
    }

    /// Unregisters: stops keeping the node and deletes it.
    ///
    /// # Errors
    ///
    /// As [`ZkKeptNode::close`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the keeper is already told to stop; a dropped future leaves the delete to
    /// the background.
    ///
    /// ```no_run
    /// # async fn demo(registration: zk_recipes::discovery::ZkServiceRegistration) -> Result<(), zk_recipes::Error> {
    /// registration.unregister().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unregister(self) -> Result<()> {
        let path = self.node.path().to_owned();
        let done = self.node.close().await;
        info!(path, "service instance unregistered");
        done
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ServiceInstance> {
        self.instance.lock().unwrap_or_else(|e| e.into_inner())
    }
}
