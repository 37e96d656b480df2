//! [`ZkSemaphore`]: at most N leases at a time, FIFO, on the shared queue.
//!
//! The layout is Curator's `InterProcessSemaphoreV2`: contenders queue on an internal mutex at
//! `{root}/locks`; the one at its head creates its lease node under `{root}/leases` and waits,
//! watching the leases, until at most `permits` exist; then it lets the next contender in. So
//! only the head watches the leases (one wake-up per release) and everyone else watches its
//! predecessor in the mutex queue.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, info_span, Instrument};
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result};
use crate::guard::{Guard, OwnedGuard};
use crate::path::sorted_contenders;
use crate::queue::{exclusive, Created, Queue, Rule, Wait};
use crate::session::{Epoch, Session};

const LOCK: Rule = Rule {
    names: &["lock-"],
    decide: exclusive,
    head_release: true,
};
const LEASE: &[&str] = &["lease-"];

/// A distributed counting semaphore: at most `permits` leases held at any moment, granted in
/// FIFO order, each lease with its [`Grant`](crate::Grant) (token, `lost()`, `release()`).
///
/// The permit count is stored in the root node's data by the first contender; a contender
/// constructed with another count gets [`Error::PermitMismatch`].
///
/// A lease's token orders it among the leases of its `leases` directory, and is no fencing
/// token: Curator creates that directory as a container, which the server deletes whenever it
/// is empty (and which cannot be anchored, since Curator counts every child as a lease), and
/// the next lease then starts a new sequence in a new directory.
///
/// # Example
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::ZkSemaphore;
///
/// let semaphore = ZkSemaphore::new(&session, "/limits/db-migrations", 3)?;
/// let lease = semaphore.acquire().await?; // at most 3 holders at once
/// lease.release().await?;
/// # Ok(()) }
/// ```
pub struct ZkSemaphore {
    session: Session,
    root: String,
    permits: u32,
    locks: Queue,
    leases: Queue,
    permits_checked: OnceLock<()>,
}

/// A held lease of a [`ZkSemaphore`]; see [`Guard`].
pub type ZkSemaphoreLease<'a> = Guard<'a, ZkSemaphore>;

/// A held lease owning an `Arc` of its [`ZkSemaphore`]; see [`OwnedGuard`].
pub type OwnedZkSemaphoreLease = OwnedGuard<ZkSemaphore>;

impl fmt::Debug for ZkSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkSemaphore")
            .field("path", &self.root)
            .field("permits", &self.permits)
            .finish()
    }
}

