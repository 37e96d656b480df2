//! [`ZkAtomicLong`]: a 64-bit value in one node, changed by compare-and-set on its version,
//! on Curator's `DistributedAtomicLong` layout (`value.rs`: the policy, the promotion, the
//! result).

mod value;

use std::fmt;
use std::sync::Arc;

use tokio::time::Instant;
use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use crate::claim::{claim, Make};
use crate::error::{Error, Result};
use crate::layout::kind::RecipeKind;
use crate::mutex::ZkMutex;
use crate::ops;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

pub use value::{AtomicStats, AtomicValue, PromotedToLock, RetryPolicy};

/// How often an operation makes the node again when it finds it deleted (each time with 0).
const MISSING_ROUNDS: u32 = 3;

/// A 64-bit signed value shared by every process on a path: a persistent node whose data is
/// the value as 8 big-endian bytes, as Curator's `DistributedAtomicLong` keeps it, so Rust
/// and Java processes change one value together.
///
/// Every change is a compare-and-set on the node's version: read, write over that version,
/// again while someone else's write lands in between, at most as many tries as the
/// [`RetryPolicy`] allows, then (optionally, [`with_promotion`](ZkAtomicLong::with_promotion))
/// the same under a lock, as Curator's `PromotedToLock`. An operation whose every try lost
/// the race answers `succeeded() == false` and wrote nothing: call it again. A missing node is
/// created with 0 on first use (its parents persistent), as Curator reads a missing value.
///
/// A write whose reply is lost to a broken connection is never sent again: it may have
/// landed, and a repeat would add twice. The operation answers [`Error::ConnectionLost`]
/// (outcome unknown) instead.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{RetryPolicy, Session, SessionOptions, ZkAtomicLong};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let orders = ZkAtomicLong::new(&session, "/counters/orders", RetryPolicy::default())?;
/// let result = orders.increment().await?;
/// if result.succeeded() {
///     println!("order number {}", result.post_value());
/// }
/// # Ok(()) }
/// ```
pub struct ZkAtomicLong {
    session: Session,
    path: ZkPath,
    retry: RetryPolicy,
    promotion: Option<(PromotedToLock, ZkMutex)>,
    /// Set once the node is known to be an atomic long (made with 0 and marked on first use).
    checked: tokio::sync::OnceCell<()>,
}

impl fmt::Debug for ZkAtomicLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkAtomicLong")
            .field("path", &self.path.as_str())
            .field("retry", &self.retry)
            .field("promotion", &self.promotion.as_ref().map(|(p, _)| p))
            .finish()
    }
}

/// One try's outcome.
enum Tried {
    Wrote {
        pre: i64,
        post: i64,
    },
    /// Someone else's write came first; what we read.
    Raced {
        pre: i64,
    },
}

