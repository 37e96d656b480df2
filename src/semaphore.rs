//! [`ZkSemaphore`]: at most N leases at a time, FIFO, on the shared queue.
//!
//! The semaphore has no rule of its own: it composes two queues, in Curator's
//! `InterProcessSemaphoreV2` layout. Contenders queue on an internal mutex at `{root}/locks`
//! (the mutex's rule); the one at its head creates its lease node under `{root}/leases` (a
//! queue whose order nobody waits on) and waits, watching the leases, until at most `permits`
//! exist; then it lets the next contender in. So only the head watches the leases (one
//! wake-up per release) and everyone else watches its predecessor in the mutex queue.

use std::fmt;
use std::sync::OnceLock;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::grant::OnChange;
use crate::guard::Guard;
use crate::mutex::never_none;
use crate::path::{sorted_contenders, Naming};
use crate::queue::{Created, Queue, Wait};
use crate::session::{Epoch, Release, Session};

/// The internal mutex is a plain [`ZkMutex`](crate::ZkMutex) queue (Curator's `lock-` names).
const LOCK: crate::queue::Rule = crate::mutex::RULE;
const LEASE: &[&str] = &[crate::layout::names::LEASE];

/// A distributed counting semaphore: at most `permits` leases held at any moment, granted in
/// FIFO order, each lease with its [`Grant`](crate::Grant) (token, `lost()`, `release()`).
///
/// The permit count is stored in the root node's data by the first contender; a contender
/// constructed with another count gets [`Error::PermitMismatch`](crate::Error::PermitMismatch).
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
pub type ZkSemaphoreLease = Guard<ZkSemaphore>;

