//! The lock kinds, and the one critical section they all protect: read a counter in
//! PostgreSQL, compute `value - amount`, write it back and record an order. The lock kind
//! decides how the section is entered and which SQL guards the write.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use zk_recipes::{Session, ZkLockSpace};

use crate::redis_lock::{RedisGuard, RedisNodes};
use crate::store::Pool;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `SET NX PX` + watchdog + compare-and-delete; the store takes any write.
    Redis,
    /// The same, plus a token from `INCR fence:{key}` and the store's `fence <= token` rule.
    RedisIncr,
    /// Redlock over 5 Redis processes (with the same watchdog); the store takes any write.
    Redlock,
    /// `BEGIN; SELECT ... FOR UPDATE; UPDATE; COMMIT` (the server's defaults).
    PgForUpdate,
    /// The same with `idle_in_transaction_session_timeout` set to the TTL.
    PgForUpdateIdle,
    /// No lock: `UPDATE ... WHERE version = :read_version`, retried on zero rows.
    PgVersion,
    /// zk-recipes `ZkLockSpace`; the store takes any write.
    Zk,
    /// `ZkLockSpace` and its fencing token (the node's zxid) with the store's rule.
    ZkFenced,
}

pub const ALL: [Kind; 8] = [
    Kind::Redis,
    Kind::RedisIncr,
    Kind::Redlock,
    Kind::PgForUpdate,
    Kind::PgForUpdateIdle,
    Kind::PgVersion,
    Kind::Zk,
    Kind::ZkFenced,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Redis => "redis",
            Kind::RedisIncr => "redis-incr-fence",
            Kind::Redlock => "redlock",
            Kind::PgForUpdate => "pg-for-update",
            Kind::PgForUpdateIdle => "pg-for-update-idle-timeout",
            Kind::PgVersion => "pg-version",
            Kind::Zk => "zk",
            Kind::ZkFenced => "zk-fenced",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        ALL.into_iter().find(|k| k.name() == s)
    }

    /// How many Redis processes its lock uses.
    pub fn redis_nodes(self) -> usize {
        match self {
            Kind::Redis | Kind::RedisIncr => 1,
            Kind::Redlock => 5,
            _ => 0,
        }
    }

    pub fn uses_zk(self) -> bool {
        matches!(self, Kind::Zk | Kind::ZkFenced)
    }

    /// Whether a holder frozen past its TTL or session loses an update (what the pause
    /// incident must show; the replay fails if it does not).
    pub fn loses_update_on_pause(self) -> bool {
        matches!(self, Kind::Redis | Kind::Redlock | Kind::Zk)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one process needs to run the critical section under one lock kind.
pub struct Ctx {
    pub kind: Kind,
    pub conninfo: String,
    pub pool: Pool,
    pub redis: Option<RedisNodes>,
    pub zk: Option<(Session, ZkLockSpace)>,
    /// Redis TTL, ZooKeeper session timeout and the idle-in-transaction timeout.
    pub ttl: Duration,
}

/// How one attempt ended.
#[derive(Debug)]
pub enum Attempt {
    /// Written: the value read, and the token the write carried (if any).
    Done { read: i64, token: Option<i64> },
    /// Less than `amount` left.
    SoldOut,
    /// The store refused the write (fence, version, or a connection the server ended).
    Refused(String),
}

/// Reports a step (`kind`, text); the incident worker prints them for its orchestrator.
pub type Report<'a> = &'a (dyn Fn(&str, String) + Sync);
/// Awaited between computing and writing (the incident worker waits there to be frozen).
pub type PauseHook = Pin<Box<dyn Future<Output = ()> + Send>>;

enum Held {
    None,
    Redis(RedisGuard),
    Zk(zk_recipes::ZkLockSpaceGuard),
}

impl Held {
    fn believes_held(&self) -> bool {
        match self {
            Held::None => true,
            Held::Redis(g) => g.believes_held(),
            Held::Zk(g) => g.is_held(),
        }
    }

    async fn release(self) {
        match self {
            Held::None => {}
            Held::Redis(g) => g.release().await,
            Held::Zk(g) => {
                let _ = g.release().await;
            }
        }
    }
}

fn sql(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}

/// One pass of the critical section on `item`: lock, read, compute, (pause), write, release.
pub async fn attempt(
    ctx: &Ctx,
    item: &str,
    amount: i64,
    buyer: &str,
    deadline: Instant,
    report: Report<'_>,
    pause: Option<PauseHook>,
) -> Result<Attempt, String> {
    let (held, token) = match ctx.kind {
        Kind::Redis | Kind::Redlock | Kind::RedisIncr => {
            let nodes = ctx.redis.as_ref().ok_or("no Redis")?;
            let guard = nodes.lock(item, deadline).await?;
            let token = match ctx.kind {
                Kind::RedisIncr => Some(nodes.incr_token(item).await?),
                _ => None,
            };
            (Held::Redis(guard), token)
        }
        Kind::Zk | Kind::ZkFenced => {
            let (_, space) = ctx.zk.as_ref().ok_or("no ZooKeeper")?;
            let guard = tokio::time::timeout_at(deadline.into(), space.lock(item))
                .await
                .map_err(|_| format!("no ZooKeeper lock on {item} before the deadline"))?
                .map_err(|e| format!("ZkLockSpace::lock: {e}"))?;
            let token = (ctx.kind == Kind::ZkFenced).then(|| guard.token().as_i64());
            (Held::Zk(guard), token)
        }
        _ => (Held::None, None),
    };
    let label = match (&held, token) {
        (Held::None, _) => "no lock of its own".to_owned(),
        (_, Some(t)) => format!("holds the lock, token {t}"),
        (Held::Zk(g), None) => format!("holds the lock (token {} unused)", g.token().as_i64()),
        (_, None) => "holds the lock (no token)".to_owned(),
    };
    report("locked", label);
    let result = section(ctx, &held, item, amount, buyer, token, report, pause).await;
    held.release().await;
    result
}

#[allow(clippy::too_many_arguments)]
async fn section(
    ctx: &Ctx,
    held: &Held,
    item: &str,
    amount: i64,
    buyer: &str,
    token: Option<i64>,
    report: Report<'_>,
    pause: Option<PauseHook>,
) -> Result<Attempt, String> {
    let db = ctx.pool.get(&ctx.conninfo).await?;
    let in_tx = matches!(ctx.kind, Kind::PgForUpdate | Kind::PgForUpdateIdle);
    // Read.
    let (value, version): (i64, i64) = if let Some(t) = token {
        let row = db
            .query_opt(
                "UPDATE stock SET fence = $2 WHERE id = $1 AND fence <= $2 RETURNING value, version",
                &[&item, &t],
            )
            .await
            .map_err(sql)?;
        match row {
            Some(r) => (r.get(0), r.get(1)),
            None => return Ok(Attempt::Refused(format!("read refused: fence > {t}"))),
        }
    } else {
        if in_tx {
            db.batch_execute("BEGIN").await.map_err(sql)?;
            if ctx.kind == Kind::PgForUpdateIdle {
                let ms = ctx.ttl.as_millis();
                db.batch_execute(&format!(
                    "SET LOCAL idle_in_transaction_session_timeout = {ms}"
                ))
                .await
                .map_err(sql)?;
            }
        }
        let lock = if in_tx { " FOR UPDATE" } else { "" };
        let row = db
            .query_one(
                &format!("SELECT value, version FROM stock WHERE id = $1{lock}"),
                &[&item],
            )
            .await
            .map_err(sql)?;
        (row.get(0), row.get(1))
    };
    report("read", format!("read {value}"));
    if value < amount {
        if in_tx {
            db.batch_execute("ROLLBACK").await.map_err(sql)?;
        }
        return Ok(Attempt::SoldOut);
    }
    let new = value - amount;
    report("computed", format!("computed {new} = {value} - {amount}"));
    if let Some(p) = pause {
        p.await;
    }
    report(
        "writing",
        format!(
            "writes {new} (the lock believes it is held: {})",
            held.believes_held()
        ),
    );
    // Write, with the order, in one statement.
    let order = "INSERT INTO orders (item, buyer, amount, token) SELECT id, $4, $5, $6 FROM u";
    let (guard_sql, third): (&str, Option<i64>) = match (token, ctx.kind) {
        (Some(t), _) => (", fence = $3 WHERE id = $1 AND fence <= $3", Some(t)),
        (None, Kind::PgVersion) => (
            ", version = version + 1 WHERE id = $1 AND version = $3",
            Some(version),
        ),
        (None, _) => (" WHERE id = $1 AND $3::BIGINT IS NULL", None),
    };
    let statement =
        format!("WITH u AS (UPDATE stock SET value = $2{guard_sql} RETURNING id) {order}");
    let written = db
        .execute(&statement, &[&item, &new, &third, &buyer, &amount, &token])
        .await;
    let written = match written {
        Ok(n) => n,
        Err(e) => return Ok(Attempt::Refused(format!("write failed: {}", sql(e)))),
    };
    if in_tx {
        if let Err(e) = db.batch_execute("COMMIT").await {
            return Ok(Attempt::Refused(format!("commit failed: {}", sql(e))));
        }
    }
    if written == 0 {
        let why = match ctx.kind {
            Kind::PgVersion => format!("version {version} is no longer the row's"),
            _ => format!("fence > {}", third.unwrap_or(0)),
        };
        return Ok(Attempt::Refused(why));
    }
    Ok(Attempt::Done { read: value, token })
}
