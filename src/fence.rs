//! Fencing: [`FencingToken`], the number storage checks to refuse a holder that lost its lock,
//! and [`FencedWrite`], a ZooKeeper transaction that commits only while a grant holds.

use std::fmt;
use std::sync::Arc;

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::session::Epoch;

/// The number a grant carries for storage to check: strictly increasing, in grant order, for
/// one lock.
///
/// Which number it is, and why it only grows:
///
/// | recipe | token | grows because |
/// |---|---|---|
/// | [`ZkMutex`](crate::ZkMutex), [`ZkRwLock`](crate::ZkRwLock), [`ZkLeaderElection`](crate::ZkLeaderElection) | the contender node's sequence number, within the root's incarnation (its creation zxid) | the root is persistent and anchored, never reaped; the end of its counter (`i32::MAX`) is refused; a root someone deleted and made again restarts its sequence, but its incarnation is larger |
/// | [`ZkLockSpace`](crate::ZkLockSpace) (one container directory per key, reaped when idle) | the contender node's creation zxid (64-bit; incarnation 0) | zxids grow across the whole ensemble, so a reaped and re-created directory cannot send a key's tokens back |
///
/// Tokens compare by incarnation first, then by number. While a root stands its incarnation
/// does not change, so the number ([`as_u64`](FencingToken::as_u64)) alone orders its
/// tokens; only a root deleted and made again (by an operator or a script: the library never
/// does it) changes the incarnation. Tokens of different locks are not comparable: a resource
/// is fenced by one lock.
///
/// # The rule for storage
///
/// Storage keeps, per resource (a row, a file, a bucket), the highest token it accepted, its
/// **fence**, and applies one rule in one atomic step to every write *and to the read of a
/// read-modify-write*:
///
/// - accept when `token >= fence`, and set `fence = token`;
/// - otherwise change nothing and refuse: a newer holder has been there, so this holder has
///   lost its lock and must stop (or lock again, with a new token, and start from a fresh read).
///
/// Equal tokens are accepted: one grant may read and write many times. What storage compares
/// is the whole token: [`to_be_bytes`](FencingToken::to_be_bytes) (16 bytes that compare as
/// the tokens do, for a `BLOB`/`bytea` column), or the pair ([`incarnation`](FencingToken::incarnation),
/// [`as_i64`](FencingToken::as_i64)) in two columns. A single `BIGINT` of `as_i64()` is right
/// for as long as the root stands, and refuses nothing stale once someone made the root
/// again. In SQL, with the fence as two columns (zero rows = refused):
///
/// ```sql
/// -- the read of a read-modify-write raises the fence (SQLite >= 3.35, PostgreSQL)
/// UPDATE accounts SET fence_root = :root, fence = :token
///   WHERE id = :id AND (fence_root, fence) <= (:root, :token) RETURNING balance;
/// -- the write
/// UPDATE accounts SET balance = :balance, fence_root = :root, fence = :token
///   WHERE id = :id AND (fence_root, fence) <= (:root, :token);
/// ```
///
/// Why reads must raise the fence too: with fenced writes alone, a frozen holder's stale write
/// can land *after* the new holder read the row and *before* it writes; the new holder's write
/// (with the larger token) is accepted and silently erases the stale one. Once the new
/// holder's read has raised the fence, the stale write is refused instead.
///
/// # Example
///
/// The rule on an in-memory row, and the incident it prevents: token 41 reads a balance and
/// freezes past its session, token 42 withdraws, 41 wakes up and writes its stale result.
///
/// ```
/// use zk_recipes::FencingToken;
///
/// /// A row: its value and its fence. `None`: refused.
/// struct Row { value: i64, fence: FencingToken }
///
/// impl Row {
///     fn read(&mut self, token: FencingToken) -> Option<i64> {
///         (token >= self.fence).then(|| { self.fence = token; self.value })
///     }
///     fn write(&mut self, value: i64, token: FencingToken) -> Option<()> {
///         (token >= self.fence).then(|| { self.fence = token; self.value = value; })
///     }
/// }
///
/// let mut row = Row { value: 12_400_000, fence: FencingToken::new(0) };
/// let (stale, newer) = (FencingToken::new(41), FencingToken::new(42));
/// let seen = row.read(stale).unwrap();
/// // ... token 41 freezes past its session; the lock goes to token 42 ...
/// let now = row.read(newer).unwrap();
/// row.write(now - 2_000_000, newer).unwrap();
/// // ... token 41 wakes up and writes what it computed before freezing: refused.
/// assert_eq!(row.write(seen - 200_000, stale), None);
/// assert_eq!(row.read(newer), Some(10_400_000));
/// ```
///
/// `cargo run --example incident_replay` plays the same story with real processes,
/// `SIGSTOP`, SQLite and ZooKeeper.
///
/// # Conversions
///
/// ```
/// use zk_recipes::FencingToken;
///
/// let token = FencingToken::from(42u32);
/// assert_eq!(token.as_u64(), 42);
/// assert_eq!(token.as_i64(), 42); // for a BIGINT column
/// // read back from storage:
/// assert_eq!(FencingToken::try_from(42i64), Ok(token));
/// assert!(FencingToken::try_from(-1i64).is_err());
/// assert!(FencingToken::new(41) < token);
/// assert_eq!(token.to_string(), "42");
/// // a root made again: its tokens restart, and still come after the old root's
/// let (old, again) = (FencingToken::from_parts(0x100, 900), FencingToken::from_parts(0x2000, 1));
/// assert!(old < again);
/// assert!(old.to_be_bytes() < again.to_be_bytes());
/// assert_eq!(FencingToken::from_be_bytes(again.to_be_bytes()), again);
/// assert_eq!(again.to_string(), "1@0x2000");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FencingToken {
    /// Compared first: the root's creation zxid for sequence tokens, 0 for zxid tokens.
    incarnation: u64,
    value: u64,
}

