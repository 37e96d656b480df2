//! [`ZkLockSpace`]: a lock per key (an order, an account, a product) that leaves nothing behind
//! once idle and whose tokens still only grow.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::claim::{claim, Make};
use crate::error::Result;
use crate::grant::Grant;
use crate::guard::Guard;
use crate::key;
use crate::layout::kind::RecipeKind;
use crate::mutex::never_none;
use crate::path::Naming;
use crate::path::ZkPath;
use crate::queue::{exclusive, DirGuess, Queue, Rule, Wait};
use crate::session::Session;

/// The mutex's rule, on Curator's protected names (`_c_{uuid}-lock-NNNNNNNNNN`): a reaped
/// directory starts its sequence again, so a plain `lock-0000000000` would name a node of every
/// incarnation, and a stale grant's delete or check could hit the next holder's node; the
/// uuid makes every node's path unique.
const RULE: Rule = Rule {
    names: &[crate::layout::names::LOCK],
    decide: exclusive,
    naming: Naming::Protected,
    head_release: true,
};

/// How long a key's directory is taken to exist after a lock of it, so its create can be left
/// out of the next acquisition's burst. Well below the server's reaping interval
/// (`znode.container.checkIntervalMs`, 60 s by default); when the directory was reaped anyway,
/// the acquisition creates it again (one more round trip).
const RECENT: Duration = Duration::from_secs(10);

/// At most this many keys are remembered; past it the expired ones are forgotten, and if that
/// is not enough, all of them.
const RECENT_KEYS: usize = 4096;

/// One lock per key under a **space** (`/locks/orders`): `lock("order-42")` locks
/// `/locks/orders/order-42`, whatever the key, and the key's directory goes away once nobody
/// holds or waits for it.
///
/// Each key's directory is a ZooKeeper **container**, created in the same burst of requests as
/// the contender's node and its listing, so a key never seen costs about one round trip like a
/// known one, and the server reaps the directory once its last contender is gone: a million
/// orders locked once leave no znode. Within a key it is [`ZkMutex`](crate::ZkMutex): FIFO,
/// one waiter woken per release, one write per handoff, Curator's node names
/// (`_c_{uuid}-lock-NNNNNNNNNN`, unique across the directory's incarnations) and layout (`InterProcessMutex` on `{space}/{key}` with
/// `creatingParentContainersIfNeeded()` excludes a Rust worker locking `key`).
///
/// # Tokens: creation zxids
///
/// A reaped directory restarts its sequence, so the sequence is no fencing token here (it
/// would go back to 0; Curator's lock does just that). The [token](Grant::token) of a keyed
/// lock is the contender node's **creation zxid**: ZooKeeper orders every write of the ensemble
/// by zxid, so a key's tokens strictly increase from grant to grant, across reaping and
/// re-creation of its directory, and never run out (64 bits). Storage applies the same rule as
/// for any token (see [`FencingToken`](crate::FencingToken)). Tokens of different keys are not
/// comparable in meaning (they are all zxids, but a fence is kept per resource).
///
/// One path serves one recipe kind ([`layout::kind`](crate::layout::kind)): the space is
/// marked as a lock space on first use, and no other recipe takes it or a key's directory in
/// it ([`RootKind::InLockSpace`](crate::RootKind::InLockSpace)): a [`ZkMutex`](crate::ZkMutex)
/// on a key's directory would hand out sequence numbers, far smaller than zxids, for the same
/// resource. A key's directory that an earlier version let someone anchor is refused
/// ([`RootKind::AnchoredKey`](crate::RootKind::AnchoredKey)) until `zkr repair` removes the
/// anchor.
///
/// # Keys
///
/// Any non-empty string of at most 1024 bytes once encoded. Characters ZooKeeper accepts in a
/// name are kept, so ordinary keys read the same in ZooKeeper; `/`, `%`, control characters and
/// the names `.` and `..` are percent-encoded ([`key_path`](ZkLockSpace::key_path) says where a
/// key lives, [`key_of`](ZkLockSpace::key_of) reads a directory's name back).
///
/// # Memory
///
/// The client remembers at most 4,096 recently locked keys, each for 10 s (to leave the
/// directory's create out of the burst); a process that locks millions of keys does not grow.
///
/// For a key it does not remember, the space guesses from its last such keys whether the
/// directory is there (a lock per order: never; a few hot keys that other processes lock too:
/// always), and sends the burst for that case: one round trip when the guess is right, two
/// (and a failed write on the server) when it is wrong. ZooKeeper has no single request that
/// is right for both cases.
///
/// # Example
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::ZkLockSpace;
///
/// let orders = ZkLockSpace::new(&session, "/locks/orders")?;
/// let guard = orders.lock("order-42").await?;
/// let token = guard.token(); // the node's creation zxid: send it with every write
/// // ... UPDATE orders SET ..., fence = :token WHERE id = 'order-42' AND fence <= :token
/// guard.release().await?;
/// # let _ = token; Ok(()) }
/// ```
pub struct ZkLockSpace {
    session: Session,
    space: ZkPath,
    recent: Mutex<RecentKeys>,
    /// Whether the directory of a key not in `recent` is there (see `queue/guess.rs`).
    unknown_dirs: Arc<DirGuess>,
    /// Set once the space is known to be a lock space (made and marked on first use).
    space_checked: tokio::sync::OnceCell<()>,
}

