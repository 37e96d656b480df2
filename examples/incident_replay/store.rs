//! An account table in SQLite that applies the fence rule (see `zk_recipes::FencingToken`), the plain
//! unfenced statements the incident was made of, and a journal of every read and write the
//! store accepted or refused (its own record, in commit order).
//!
//! Shared by `examples/incident_replay` and `tests/fencing.rs`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use zk_recipes::FencingToken;

/// What the store did with a read or a write that carried a token.
#[must_use = "a refused write did not happen"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceVerdict<T> {
    /// The token was at least the row's fence: done, and the row's fence is now this token.
    Accepted(T),
    /// The row had already seen a newer token: nothing was read or written.
    Refused {
        /// The highest token the row had seen.
        fence: FencingToken,
    },
}

/// One connection to the account database, labelled with who uses it (the journal records
/// the label). Separate processes or tasks each open their own.
pub struct Accounts {
    conn: Arc<Mutex<Connection>>,
    writer: String,
}

/// A line of the store's journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    /// Commit order.
    pub seq: i64,
    pub writer: String,
    /// `read` or `write`.
    pub op: String,
    /// The token sent with the operation.
    pub token: i64,
    /// The value read, or the value the writer asked to write.
    pub value: i64,
    pub accepted: bool,
    /// The row's fence after the operation (for a refusal: the fence that refused it).
    pub fence: i64,
}

impl Accounts {
    /// Opens (creating if needed) the database at `path`, in WAL mode, waiting on locks held
    /// by other connections rather than failing.
    pub fn open(path: &Path, writer: &str) -> rusqlite::Result<Accounts> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS accounts (
                 id      TEXT PRIMARY KEY,
                 balance INTEGER NOT NULL,
                 fence   INTEGER NOT NULL DEFAULT 0
             );
             CREATE TABLE IF NOT EXISTS journal (
                 seq      INTEGER PRIMARY KEY AUTOINCREMENT,
                 account  TEXT NOT NULL,
                 writer   TEXT NOT NULL,
                 op       TEXT NOT NULL,
                 token    INTEGER NOT NULL,
                 value    INTEGER NOT NULL,
                 accepted INTEGER NOT NULL,
                 fence    INTEGER NOT NULL
             );",
        )?;
        Ok(Accounts {
            conn: Arc::new(Mutex::new(conn)),
            writer: writer.to_owned(),
        })
    }

    /// Creates the account with `balance` and fence 0.
    pub fn create(&self, id: &str, balance: i64) -> rusqlite::Result<()> {
        self.conn.lock().unwrap().execute(
            "INSERT INTO accounts (id, balance, fence) VALUES (?1, ?2, 0)",
            params![id, balance],
        )?;
        Ok(())
    }

    /// The balance and the fence, as they are now.
    pub fn balance(&self, id: &str) -> rusqlite::Result<(i64, i64)> {
        self.conn.lock().unwrap().query_row(
            "SELECT balance, fence FROM accounts WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// The journal of `id`, in commit order.
    pub fn journal(&self, id: &str) -> rusqlite::Result<Vec<JournalEntry>> {
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn.prepare(
            "SELECT seq, writer, op, token, value, accepted, fence
               FROM journal WHERE account = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok(JournalEntry {
                seq: r.get(0)?,
                writer: r.get(1)?,
                op: r.get(2)?,
                token: r.get(3)?,
                value: r.get(4)?,
                accepted: r.get(5)?,
                fence: r.get(6)?,
            })
        })?;
        rows.collect()
    }

    /// What the incident's workers did: a plain read, the token ignored (only journaled).
    pub async fn read_unfenced(&self, id: &str, token: FencingToken) -> rusqlite::Result<i64> {
        self.transaction(id, move |tx, id, writer| {
            let (balance, fence): (i64, i64) = tx.query_row(
                "SELECT balance, fence FROM accounts WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            journal(tx, id, writer, "read", token, balance, true, fence)?;
            Ok(balance)
        })
        .await
    }

    /// What the incident's workers did: `UPDATE accounts SET balance = ?`, whoever writes.
    pub async fn write_unfenced(
        &self,
        id: &str,
        balance: i64,
        token: FencingToken,
    ) -> rusqlite::Result<()> {
        self.transaction(id, move |tx, id, writer| {
            tx.execute(
                "UPDATE accounts SET balance = ?2 WHERE id = ?1",
                params![id, balance],
            )?;
            let fence = fence_of(tx, id)?;
            journal(tx, id, writer, "write", token, balance, true, fence)
        })
        .await
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on a blocking thread (SQLite may wait
    /// for another connection's lock).
    async fn transaction<T, F>(&self, id: &str, f: F) -> rusqlite::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &str, &str) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = self.conn.clone();
        let (id, writer) = (id.to_owned(), self.writer.clone());
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx, &id, &writer)?;
            tx.commit()?;
            Ok(out)
        })
        .await
        .expect("the store's blocking task")
    }
}

/// The fence rule, in SQL: one conditional statement per operation, zero rows = refused.
impl Accounts {
    /// Reads the balance as the holder of `token`, raising the row's fence to it; refused if
    /// the row has seen a newer token.
    pub async fn read(&self, id: &str, token: FencingToken) -> rusqlite::Result<FenceVerdict<i64>> {
        self.transaction(id, move |tx, id, writer| {
            let read: Option<i64> = tx
                .query_row(
                    "UPDATE accounts SET fence = ?2 WHERE id = ?1 AND fence <= ?2
                     RETURNING balance",
                    params![id, token.as_i64()],
                    |r| r.get(0),
                )
                .optional()?;
            let fence = fence_of(tx, id)?;
            let balance = read.unwrap_or(0);
            journal(
                tx,
                id,
                writer,
                "read",
                token,
                balance,
                read.is_some(),
                fence,
            )?;
            Ok(match read {
                Some(balance) => FenceVerdict::Accepted(balance),
                None => FenceVerdict::Refused {
                    fence: to_token(fence)?,
                },
            })
        })
        .await
    }

    /// Writes the balance as the holder of `token`; refused (nothing changes) if the row has
    /// seen a newer token.
    pub async fn write(
        &self,
        id: &str,
        balance: i64,
        token: FencingToken,
    ) -> rusqlite::Result<FenceVerdict<()>> {
        self.transaction(id, move |tx, id, writer| {
            let written = tx.execute(
                "UPDATE accounts SET balance = ?2, fence = ?3 WHERE id = ?1 AND fence <= ?3",
                params![id, balance, token.as_i64()],
            )? == 1;
            let fence = fence_of(tx, id)?;
            journal(tx, id, writer, "write", token, balance, written, fence)?;
            Ok(if written {
                FenceVerdict::Accepted(())
            } else {
                FenceVerdict::Refused {
                    fence: to_token(fence)?,
                }
            })
        })
        .await
    }
}

fn fence_of(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<i64> {
    tx.query_row("SELECT fence FROM accounts WHERE id = ?1", [id], |r| {
        r.get(0)
    })
}

#[allow(clippy::too_many_arguments)]
fn journal(
    tx: &Transaction<'_>,
    id: &str,
    writer: &str,
    op: &str,
    token: FencingToken,
    value: i64,
    accepted: bool,
    fence: i64,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO journal (account, writer, op, token, value, accepted, fence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![id, writer, op, token.as_i64(), value, accepted, fence],
    )?;
    Ok(())
}

/// Fences are only ever set from tokens, which are never negative.
fn to_token(fence: i64) -> rusqlite::Result<FencingToken> {
    FencingToken::try_from(fence).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, fence))
}