impl FencingToken {
    /// A token with the given value and incarnation 0 (for tests and for tokens read back from
    /// storage).
    ///
    /// ```
    /// assert_eq!(zk_recipes::FencingToken::new(7).as_u64(), 7);
    /// ```
    pub const fn new(value: u64) -> FencingToken {
        FencingToken::from_parts(0, value)
    }

    /// A token with the given incarnation and value (read back from storage's two columns).
    ///
    /// ```
    /// let token = zk_recipes::FencingToken::from_parts(0x1f, 7);
    /// assert_eq!((token.incarnation(), token.as_u64()), (0x1f, 7));
    /// ```
    pub const fn from_parts(incarnation: u64, value: u64) -> FencingToken {
        FencingToken { incarnation, value }
    }

    /// The token from a contender's sequence under a root created at `root_czxid`; `None`
    /// once the counter is used up: at `i32::MAX` (which ZooKeeper hands out again to every
    /// later child) or past it.
    pub(crate) fn from_sequence(sequence: i64, root_czxid: i64) -> Option<FencingToken> {
        u64::try_from(sequence)
            .ok()
            .filter(|&s| s < i32::MAX as u64)
            .map(|s| FencingToken::from_parts(u64::try_from(root_czxid).unwrap_or(0), s))
    }

    /// The token's number: the sequence, or the zxid (see the table above).
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// assert_eq!(FencingToken::new(7).as_u64(), 7u64);
    /// ```
    pub const fn as_u64(self) -> u64 {
        self.value
    }

    /// The incarnation: the creation zxid of the root whose sequence the number is (0 for a
    /// zxid token). Compared before the number.
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// assert_eq!(FencingToken::new(7).incarnation(), 0);
    /// ```
    pub const fn incarnation(self) -> u64 {
        self.incarnation
    }

    /// The whole token as 16 big-endian bytes (incarnation, then number), which compare
    /// byte by byte as the tokens do: one `BLOB` or `bytea` column holds it.
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// assert!(FencingToken::new(9).to_be_bytes() < FencingToken::new(10).to_be_bytes());
    /// ```
    pub fn to_be_bytes(self) -> [u8; 16] {
        ((u128::from(self.incarnation) << 64) | u128::from(self.value)).to_be_bytes()
    }

