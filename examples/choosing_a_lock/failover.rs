//! The failover incident. Redis: a primary with one replica; an earlier holder's `INCR` token
//! reaches the replica; then the replica is frozen (SIGSTOP) and its link dropped by the primary
//! (`CLIENT KILL TYPE replica`: a frozen replica alone would still get the writes, which the
//! kernel buffers on its socket), so holder 1's `SET NX PX` and `INCR` exist on the primary
//! only; the primary is SIGKILLed, the replica resumed and promoted (`REPLICAOF NO ONE`), and
//! holder 2 takes the lock on it, with a token from the same `INCR`.
//!
//! Redlock (the restart case of Kleppmann's "How to do distributed locking"): five nodes A-E of
//! its own, without persistence; D and E are frozen (SIGSTOP) before holder 1 connects, so they
//! do not answer it and it takes the lock on A, B and C only (frozen after it connected, they
//! would run its `SET` from their socket buffers when resumed); D and E are resumed; C is
//! SIGKILLed and started again on its port without its keys, as a node that had not fsynced
//! them; holder 2 takes C, D and E, a majority, within holder 1's validity.
//!
//! ZooKeeper: a 3-member ensemble; holder 1 holds a `ZkLockSpace` key; the leader is killed;
//! holder 2 tries to take the lock while holder 1's session reconnects to a surviving member,
//! and for longer than a session timeout after that; then holder 1 writes and lets go.

use std::time::{Duration, Instant};

use crate::duel::{self, LockAt, Outcome, Timeline};
use crate::kinds::Kind;
use crate::servers::Servers;
use zk_recipes::SessionState;
use zk_testcontainers::ZkEnsemble;

/// The kinds this incident is about: the Redis lock on a replicated Redis, Redlock, and
/// ZooKeeper.
pub fn applies(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Redis | Kind::RedisIncr | Kind::Redlock | Kind::Zk | Kind::ZkFenced
    )
}

/// Whether the design lets two hold at once here: asynchronous replication loses the lock, and
/// a Redlock node restarted without its keys gives holder 1's vote to holder 2.
pub fn two_allowed(kind: Kind) -> bool {
    matches!(kind, Kind::Redis | Kind::RedisIncr | Kind::Redlock)
}

async fn redis_conn(url: &str) -> Result<redis::aio::MultiplexedConnection, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("{url}: {e}"))
}

async fn cmd<T: redis::FromRedisValue>(
    conn: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> Result<T, String> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query_async(conn)
        .await
        .map_err(|e| format!("{}: {e}", args.join(" ")))
}

