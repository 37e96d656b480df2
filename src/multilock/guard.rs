//! What a [`ZkMultiLock`](super::ZkMultiLock) hands out: every member's grant, released
//! together; one `lost()` for all; a fenced write over every member.

use std::fmt;
use std::ops::{Deref, DerefMut};

use tracing::debug;
use zookeeper_client as zk;

use super::{first_of, LockRef};
use crate::error::{Error, Result};
use crate::fence::{FencedWrite, FencingToken};
use crate::grant::{Grant, LossReason};
use crate::{ZkLockSpaceGuard, ZkMutexGuard};

/// One member's guard.
pub(super) enum Held {
    Mutex(ZkMutexGuard),
    Key(ZkLockSpaceGuard),
}

impl Deref for Held {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        match self {
            Held::Mutex(g) => g,
            Held::Key(g) => g,
        }
    }
}

impl Held {
    async fn release(self) -> Result<()> {
        match self {
            Held::Mutex(g) => g.release().await,
            Held::Key(g) => g.release().await,
        }
    }
}

/// Releases every one of `held` at once (each in a task of its own, so a dropped call still
/// releases them all) and reports the first error in lock order.
pub(super) async fn release_all(held: Vec<(LockRef, Held)>) -> Result<()> {
    let tasks: Vec<_> = held
        .into_iter()
        .map(|(lock, h)| (lock, tokio::spawn(h.release())))
        .collect();
    let mut first = None;
    for (lock, task) in tasks {
        let released = task
            .await
            .unwrap_or_else(|e| Err(Error::internal(format!("a release failed: {e}"))));
        if let Err(e) = released {
            debug!(%lock, error = %e, "release failed");
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Which lock of a multi-lock was lost first, and why: what
/// [`ZkMultiLockGuard::lost`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MultiLoss {
    /// The lock that was lost.
    pub lock: LockRef,
    /// Why (as [`Grant::lost`] says it).
    pub reason: LossReason,
}

/// Every lock of a [`ZkMultiLock`](super::ZkMultiLock), held. Dropping it releases them all
/// in the background; [`release`](ZkMultiLockGuard::release) does so and reports errors. It
/// borrows nothing (`'static`, `Send` and `Sync`).
///
/// Each lock keeps its own fencing token ([`tokens`](ZkMultiLockGuard::tokens)): storage
/// fences each resource by its own lock's token, as it would for that lock alone.
///
/// ```no_run
/// # async fn work() {}
/// # async fn demo(multi: zk_recipes::ZkMultiLock) -> Result<(), zk_recipes::Error> {
/// let guard = multi.lock().await?;
/// tokio::select! {
///     loss = guard.lost() => eprintln!("{} lost ({:?}): stopping", loss.lock, loss.reason),
///     _ = work() => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "the locks are released when the guard is dropped"]
pub struct ZkMultiLockGuard {
    /// In lock order.
    held: Vec<(LockRef, Held)>,
}

impl fmt::Debug for ZkMultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.held.iter().map(|(r, h)| (r, &**h)))
            .finish()
    }
}

impl ZkMultiLockGuard {
    pub(super) fn new(held: Vec<(LockRef, Held)>) -> ZkMultiLockGuard {
        ZkMultiLockGuard { held }
    }

    /// Every lock with its grant (its token, node, [`is_held`](Grant::is_held),
    /// [`fenced_write`](Grant::fenced_write) for a write fenced by that lock alone), in lock
    /// order.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMultiLockGuard) {
    /// for (lock, grant) in guard.grants() {
    ///     println!("{lock}: {}", grant.path());
    /// }
    /// # }
    /// ```
    pub fn grants(&self) -> impl Iterator<Item = (&LockRef, &Grant)> {
        self.held.iter().map(|(r, h)| (r, &**h))
    }

    /// The grant of `lock`, if it is one of the multi-lock's.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMultiLockGuard) {
    /// let ledger = guard.grant(&zk_recipes::LockRef::mutex("/locks/ledger"));
    /// # }
    /// ```
    pub fn grant(&self, lock: &LockRef) -> Option<&Grant> {
        self.held.iter().find(|(r, _)| r == lock).map(|(_, h)| &**h)
    }

    /// The fencing token of every lock, in lock order: each resource is fenced by its own.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMultiLockGuard) {
    /// for (lock, token) in guard.tokens() { println!("{lock}: {token}"); }
    /// # }
    /// ```
    pub fn tokens(&self) -> impl Iterator<Item = (&LockRef, FencingToken)> {
        self.held.iter().map(|(r, h)| (r, h.token()))
    }

    /// The fencing token of `lock`, if it is one of the multi-lock's.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMultiLockGuard) {
    /// let token = guard.token(&zk_recipes::LockRef::key("/locks/accounts", "alice"));
    /// # }
    /// ```
    pub fn token(&self, lock: &LockRef) -> Option<FencingToken> {
        self.grant(lock).map(Grant::token)
    }

