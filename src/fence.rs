//! [`FencingToken`]: the number storage checks to refuse a holder that lost its lock.

use std::fmt;

/// The sequence number ZooKeeper gave a contender node: strictly increasing, in grant order,
/// for one recipe root (as long as the root is never deleted; the library refuses roots that
/// ZooKeeper could delete by itself and refuses to hand out a token past the counter's wrap).
///
/// Storage that remembers the highest token it accepted for a row refuses a write carrying a
/// smaller one, which is what stops a holder that paused past its session:
///
/// ```sql
/// UPDATE accounts SET balance = :balance, fence = :token
///  WHERE id = :id AND fence <= :token
/// ```
///
/// (zero rows updated = a newer holder has written; the stale writer must give up.)
///
/// # Example
///
/// ```
/// use zk_recipes::FencingToken;
///
/// let older = FencingToken::new(41);
/// let newer = FencingToken::new(42);
/// assert!(older < newer);
/// assert_eq!(newer.as_u64(), 42);
/// assert_eq!(newer.to_string(), "42");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u32);

impl FencingToken {
    /// A token with the given value (for tests and for tokens read back from storage).
    pub const fn new(value: u32) -> FencingToken {
        FencingToken(value)
    }

    /// The token from a contender's sequence; `None` at or past the signed 32-bit wrap.
    pub(crate) fn from_sequence(sequence: i64) -> Option<FencingToken> {
        u32::try_from(sequence).ok().filter(|&s| s <= i32::MAX as u32).map(FencingToken)
    }

    /// The token as `u64`, for storage.
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// assert_eq!(FencingToken::new(7).as_u64(), 7u64);
    /// ```
    pub const fn as_u64(self) -> u64 {
        self.0 as u64
    }

    /// The token as `i64`, for storage with signed integers (SQL `BIGINT`).
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// assert_eq!(FencingToken::new(7).as_i64(), 7i64);
    /// ```
    pub const fn as_i64(self) -> i64 {
        self.0 as i64
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<FencingToken> for u64 {
    fn from(t: FencingToken) -> u64 {
        t.as_u64()
    }
}

impl From<FencingToken> for i64 {
    fn from(t: FencingToken) -> i64 {
        t.as_i64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_stop_at_the_wrap() {
        assert_eq!(FencingToken::from_sequence(0), Some(FencingToken(0)));
        assert_eq!(FencingToken::from_sequence(i64::from(i32::MAX)), Some(FencingToken(i32::MAX as u32)));
        assert_eq!(FencingToken::from_sequence(-1), None);
        assert_eq!(FencingToken::from_sequence(i64::from(i32::MIN)), None);
        assert_eq!(FencingToken::from_sequence(i64::from(i32::MAX) + 1), None);
    }
}
