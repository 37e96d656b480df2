//! [`FencingToken`]: the number storage checks to refuse a holder that lost its lock.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::session::Epoch;

/// The sequence number ZooKeeper gave a contender node: strictly increasing, in grant order,
/// for one recipe root (as long as the root is never deleted; the library refuses roots that
/// ZooKeeper could delete by itself and hands out no token once the counter is used up, at
/// `i32::MAX`).
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
/// A holder that reads the row before writing (read, compute, write back) must present its
/// token when reading too, or a stale write that lands between its read and its write is
/// silently overwritten: [`FencedStore`] spells out both checks.
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

    /// The token from a contender's sequence; `None` once the counter is used up: at
    /// `i32::MAX` (which ZooKeeper hands out again to every later child) or past it.
    pub(crate) fn from_sequence(sequence: i64) -> Option<FencingToken> {
        u32::try_from(sequence)
            .ok()
            .filter(|&s| s < i32::MAX as u32)
            .map(FencingToken)
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

/// What a [`FencedStore`] did with a read or a write that carried a [`FencingToken`].
///
/// ```
/// use zk_recipes::{FenceVerdict, FencingToken};
///
/// let refused: FenceVerdict<i64> = FenceVerdict::Refused { fence: FencingToken::new(42) };
/// match refused {
///     FenceVerdict::Accepted(balance) => println!("balance {balance}"),
///     FenceVerdict::Refused { fence } => println!("a newer holder (token {fence}) was here"),
/// }
/// ```
#[must_use = "a refused write did not happen"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceVerdict<T> {
    /// The token was at least the row's fence: the operation was done and the row's fence is
    /// now this token.
    Accepted(T),
    /// The row had already seen a newer token: nothing was read or written. The holder that
    /// sent this token has lost its lock and must stop (or take the lock again, with a new
    /// token, and start over from a fresh read).
    Refused {
        /// The highest token the row had seen.
        fence: FencingToken,
    },
}

/// A store that refuses a holder whose lock has passed to someone else: the storage side of
/// fencing, which the lock alone cannot provide (a holder frozen past its session timeout
/// wakes up still believing it holds the lock).
///
/// Each row (or each group of rows one lock protects) keeps a **fence**: the highest
/// [`FencingToken`] it has seen, from one lock root (tokens of different roots are not
/// comparable). Both operations follow one rule, in one atomic step:
///
/// - accept when `token >= fence`, and set `fence = token`;
/// - otherwise change nothing and answer [`FenceVerdict::Refused`].
///
/// Equal tokens are accepted: one grant may read and write many times. In SQL, with the fence
/// as a column:
///
/// ```sql
/// -- write
/// UPDATE accounts SET balance = :balance, fence = :token WHERE id = :id AND fence <= :token;
/// -- read, raising the fence first (SQLite >= 3.35, PostgreSQL)
/// UPDATE accounts SET fence = :token WHERE id = :id AND fence <= :token RETURNING balance;
/// ```
///
/// (zero rows = refused.) Why reads must raise the fence too: with fenced writes alone, a
/// frozen holder's stale write can land *after* the new holder read the row and *before* it
/// writes; the new holder's write (with the larger token) is accepted and silently erases the
/// stale one, and the row no longer equals the sum of the accepted writes. Once the new
/// holder's read has raised the fence, the stale write is refused instead.
///
/// # Example
///
/// An in-memory store, and the incident it prevents: token 41 reads a balance and freezes,
/// token 42 withdraws, 41 wakes up and writes its stale result.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
///
/// use async_trait::async_trait;
/// use zk_recipes::{FenceVerdict, FencedStore, FencingToken};
///
/// /// Rows by key: the value and the row's fence.
/// struct Rows(Mutex<HashMap<String, (i64, FencingToken)>>);
///
/// #[async_trait]
/// impl FencedStore for Rows {
///     type Key = str;
///     type Value = i64;
///     type Error = &'static str;
///
///     async fn read(&self, key: &str, token: FencingToken) -> Result<FenceVerdict<i64>, Self::Error> {
///         let mut rows = self.0.lock().unwrap();
///         let (value, fence) = rows.get_mut(key).ok_or("no such row")?;
///         if token < *fence {
///             return Ok(FenceVerdict::Refused { fence: *fence });
///         }
///         *fence = token;
///         Ok(FenceVerdict::Accepted(*value))
///     }
///
///     async fn write(&self, key: &str, value: i64, token: FencingToken)
///         -> Result<FenceVerdict<()>, Self::Error>
///     {
///         let mut rows = self.0.lock().unwrap();
///         let row = rows.get_mut(key).ok_or("no such row")?;
///         if token < row.1 {
///             return Ok(FenceVerdict::Refused { fence: row.1 });
///         }
///         *row = (value, token);
///         Ok(FenceVerdict::Accepted(()))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), &'static str> {
/// let rows = Rows(Mutex::new(HashMap::from([
///     ("acct-1".to_owned(), (12_400_000, FencingToken::new(0))),
/// ])));
/// let (stale, newer) = (FencingToken::new(41), FencingToken::new(42));
///
/// let FenceVerdict::Accepted(seen) = rows.read("acct-1", stale).await? else { panic!() };
/// // ... token 41 freezes past its session; the lock goes to token 42 ...
/// let FenceVerdict::Accepted(now) = rows.read("acct-1", newer).await? else { panic!() };
/// assert_eq!(rows.write("acct-1", now - 2_000_000, newer).await?, FenceVerdict::Accepted(()));
/// // ... token 41 wakes up and writes what it computed before freezing:
/// assert_eq!(
///     rows.write("acct-1", seen - 200_000, stale).await?,
///     FenceVerdict::Refused { fence: newer },
/// );
/// assert_eq!(rows.read("acct-1", newer).await?, FenceVerdict::Accepted(10_400_000));
/// # Ok(()) }
/// ```
#[async_trait]
pub trait FencedStore: Send + Sync {
    /// What identifies a fenced row (`str` for an account id, say).
    type Key: ?Sized + Sync;
    /// What a row holds.
    type Value: Send;
    /// The store's own errors (a failed query, a missing row); a refusal is not one.
    type Error: Send;

