//! [`ZkMultiLock`]: several locks ([`ZkMutex`] roots and [`ZkLockSpace`] keys, mixed) taken
//! together, without deadlock, as Curator's `InterProcessMultiLock` takes its locks. This
//! file: the locks, their order and the acquisition; `guard.rs`: what is held (tokens,
//! `lost()`, the release of all) and the fenced write over every member.

mod guard;

pub use guard::{MultiFencedWrite, MultiLoss, ZkMultiLockGuard};

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tracing::{debug, debug_span, Instrument};

use crate::error::{Error, Result};
use crate::key;
use crate::path::ZkPath;
use crate::session::Session;
use crate::{ZkLockSpace, ZkMutex};

use guard::Held;

/// How many times [`ZkMultiLock::lock`] starts over after a member it already held was lost
/// while it waited for a later one (a session expiry takes them all), before it gives up.
const ROUNDS: usize = 4;

/// One lock of a [`ZkMultiLock`]: a [`ZkMutex`]'s root or a key of a [`ZkLockSpace`].
///
/// Locks are ordered (derived `Ord`): every mutex before every key, mutexes by path, keys by
/// space and then key. A multi-lock takes its locks in this order, so that two multi-locks
/// that share locks take the shared ones in the same order and never wait for each other in
/// a circle.
///
/// ```
/// use zk_recipes::LockRef;
///
/// let a = LockRef::mutex("/locks/inventory");
/// let b = LockRef::key("/locks/orders", "order-42");
/// assert!(a < b);
/// assert_eq!(b.to_string(), "/locks/orders[order-42]");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockRef {
    /// A [`ZkMutex`] on this root.
    Mutex {
        /// The mutex's root.
        path: String,
    },
    /// The key `key` of the [`ZkLockSpace`] at `space`.
    Key {
        /// The lock space's path.
        space: String,
        /// The key.
        key: String,
    },
}

impl LockRef {
    /// The [`ZkMutex`] on `path`.
    ///
    /// ```
    /// let lock = zk_recipes::LockRef::mutex("/locks/inventory");
    /// ```
    pub fn mutex(path: impl Into<String>) -> LockRef {
        LockRef::Mutex { path: path.into() }
    }

    /// The key `key` of the [`ZkLockSpace`] at `space`.
    ///
    /// ```
    /// let lock = zk_recipes::LockRef::key("/locks/orders", "order-42");
    /// ```
    pub fn key(space: impl Into<String>, key: impl Into<String>) -> LockRef {
        LockRef::Key {
            space: space.into(),
            key: key.into(),
        }
    }
}

/// `/path` for a mutex, `/space[key]` for a key.
impl fmt::Display for LockRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockRef::Mutex { path } => f.write_str(path),
            LockRef::Key { space, key } => write!(f, "{space}[{key}]"),
        }
    }
}

/// A member lock, ready to take.
enum Locker {
    Mutex(ZkMutex),
    Key(Arc<ZkLockSpace>, String),
}

impl Locker {
    async fn lock(&self) -> Result<Held> {
        match self {
            Locker::Mutex(m) => m.lock().await.map(Held::Mutex),
            Locker::Key(space, key) => space.lock(key).await.map(Held::Key),
        }
    }

    async fn try_lock(&self) -> Result<Option<Held>> {
        match self {
            Locker::Mutex(m) => Ok(m.try_lock().await?.map(Held::Mutex)),
            Locker::Key(space, key) => Ok(space.try_lock(key).await?.map(Held::Key)),
        }
    }
}

/// Several locks taken together: [`ZkMutex`] roots and [`ZkLockSpace`] keys, mixed (Curator's
/// `InterProcessMultiLock`). [`lock`](ZkMultiLock::lock) takes every one of them in the
/// global order of [`LockRef`] (each lock waits FIFO among its own contenders, as alone), so
/// that multi-locks sharing locks never deadlock; the [guard](ZkMultiLockGuard) holds them
/// all, with a fencing token per lock, one [`lost`](ZkMultiLockGuard::lost) for all and a
/// [fenced write](ZkMultiLockGuard::fenced_write) that commits only while every one holds.
///
/// Each member is the recipe itself on the same layout, so a plain [`ZkMutex`] (or a Curator
/// `InterProcessMutex`) on one of the paths excludes the multi-lock holder as usual. The
/// order protects multi-locks from each other only: a process that holds one lock and then
/// waits for a multi-lock containing another can still wait in a circle with one doing the
/// reverse, as with any two locks.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{LockRef, ZkMultiLock};
///
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// let transfer = ZkMultiLock::new(&session, [
///     LockRef::key("/locks/accounts", "alice"),
///     LockRef::key("/locks/accounts", "bob"),
///     LockRef::mutex("/locks/ledger"),
/// ])?;
/// let guard = transfer.lock().await?;
/// for (lock, token) in guard.tokens() {
///     println!("{lock}: token {token}"); // each resource fenced by its own token
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub struct ZkMultiLock {
    /// In lock order.
    members: Vec<(LockRef, Locker)>,
}

impl fmt::Debug for ZkMultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.members.iter().map(|(r, _)| r))
            .finish()
    }
}