    /// The token from [`to_be_bytes`](FencingToken::to_be_bytes).
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// let token = FencingToken::from_parts(3, 4);
    /// assert_eq!(FencingToken::from_be_bytes(token.to_be_bytes()), token);
    /// ```
    pub fn from_be_bytes(bytes: [u8; 16]) -> FencingToken {
        let whole = u128::from_be_bytes(bytes);
        FencingToken::from_parts((whole >> 64) as u64, whole as u64)
    }

    /// The token's number as `i64`, for storage with signed integers (SQL `BIGINT`). Every
    /// token the library hands out fits (sequence numbers and zxids are at most `i64::MAX`);
    /// a token made with [`new`](FencingToken::new) above that saturates at `i64::MAX`.
    ///
    /// ```
    /// # use zk_recipes::FencingToken;
    /// assert_eq!(FencingToken::new(7).as_i64(), 7i64);
    /// ```
    pub const fn as_i64(self) -> i64 {
        if self.value > i64::MAX as u64 {
            i64::MAX
        } else {
            self.value as i64
        }
    }
}

/// The number, and `@` the incarnation in hex where there is one: `42`, `42@0x1a3`.
impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.value, f)?;
        if self.incarnation != 0 {
            write!(f, "@{:#x}", self.incarnation)?;
        }
        Ok(())
    }
}

impl From<FencingToken> for u64 {
    fn from(t: FencingToken) -> u64 {
        t.as_u64()
    }
}

impl From<u64> for FencingToken {
    fn from(value: u64) -> FencingToken {
        FencingToken::new(value)
    }
}

impl From<u32> for FencingToken {
    fn from(value: u32) -> FencingToken {
        FencingToken::new(u64::from(value))
    }
}

impl TryFrom<i64> for FencingToken {
    type Error = std::num::TryFromIntError;

    /// A token read back from a signed column; negative values are no token.
    fn try_from(value: i64) -> std::result::Result<FencingToken, Self::Error> {
        u64::try_from(value).map(FencingToken::new)
    }
}

/// A ZooKeeper transaction that commits only while a [`Grant`](crate::Grant) still holds:
/// zookeeper-client's own [`zk::CheckWriter`] behind it, whose first operation checks that
/// the grant's node exists (at its version), so the writes and the ownership check are one
/// atomic multi-op. Add [`set_data`](FencedWrite::add_set_data),
/// [`create`](FencedWrite::add_create) (with your own ACLs), [`delete`](FencedWrite::add_delete)
/// and [`check_version`](FencedWrite::add_check_version) operations, then
/// [`commit`](FencedWrite::commit). Get one from
/// [`Grant::fenced_write`](crate::Grant::fenced_write).
///
/// Every operation is size-checked against the servers' packet limit
/// ([`SessionOptions::max_packet_bytes`](crate::SessionOptions::max_packet_bytes)) as it is
/// added, and the whole transaction when it commits: one that is too large is
/// [`Error::TooLarge`] at once, with nothing sent (a server closes the connection on such a
/// packet, which would make it `ConnectionLost`, "outcome unknown", for a write that could
/// never have happened). An operation refused so is not added; the others stay.
///
/// # Example
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), Box<dyn std::error::Error>> {
/// use zk_recipes::zookeeper_client as zk;
///
/// let guard = mutex.lock().await?;
/// let client = guard.client()?;
/// let mut write = guard.fenced_write(&client)?;
/// write.add_set_data("/app/balance", b"10400000", None)?;
/// write.add_create("/app/journal/entry-", b"debit", &zk::CreateMode::PersistentSequential.with_acls(zk::Acls::creator_all()))?;
/// match write.commit().await {
///     Ok(_) => println!("written under token {}", guard.token()),
///     Err(zk_recipes::Error::Lost { .. }) => println!("lock lost: nothing was written"),
///     Err(err) => return Err(err.into()),
/// }
/// # Ok(()) }
/// ```
#[must_use = "nothing is written until commit()"]
pub struct FencedWrite<'c> {
    writer: zk::CheckWriter<'c>,
    epoch: Arc<Epoch>,
    guard: String,
    /// The grant's token: what storage that keeps its own fence compares.
    token: FencingToken,
    /// The grant's suspension count (see `LossPolicy::Suspension`).
    since: u64,
    /// What the grant's watch has seen of its node.
    loss: tokio::sync::watch::Receiver<Option<crate::LossReason>>,
    /// The length of the client's chroot, which every path carries on the wire.
    chroot: usize,
    /// The transaction's size on the wire so far, estimated from above (see [`wire`]).
    size: usize,
}