    /// Whether every lock still holds, as [`Grant::is_held`] says of each (the lease clock
    /// included): `false` as soon as one does not.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMultiLockGuard) {
    /// if !guard.is_held() { return; }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        self.held.iter().all(|(_, h)| h.is_held())
    }

    /// Resolves when any lock is lost, with which one and why (the first to be seen lost).
    /// The others may still hold: release the guard to give them back.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Grant::lost`]: every member's watch stays set for the next call.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMultiLockGuard) {
    /// let loss = guard.lost().await;
    /// eprintln!("{} lost: {:?}", loss.lock, loss.reason);
    /// # }
    /// ```
    pub async fn lost(&self) -> MultiLoss {
        let (i, reason) = first_of(self.held.iter().map(|(_, h)| h.lost())).await;
        MultiLoss {
            lock: self.held[i].0.clone(),
            reason,
        }
    }

    /// Releases every lock, all at once; each is released even when another fails.
    ///
    /// # Errors
    ///
    /// The first error in lock order, as [`Guard::release`](crate::Guard::release) reports
    /// it ([`Error::Lost`] when a node was already gone, [`Error::SessionExpired`], ...).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the releases run in tasks of their own and finish if the future is
    /// dropped.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMultiLockGuard) -> Result<(), zk_recipes::Error> {
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        release_all(self.held).await
    }

    /// A transaction that commits only while **every** lock holds: the first lock's
    /// [`FencedWrite`] (its node at its version), with a check that each other lock's node
    /// exists added in front of your operations, so a write that spans several resources is
    /// fenced by all of their locks in one atomic multi-op. Add operations through it as to a
    /// [`FencedWrite`] (it dereferences to one), then [`commit`](MultiFencedWrite::commit).
    ///
    /// # Errors
    ///
    /// [`Error::Zk`] if the client refuses a node's path (a client with another chroot than
    /// the grants' session), [`Error::TooLarge`] if the checks alone would not fit a packet.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMultiLockGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_set_data("/accounts/alice", b"90", None)?;
    /// write.add_set_data("/accounts/bob", b"110", None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_write<'c>(&self, client: &'c zk::Client) -> Result<MultiFencedWrite<'c>> {
        let (_, first) = &self.held[0];
        let mut write = first.fenced_write(client)?;
        for (_, h) in &self.held[1..] {
            // Version -1: the node must exist, at any version.
            write.add_check_version(h.path(), -1)?;
        }
        Ok(MultiFencedWrite {
            write,
            client,
            members: self
                .held
                .iter()
                .map(|(_, h)| Member {
                    path: h.path().to_owned(),
                    session: h.session_id(),
                    held: h.is_held(),
                })
                .collect(),
        })
    }

    /// The client of the session the locks were granted on.
    ///
    /// # Errors
    ///
    /// [`Error::SessionExpired`] or [`Error::SessionClosed`] once that session is over.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMultiLockGuard) -> Result<(), zk_recipes::Error> {
    /// let client = guard.client()?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> Result<zk::Client> {
        self.held[0].1.client()
    }
}

/// A member's node as the fenced write checks it.
struct Member {
    path: String,
    session: i64,
    /// Whether its grant held when the write was made.
    held: bool,
}

/// A [`FencedWrite`] over every lock of a [`ZkMultiLockGuard`], from
/// [`ZkMultiLockGuard::fenced_write`]: add operations through it (it dereferences to the
/// [`FencedWrite`]), then [`commit`](MultiFencedWrite::commit).
#[must_use = "nothing is written until commit()"]
pub struct MultiFencedWrite<'c> {
    write: FencedWrite<'c>,
    client: &'c zk::Client,
    members: Vec<Member>,
}

impl fmt::Debug for MultiFencedWrite<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiFencedWrite")
            .field("write", &self.write)
            .field("members", &self.members.len())
            .finish()
    }
}

impl<'c> Deref for MultiFencedWrite<'c> {
    type Target = FencedWrite<'c>;
    fn deref(&self) -> &FencedWrite<'c> {
        &self.write
    }
}

impl DerefMut for MultiFencedWrite<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.write
    }
}

impl MultiFencedWrite<'_> {
    /// Commits every operation added, if and only if every lock still holds.
    ///
    /// # Errors
    ///
    /// As [`FencedWrite::commit`]; [`Error::Lost`] names the lock's node that was gone (or
    /// not held when the write was made: nothing is sent then). After a failed check of a
    /// node, which node it was is found by one read of each (one more round trip).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in outcome, as [`FencedWrite::commit`]: a commit dropped after its
    /// first poll may or may not take effect.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMultiLockGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_delete("/jobs/pending/17", None)?;
    /// match write.commit().await {
    ///     Ok(_) => {}
    ///     Err(zk_recipes::Error::Lost { path }) => eprintln!("{path} lost: nothing written"),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn commit(self) -> Result<Vec<zk::MultiWriteResult>> {
        let MultiFencedWrite {
            write,
            client,
            members,
        } = self;
        if let Some(m) = members.iter().find(|m| !m.held) {
            return Err(Error::Lost {
                path: m.path.clone(),
            });
        }
        match write.commit().await {
            // A node's check failed, or one of the caller's operations: which? The nodes say.
            Err(Error::Zk(source @ (zk::Error::NoNode | zk::Error::BadVersion))) => {
                let stats: Vec<_> = members.iter().map(|m| client.check_stat(&m.path)).collect();
                for (m, stat) in members.iter().zip(stats) {
                    match stat.await {
                        Ok(Some(s)) if s.ephemeral_owner == m.session => {}
                        Ok(_) => {
                            return Err(Error::Lost {
                                path: m.path.clone(),
                            })
                        }
                        Err(_) => break,
                    }
                }
                Err(Error::Zk(source))
            }
            other => other,
        }
    }
}
