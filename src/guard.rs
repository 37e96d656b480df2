//! The guards recipes hand out: a [`Grant`] tied to the recipe value it came from, borrowed
//! ([`Guard`]) or owned through an `Arc` ([`OwnedGuard`]).

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;

use crate::error::Result;
use crate::grant::Grant;

/// A held lock borrowed from its recipe value `R` (a [`ZkMutex`](crate::ZkMutex), a
/// [`ZkRwLock`](crate::ZkRwLock), ...). Dereferences to [`Grant`] for
/// [`token`](Grant::token), [`zxid`](Grant::zxid), [`path`](Grant::path),
/// [`is_held`](Grant::is_held), [`lost`](Grant::lost) and
/// [`fenced_write`](Grant::fenced_write).
///
/// Dropping it releases in the background (no runtime needed on the dropping thread, no
/// panic); [`release`](Guard::release) does so and reports errors.
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
/// let guard: zk_recipes::ZkMutexGuard<'_> = mutex.lock().await?;
/// println!("token {}", guard.token());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "the lock is released when the guard is dropped"]
pub struct Guard<'a, R> {
    grant: Grant,
    _recipe: PhantomData<&'a R>,
}

impl<R> Guard<'_, R> {
    pub(crate) fn new(grant: Grant) -> Self {
        Guard {
            grant,
            _recipe: PhantomData,
        }
    }

    /// Releases: deletes the node, which lets the next contender in.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`](crate::Error::Lost) when the node was already gone (someone deleted
    /// it): the critical section may not have been exclusive.
    /// [`Error::SessionExpired`](crate::Error::SessionExpired) when the session ended first
    /// (the node went with it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if dropped before completing, the node is deleted in the background.
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
    /// mutex.lock().await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        self.grant.release().await
    }
}

impl<R> Deref for Guard<'_, R> {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        &self.grant
    }
}

impl<R> fmt::Debug for Guard<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guard").field(&self.grant).finish()
    }
}

/// A held lock that owns an `Arc` of its recipe value: `'static`, it can move into tasks.
/// Otherwise as [`Guard`].
///
/// ```no_run
/// # async fn demo(mutex: std::sync::Arc<zk_recipes::ZkMutex>) -> Result<(), zk_recipes::Error> {
/// let guard: zk_recipes::OwnedZkMutexGuard = mutex.lock_owned().await?;
/// tokio::spawn(async move { guard.release().await });
/// # Ok(()) }
/// ```
#[must_use = "the lock is released when the guard is dropped"]
pub struct OwnedGuard<R> {
    grant: Grant,
    _recipe: Arc<R>,
}

impl<R> OwnedGuard<R> {
    pub(crate) fn new(grant: Grant, recipe: Arc<R>) -> Self {
        OwnedGuard {
            grant,
            _recipe: recipe,
        }
    }

    /// Releases; see [`Guard::release`].
    ///
    /// # Errors
    ///
    /// As [`Guard::release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Guard::release`].
    ///
    /// ```no_run
    /// # async fn demo(mutex: std::sync::Arc<zk_recipes::ZkMutex>) -> Result<(), zk_recipes::Error> {
    /// mutex.lock_owned().await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        self.grant.release().await
    }
}

impl<R> Deref for OwnedGuard<R> {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        &self.grant
    }
}

impl<R> fmt::Debug for OwnedGuard<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OwnedGuard").field(&self.grant).finish()
    }
}