impl ZkSemaphore {
    /// A semaphore with `permits` leases on `path`. Nothing is sent until the first
    /// acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path, [`Error::InvalidPermits`] for zero permits.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let semaphore = zk_recipes::ZkSemaphore::new(session, "/limits/db-migrations", 3)?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str, permits: u32) -> Result<ZkSemaphore> {
        if permits == 0 {
            return Err(Error::InvalidPermits { permits });
        }
        let root = crate::path::ZkPath::new(path)?;
        Ok(ZkSemaphore {
            session: session.clone(),
            locks: Queue::new(session, &root.child("locks"))?,
            // Curator counts every child of `leases` as a lease: no anchor there.
            leases: Queue::unanchored(session, &root.child("leases"))?,
            root: root.to_string(),
            permits,
            permits_checked: OnceLock::new(),
        })
    }

    /// The root path.
    ///
    /// ```no_run
    /// # fn demo(semaphore: zk_recipes::ZkSemaphore) {
    /// assert_eq!(semaphore.path(), "/limits/db-migrations");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.root
    }

    /// The number of permits.
    ///
    /// ```no_run
    /// # fn demo(semaphore: zk_recipes::ZkSemaphore) {
    /// assert_eq!(semaphore.permits(), 3);
    /// # }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Waits for a lease (FIFO).
    ///
    /// # Errors
    ///
    /// [`Error::PermitMismatch`], and as [`ZkMutex::lock`](crate::ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future removes its nodes in the background and lets the next
    /// contender in.
    ///
    /// ```no_run
    /// # async fn demo(semaphore: zk_recipes::ZkSemaphore) -> Result<(), zk_recipes::Error> {
    /// let lease = semaphore.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<ZkSemaphoreLease<'_>> {
        Ok(Guard::new(
            self.lease(Wait::Forever)
                .await?
                .expect("waits until granted"),
        ))
    }

    /// Takes a lease if one is free and nobody waits ahead; `Ok(None)` otherwise.
    ///
    /// # Errors
    ///
    /// As [`acquire`](ZkSemaphore::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](ZkSemaphore::acquire).
    ///
    /// ```no_run
    /// # async fn demo(semaphore: zk_recipes::ZkSemaphore) -> Result<(), zk_recipes::Error> {
    /// if let Some(lease) = semaphore.try_acquire().await? { lease.release().await?; }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<ZkSemaphoreLease<'_>>> {
        Ok(self.lease(Wait::No).await?.map(Guard::new))
    }

    /// Waits for a lease at most `timeout`; `Ok(None)` if not granted in time.
    ///
    /// # Errors
    ///
    /// As [`acquire`](ZkSemaphore::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](ZkSemaphore::acquire).
    ///
    /// ```no_run
    /// # async fn demo(semaphore: zk_recipes::ZkSemaphore) -> Result<(), zk_recipes::Error> {
    /// let maybe = semaphore.acquire_timeout(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<ZkSemaphoreLease<'_>>> {
        Ok(self
            .lease(Wait::Until(Instant::now() + timeout))
            .await?
            .map(Guard::new))
    }

    /// [`acquire`](ZkSemaphore::acquire) for an `Arc<ZkSemaphore>`, returning an owned lease.
    ///
    /// # Errors
    ///
    /// As [`acquire`](ZkSemaphore::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](ZkSemaphore::acquire).
    ///
    /// ```no_run
    /// # async fn demo(semaphore: std::sync::Arc<zk_recipes::ZkSemaphore>) -> Result<(), zk_recipes::Error> {
    /// let lease = semaphore.acquire_owned().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_owned(self: Arc<Self>) -> Result<OwnedZkSemaphoreLease> {
        let grant = self
            .lease(Wait::Forever)
            .await?
            .expect("waits until granted");
        Ok(OwnedGuard::new(grant, self))
    }

    async fn lease(&self, wait: Wait) -> Result<Option<crate::Grant>> {
        let span = info_span!("acquire", path = %self.root, permits = self.permits);
        async {
            self.check_permits().await?;
            // The head of the internal mutex queue is the only contender creating leases.
            let Some(head) = self.locks.acquire(LOCK, 0, &[], wait).await? else {
                return Ok(None);
            };
            let epoch = self.session.epoch().await?;
            let created = self.leases.enqueue(&epoch, LEASE[0], &[]).await?;
            let granted = self.wait_for_room(&epoch, &created, wait).await;
            // Let the next contender in, whatever happened; dropping would do it too.
            let _ = head.release().await;
            match granted? {
                true => {
                    info!(node = %created.node.path, "lease granted");
                    Ok(Some(created.into_grant(false, false)))
                }
                false => Ok(None),
            }
        }
        .instrument(span)
        .await
    }

    /// Waits until the leases (ours included) number at most `permits`.
    async fn wait_for_room(&self, epoch: &Epoch, created: &Created, wait: Wait) -> Result<bool> {
        let leases = self.leases.root().as_str();
        let mut children = created.children.clone();
        loop {
            let live = sorted_contenders(&children, LEASE)
                .iter()
                .filter(|c| !c.is_wrapped())
                .count();
            if live <= self.permits as usize {
                return Ok(true);
            }
            if matches!(wait, Wait::No) {
                return Ok(false);
            }
            let client = epoch.client()?;
            let (listed, watcher) = match client.get_and_watch_children(leases).await {
                Ok((listed, _, watcher)) => (listed, watcher),
                Err(e) if connection_lost(&e) => {
                    drop(client);
                    epoch.wait_reconnect().await;
                    children = self.leases_now(epoch).await?;
                    continue;
                }
                Err(e) => return Err(Error::zk(e, leases)),
            };
            drop(client);
            let full = sorted_contenders(&listed, LEASE)
                .iter()
                .filter(|c| !c.is_wrapped())
                .count()
                > self.permits as usize;
            if full {
                let deadline = async {
                    match wait {
                        Wait::Until(t) => tokio::time::sleep_until(t).await,
                        Wait::No | Wait::Forever => std::future::pending().await,
                    }
                };
                debug!("waiting for a lease");
                tokio::select! {
                    event = watcher.changed() => debug!(event = ?event.event_type, "lease watch fired"),
                    _ = epoch.ended() => return Err(Error::SessionExpired),
                    _ = deadline => return Ok(false),
                }
                children = self.leases_now(epoch).await?;
            } else {
                children = listed;
            }
        }
    }

    async fn leases_now(&self, epoch: &Epoch) -> Result<Vec<String>> {
        let leases = self.leases.root().as_str();
        loop {
            let client = epoch.client()?;
            match client.list_children(leases).await {
                Ok(children) => return Ok(children),
                Err(e) if connection_lost(&e) => {
                    drop(client);
                    epoch.wait_reconnect().await;
                }
                Err(e) => return Err(Error::zk(e, leases)),
            }
        }
    }

    /// Once per value: stores the permit count in the root's data, or checks it against the
    /// stored one.
    async fn check_permits(&self) -> Result<()> {
        if self.permits_checked.get().is_some() {
            return Ok(());
        }
        let ours = self.permits.to_string();
        let root = self.root.as_str();
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        loop {
            let client = self.session.client().await?;
            match client.get_data(root).await {
                Ok((data, stat)) if data.is_empty() => {
                    match client
                        .set_data(root, ours.as_bytes(), Some(stat.version))
                        .await
                    {
                        Ok(_) => break,
                        Err(zk::Error::BadVersion) => continue,
                        Err(e) => return Err(Error::zk(e, root)),
                    }
                }
                Ok((data, _)) => {
                    let stored = String::from_utf8_lossy(&data).trim().parse::<u32>().ok();
                    if stored == Some(self.permits) {
                        break;
                    }
                    return Err(Error::PermitMismatch {
                        path: root.to_owned(),
                        stored: String::from_utf8_lossy(&data).into_owned(),
                        ours: self.permits,
                    });
                }
                Err(zk::Error::NoNode) => {
                    if let Some((parent, _)) = root.rsplit_once('/').filter(|(p, _)| !p.is_empty())
                    {
                        client
                            .mkdir(parent, &open)
                            .await
                            .map_err(|e| Error::zk(e, parent))?;
                    }
                    match client.create(root, ours.as_bytes(), &open).await {
                        Ok(_) | Err(zk::Error::NodeExists) => continue,
                        Err(e) => return Err(Error::zk(e, root)),
                    }
                }
                Err(e) if connection_lost(&e) => {
                    drop(client);
                    self.session.epoch().await?.wait_reconnect().await;
                }
                Err(e) => return Err(Error::zk(e, root)),
            }
        }
        debug!(permits = self.permits, "permit count checked");
        let _ = self.permits_checked.set(());
        Ok(())
    }
}