    /// Reads `key` as the holder of `token`: refused if the row has seen a newer token;
    /// otherwise raises the row's fence to `token` (from then on, writes with older tokens
    /// are refused) and returns the value.
    ///
    /// # Errors
    ///
    /// The store's own; a refusal is `Ok(FenceVerdict::Refused { .. })`.
    ///
    /// # Cancel safety
    ///
    /// Implementations must make the check, the fence update and the read one atomic step
    /// (one statement or transaction), so that a dropped call raised the fence or did not.
    /// Either way it wrote no value: the call can simply be made again.
    ///
    /// ```
    /// use zk_recipes::{FenceVerdict, FencedStore, FencingToken};
    ///
    /// /// The balance, or `None` when a newer holder has been here (stop working then).
    /// async fn balance<S>(store: &S, token: FencingToken) -> Result<Option<i64>, S::Error>
    /// where
    ///     S: FencedStore<Key = str, Value = i64>,
    /// {
    ///     Ok(match store.read("acct-1", token).await? {
    ///         FenceVerdict::Accepted(balance) => Some(balance),
    ///         FenceVerdict::Refused { .. } => None,
    ///     })
    /// }
    /// ```
    async fn read(
        &self,
        key: &Self::Key,
        token: FencingToken,
    ) -> Result<FenceVerdict<Self::Value>, Self::Error>;

    /// Writes `value` to `key` as the holder of `token`: refused (nothing changes) if the row
    /// has seen a newer token; otherwise stores the value and sets the row's fence to `token`.
    ///
    /// # Errors
    ///
    /// The store's own; a refusal is `Ok(FenceVerdict::Refused { .. })`.
    ///
    /// # Cancel safety
    ///
    /// Implementations must make the check and the write one atomic step, so that a dropped
    /// call either wrote (value and fence) or changed nothing. Which one is unknown to the
    /// caller, as for any request sent to a store: read the row again (with the same token)
    /// before deciding to repeat a write that is not idempotent.
    ///
    /// ```
    /// use zk_recipes::{FenceVerdict, FencedStore, FencingToken};
    ///
    /// /// Read, compute, write, all with the token of one grant; `false` if fenced off.
    /// async fn charge<S>(store: &S, token: FencingToken, amount: i64) -> Result<bool, S::Error>
    /// where
    ///     S: FencedStore<Key = str, Value = i64>,
    /// {
    ///     let FenceVerdict::Accepted(balance) = store.read("acct-1", token).await? else {
    ///         return Ok(false);
    ///     };
    ///     let written = store.write("acct-1", balance - amount, token).await?;
    ///     Ok(written == FenceVerdict::Accepted(()))
    /// }
    /// ```
    async fn write(
        &self,
        key: &Self::Key,
        value: Self::Value,
        token: FencingToken,
    ) -> Result<FenceVerdict<()>, Self::Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_stop_before_the_counter_is_used_up() {
        assert_eq!(FencingToken::from_sequence(0), Some(FencingToken(0)));
        assert_eq!(
            FencingToken::from_sequence(i64::from(i32::MAX) - 1),
            Some(FencingToken(i32::MAX as u32 - 1))
        );
        assert_eq!(FencingToken::from_sequence(i64::from(i32::MAX)), None);
        assert_eq!(FencingToken::from_sequence(-1), None);
        assert_eq!(FencingToken::from_sequence(i64::from(i32::MIN)), None);
        assert_eq!(FencingToken::from_sequence(i64::from(i32::MAX) + 1), None);
    }
}

