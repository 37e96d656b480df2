//! [`Guard`]: the one shape of everything held (a lock, a lease, a leadership, a group
//! membership), named after its recipe; [`Recipe`], the recipes that hand one out.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;

use crate::error::Result;
use crate::grant::{Grant, LossReason};

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A recipe whose holdings are [`Guard`]s: [`ZkMutex`](crate::ZkMutex),
/// [`ZkLockSpace`](crate::ZkLockSpace), [`ZkRwLock`](crate::ZkRwLock),
/// [`ZkSemaphore`](crate::ZkSemaphore), [`ZkLeaderElection`](crate::ZkLeaderElection) and
/// [`ZkGroup`](crate::ZkGroup). Sealed: it names the library's recipes only, so that code
/// generic over `Guard<R>` (a supervisor that holds whatever it was given) can be written.
///
/// ```
/// use zk_recipes::{Guard, Recipe};
///
/// /// Holds anything until it is lost, then says why.
/// async fn hold_until_lost<R: Recipe>(guard: Guard<R>) -> zk_recipes::LossReason {
///     guard.lost().await
/// }
/// ```
pub trait Recipe: Sealed + 'static {
    /// What a guard of this recipe keeps (a grant, with the candidate's info for an
    /// election; a kept node for a group member). Not for use outside the library.
    #[doc(hidden)]
    type Held: Holding;
}

/// What a [`Guard`] keeps: how it tells whether it holds, waits for the loss and releases.
/// Not for use outside the library (the trait is sealed through [`Recipe`]).
#[doc(hidden)]
pub trait Holding: fmt::Debug + Send + Sync + 'static {
    /// Whether it is held now, as far as the library knows.
    fn holding_is_held(&self) -> bool;
    /// Resolves once it is not held, with why; what it counts from is taken when called.
    fn holding_lost(&self) -> impl Future<Output = LossReason> + Send + '_;
    /// Gives it up.
    fn holding_release(self) -> impl Future<Output = Result<()>> + Send;
}

/// A [`Holding`] that rests on a [`Grant`] (a queue position): its guard dereferences to it.
#[doc(hidden)]
pub trait OnGrant: Holding {
    /// The grant it rests on.
    fn grant(&self) -> &Grant;
}

impl Holding for Grant {
    fn holding_is_held(&self) -> bool {
        self.is_held()
    }
    fn holding_lost(&self) -> impl Future<Output = LossReason> + Send + '_ {
        self.lost()
    }
    fn holding_release(self) -> impl Future<Output = Result<()>> + Send {
        self.release()
    }
}

impl OnGrant for Grant {
    fn grant(&self) -> &Grant {
        self
    }
}

/// Something held of recipe `R`: a lock ([`ZkMutexGuard`](crate::ZkMutexGuard),
/// [`ZkLockSpaceGuard`](crate::ZkLockSpaceGuard), [`ZkRwLockGuard`](crate::ZkRwLockGuard)), a
/// lease ([`ZkSemaphoreLease`](crate::ZkSemaphoreLease)), a leadership
/// ([`ZkLeadership`](crate::ZkLeadership)) or a group membership
/// ([`ZkGroupMember`](crate::ZkGroupMember)). Every one has the same three methods:
/// [`is_held`](Guard::is_held), [`lost`](Guard::lost) and [`release`](Guard::release); a
/// recipe adds its own (a leadership's [`term`](Guard::term), a member's
/// [`set_payload`](Guard::set_payload)). Those that stand on a queue position dereference to
/// their [`Grant`] for [`token`](Grant::token), [`path`](Grant::path),
/// [`fenced_write`](Grant::fenced_write) and [`confirm`](Grant::confirm).
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
#[must_use = "what is held is released when the guard is dropped"]
pub struct Guard<R: Recipe> {
    held: R::Held,
    _recipe: PhantomData<fn() -> R>,
}

impl<R: Recipe> Guard<R> {
    pub(crate) fn new(held: R::Held) -> Self {
        Guard {
            held,
            _recipe: PhantomData,
        }
    }

    /// What the guard keeps, for the recipe's own methods.
    pub(crate) fn held(&self) -> &R::Held {
        &self.held
    }

    /// Whether it is held now, as far as the library knows, without a request. For a grant
    /// see [`Grant::is_held`] (the lease clock included); for a group member, whether its node
    /// exists as this session's right now.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// if !guard.is_held() {
    ///     return; // stop before acting
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        self.held.holding_is_held()
    }

    /// Resolves once it is not held, with why (at once if it is not held now). For a grant
    /// see [`Grant::lost`]. A group member's node is made again by its keeper after each lapse,
    /// so for a member the future counts from the moment `lost()` is called (not from its
    /// first poll): a lapse after the call resolves it even if the node is back by the time the
    /// future is awaited, and a later call waits for the next lapse.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits; call it again at will.
    ///
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// tokio::select! {
    ///     reason = guard.lost() => eprintln!("lost: {reason:?}"),
    ///     _ = work() => {}
    /// }
    /// # }
    /// ```
    pub fn lost(&self) -> impl Future<Output = LossReason> + Send + '_ {
        self.held.holding_lost()
    }

    /// Releases: deletes the node (a lock's, a lease's, a leadership's, a member's), which
    /// lets the next contender in.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`](crate::Error::Lost) when the node was already gone (someone deleted
    /// it): the critical section may not have been exclusive.
    /// [`Error::SessionExpired`](crate::Error::SessionExpired) or
    /// [`Error::SessionClosed`](crate::Error::SessionClosed) when the session ended first
    /// (the node went with it). A group member: [`Error::SessionClosed`](crate::Error::SessionClosed)
    /// or [`Error::ConnectionLost`](crate::Error::ConnectionLost) (the node is then deleted in
    /// the background, or goes with the session).
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
        self.held.holding_release().await
    }
}

impl<R: Recipe> Deref for Guard<R>
where
    R::Held: OnGrant,
{
    type Target = Grant;
    fn deref(&self) -> &Grant {
        self.held.grant()
    }
}

impl<R: Recipe> fmt::Debug for Guard<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guard").field(&self.held).finish()
    }
}
