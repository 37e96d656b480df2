//! [`Guard`]: what a lock recipe hands out, a [`Grant`] named after its recipe.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use crate::error::Result;
use crate::grant::Grant;

/// A held lock of recipe `R` (a [`ZkMutex`](crate::ZkMutex), a [`ZkRwLock`](crate::ZkRwLock),
/// a [`ZkSemaphore`](crate::ZkSemaphore)). Dereferences to [`Grant`] for
/// [`token`](Grant::token), [`zxid`](Grant::zxid), [`path`](Grant::path),
/// [`is_held`](Grant::is_held), [`lost`](Grant::lost) and
/// [`fenced_write`](Grant::fenced_write).
///
/// It borrows nothing (`'static`, `Send` and `Sync`): move it into a spawned task, keep it in a
/// struct, outlive the recipe value it came from. Dropping it releases in the background (no
/// runtime needed on the dropping thread, no panic); [`release`](Guard::release) does so and
/// reports errors.
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
/// let guard: zk_recipes::ZkMutexGuard = mutex.lock().await?;
/// tokio::spawn(async move {
///     println!("token {}", guard.token());
///     guard.release().await
/// });
/// # Ok(()) }
/// ```
#[must_use = "the lock is released when the guard is dropped"]
pub struct Guard<R> {
    grant: Grant,
    _recipe: PhantomData<fn() -> R>,
}

impl<R> Guard<R> {
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
    /// [`Error::SessionExpired`](crate::Error::SessionExpired) or
    /// [`Error::SessionClosed`](crate::Error::SessionClosed) when the session ended first
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

impl<R> Deref for Guard<R> {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        &self.grant
    }
}

impl<R> fmt::Debug for Guard<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guard").field(&self.grant).finish()
    }
}
