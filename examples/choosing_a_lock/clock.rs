//! The clock-jump incident (Kleppmann's "How to do distributed locking" scenario). Redlock over
//! five nodes A-E: holder 1 is cut off D and E (a partition: it never reaches them) and takes
//! the lock on A, B and C, exactly a majority; A's wall clock then jumps ahead past the TTL
//! (`servers/clock_shim.c`), so the key expires there early (Redis expires keys by its own
//! wall clock); holder 2 reaches every node and takes A, D and E while holder 1 still believes
//! it holds.
//!
//! ZooKeeper: a server whose JVM runs under libfaketime; holder 1 holds a `ZkLockSpace` key, the
//! server's wall clock jumps ahead by as much; holder 2 tries for longer than a session timeout.
//! Session expiry runs on the leader's elapsed-time ticks, not on wall-clock dates.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes::zookeeper_client as zk;
use zk_testcontainers::ZkServer;

use crate::duel::{self, LockAt, Outcome, Timeline};
use crate::kinds::Kind;
use crate::servers::{FakeClock, Servers};

/// The kinds this incident is about: Redlock, and ZooKeeper.
pub fn applies(kind: Kind) -> bool {
    matches!(kind, Kind::Redlock | Kind::Zk | Kind::ZkFenced)
}

/// Whether the design lets two hold at once here: Redlock trusts every node's clock.
pub fn two_allowed(kind: Kind) -> bool {
    kind == Kind::Redlock
}

/// How far the clock jumps: past the TTL with a margin.
pub fn jump(ttl: Duration) -> Duration {
    ttl + Duration::from_secs(1)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The Redlock row.
pub async fn run_redlock(
    servers: &Servers,
    pg: &str,
    ttl: Duration,
    nonce: &str,
) -> Result<Outcome, String> {
    let kind = Kind::Redlock;
    let (db, item) = duel::new_account(pg, "clock", kind, nonce).await?;
    let nodes = servers.clock_nodes(&format!("clock-{nonce}"))?;
    let mut tl = Timeline::new();
    let at1 = LockAt::Redis(nodes.urls.clone(), vec![3, 4]);
    tl.note(
        "orchestrator",
        "holder 1 is cut off nodes D and E; node A's clock is movable",
    );
    let (h1, go) = duel::start_holder_1(
        &mut tl,
        duel::ctx(kind, at1, pg.to_owned(), ttl),
        item.clone(),
    )
    .await?;
    let by = jump(ttl);
    nodes.set_ahead(by)?;
    // What node A now says the time is.
    let client =
        redis::Client::open(nodes.urls[nodes.jumped].as_str()).map_err(|e| e.to_string())?;
    let mut a = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("node A: {e}"))?;
    let (secs, micros): (i64, i64) = redis::cmd("TIME")
        .query_async(&mut a)
        .await
        .map_err(|e| format!("TIME: {e}"))?;
    let ahead_ms = secs * 1000 + micros / 1000 - now_ms();
    tl.note(
        "orchestrator",
        format!(
            "node A's clock jumps {:.1} s ahead (its TIME is {:.2} s ahead)",
            by.as_secs_f64(),
            ahead_ms as f64 / 1000.0
        ),
    );
    let at2 = LockAt::Redis(nodes.urls.clone(), Vec::new());
    // Within holder 1's validity or not at all.
    let within = ttl;
    let ctx2 = duel::ctx(kind, at2, pg.to_owned(), ttl);
    duel::second_then_first(kind, tl, &db, &item, ctx2, within, (h1, go)).await
}

/// The ZooKeeper server's wall clock, from the ctime of a node created now.
async fn server_clock_ahead(connect: &str) -> Result<i64, String> {
    let client = zk::Client::connect(connect)
        .await
        .map_err(|e| format!("probe client: {e}"))?;
    let path = format!("/clock-probe-{}", rand::random::<u64>());
    let sent = now_ms();
    let (stat, _) = client
        .create(
            &path,
            b"",
            &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .map_err(|e| format!("probe create: {e}"))?;
    let _ = client.delete(&path, None).await;
    Ok(stat.ctime - sent)
}

/// The ZooKeeper rows (`zk`, `zk-fenced`) on a server under libfaketime; each row jumps its
/// clock further ahead (`ahead` is where it stands before this row).
pub async fn run_zk(
    kind: Kind,
    server: &ZkServer,
    clock: &FakeClock,
    ahead: &mut Duration,
    pg: &str,
    ttl: Duration,
    nonce: &str,
) -> Result<Outcome, String> {
    let (db, item) = duel::new_account(pg, "clock", kind, nonce).await?;
    let connect = server.connect_string();
    let mut tl = Timeline::new();
    let before = server_clock_ahead(&connect).await?;
    tl.note(
        "orchestrator",
        format!(
            "the server's wall clock is {:.2} s ahead (a node's ctime)",
            before as f64 / 1000.0
        ),
    );
    let (h1, go) = duel::start_holder_1(
        &mut tl,
        duel::ctx(kind, LockAt::Zk(connect.clone()), pg.to_owned(), ttl),
        item.clone(),
    )
    .await?;
    *ahead += jump(ttl);
    clock.set_ahead(*ahead).await?;
    let after = server_clock_ahead(&connect).await?;
    tl.note(
        "orchestrator",
        format!(
            "the server's clock jumps {:.1} s ahead: a node's ctime is now {:.2} s ahead",
            jump(ttl).as_secs_f64(),
            after as f64 / 1000.0
        ),
    );
    if after - before < jump(ttl).as_millis() as i64 / 2 {
        return Err(format!(
            "the ZooKeeper server's clock did not move ({before} ms, then {after} ms ahead)"
        ));
    }
    let (h2, _) = duel::spawn_holder(
        &tl,
        "holder 2",
        duel::ctx(kind, LockAt::Zk(connect), pg.to_owned(), ttl),
        item.clone(),
        duel::HOLDER_2,
        false,
    );
    // Longer than a session timeout and the jump.
    if tl
        .expect("holder 2", "locked", jump(ttl) + Duration::from_secs(1))
        .await?
    {
        tl.expect("holder 2", "done", Duration::from_secs(30))
            .await?;
    }
    let _ = go.ok_or("no go for holder 1")?.send(());
    tl.note("orchestrator", "holder 1 may write");
    duel::finish(kind, tl, &db, &item, vec![h1, h2]).await
}