/// Sizes on the wire of a multi-op (`MultiRequest`), from above: what zookeeper-client
/// serializes, each path with the client's chroot in front.
mod wire {
    /// The frame's length, the request header (xid, type) and the closing multi header.
    pub const FRAME: usize = 4 + 8 + 9;
    /// Each operation's multi header (type, done, err).
    const HEADER: usize = 9;
    /// A length-prefixed string or buffer.
    const fn buffer(len: usize) -> usize {
        4 + len
    }

    /// `check`: path, version.
    pub const fn check(path: usize) -> usize {
        HEADER + buffer(path) + 4
    }

    /// `delete`: path, version.
    pub const fn delete(path: usize) -> usize {
        HEADER + buffer(path) + 4
    }

    /// `setData`: path, data, version.
    pub const fn set_data(path: usize, data: usize) -> usize {
        HEADER + buffer(path) + buffer(data) + 4
    }

    /// `create`: path, data, then the ACLs, flags and TTL, of which `options` is an upper
    /// bound (see `FencedWrite::add_create`).
    pub const fn create(path: usize, data: usize, options: usize) -> usize {
        HEADER + buffer(path) + buffer(data) + options
    }
}

impl fmt::Debug for FencedWrite<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedWrite")
            .field("guard", &self.guard)
            .field("token", &self.token)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// An upper bound of what a create's options (flags, ACLs, TTL) take on the wire.
/// zookeeper-client keeps them private; their `Debug` text names every ACL's scheme and id
/// (or one of the fixed lists, `world:anyone` or `auth:`, by name), with more around each than
/// the wire's 4-byte lengths and permissions, and the mode and the TTL, so it is never
/// shorter than what is sent. The floor covers the fixed lists' wire form whatever their name.
fn create_options_bound(options: &zk::CreateOptions<'_>) -> usize {
    format!("{options:?}").len().max(64)
}

impl<'c> FencedWrite<'c> {
    /// `version`: the grant's node must be at this data version (our nodes are made at 0; a
    /// change by someone else but a revocation request ends the grant).
    pub(crate) fn new(
        client: &'c zk::Client,
        epoch: Arc<Epoch>,
        guard: String,
        token: FencingToken,
        version: Option<i32>,
        since: u64,
        loss: tokio::sync::watch::Receiver<Option<crate::LossReason>>,
    ) -> Result<Self> {
        let writer = client
            .new_check_writer(&guard, version)
            .map_err(|e| epoch.error(e, &guard))?;
        let chroot = client.path().len();
        let size = wire::FRAME + wire::check(chroot + guard.len());
        Ok(FencedWrite {
            writer,
            epoch,
            guard,
            token,
            since,
            loss,
            chroot,
            size,
        })
    }

    /// The fencing token of the grant this write is fenced by: the one to write into the
    /// transaction's data where other storage compares tokens too. It is the grant's for the
    /// write's whole life: a grant lost and taken again since has a new token and needs a new
    /// write, so the token written and the ownership checked always belong together.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// let token = write.token();
    /// assert_eq!(token, guard.token());
    /// write.add_set_data("/app/config", format!("v2 by {token}").as_bytes(), None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The transaction's size on the wire so far, in bytes, estimated from above (what
    /// [`commit`](FencedWrite::commit) compares with the servers' limit).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// let empty = write.size();
    /// write.add_set_data("/app/config", b"v2", None)?;
    /// assert!(write.size() > empty);
    /// # Ok(()) }
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// Refuses an operation of `op` bytes that would not fit the servers' limit even with
    /// nothing but the ownership check beside it.
    fn check_op(&self, op: usize) -> Result<()> {
        let alone = wire::FRAME + wire::check(self.chroot + self.guard.len()) + op;
        self.epoch
            .check_wire_size("an operation of a fenced write", alone)
    }