impl crate::guard::Sealed for ZkSemaphore {}
impl crate::guard::Recipe for ZkSemaphore {
    type Held = crate::grant::Grant;
}

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
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a malformed path, [`Error::InvalidPermits`](crate::Error::InvalidPermits) for zero permits.
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
            locks: Queue::new(
                session,
                &root.child(crate::layout::SEMAPHORE_LOCKS),
                crate::layout::kind::RecipeKind::Semaphore,
            )?,
            // Curator counts every child of `leases` as a lease: no anchor there.
            leases: Queue::unanchored(session, &root.child(crate::layout::SEMAPHORE_LEASES))?,
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
    /// [`Error::PermitMismatch`](crate::Error::PermitMismatch), and as [`ZkMutex::lock`](crate::ZkMutex::lock).
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
    pub async fn acquire(&self) -> Result<ZkSemaphoreLease> {
        let grant = self.lease(Wait::Forever).await?;
        grant.map(Guard::new).ok_or_else(never_none)
    }

    /// Takes a lease if one is free and nobody waits ahead; `Ok(None)` otherwise.
    ///
    /// # Errors
    ///
    /// As [`acquire`](ZkSemaphore::acquire), except that a session expiry is returned as
    /// [`Error::SessionExpired`](crate::Error::SessionExpired).
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
    pub async fn try_acquire(&self) -> Result<Option<ZkSemaphoreLease>> {
        Ok(self.lease(Wait::No).await?.map(Guard::new))
    }

    async fn lease(&self, wait: Wait) -> Result<Option<crate::Grant>> {
        let span = debug_span!("acquire", path = %self.root, permits = self.permits);
        async {
            self.check_permits().await?;
            loop {
                // The head of the internal mutex queue is the only contender creating leases.
                let Some(head) = self.locks.acquire(LOCK, LOCK.names[0], None, wait).await? else {
                    return Ok(None);
                };
                // The lease is made on the session that holds the internal lock.
                let epoch = head.epoch().clone();
                let room = async {
                    let created = self
                        .leases
                        .enqueue(&epoch, LEASE[0], Naming::Protected, None, true)
                        .await?;
                    let granted = self.wait_for_room(&epoch, &created, wait).await?;
                    Ok::<_, Error>(granted.then_some(created))
                }
                .await;
                // Let the next contender in, whatever happened; dropping would do it too.
                let _ = head.release().await;
                match room {
                    Ok(Some(created)) => {
                        debug!(node = %created.node.path, "lease granted");
                        return Ok(Some(created.into_grant(
                            Release::Plain,
                            OnChange::Ignore,
                            None,
                        )));
                    }
                    Ok(None) => return Ok(None),
                    // The session expired while we waited, taking our lease node and our place
                    // in the internal lock's queue: a blocking acquire queues again on the new
                    // session, as `ZkMutex::lock` does.
                    Err(Error::SessionExpired) if wait == Wait::Forever => {
                        debug!("session expired while waiting for a lease; queueing again");
                        epoch.ended().await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Waits until the leases (ours included) number at most `permits`; `false` when they do
    /// not and `wait` is [`Wait::No`].
    async fn wait_for_room(&self, epoch: &Epoch, created: &Created, wait: Wait) -> Result<bool> {
        let leases = self.leases.root().as_str();
        let live = |children: &[String]| {
            sorted_contenders(children, LEASE)
                .iter()
                .filter(|c| !c.is_wrapped())
                .count()
        };
        if live(created.children()) <= self.permits as usize {
            return Ok(true);
        }
        if wait == Wait::No {
            return Ok(false);
        }
        let path = created.node.path.as_str();
        let ours = path.rsplit('/').next().unwrap_or(path);
        loop {
            let (listed, _, watcher) = epoch
                .retry(
                    leases,
                    |c| async move { c.get_and_watch_children(leases).await },
                )
                .await?;
            // Someone deleted our lease node while we waited: a grant now would have no node.
            if !listed.iter().any(|c| c == ours) {
                return Err(Error::Lost {
                    path: path.to_owned(),
                });
            }
            if live(&listed) <= self.permits as usize {
                return Ok(true);
            }
            debug!("waiting for a lease");
            tokio::select! {
                event = watcher.changed() => debug!(event = ?event.event_type, "lease watch fired"),
                _ = epoch.ended() => return Err(epoch.over()),
            }
        }
    }

    /// Once per value: makes and marks the root (one path, one kind), stores the permit count
    /// in the root's data, or checks it against the stored one.
    async fn check_permits(&self) -> Result<()> {
        if self.permits_checked.get().is_some() {
            return Ok(());
        }
        let ours = self.permits.to_string();
        let root = self.root.as_str();
        let epoch = self.session.epoch().await?;
        // One path, one kind: the root is made (with our count) and marked as a semaphore's.
        let root_path = crate::path::ZkPath::new(root)?;
        let make = crate::claim::Make::Persistent(ours.as_bytes());
        let kind = crate::layout::kind::RecipeKind::Semaphore;
        crate::claim::claim(&epoch, &self.session, &root_path, kind, make).await?;
        loop {
            match crate::ops::read(&epoch, root).await? {
                Some((data, stat)) if data.is_empty() => {
                    let ours = ours.as_bytes();
                    let set = epoch
                        .retry(root, |c| async move {
                            match c.set_data(root, ours, Some(stat.version)).await {
                                // Someone else stored a count first (or our lost reply did):
                                // read again.
                                Err(zk::Error::BadVersion) => Ok(false),
                                other => other.map(|_| true),
                            }
                        })
                        .await?;
                    if set {
                        break;
                    }
                }
                Some((data, _)) => {
                    let stored = crate::layout::semaphore_permits(&data);
                    if stored == Some(self.permits) {
                        break;
                    }
                    return Err(Error::PermitMismatch {
                        path: root.to_owned(),
                        stored: String::from_utf8_lossy(&data).into_owned(),
                        ours: self.permits,
                    });
                }
                None => {
                    let (session, persistent) = (&self.session, zk::CreateMode::Persistent);
                    crate::ops::ensure_node(&epoch, session, root, ours.as_bytes(), persistent)
                        .await?;
                }
            }
        }
        debug!(permits = self.permits, "permit count checked");
        let _ = self.permits_checked.set(());
        Ok(())
    }
}