impl ZkMultiLock {
    /// The multi-lock of `locks` (in any order: they are taken in [`LockRef`]'s). Nothing is
    /// sent to ZooKeeper until the first acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSet`] for no lock or one lock twice (it would wait for itself: the
    /// locks are not reentrant), [`Error::InvalidPath`] for a malformed path,
    /// [`Error::InvalidKey`] for a key no lock can have.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::{LockRef, ZkMultiLock};
    /// let both = ZkMultiLock::new(session, [LockRef::mutex("/locks/a"), LockRef::mutex("/locks/b")])?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, locks: impl IntoIterator<Item = LockRef>) -> Result<ZkMultiLock> {
        let mut locks: Vec<LockRef> = locks.into_iter().collect();
        locks.sort();
        if locks.is_empty() {
            return Err(Error::InvalidSet {
                what: "multi-lock",
                reason: "no lock in it".to_owned(),
            });
        }
        if let Some(twice) = locks.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidSet {
                what: "multi-lock",
                reason: format!("{} is in it twice", twice[0]),
            });
        }
        let mut spaces: BTreeMap<String, Arc<ZkLockSpace>> = BTreeMap::new();
        let mut members = Vec::with_capacity(locks.len());
        for lock in locks {
            let locker = match &lock {
                LockRef::Mutex { path } => Locker::Mutex(ZkMutex::new(session, path)?),
                LockRef::Key { space, key } => {
                    key::encode(key)?;
                    ZkPath::new(space.as_str())?;
                    let space = match spaces.get(space) {
                        Some(s) => s.clone(),
                        None => {
                            let s = Arc::new(ZkLockSpace::new(session, space)?);
                            spaces.insert(space.clone(), s.clone());
                            s
                        }
                    };
                    Locker::Key(space, key.clone())
                }
            };
            members.push((lock, locker));
        }
        Ok(ZkMultiLock { members })
    }

    /// The locks, in the order they are taken.
    ///
    /// ```no_run
    /// # fn demo(multi: zk_recipes::ZkMultiLock) {
    /// for lock in multi.locks() { println!("{lock}"); }
    /// # }
    /// ```
    pub fn locks(&self) -> impl Iterator<Item = &LockRef> {
        self.members.iter().map(|(r, _)| r)
    }

    /// Waits until every lock is held, taking them one after the other in [`LockRef`]'s
    /// order. When a lock already taken is lost while a later one is awaited (its session
    /// expired, its node was deleted), everything taken is given back and the acquisition
    /// starts over, at most four times.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::lock`] and [`ZkLockSpace::lock`], for the first lock that fails (the
    /// ones taken before it are released); [`Error::Lost`] when members kept being lost
    /// while it waited.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases, in the background, every lock it took and
    /// the contender node it was waiting with; nothing is held.
    ///
    /// ```no_run
    /// # async fn demo(multi: zk_recipes::ZkMultiLock) -> Result<(), zk_recipes::Error> {
    /// let guard = multi.lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<ZkMultiLockGuard> {
        let span = debug_span!("multi_lock", locks = self.members.len());
        async {
            let mut lost = None;
            for round in 0..ROUNDS {
                let mut held: Vec<(LockRef, Held)> = Vec::with_capacity(self.members.len());
                for (lock, locker) in &self.members {
                    let taken = tokio::select! {
                        biased;
                        (i, reason) = first_of(held.iter().map(|(_, h)| h.lost())) => Err((i, reason)),
                        taken = locker.lock() => Ok(taken?),
                    };
                    match taken {
                        Ok(h) => held.push((lock.clone(), h)),
                        Err((i, reason)) => {
                            debug!(round, lock = %held[i].0, ?reason, "a lock already taken was lost; starting over");
                            lost = Some(held[i].1.path().to_owned());
                            break;
                        }
                    }
                }
                if held.len() == self.members.len() {
                    if let Some((_, h)) = held.iter().find(|(_, h)| !h.is_held()) {
                        lost = Some(h.path().to_owned());
                        continue;
                    }
                    debug!("every lock held");
                    return Ok(ZkMultiLockGuard::new(held));
                }
                // What was taken is dropped here: each guard deletes its node.
            }
            Err(Error::Lost {
                path: lost.unwrap_or_default(),
            })
        }
        .instrument(span)
        .await
    }

    /// Takes every lock if every one is free now: all or nothing. `Ok(None)` when one of them
    /// is busy, after the ones taken before it were released (their deletes answered): nothing
    /// is left behind. About one round trip per lock.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::try_lock`] and [`ZkLockSpace::try_lock`], for the first lock that fails
    /// (the ones taken before it are released first).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future releases what it took, in the background.
    ///
    /// ```no_run
    /// # async fn demo(multi: zk_recipes::ZkMultiLock) -> Result<(), zk_recipes::Error> {
    /// match multi.try_lock().await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("one of them is busy; nothing taken"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<ZkMultiLockGuard>> {
        let span = debug_span!("multi_try_lock", locks = self.members.len());
        async {
            let mut held: Vec<(LockRef, Held)> = Vec::with_capacity(self.members.len());
            for (lock, locker) in &self.members {
                let taken = locker.try_lock().await;
                let failed = match taken {
                    Ok(Some(h)) => {
                        held.push((lock.clone(), h));
                        continue;
                    }
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                };
                debug!(busy = %lock, "not every lock is free; giving back what was taken");
                // The releases' own errors say only that a node is gone already.
                let _ = guard::release_all(held).await;
                return failed;
            }
            Ok(Some(ZkMultiLockGuard::new(held)))
        }
        .instrument(span)
        .await
    }
}

/// The first of `futures` to finish: its index and output. Never finishes for none.
pub(crate) async fn first_of<'a, T>(
    futures: impl IntoIterator<Item = impl Future<Output = T> + Send + 'a>,
) -> (usize, T) {
    let mut futures: Vec<Pin<Box<dyn Future<Output = T> + Send + 'a>>> = futures
        .into_iter()
        .map(|f| Box::pin(f) as Pin<Box<dyn Future<Output = T> + Send + 'a>>)
        .collect();
    std::future::poll_fn(|cx| {
        for (i, f) in futures.iter_mut().enumerate() {
            if let Poll::Ready(out) = f.as_mut().poll(cx) {
                return Poll::Ready((i, out));
            }
        }
        Poll::Pending
    })
    .await
}