    /// Adds an operation with zookeeper-client's `add`, counting its size.
    fn add(
        &mut self,
        path: &str,
        op: usize,
        add: impl FnOnce(&mut zk::CheckWriter<'c>) -> std::result::Result<(), zk::Error>,
    ) -> Result<()> {
        self.check_op(op)?;
        add(&mut self.writer).map_err(|e| self.epoch.error(e, path))?;
        self.size += op;
        Ok(())
    }

    /// Adds a data write: `path`'s data becomes `data`, if its version is
    /// `expected_version` (any version with `None`). zookeeper-client's
    /// [`add_set_data`](zk::MultiWriter::add_set_data).
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when the operation alone would not fit the servers' packet limit
    /// (nothing is added); [`Error::Zk`] for a path the client refuses.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_set_data("/app/config", b"v2", Some(7))?; // only over version 7
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn add_set_data(
        &mut self,
        path: &str,
        data: &[u8],
        expected_version: Option<i32>,
    ) -> Result<()> {
        let op = wire::set_data(self.chroot + path.len(), data.len());
        self.add(path, op, |w| w.add_set_data(path, data, expected_version))
    }

    /// Adds a create of `path` with `data` and `options` (mode, your own ACLs, TTL).
    /// zookeeper-client's [`add_create`](zk::MultiWriter::add_create).
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when the operation alone would not fit the servers' packet limit
    /// (nothing is added); [`Error::Zk`] for a path or options the client refuses.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// use zk_recipes::zookeeper_client as zk;
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// let mode = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
    /// write.add_create("/app/journal/entry-", b"debit", &mode)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn add_create(
        &mut self,
        path: &str,
        data: &[u8],
        options: &zk::CreateOptions<'_>,
    ) -> Result<()> {
        let op = wire::create(
            self.chroot + path.len(),
            data.len(),
            create_options_bound(options),
        );
        self.add(path, op, |w| w.add_create(path, data, options))
    }