impl fmt::Debug for ZkLockSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkLockSpace")
            .field("path", &self.space.as_str())
            .finish()
    }
}

/// A held keyed lock; see [`Guard`]. Its token is the node's creation zxid.
pub type ZkLockSpaceGuard = Guard<ZkLockSpace>;

impl crate::guard::Sealed for ZkLockSpace {}
impl crate::guard::Recipe for ZkLockSpace {
    type Held = crate::grant::Grant;
}

impl ZkLockSpace {
    /// The lock space at `path` (relative to the session's chroot). Nothing is sent until the
    /// first lock, which creates the space as persistent nodes if missing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let orders = zk_recipes::ZkLockSpace::new(session, "/locks/orders")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<ZkLockSpace> {
        Ok(ZkLockSpace {
            session: session.clone(),
            space: ZkPath::new(path)?,
            recent: Mutex::new(RecentKeys::default()),
            unknown_dirs: Arc::default(),
            space_checked: tokio::sync::OnceCell::new(),
        })
    }

    /// The space's path.
    ///
    /// ```no_run
    /// # fn demo(orders: zk_recipes::ZkLockSpace) {
    /// assert_eq!(orders.path(), "/locks/orders");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.space.as_str()
    }

    /// Where `key`'s lock lives: `{space}/{encoded key}`, the path a Curator
    /// `InterProcessMutex` must lock to exclude this lock.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`](crate::Error::InvalidKey) for an empty or too long key.
    ///
    /// ```no_run
    /// # fn demo(orders: zk_recipes::ZkLockSpace) -> Result<(), zk_recipes::Error> {
    /// assert_eq!(orders.key_path("order-42")?, "/locks/orders/order-42");
    /// assert_eq!(orders.key_path("a/b")?, "/locks/orders/a%2Fb");
    /// # Ok(()) }
    /// ```
    pub fn key_path(&self, key: &str) -> Result<String> {
        Ok(self.space.child(&key::encode(key)?))
    }

    /// The key a directory of a lock space stands for (its name as ZooKeeper lists it), or
    /// `None` for a name no key encodes to.
    ///
    /// ```
    /// use zk_recipes::ZkLockSpace;
    /// assert_eq!(ZkLockSpace::key_of("a%2Fb").as_deref(), Some("a/b"));
    /// assert_eq!(ZkLockSpace::key_of("order-42").as_deref(), Some("order-42"));
    /// assert_eq!(ZkLockSpace::key_of("%zz"), None);
    /// ```
    pub fn key_of(name: &str) -> Option<String> {
        key::decode(name)
    }

    /// Waits for `key`'s lock (FIFO among its contenders). If the session expires while
    /// waiting, it enqueues again on the new session. For a time limit, wrap it in
    /// `tokio::time::timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`](crate::Error::InvalidKey),
    /// [`Error::UnsuitableRoot`](crate::Error::UnsuitableRoot) when the space is an ephemeral
    /// node or the key's directory a `ZkMutex` root, and as
    /// [`ZkMutex::lock`](crate::ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future removes the contender's node in the background, and
    /// the server reaps the directory once it is empty.
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkLockSpace) -> Result<(), zk_recipes::Error> {
    /// let guard = orders.lock("order-42").await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self, key: &str) -> Result<ZkLockSpaceGuard> {
        let grant = self.acquire(key, Wait::Forever).await?;
        grant.map(Guard::new).ok_or_else(never_none)
    }

    /// Takes `key`'s lock if it is free now; `Ok(None)` otherwise (about one round trip,
    /// leaves no node behind).
    ///
    /// # Errors
    ///
    /// As [`lock`](ZkLockSpace::lock), except that a session expiry is returned as
    /// [`Error::SessionExpired`](crate::Error::SessionExpired).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](ZkLockSpace::lock).
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkLockSpace) -> Result<(), zk_recipes::Error> {
    /// match orders.try_lock("order-42").await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("someone else works on order 42"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self, key: &str) -> Result<Option<ZkLockSpaceGuard>> {
        Ok(self.acquire(key, Wait::No).await?.map(Guard::new))
    }

    async fn acquire(&self, key: &str, wait: Wait) -> Result<Option<Grant>> {
        let name = key::encode(key)?;
        let dir = ZkPath::new(self.space.child(&name))?;
        self.check_space().await?;
        let known = self.recent().seen(&name);
        let queue = Queue::container(&self.session, dir, known, &self.unknown_dirs);
        let acquired = queue.acquire(RULE, RULE.names[0], None, wait).await;
        match &acquired {
            Ok(_) => self.recent().saw(name),
            Err(_) => self.recent().forget(&name),
        }
        acquired
    }

    /// Once per value: the space exists (made as persistent nodes when missing) and is marked
    /// as a lock space, so that no other recipe takes it or a key's directory in it.
    async fn check_space(&self) -> Result<()> {
        self.space_checked
            .get_or_try_init(|| async {
                let epoch = self.session.epoch().await?;
                let space = &self.space;
                claim(
                    &epoch,
                    &self.session,
                    space,
                    RecipeKind::LockSpace,
                    Make::Persistent(&[]),
                )
                .await
                .map(drop)
            })
            .await
            .copied()
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, RecentKeys> {
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Keys locked lately, whose directories are taken to exist (bounded in count and age).
#[derive(Default)]
struct RecentKeys(HashMap<String, Instant>);

impl RecentKeys {
    fn seen(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(|at| at.elapsed() < RECENT)
    }

    fn saw(&mut self, name: String) {
        if self.0.len() >= RECENT_KEYS && !self.0.contains_key(&name) {
            self.0.retain(|_, at| at.elapsed() < RECENT);
            if self.0.len() >= RECENT_KEYS {
                self.0.clear();
            }
        }
        self.0.insert(name, Instant::now());
    }

    fn forget(&mut self, name: &str) {
        self.0.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_a_bounded_number_of_keys() {
        let mut recent = RecentKeys::default();
        for i in 0..RECENT_KEYS * 3 {
            recent.saw(format!("key-{i}"));
            assert!(recent.0.len() <= RECENT_KEYS);
        }
        let last = format!("key-{}", RECENT_KEYS * 3 - 1);
        assert!(recent.seen(&last));
        recent.forget(&last);
        assert!(!recent.seen(&last));
        assert!(!recent.seen("never"));
    }
}
