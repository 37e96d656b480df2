//! The Redis locks as their users write them, on the `redis` crate: `SET key token NX PX ttl`
//! to take, a Lua compare-and-delete to release, a watchdog task renewing the TTL (a Lua
//! compare-and-`PEXPIRE`) every third of it; and Redlock, the same on 5 independent Redis
//! processes with a majority and a validity time.
//!
//! A waiter retries `SET NX` every 10-40 ms (random, as redsync and most hand-written loops
//! do); nothing queues.
//!
//! A client can be cut off some nodes ([`RedisNodes::connect_cut`], the clock-jump incident's
//! partition): it never reaches them, and counts them as nodes that did not answer; or it can
//! count the nodes that do not answer its connection as such ([`RedisNodes::connect_answering`],
//! the failover incident's frozen nodes).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Script;
use tokio::task::JoinHandle;

const RELEASE: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end"#;

const RENEW: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
else
    return 0
end"#;

/// Connections to the Redis processes of one lock kind: one for the plain lock, five for
/// Redlock.
#[derive(Clone)]
pub struct RedisNodes {
    /// `None`: a node this client cannot reach.
    conns: Vec<Option<MultiplexedConnection>>,
    pub ttl: Duration,
}

/// A held Redis lock (one node or a Redlock majority) and its watchdog.
pub struct RedisGuard {
    nodes: RedisNodes,
    key: String,
    token: String,
    watchdog: JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

fn random_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

async fn retry_pause() {
    let ms = 10 + rand::random::<u64>() % 30;
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// One node's connection: 2 s to set it up, 500 ms for each answer.
async fn connect_one(url: &str) -> Result<MultiplexedConnection, String> {
    let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_millis(500)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| format!("{url}: {e}"))
}

impl RedisNodes {
    /// Connects to every URL (a short response timeout, so that a dead node costs a Redlock
    /// attempt little).
    pub async fn connect(urls: &[String], ttl: Duration) -> Result<RedisNodes, String> {
        Self::connect_cut(urls, ttl, &[]).await
    }

    /// [`connect`](Self::connect), but the nodes at the indexes in `cut` are unreachable for
    /// this client (a network partition between it and them).
    pub async fn connect_cut(
        urls: &[String],
        ttl: Duration,
        cut: &[usize],
    ) -> Result<RedisNodes, String> {
        let mut conns = Vec::new();
        for (i, url) in urls.iter().enumerate() {
            if cut.contains(&i) {
                conns.push(None);
                continue;
            }
            conns.push(Some(connect_one(url).await?));
        }
        Ok(RedisNodes { conns, ttl })
    }

    /// [`connect`](Self::connect), but a node whose connection is not set up within the
    /// connection timeout (a frozen process: the kernel completes the TCP handshake, the
    /// server never answers the client's setup commands) is one this client never reaches,
    /// as if cut off. Nothing but those setup commands waits in the frozen node's socket.
    pub async fn connect_answering(urls: &[String], ttl: Duration) -> Result<RedisNodes, String> {
        let mut conns = Vec::new();
        for url in urls {
            redis::Client::open(url.as_str()).map_err(|e| format!("{url}: {e}"))?;
            conns.push(connect_one(url).await.ok());
        }
        Ok(RedisNodes { conns, ttl })
    }

    fn quorum(&self) -> usize {
        self.conns.len() / 2 + 1
    }

    /// `INCR fence:{key}` on the first node: the token of the "Redis lock + INCR" kind.
    pub async fn incr_token(&self, key: &str) -> Result<i64, String> {
        let mut conn = self.conns[0]
            .clone()
            .ok_or("INCR: the node is unreachable")?;
        redis::cmd("INCR")
            .arg(format!("fence:{key}"))
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("INCR: {e}"))
    }

    /// Takes the lock on `key`, retrying until `deadline`. One node: `SET NX PX`. Several:
    /// Redlock (a majority within the validity time, else undo and retry).
    pub async fn lock(&self, key: &str, deadline: Instant) -> Result<RedisGuard, String> {
        let token = random_token();
        let ttl_ms = self.ttl.as_millis() as u64;
        loop {
            let start = Instant::now();
            let mut tries = Vec::new();
            for conn in &self.conns {
                let conn = conn.clone();
                let (key, token) = (key.to_owned(), token.clone());
                tries.push(tokio::spawn(async move {
                    let Some(mut conn) = conn else {
                        return false;
                    };
                    let set: redis::RedisResult<Option<String>> = redis::cmd("SET")
                        .arg(&key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl_ms)
                        .query_async(&mut conn)
                        .await;
                    matches!(set, Ok(Some(_)))
                }));
            }
            let mut granted = 0;
            for t in tries {
                if t.await.unwrap_or(false) {
                    granted += 1;
                }
            }
            // Redlock's validity: the TTL less the time taken and a clock drift allowance.
            let drift = self.ttl / 100 + Duration::from_millis(2);
            let valid = granted >= self.quorum()
                && (self.conns.len() == 1 || start.elapsed() + drift < self.ttl);
            if valid {
                let lost = Arc::new(AtomicBool::new(false));
                let watchdog = tokio::spawn(watchdog(
                    self.clone(),
                    key.to_owned(),
                    token.clone(),
                    lost.clone(),
                ));
                return Ok(RedisGuard {
                    nodes: self.clone(),
                    key: key.to_owned(),
                    token,
                    watchdog,
                    lost,
                });
            }
            if granted > 0 {
                self.run_everywhere(RELEASE, key, &token, None).await;
            }
            if Instant::now() > deadline {
                return Err(format!("no Redis lock on {key} before the deadline"));
            }
            retry_pause().await;
        }
    }

    /// Runs a compare-and-X script on every node; how many returned non-zero.
    async fn run_everywhere(&self, src: &str, key: &str, token: &str, ms: Option<u64>) -> usize {
        let mut runs = Vec::new();
        for conn in &self.conns {
            let conn = conn.clone();
            let script = Script::new(src);
            let (key, token) = (key.to_owned(), token.to_owned());
            runs.push(tokio::spawn(async move {
                let Some(mut conn) = conn else {
                    return false;
                };
                let mut inv = script.key(key);
                inv.arg(token);
                if let Some(ms) = ms {
                    inv.arg(ms);
                }
                matches!(inv.invoke_async::<i64>(&mut conn).await, Ok(n) if n > 0)
            }));
        }
        let mut ok = 0;
        for r in runs {
            if r.await.unwrap_or(false) {
                ok += 1;
            }
        }
        ok
    }
}

/// Renews the TTL every third of it while the key still holds our token (on a majority).
async fn watchdog(nodes: RedisNodes, key: String, token: String, lost: Arc<AtomicBool>) {
    let ttl_ms = nodes.ttl.as_millis() as u64;
    loop {
        tokio::time::sleep(nodes.ttl / 3).await;
        let renewed = nodes
            .run_everywhere(RENEW, &key, &token, Some(ttl_ms))
            .await;
        if renewed < nodes.quorum() {
            lost.store(true, Ordering::SeqCst);
            return;
        }
    }
}

impl RedisGuard {
    /// What the watchdog knows: false once a renewal found the key gone or another's.
    pub fn believes_held(&self) -> bool {
        !self.lost.load(Ordering::SeqCst)
    }

    /// Stops the watchdog and deletes the key where it still holds our token.
    pub async fn release(self) {
        self.watchdog.abort();
        self.nodes
            .run_everywhere(RELEASE, &self.key, &self.token, None)
            .await;
    }
}