    /// Adds a delete of `path`, if its version is `expected_version` (any version with
    /// `None`). zookeeper-client's [`add_delete`](zk::MultiWriter::add_delete).
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when the operation alone would not fit the servers' packet limit
    /// (a path that long never does; nothing is added); [`Error::Zk`] for a path the client
    /// refuses.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_delete("/app/pending/job-17", None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn add_delete(&mut self, path: &str, expected_version: Option<i32>) -> Result<()> {
        let op = wire::delete(self.chroot + path.len());
        self.add(path, op, |w| w.add_delete(path, expected_version))
    }

    /// Adds a check that `path` is at data version `version`: the transaction commits only if
    /// it is. zookeeper-client's [`add_check_version`](zk::MultiWriter::add_check_version).
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when the operation alone would not fit the servers' packet limit
    /// (a path that long never does; nothing is added); [`Error::Zk`] for a path the client
    /// refuses.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_check_version("/app/schema", 3)?;
    /// write.add_set_data("/app/config", b"v2", None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn add_check_version(&mut self, path: &str, version: i32) -> Result<()> {
        let op = wire::check(self.chroot + path.len());
        self.add(path, op, |w| w.add_check_version(path, version))
    }

    /// Commits every operation added, if and only if the grant still holds.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when the whole transaction would not fit the servers' packet limit
    /// (each operation did; nothing was sent), [`Error::Lost`] when the grant is lost: its
    /// node is gone or was changed by someone else, or (under
    /// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension)) the connection was
    /// suspended since the grant (nothing was written),
    /// [`Error::SessionExpired`] or [`Error::SessionClosed`] when its session is over,
    /// [`Error::ConnectionLost`] when the connection broke before the answer (the writes may
    /// or may not have been made: read back), and [`Error::Zk`] when one of the operations
    /// failed (`NodeExists`, `BadVersion`, ...; nothing was written).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in outcome: the request is sent at the first poll, and a commit dropped
    /// after that may or may not take effect, as after [`Error::ConnectionLost`].
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_delete("/app/pending/job-17", None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn commit(self) -> Result<Vec<zk::MultiWriteResult>> {
        let FencedWrite {
            writer,
            epoch,
            guard,
            since,
            loss,
            size,
            ..
        } = self;
        epoch.check_wire_size("a fenced write's transaction", size)?;
        // A grant lost under the session's policy (a suspension, under `Suspension`) writes
        // nothing, even while its node is still there; nor does one whose node was seen gone
        // (the check by path could pass on a namesake in a root made again).
        if !epoch.holds(since) || loss.borrow().is_some() {
            return Err(if epoch.is_lost() {
                epoch.over()
            } else {
                Error::Lost { path: guard }
            });
        }
        match writer.commit().await {
            Ok(results) => Ok(results),
            Err(zk::CheckWriteError::CheckFailed {
                source: zk::Error::NoNode | zk::Error::BadVersion,
            }) => Err(if epoch.is_lost() {
                epoch.over()
            } else {
                Error::Lost { path: guard }
            }),
            Err(zk::CheckWriteError::CheckFailed { source })
            | Err(zk::CheckWriteError::RequestFailed { source }) => {
                Err(epoch.error(source, &guard))
            }
            Err(zk::CheckWriteError::OperationFailed { index, source }) => {
                Err(epoch.error(source, &format!("operation {index} of the fenced write")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_stop_before_the_counter_is_used_up() {
        let t = |s| FencingToken::from_sequence(s, 5);
        assert_eq!(t(0), Some(FencingToken::from_parts(5, 0)));
        assert_eq!(
            t(i64::from(i32::MAX) - 1),
            Some(FencingToken::from_parts(5, i32::MAX as u64 - 1))
        );
        assert_eq!(t(i64::from(i32::MAX)), None);
        assert_eq!(t(-1), None);
        assert_eq!(t(i64::from(i32::MIN)), None);
        assert_eq!(t(i64::from(i32::MAX) + 1), None);
    }

    #[test]
    fn a_later_incarnation_orders_after_every_token_of_an_earlier_one() {
        let old = FencingToken::from_sequence(i64::from(i32::MAX) - 1, 0x1_0000_0005).unwrap();
        let again = FencingToken::from_sequence(0, 0x1_0000_0009).unwrap();
        assert!(old < again);
        assert!(old.to_be_bytes() < again.to_be_bytes());
        assert!(
            FencingToken::new(u64::MAX) < again,
            "zxid tokens (incarnation 0) never mix"
        );
    }

    #[test]
    fn the_bound_of_a_creates_options_covers_their_wire_form() {
        // On the wire: flags, the ACL vector's length, each ACL (permissions, scheme, id,
        // each string with its length), and the TTL.
        let wire = |acls: &[zk::Acl], ttl: bool| {
            4 + 4
                + acls
                    .iter()
                    .map(|a| 4 + 4 + a.scheme().len() + 4 + a.id().len())
                    .sum::<usize>()
                + if ttl { 8 } else { 0 }
        };
        let long: Vec<zk::Acl> = (0..50)
            .map(|i| {
                zk::Acl::new(
                    zk::Permission::ALL,
                    zk::AuthId::new("digest", &format!("user-{i}:{}", "x".repeat(200))),
                )
            })
            .collect();
        let mode = zk::CreateMode::Persistent;
        let options = mode.with_acls(zk::Acls::new(&long));
        assert!(create_options_bound(&options) >= wire(&long, false));
        let ttl = options.with_ttl(std::time::Duration::from_secs(60));
        assert!(create_options_bound(&ttl) >= wire(&long, true));
        for fixed in [
            zk::Acls::anyone_all(),
            zk::Acls::anyone_read(),
            zk::Acls::creator_all(),
        ] {
            assert!(create_options_bound(&mode.with_acls(fixed)) >= wire(&fixed, true));
        }
    }

    #[test]
    fn i64_saturates_only_past_what_zookeeper_hands_out() {
        assert_eq!(FencingToken::new(i64::MAX as u64).as_i64(), i64::MAX);
        assert_eq!(FencingToken::new(u64::MAX).as_i64(), i64::MAX);
    }
}