/// Polls `INFO replication` on `conn` until it contains `needle`.
async fn wait_info(
    conn: &mut redis::aio::MultiplexedConnection,
    needle: &str,
    within: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let info: String = cmd(conn, &["INFO", "replication"]).await?;
        if info.contains(needle) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no {needle:?} in INFO replication within {within:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The Redis rows: `redis` and `redis-incr-fence`.
pub async fn run_redis(
    kind: Kind,
    servers: &Servers,
    pg: &str,
    ttl: Duration,
    nonce: &str,
) -> Result<Outcome, String> {
    let (db, item) = duel::new_account(pg, "failover", kind, nonce).await?;
    let mut pair = servers.replica_pair(&format!("failover-{kind}"))?;
    let mut primary = redis_conn(&pair.primary).await?;
    let mut replica = redis_conn(&pair.replica).await?;
    wait_info(
        &mut replica,
        "master_link_status:up",
        Duration::from_secs(20),
    )
    .await?;
    let mut tl = Timeline::new();
    // An earlier holder's token, replicated: the replica knows fence = 1.
    let fence_key = format!("fence:{item}");
    let t0: i64 = cmd(&mut primary, &["INCR", &fence_key]).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let on_replica: Option<i64> = cmd(&mut replica, &["GET", &fence_key]).await?;
        if on_replica == Some(t0) {
            break;
        }
        if Instant::now() > deadline {
            return Err("the replica never got the earlier token".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tl.note(
        "orchestrator",
        format!("an earlier holder's token {t0} is on primary and replica"),
    );
    // Holder 1's writes must not reach the replica.
    crate::pause::signal(pair.replica_pid(), "STOP")?;
    let killed: i64 = cmd(&mut primary, &["CLIENT", "KILL", "TYPE", "replica"]).await?;
    wait_info(&mut primary, "connected_slaves:0", Duration::from_secs(10)).await?;
    tl.note(
        "orchestrator",
        format!("SIGSTOP replica; primary drops its replica link ({killed} link)"),
    );
    let at1 = LockAt::Redis(vec![pair.primary.clone()], Vec::new());
    let (h1, go) = duel::start_holder_1(
        &mut tl,
        duel::ctx(kind, at1, pg.to_owned(), ttl),
        item.clone(),
    )
    .await?;
    pair.kill_primary()?;
    tl.note("orchestrator", "SIGKILL primary");
    crate::pause::signal(pair.replica_pid(), "CONT")?;
    let _: String = cmd(&mut replica, &["REPLICAOF", "NO", "ONE"]).await?;
    wait_info(&mut replica, "role:master", Duration::from_secs(10)).await?;
    let on_replica: Option<String> = cmd(&mut replica, &["GET", &item]).await?;
    let fence_there: Option<i64> = cmd(&mut replica, &["GET", &fence_key]).await?;
    tl.note(
        "orchestrator",
        format!(
            "SIGCONT replica, REPLICAOF NO ONE: promoted; lock key there: {}, fence there: {fence_there:?}",
            if on_replica.is_some() { "yes" } else { "no" }
        ),
    );
    let at2 = LockAt::Redis(vec![pair.replica.clone()], Vec::new());
    // Holder 2 finds the lock free at once if it is lost; it is given twice the TTL.
    let within = ttl * 2;
    let ctx2 = duel::ctx(kind, at2, pg.to_owned(), ttl);
    duel::second_then_first(kind, tl, &db, &item, ctx2, within, (h1, go)).await
}

/// The Redlock nodes' names.
const NODES: [&str; 5] = ["A", "B", "C", "D", "E"];

/// Which nodes have `key`: each node's name and the value's first 8 characters, or `-`.
async fn who_has(urls: &[String], key: &str) -> Result<String, String> {
    let mut have = Vec::new();
    for (url, name) in urls.iter().zip(NODES) {
        let mut conn = redis_conn(url).await?;
        let value: Option<String> = cmd(&mut conn, &["GET", key]).await?;
        let value = value.map_or("-".to_owned(), |v| v.chars().take(8).collect());
        have.push(format!("{name} {value}"));
    }
    Ok(have.join(", "))
}

/// The Redlock row.
pub async fn run_redlock(
    servers: &Servers,
    pg: &str,
    ttl: Duration,
    nonce: &str,
) -> Result<Outcome, String> {
    let kind = Kind::Redlock;
    let (db, item) = duel::new_account(pg, "failover", kind, nonce).await?;
    let mut nodes = servers.restart_nodes(&format!("failover-{kind}"))?;
    let (restarted, frozen) = (2, [3, 4]);
    let mut tl = Timeline::new();
    for n in frozen {
        crate::pause::signal(nodes.pid(n), "STOP")?;
    }
    tl.note(
        "orchestrator",
        "SIGSTOP nodes D and E: they will not answer holder 1's connection",
    );
    let at1 = LockAt::RedisAnswering(nodes.urls.clone());
    let started = duel::start_holder_1(
        &mut tl,
        duel::ctx(kind, at1, pg.to_owned(), ttl),
        item.clone(),
    )
    .await;
    for n in frozen {
        crate::pause::signal(nodes.pid(n), "CONT")?;
    }
    let (h1, go) = started?;
    tl.note(
        "orchestrator",
        format!(
            "SIGCONT D and E; the lock key on each node: {}",
            who_has(&nodes.urls, &item).await?
        ),
    );
    nodes.kill_and_restart(restarted)?;
    tl.note(
        "orchestrator",
        format!(
            "SIGKILL node C, started again on its port without its keys; the lock key: {}",
            who_has(&nodes.urls, &item).await?
        ),
    );
    let granted = tl
        .saw("holder 1", "locked")
        .ok_or("holder 1 was never granted")?
        .0;
    let validity = ttl.saturating_sub(granted.elapsed());
    tl.note(
        "orchestrator",
        format!(
            "holder 2 tries, on all five nodes; holder 1's validity has {:.2} s to run",
            validity.as_secs_f64()
        ),
    );
    let at2 = LockAt::Redis(nodes.urls.clone(), Vec::new());
    // Within holder 1's validity or not at all.
    let within = validity;
    let ctx2 = duel::ctx(kind, at2, pg.to_owned(), ttl);
    duel::second_then_first(kind, tl, &db, &item, ctx2, within, (h1, go)).await
}

/// The ZooKeeper rows: `zk` and `zk-fenced`. The ensemble's killed member is started again
/// at the end, for the next row.
pub async fn run_zk(
    kind: Kind,
    ensemble: &ZkEnsemble,
    pg: &str,
    ttl: Duration,
    nonce: &str,
) -> Result<Outcome, String> {
    let (db, item) = duel::new_account(pg, "failover", kind, nonce).await?;
    let mut tl = Timeline::new();
    let connect = ensemble.connect_string();
    let ctx1 = duel::ctx(kind, LockAt::Zk(connect.clone()), pg.to_owned(), ttl).await?;
    let session1 = ctx1
        .zk
        .as_ref()
        .map(|(s, _)| s.clone())
        .ok_or("no session")?;
    let (h1, go) = duel::start_holder_1(&mut tl, async move { Ok(ctx1) }, item.clone()).await?;
    let id1 = session1.session_id().ok_or("holder 1 has no session")?;
    let leader = ensemble
        .leader_index()
        .await
        .map_err(|e| format!("leader: {e}"))?;
    let on = ensemble
        .member_of_session(id1)
        .await
        .map_err(|e| format!("cons: {e}"))?
        .and_then(|m| m.server_id());
    ensemble
        .member(leader)
        .kill()
        .await
        .map_err(|e| format!("killing the leader: {e}"))?;
    tl.note(
        "orchestrator",
        format!(
            "SIGKILL the leader (server {}); holder 1's session {id1:#x} was on server {}",
            leader + 1,
            on.map_or("?".to_owned(), |id| id.to_string())
        ),
    );
    let (h2, _) = duel::spawn_holder(
        &tl,
        "holder 2",
        duel::ctx(kind, LockAt::Zk(connect), pg.to_owned(), ttl),
        item.clone(),
        duel::HOLDER_2,
        false,
    );
    // Holder 1's session: suspended, then connected again (same id) or expired.
    let mut states = session1.watch_state();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut was_suspended = false;
    let back = loop {
        let state = *states.borrow_and_update();
        match state {
            SessionState::Suspended { .. } => was_suspended = true,
            SessionState::Connected { session_id } if was_suspended || session_id != id1 => {
                break session_id == id1;
            }
            SessionState::Expired { .. } => break false,
            _ => {}
        }
        match tokio::time::timeout_at(deadline, states.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err("holder 1's session closed".into()),
            Err(_) => return Err("holder 1's session never reconnected".into()),
        }
    };
    tl.drain();
    tl.note(
        "orchestrator",
        if back {
            format!("holder 1's session {id1:#x} reconnected to a surviving member")
        } else {
            format!("holder 1's session {id1:#x} was LOST")
        },
    );
    // Holder 2 keeps trying for longer than a session timeout after that.
    if tl
        .expect("holder 2", "locked", ttl + Duration::from_secs(1))
        .await?
    {
        tl.expect("holder 2", "done", Duration::from_secs(30))
            .await?;
    }
    let _ = go.ok_or("no go for holder 1")?.send(());
    tl.note("orchestrator", "holder 1 may write");
    let outcome = duel::finish(kind, tl, &db, &item, vec![h1, h2]).await;
    ensemble
        .member(leader)
        .start_again()
        .await
        .map_err(|e| format!("restarting the old leader: {e}"))?;
    ensemble
        .wait_for_all_serving(Duration::from_secs(60))
        .await
        .map_err(|e| format!("ensemble after the restart: {e}"))?;
    outcome
}
