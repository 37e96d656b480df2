//! What an atomic long's operations take and give: the bound on its tries ([`RetryPolicy`]),
//! the optional lock-backed round ([`PromotedToLock`]), and the result ([`AtomicValue`],
//! [`AtomicStats`]). Pure, tested without a server.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::path::ZkPath;

/// How many compare-and-set tries an operation makes before it answers "not succeeded", and
/// how long it pauses between them (as Curator's `RetryPolicy` bounds a
/// `DistributedAtomicLong`): at least one try; before try `k + 1` a pause drawn at random
/// between `base` and `base * 2^k`, never over `max` (none when `base` is zero).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes::RetryPolicy;
///
/// let policy = RetryPolicy::new(10).with_backoff(Duration::from_millis(1), Duration::from_millis(50));
/// assert_eq!(policy.tries(), 10);
/// assert_eq!(RetryPolicy::new(0).tries(), 1); // one try at least
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    tries: u32,
    base: Duration,
    max: Duration,
}

impl Default for RetryPolicy {
    /// 10 tries, pausing from 1 ms, at most 100 ms.
    ///
    /// ```
    /// assert_eq!(zk_recipes::RetryPolicy::default().tries(), 10);
    /// ```
    fn default() -> RetryPolicy {
        RetryPolicy::new(10).with_backoff(Duration::from_millis(1), Duration::from_millis(100))
    }
}

impl RetryPolicy {
    /// `tries` tries (at least one), without pauses.
    ///
    /// ```
    /// assert_eq!(zk_recipes::RetryPolicy::new(3).tries(), 3);
    /// ```
    pub fn new(tries: u32) -> RetryPolicy {
        RetryPolicy {
            tries: tries.max(1),
            base: Duration::ZERO,
            max: Duration::ZERO,
        }
    }

    /// Pauses between the tries, growing from `base`, at most `max`, each drawn at random
    /// (so contenders that met once do not meet again in step).
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = zk_recipes::RetryPolicy::new(5)
    ///     .with_backoff(Duration::from_millis(2), Duration::from_millis(20));
    /// # let _ = policy;
    /// ```
    pub fn with_backoff(self, base: Duration, max: Duration) -> RetryPolicy {
        RetryPolicy {
            base,
            max: max.max(base),
            ..self
        }
    }

    /// The number of tries.
    ///
    /// ```
    /// assert_eq!(zk_recipes::RetryPolicy::new(4).tries(), 4);
    /// ```
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// The pause before retry number `retry` (1 for the second try), from a random `draw`.
    pub(crate) fn pause(&self, retry: u32, draw: u64) -> Duration {
        if self.base.is_zero() || retry == 0 {
            return Duration::ZERO;
        }
        let top = self
            .base
            .saturating_mul(1u32 << retry.min(16))
            .min(self.max);
        let span = top.saturating_sub(self.base).as_nanos() as u64;
        let extra = if span == 0 { 0 } else { draw % (span + 1) };
        self.base + Duration::from_nanos(extra)
    }
}

/// A random number for a pause (the standard library's per-process random hash keys).
pub(crate) fn draw() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// The lock-backed round after the optimistic tries failed, as Curator's `PromotedToLock`:
/// take a [`ZkMutex`](crate::ZkMutex) on `lock_path` (waiting at most `max_wait`), then try
/// again under it (by default once, as Curator's). The lock is Curator's
/// `InterProcessMutex` layout, so Java and Rust processes promoted to the same lock path
/// exclude each other. The writes under the lock are the same compare-and-set: the lock
/// spares the value's contention, it is not needed for correctness.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes::{PromotedToLock, RetryPolicy};
///
/// let promotion = PromotedToLock::new("/counters/orders-lock", Duration::from_secs(2))?
///     .with_retry(RetryPolicy::new(3));
/// assert_eq!(promotion.lock_path(), "/counters/orders-lock");
/// # Ok::<(), zk_recipes::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromotedToLock {
    lock_path: ZkPath,
    max_wait: Duration,
    retry: RetryPolicy,
}

impl PromotedToLock {
    /// Promotion to the lock at `lock_path`, waiting at most `max_wait` for it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let promotion = zk_recipes::PromotedToLock::new("/counters/lock", Duration::from_secs(1))?;
    /// # let _ = promotion; Ok::<(), zk_recipes::Error>(())
    /// ```
    pub fn new(lock_path: &str, max_wait: Duration) -> Result<PromotedToLock> {
        Ok(PromotedToLock {
            lock_path: ZkPath::new(lock_path)?,
            max_wait,
            retry: RetryPolicy::new(1),
        })
    }

    /// The tries under the lock (one by default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use zk_recipes::{PromotedToLock, RetryPolicy};
    /// let promotion = PromotedToLock::new("/counters/lock", Duration::from_secs(1))?
    ///     .with_retry(RetryPolicy::new(2));
    /// # let _ = promotion; Ok::<(), zk_recipes::Error>(())
    /// ```
    pub fn with_retry(self, retry: RetryPolicy) -> PromotedToLock {
        PromotedToLock { retry, ..self }
    }

    /// The lock's path.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let promotion = zk_recipes::PromotedToLock::new("/counters/lock", Duration::from_secs(1))?;
    /// assert_eq!(promotion.lock_path(), "/counters/lock");
    /// # Ok::<(), zk_recipes::Error>(())
    /// ```
    pub fn lock_path(&self) -> &str {
        self.lock_path.as_str()
    }

    pub(crate) fn max_wait(&self) -> Duration {
        self.max_wait
    }

    pub(crate) fn retry(&self) -> RetryPolicy {
        self.retry
    }
}