impl ZkAtomicLong {
    /// An atomic long on `path` (relative to the session's chroot), its operations bounded by
    /// `retry`. Nothing is sent to ZooKeeper here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path, [`Error::TooLarge`] for one longer than
    /// the server takes.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::{RetryPolicy, ZkAtomicLong};
    /// let orders = ZkAtomicLong::new(session, "/counters/orders", RetryPolicy::new(20))?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str, retry: RetryPolicy) -> Result<ZkAtomicLong> {
        let path = ZkPath::new(path)?;
        session.check_size("the atomic long's path", path.as_str().len() + 8)?;
        Ok(ZkAtomicLong {
            session: session.clone(),
            path,
            retry,
            promotion: None,
            checked: tokio::sync::OnceCell::new(),
        })
    }

    /// Adds the lock-backed round: once the optimistic tries failed, take the
    /// [`PromotedToLock`]'s mutex and try again under it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] when the lock's path is the value's own (or below it).
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// use std::time::Duration;
    /// use zk_recipes::{PromotedToLock, RetryPolicy, ZkAtomicLong};
    /// let lock = PromotedToLock::new("/counters/orders-lock", Duration::from_secs(2))?;
    /// let orders = ZkAtomicLong::new(session, "/counters/orders", RetryPolicy::new(3))?
    ///     .with_promotion(lock)?;
    /// # Ok(()) }
    /// ```
    pub fn with_promotion(self, promotion: PromotedToLock) -> Result<ZkAtomicLong> {
        let lock = promotion.lock_path();
        let own = self.path.as_str();
        if lock == own || lock.strip_prefix(own).is_some_and(|r| r.starts_with('/')) {
            return Err(Error::InvalidPath {
                path: lock.to_owned(),
                reason: "the promoted lock cannot be the atomic long's node or below it",
            });
        }
        let mutex = ZkMutex::new(&self.session, lock)?;
        Ok(ZkAtomicLong {
            promotion: Some((promotion, mutex)),
            ..self
        })
    }

    /// The value's path.
    ///
    /// ```no_run
    /// # fn demo(orders: zk_recipes::ZkAtomicLong) {
    /// assert_eq!(orders.path(), "/counters/orders");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// Reads the value (creating the node with 0 when it is missing); always succeeded, with
    /// `pre_value() == post_value()`.
    ///
    /// # Errors
    ///
    /// [`Error::BadCount`] when the node holds neither 8 bytes nor none,
    /// [`Error::UnsuitableRoot`] when another recipe kind uses the path, and the session's
    /// errors ([`Error::NoAuth`], [`Error::SessionExpired`], ...).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (but for a missing node, which a later call would create
    /// the same way).
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// println!("{}", orders.get().await?.post_value());
    /// # Ok(()) }
    /// ```
    pub async fn get(&self) -> Result<AtomicValue> {
        let span = debug_span!("atomic_get", path = %self.path);
        async {
            let epoch = self.epoch().await?;
            let (value, _) = self.read(&epoch).await?;
            Ok(AtomicValue {
                succeeded: true,
                pre: value,
                post: value,
                stats: AtomicStats::default(),
            })
        }
        .instrument(span)
        .await
    }

    /// Adds `delta` (see the type's docs for the tries).
    ///
    /// # Errors
    ///
    /// [`Error::BadCount`] when the sum would not fit an `i64` (nothing is written; Curator's
    /// Java arithmetic wraps instead) or the node is malformed, [`Error::ConnectionLost`] when
    /// a write's reply was lost (it may or may not have landed, and is not sent again), as
    /// [`get`](ZkAtomicLong::get) otherwise.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a write already sent may still land after the future is
    /// dropped. Read the value again to know.
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// let result = orders.add(10).await?;
    /// assert!(!result.succeeded() || result.post_value() == result.pre_value() + 10);
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, delta: i64) -> Result<AtomicValue> {
        let path = self.path.as_str();
        self.update("atomic_add", |pre| {
            pre.checked_add(delta).ok_or_else(|| Error::BadCount {
                path: path.to_owned(),
                reason: format!("{pre} + {delta} does not fit a 64-bit long"),
            })
        })
        .await
    }

    /// Subtracts `delta`, as [`add`](ZkAtomicLong::add) of its negation.
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add) (`i64::MIN` has no negation: [`Error::BadCount`]).
    ///
    /// # Cancel safety
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// ```no_run
    /// # async fn demo(stock: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// stock.subtract(3).await?;
    /// # Ok(()) }
    /// ```
    pub async fn subtract(&self, delta: i64) -> Result<AtomicValue> {
        let negated = delta.checked_neg().ok_or_else(|| Error::BadCount {
            path: self.path.as_str().to_owned(),
            reason: format!("{delta} cannot be subtracted (its negation does not fit)"),
        })?;
        self.add(negated).await
    }

    /// Adds 1.
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// # Cancel safety
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// while !orders.increment().await?.succeeded() {}
    /// # Ok(()) }
    /// ```
    pub async fn increment(&self) -> Result<AtomicValue> {
        self.add(1).await
    }

    /// Subtracts 1.
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// # Cancel safety
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// ```no_run
    /// # async fn demo(stock: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// stock.decrement().await?;
    /// # Ok(()) }
    /// ```
    pub async fn decrement(&self) -> Result<AtomicValue> {
        self.add(-1).await
    }

    /// Sets the value to `value` whatever it was, through the tries (see the type's docs);
    /// the Curator `trySet`.
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// # Cancel safety
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// orders.try_set(1_000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_set(&self, value: i64) -> Result<AtomicValue> {
        self.update("atomic_try_set", |_| Ok(value)).await
    }

    /// Sets the value to `new` only if it is `expected` now: one read and at most one
    /// compare-and-set, no further tries (Curator's `compareAndSet`).
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// # Cancel safety
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// ```no_run
    /// # async fn demo(flag: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// if flag.compare_and_set(0, 1).await?.succeeded() {
    ///     println!("we switched it on");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn compare_and_set(&self, expected: i64, new: i64) -> Result<AtomicValue> {
        let span = debug_span!("atomic_compare_and_set", path = %self.path, expected, new);
        async {
            let epoch = self.epoch().await?;
            let start = Instant::now();
            let (pre, version) = self.read(&epoch).await?;
            let wrote = pre == expected && self.write(&epoch, new, Some(version)).await?;
            let stats = AtomicStats {
                optimistic_tries: 1,
                optimistic_time: start.elapsed(),
                ..AtomicStats::default()
            };
            debug!(pre, wrote, "atomic compare-and-set");
            Ok(AtomicValue {
                succeeded: wrote,
                pre,
                post: if wrote { new } else { pre },
                stats,
            })
        }
        .instrument(span)
        .await
    }

    /// Sets the value to `value` unconditionally, in one write (Curator's `forceSet`): a
    /// change landing at the same moment is overwritten.
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// # Cancel safety
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// orders.force_set(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_set(&self, value: i64) -> Result<()> {
        let span = debug_span!("atomic_force_set", path = %self.path, value);
        async {
            let epoch = self.epoch().await?;
            for _ in 0..MISSING_ROUNDS {
                if self.write(&epoch, value, None).await? {
                    debug!("atomic force-set");
                    return Ok(());
                }
                self.make(&epoch).await?;
            }
            Err(self.replaced())
        }
        .instrument(span)
        .await
    }

    /// Creates the node with `value` if it is missing; `false` when it exists already
    /// (Curator's `initialize`).
    ///
    /// # Errors
    ///
    /// As [`add`](ZkAtomicLong::add).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a create already sent may still land after the future is
    /// dropped.
    ///
    /// ```no_run
    /// # async fn demo(orders: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// if orders.initialize(1_000).await? {
    ///     println!("numbering starts at 1000");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn initialize(&self, value: i64) -> Result<bool> {
        let span = debug_span!("atomic_initialize", path = %self.path, value);
        async {
            let epoch = self.session.epoch().await?;
            let kind = RecipeKind::AtomicLong;
            if claim(&epoch, &self.session, &self.path, kind, Make::Nothing)
                .await?
                .is_some()
            {
                return Ok(false);
            }
            let path = self.path.as_str();
            let parent = self.path.parent();
            let options = &zk::CreateMode::Persistent.with_acls(self.session.acls());
            if parent != "/" {
                epoch
                    .retry(parent, |c| async move { c.mkdir(parent, options).await })
                    .await?;
            }
            // Sent once: a create sent again after a lost reply would find its own node and
            // answer "existed".
            let data = &value.to_be_bytes();
            let made = ops::send_once(&epoch, path, |c| async move {
                match c.create(path, data, options).await {
                    Ok(_) => Ok(true),
                    Err(zk::Error::NodeExists) => Ok(false),
                    Err(e) => Err(e),
                }
            })
            .await?;
            // Marked now (made by us or by someone just before).
            self.epoch().await?;
            debug!(made, "atomic initialize");
            Ok(made)
        }
        .instrument(span)
        .await
    }

    /// The optimistic tries, then the promoted round; `make` gives the new value from the
    /// one read.
    async fn update(
        &self,
        name: &'static str,
        make: impl Fn(i64) -> Result<i64>,
    ) -> Result<AtomicValue> {
        let span = debug_span!("atomic_update", op = name, path = %self.path);
        async {
            let epoch = self.epoch().await?;
            let mut stats = AtomicStats::default();
            let start = Instant::now();
            let mut last = self
                .tries(&epoch, self.retry, &make, &mut stats.optimistic_tries)
                .await?;
            stats.optimistic_time = start.elapsed();
            if let (Tried::Raced { .. }, Some((promotion, mutex))) = (&last, &self.promotion) {
                let start = Instant::now();
                debug!(lock = promotion.lock_path(), "promoted to the lock");
                match tokio::time::timeout(promotion.max_wait(), mutex.lock()).await {
                    Ok(guard) => {
                        let guard = guard?;
                        let retry = promotion.retry();
                        let tried = self.tries(&epoch, retry, &make, &mut stats.promoted_tries);
                        last = tried.await?;
                        guard.release().await?;
                    }
                    Err(_) => debug!("the promoted lock was not free in time"),
                }
                stats.promoted_time = start.elapsed();
            }
            let (succeeded, pre, post) = match last {
                Tried::Wrote { pre, post } => (true, pre, post),
                Tried::Raced { pre } => (false, pre, pre),
            };
            let tries = stats.optimistic_tries + stats.promoted_tries;
            debug!(succeeded, pre, post, tries, "atomic update");
            Ok(AtomicValue {
                succeeded,
                pre,
                post,
                stats,
            })
        }
        .instrument(span)
        .await
    }

    /// Up to `retry.tries()` read-and-compare-and-set rounds, counted in `count`.
    async fn tries(
        &self,
        epoch: &Epoch,
        retry: RetryPolicy,
        make: &impl Fn(i64) -> Result<i64>,
        count: &mut u32,
    ) -> Result<Tried> {
        let mut last = None;
        for attempt in 0..retry.tries() {
            let pause = retry.pause(attempt, value::draw());
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            *count += 1;
            let (pre, version) = self.read(epoch).await?;
            let post = make(pre)?;
            if self.write(epoch, post, Some(version)).await? {
                return Ok(Tried::Wrote { pre, post });
            }
            last = Some(pre);
        }
        Ok(Tried::Raced {
            pre: last.unwrap_or_default(),
        })
    }

    /// The value and the node's version, the node made (with 0) when missing.
    async fn read(&self, epoch: &Epoch) -> Result<(i64, i32)> {
        let path = self.path.as_str();
        for _ in 0..MISSING_ROUNDS {
            if let Some((data, stat)) = ops::read(epoch, path).await? {
                return Ok((value::decode(path, &data)?, stat.version));
            }
            self.make(epoch).await?;
        }
        Err(self.replaced())
    }

    /// One write of `value` (on `version`, or whatever it is), never sent again: after a
    /// broken connection its outcome is unknown ([`Error::ConnectionLost`]). `false` when
    /// the version moved on or the node is gone.
    async fn write(&self, epoch: &Epoch, value: i64, version: Option<i32>) -> Result<bool> {
        let path = self.path.as_str();
        let data = &value.to_be_bytes();
        ops::send_once(epoch, path, |c| async move {
            match c.set_data(path, data, version).await {
                Ok(_) => Ok(true),
                Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// Makes the node (with 0) and its mark, or checks them.
    async fn make(&self, epoch: &Epoch) -> Result<()> {
        let zero = 0i64.to_be_bytes();
        let kind = RecipeKind::AtomicLong;
        claim(
            epoch,
            &self.session,
            &self.path,
            kind,
            Make::Persistent(&zero),
        )
        .await?;
        Ok(())
    }

    /// The session's epoch, once the node is known to be an atomic long (made with 0 when
    /// missing and marked by its anchor, once per value), so that no other recipe takes it.
    async fn epoch(&self) -> Result<Arc<Epoch>> {
        let epoch = self.session.epoch().await?;
        self.checked
            .get_or_try_init(|| async {
                match self.make(&epoch).await {
                    // A value this session may read but not mark (its ACL): checked, not
                    // marked; its writes get the same refusal.
                    Err(Error::NoAuth { path }) if path.ends_with(crate::layout::ANCHOR) => {
                        debug!(%path, "the atomic long cannot be marked (ACL); left unmarked");
                        Ok(())
                    }
                    other => other,
                }
            })
            .await?;
        Ok(epoch)
    }

    /// The node went missing on every round (deleted again and again).
    fn replaced(&self) -> Error {
        Error::RootReplaced {
            path: self.path.as_str().to_owned(),
        }
    }
}