/// A ZooKeeper transaction that commits only while a [`Grant`](crate::Grant) still holds: its
/// first operation checks that the grant's node exists, in the grant's own session, so the
/// writes and the ownership check are one atomic multi-op. Build one with
/// [`Grant::fenced_write`](crate::Grant::fenced_write).
///
/// # Example
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
/// let guard = mutex.lock().await?;
/// let mut write = guard.fenced_write();
/// write.set_data("/app/balance", b"10400000", None);
/// match write.commit().await {
///     Ok(_) => println!("written under token {}", guard.token()),
///     Err(zk_recipes::Error::Lost { .. }) => println!("lock lost: nothing was written"),
///     Err(err) => return Err(err),
/// }
/// # Ok(()) }
/// ```
#[must_use = "nothing is written until commit()"]
#[derive(Debug)]
pub struct FencedWrite {
    epoch: Arc<Epoch>,
    guard_path: String,
    ops: Vec<Op>,
}

#[derive(Debug)]
enum Op {
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    Create {
        path: String,
        data: Vec<u8>,
        mode: zk::CreateMode,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    Check {
        path: String,
        version: i32,
    },
}

impl FencedWrite {
    pub(crate) fn new(epoch: Arc<Epoch>, guard_path: String) -> FencedWrite {
        FencedWrite {
            epoch,
            guard_path,
            ops: Vec::new(),
        }
    }

    /// Sets `path`'s data (at `version`, if given).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) -> Result<(), zk_recipes::Error> {
    /// let mut write = guard.fenced_write();
    /// write.set_data("/app/balance", b"10400000", None);
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> &mut Self {
        self.ops.push(Op::SetData {
            path: path.to_owned(),
            data: data.to_vec(),
            version,
        });
        self
    }

    /// Creates `path` (open ACL) in the given mode.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) -> Result<(), zk_recipes::Error> {
    /// let mut write = guard.fenced_write();
    /// write.create("/app/journal/entry-", b"debit 200000", zookeeper_client::CreateMode::PersistentSequential);
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn create(&mut self, path: &str, data: &[u8], mode: zk::CreateMode) -> &mut Self {
        self.ops.push(Op::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        });
        self
    }

    /// Deletes `path` (at `version`, if given).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) -> Result<(), zk_recipes::Error> {
    /// let mut write = guard.fenced_write();
    /// write.delete("/app/pending/job-17", None);
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn delete(&mut self, path: &str, version: Option<i32>) -> &mut Self {
        self.ops.push(Op::Delete {
            path: path.to_owned(),
            version,
        });
        self
    }

    /// Also requires `path` to be at `version`.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) -> Result<(), zk_recipes::Error> {
    /// let mut write = guard.fenced_write();
    /// write.check_version("/app/config", 7).set_data("/app/derived", b"from config v7", None);
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn check_version(&mut self, path: &str, version: i32) -> &mut Self {
        self.ops.push(Op::Check {
            path: path.to_owned(),
            version,
        });
        self
    }

    /// Commits all operations atomically, if and only if the grant still holds.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] when the grant's node is gone (nothing was written);
    /// [`Error::SessionExpired`] when its session is over (nothing was written);
    /// [`Error::ConnectionLost`] when the connection broke first: the outcome is unknown;
    /// [`Error::Zk`] with the failing operation's error otherwise (nothing was written).
    ///
    /// # Cancel safety
    ///
    /// The request is sent when `commit` is called; dropping the future leaves its outcome
    /// unknown, as for any ZooKeeper write.
    pub async fn commit(self) -> Result<Vec<zk::MultiWriteResult>> {
        let client = self.epoch.client()?;
        let guard = self.guard_path.as_str();
        let mut writer = client.new_check_writer(guard, None).map_err(Error::Zk)?;
        const OPEN: zk::Acls<'static> = zk::Acls::anyone_all();
        for op in &self.ops {
            match op {
                Op::SetData {
                    path,
                    data,
                    version,
                } => writer.add_set_data(path, data, *version),
                Op::Create { path, data, mode } => {
                    writer.add_create(path, data, &mode.with_acls(OPEN))
                }
                Op::Delete { path, version } => writer.add_delete(path, *version),
                Op::Check { path, version } => writer.add_check_version(path, *version),
            }
            .map_err(Error::Zk)?;
        }
        match writer.commit().await {
            Ok(results) => Ok(results),
            Err(zk::CheckWriteError::CheckFailed {
                source: zk::Error::NoNode,
            }) => Err(if self.epoch.is_lost() {
                Error::SessionExpired
            } else {
                Error::Lost {
                    path: guard.to_owned(),
                }
            }),
            Err(zk::CheckWriteError::CheckFailed { source })
            | Err(zk::CheckWriteError::RequestFailed { source })
            | Err(zk::CheckWriteError::OperationFailed { source, .. }) => {
                Err(Error::zk(source, guard))
            }
        }
    }
}