/// How an operation went: its tries and the time they took, as Curator's `AtomicStats`.
///
/// ```no_run
/// # async fn demo(long: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
/// let stats = long.increment().await?.stats();
/// println!("{} tries ({} under the lock)", stats.optimistic_tries() + stats.promoted_tries(), stats.promoted_tries());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicStats {
    pub(crate) optimistic_tries: u32,
    pub(crate) promoted_tries: u32,
    pub(crate) optimistic_time: Duration,
    pub(crate) promoted_time: Duration,
}

impl AtomicStats {
    /// Compare-and-set tries before any lock.
    ///
    /// ```
    /// assert_eq!(zk_recipes::AtomicStats::default().optimistic_tries(), 0);
    /// ```
    pub fn optimistic_tries(&self) -> u32 {
        self.optimistic_tries
    }

    /// Tries under the promoted lock (0 without promotion, or when the optimistic ones did).
    ///
    /// ```
    /// assert_eq!(zk_recipes::AtomicStats::default().promoted_tries(), 0);
    /// ```
    pub fn promoted_tries(&self) -> u32 {
        self.promoted_tries
    }

    /// The time the optimistic tries took.
    ///
    /// ```
    /// assert!(zk_recipes::AtomicStats::default().optimistic_time().is_zero());
    /// ```
    pub fn optimistic_time(&self) -> Duration {
        self.optimistic_time
    }

    /// The time the promoted round took, the wait for the lock included.
    ///
    /// ```
    /// assert!(zk_recipes::AtomicStats::default().promoted_time().is_zero());
    /// ```
    pub fn promoted_time(&self) -> Duration {
        self.promoted_time
    }
}

/// The result of an atomic long's operation, as Curator's `AtomicValue`: whether it
/// succeeded, the value before and after, and its [`AtomicStats`]. An operation that did not
/// succeed (every try met someone else's write first) wrote nothing; its
/// [`post_value`](AtomicValue::post_value) is the last value it read.
///
/// ```no_run
/// # async fn demo(long: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
/// let result = long.add(5).await?;
/// if result.succeeded() {
///     println!("{} -> {}", result.pre_value(), result.post_value());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicValue {
    pub(crate) succeeded: bool,
    pub(crate) pre: i64,
    pub(crate) post: i64,
    pub(crate) stats: AtomicStats,
}

impl AtomicValue {
    /// Whether the operation took effect.
    ///
    /// ```no_run
    /// # async fn demo(long: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// assert!(long.get().await?.succeeded());
    /// # Ok(()) }
    /// ```
    pub fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The value before the operation (the one its last try read).
    ///
    /// ```no_run
    /// # async fn demo(long: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// let before = long.increment().await?.pre_value();
    /// # let _ = before; Ok(()) }
    /// ```
    pub fn pre_value(&self) -> i64 {
        self.pre
    }

    /// The value after it: what it wrote, or, when it did not succeed, the value before.
    ///
    /// ```no_run
    /// # async fn demo(long: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// let now = long.get().await?.post_value();
    /// # let _ = now; Ok(()) }
    /// ```
    pub fn post_value(&self) -> i64 {
        self.post
    }

    /// The tries it took.
    ///
    /// ```no_run
    /// # async fn demo(long: zk_recipes::ZkAtomicLong) -> Result<(), zk_recipes::Error> {
    /// println!("{:?}", long.increment().await?.stats());
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> AtomicStats {
        self.stats
    }
}

/// The value in a node's data: 8 big-endian bytes, as Curator's `DistributedAtomicLong`
/// writes it; no data reads as 0, as Curator reads it.
pub(crate) fn decode(path: &str, data: &[u8]) -> Result<i64> {
    if data.is_empty() {
        return Ok(0);
    }
    let bytes: [u8; 8] = data.try_into().map_err(|_| Error::BadCount {
        path: path.to_owned(),
        reason: format!(
            "it holds {} bytes, not an 8-byte big-endian long",
            data.len()
        ),
    })?;
    Ok(i64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longs_are_eight_big_endian_bytes_as_curator_writes_them() {
        // Curator: ByteBuffer.allocate(8).putLong(258).array()
        assert_eq!(decode("/a", &[0, 0, 0, 0, 0, 0, 1, 2]).unwrap(), 258);
        assert_eq!(decode("/a", &(-2i64).to_be_bytes()).unwrap(), -2);
        assert_eq!(decode("/a", &i64::MIN.to_be_bytes()).unwrap(), i64::MIN);
        assert_eq!(decode("/a", b"").unwrap(), 0);
    }

    #[test]
    fn anything_but_eight_bytes_or_none_is_a_typed_error() {
        for data in [&b"1"[..], b"1234", b"1234567", b"123456789"] {
            let err = decode("/a", data).unwrap_err();
            assert!(matches!(err, Error::BadCount { .. }), "{err}");
            assert!(!err.is_retryable());
        }
    }

    #[test]
    fn pauses_grow_within_their_bounds() {
        let ms = Duration::from_millis;
        let policy = RetryPolicy::new(20).with_backoff(ms(2), ms(40));
        assert_eq!(policy.pause(0, 7), Duration::ZERO);
        for retry in 1..20 {
            let top = (ms(2) * (1 << retry.min(16))).min(ms(40));
            for draw in [0, 1, 12_345_678, u64::MAX] {
                let pause = policy.pause(retry, draw);
                assert!(pause >= ms(2) && pause <= top, "{retry} {draw} {pause:?}");
            }
        }
        assert_eq!(RetryPolicy::new(3).pause(2, 99), Duration::ZERO);
        assert_ne!(draw(), draw());
    }
}
