//! Two holders of one lock, as tasks of the orchestrator (each with its own connections and
//! ZooKeeper session), for the failover and clock-jump incidents: holder 1 takes the lock,
//! reads the balance, computes its 200,000 charge and waits to be told to write; the
//! orchestrator breaks a server; holder 2 takes the lock if the lock kind lets it and withdraws
//! 2,000,000; then holder 1 writes what it computed. Neither retries a refused write.
//!
//! Right: 10,200,000 (or 10,400,000 when the store refused holder 1's write, which its caller
//! then knows). The lost update: 12,200,000.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use zk_recipes::{Session, SessionOptions, ZkLockSpace};

use crate::kinds::{self, Attempt, Ctx, Kind};
use crate::pause::{CHARGE, LOST, OPENING, RIGHT, WITHDRAWAL};

pub struct Event {
    at: Instant,
    who: &'static str,
    kind: String,
    text: String,
}

/// What the holders reported, in order, and what the orchestrator did.
pub struct Timeline {
    pub start: Instant,
    pub lines: Vec<String>,
    rx: mpsc::UnboundedReceiver<Event>,
    tx: mpsc::UnboundedSender<Event>,
    seen: Vec<(&'static str, String, String, Instant)>,
}

impl Timeline {
    pub fn new() -> Timeline {
        let (tx, rx) = mpsc::unbounded_channel();
        Timeline {
            start: Instant::now(),
            lines: Vec::new(),
            rx,
            tx,
            seen: Vec::new(),
        }
    }

    pub fn note(&mut self, who: &str, text: impl std::fmt::Display) {
        let t = self.start.elapsed().as_secs_f64();
        self.lines.push(format!("+{t:6.2}s  {who:<12}  {text}"));
    }

    fn record(&mut self, event: Event) {
        let t = event.at.saturating_duration_since(self.start).as_secs_f64();
        self.lines
            .push(format!("+{t:6.2}s  {:<12}  {}", event.who, event.text));
        self.seen
            .push((event.who, event.kind, event.text, event.at));
    }

    /// Records what has arrived so far, without waiting.
    pub fn drain(&mut self) {
        while let Ok(event) = self.rx.try_recv() {
            self.record(event);
        }
    }

    /// Waits for `who`'s `kind` (recording all that arrives); Ok(false) on timeout.
    pub async fn expect(
        &mut self,
        who: &str,
        kind: &str,
        within: Duration,
    ) -> Result<bool, String> {
        self.drain();
        if self.saw(who, kind).is_some() {
            return Ok(true);
        }
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let Ok(event) = tokio::time::timeout_at(deadline, self.rx.recv()).await else {
                return Ok(false);
            };
            let event = event.ok_or("every holder is gone")?;
            let hit = event.who == who && event.kind == kind;
            let failed = event.who == who && event.kind == "error";
            let text = event.text.clone();
            self.record(event);
            if hit {
                return Ok(true);
            }
            if failed {
                return Err(format!("{who}: {text}"));
            }
        }
    }

    /// When `who` reported `kind`, and the text.
    pub fn saw(&self, who: &str, kind: &str) -> Option<(Instant, &str)> {
        self.seen
            .iter()
            .find(|(w, k, _, _)| *w == who && k == kind)
            .map(|(_, _, text, at)| (*at, text.as_str()))
    }

    /// The token `who` was granted with (from its "locked" report), if it has one.
    pub fn token(&self, who: &str) -> Option<i64> {
        let (_, text) = self.saw(who, "locked")?;
        let rest = text.split("token ").nth(1)?;
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().ok()
    }
}

/// How holder 1 is told to write.
pub type Go = oneshot::Sender<()>;

/// Starts holder 1 (which waits for its go once it has computed its write) and waits until it
/// has computed.
pub async fn start_holder_1(
    tl: &mut Timeline,
    ctx: impl Future<Output = Result<Ctx, String>> + Send + 'static,
    item: String,
) -> Result<(JoinHandle<()>, Option<Go>), String> {
    let started = spawn_holder(tl, "holder 1", ctx, item, HOLDER_1, true);
    if !tl
        .expect("holder 1", "computed", Duration::from_secs(30))
        .await?
    {
        return Err("holder 1 never computed".into());
    }
    Ok(started)
}

/// Starts a holder: it builds its context (`ctx`: connecting is part of trying), then runs the
/// critical section once; with `go`, it waits between computing and writing until told.
pub fn spawn_holder(
    tl: &Timeline,
    who: &'static str,
    ctx: impl Future<Output = Result<Ctx, String>> + Send + 'static,
    item: String,
    amount: i64,
    wait_for_go: bool,
) -> (JoinHandle<()>, Option<Go>) {
    let tx = tl.tx.clone();
    let (go, go_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let send = |kind: &str, text: String| {
            let _ = tx.send(Event {
                at: Instant::now(),
                who,
                kind: kind.to_owned(),
                text,
            });
        };
        let result = async {
            let ctx = ctx.await?;
            let hook: Option<kinds::PauseHook> = wait_for_go.then(|| {
                Box::pin(async move {
                    let _ = go_rx.await;
                }) as kinds::PauseHook
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            let outcome = kinds::attempt(&ctx, &item, amount, who, deadline, &send, hook).await?;
            Ok::<_, String>((ctx, outcome))
        }
        .await;
        match result {
            Ok((ctx, Attempt::Done { read, token })) => {
                send(
                    "accepted",
                    format!(
                        "store ACCEPTED {} (read {read}, token {token:?})",
                        read - amount
                    ),
                );
                drop(ctx);
            }
            Ok((_, Attempt::Refused(why))) => send("refused", format!("store REFUSED: {why}")),
            Ok((_, Attempt::SoldOut)) => send("refused", "nothing left".into()),
            Err(e) => send("error", format!("failed: {e}")),
        }
        send("done", "done".into());
    });
    (task, wait_for_go.then_some(go))
}

/// A row of the failover or clock-jump table.
pub struct Outcome {
    pub kind: Kind,
    /// Holder 2 was granted the lock while holder 1 held it (before holder 1 began its write,
    /// which it does before it lets go).
    pub two_holders: bool,
    /// From holder 1's grant to holder 2's (when holder 2 got it at all).
    pub second_granted_after: Option<Duration>,
    pub token1: Option<i64>,
    pub token2: Option<i64>,
    pub first_write_accepted: bool,
    pub final_balance: i64,
    pub timeline: Vec<String>,
}

impl Outcome {
    /// Holder 2's token is not larger than holder 1's (both have one).
    pub fn token_repeated(&self) -> Option<bool> {
        Some(self.token2? <= self.token1?)
    }

    pub fn lost_update(&self) -> bool {
        self.final_balance == LOST
    }

    /// The balance is one a correct lock leaves.
    pub fn data_right(&self) -> bool {
        self.final_balance == RIGHT || self.final_balance == OPENING - WITHDRAWAL
    }

    pub fn verdict(&self) -> String {
        if self.lost_update() {
            format!("**lost update** ({} gone)", crate::pause::money(WITHDRAWAL))
        } else if self.final_balance == RIGHT {
            "right".into()
        } else if self.data_right() {
            "right (holder 1's charge refused)".into()
        } else {
            format!("wrong ({})", crate::pause::money(self.final_balance))
        }
    }
}

/// Waits for both holders and reads the outcome (`tl` has seen holder 1's grant).
/// The second half of a duel: holder 2 tries on `ctx2`, given `within` to be granted (granted,
/// it withdraws and is done), then holder 1 is let go to write what it computed, and the row
/// is finished.
pub async fn second_then_first(
    kind: Kind,
    mut tl: Timeline,
    db: &tokio_postgres::Client,
    item: &str,
    ctx2: impl Future<Output = Result<Ctx, String>> + Send + 'static,
    within: Duration,
    (h1, go): (JoinHandle<()>, Option<Go>),
) -> Result<Outcome, String> {
    let (h2, _) = spawn_holder(&tl, "holder 2", ctx2, item.to_owned(), HOLDER_2, false);
    if tl.expect("holder 2", "locked", within).await? {
        tl.expect("holder 2", "done", Duration::from_secs(30))
            .await?;
    }
    let _ = go.ok_or("no go for holder 1")?.send(());
    tl.note("orchestrator", "holder 1 may write");
    finish(kind, tl, db, item, vec![h1, h2]).await
}

pub async fn finish(
    kind: Kind,
    mut tl: Timeline,
    db: &tokio_postgres::Client,
    item: &str,
    holders: Vec<JoinHandle<()>>,
) -> Result<Outcome, String> {
    let wait = Duration::from_secs(60);
    for who in ["holder 1", "holder 2"] {
        if !tl.expect(who, "done", wait).await? {
            return Err(format!("{who} did not finish"));
        }
    }
    for h in holders {
        h.await.map_err(|e| format!("holder task: {e}"))?;
    }
    if let Some((_, text)) = tl.saw("holder 1", "error").or(tl.saw("holder 2", "error")) {
        return Err(text.to_owned());
    }
    let (final_balance, _) = crate::store::tally(db, item).await?;
    tl.note("store", format!("{item}: balance {final_balance}"));
    let g1 = tl.saw("holder 1", "locked").map(|(at, _)| at);
    let g2 = tl.saw("holder 2", "locked").map(|(at, _)| at);
    // Holder 1 lets go only after its write: granted before it writes is granted while held.
    let w1 = tl.saw("holder 1", "writing").map(|(at, _)| at);
    let two_holders = match (g2, w1) {
        (Some(g2), Some(w1)) => g2 < w1,
        _ => false,
    };
    Ok(Outcome {
        kind,
        two_holders,
        second_granted_after: g1.zip(g2).map(|(a, b)| b.saturating_duration_since(a)),
        token1: tl.token("holder 1"),
        token2: tl.token("holder 2"),
        first_write_accepted: tl.saw("holder 1", "accepted").is_some(),
        final_balance,
        timeline: tl.lines,
    })
}

/// Prints a table of outcomes in the page's format; true when every row is as `expect` says
/// (`expect(kind)`: whether the design lets two hold at once there).
pub fn print_table(title: &str, rows: &[Outcome], two_allowed: fn(Kind) -> bool) -> bool {
    let mut ok = true;
    println!("\n{title}");
    println!("| lock kind | two holders at once | holder 2 granted after holder 1 | holder 1's token | holder 2's token | token repeated | holder 1's write | final balance | outcome |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let token = |t: Option<i64>| t.map_or("none".to_owned(), |t| t.to_string());
        let expected = r.two_holders == two_allowed(r.kind)
            && (r.two_holders || r.token_repeated() != Some(true))
            && (r.two_holders || r.data_right());
        ok &= expected;
        println!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {}{} |",
            r.kind,
            if r.two_holders { "**yes**" } else { "no" },
            r.second_granted_after
                .map_or("never".to_owned(), |d| format!("{:.2} s", d.as_secs_f64())),
            token(r.token1),
            token(r.token2),
            match r.token_repeated() {
                Some(true) => "**yes**",
                Some(false) => "no",
                None => "n/a",
            },
            if r.first_write_accepted {
                "accepted"
            } else {
                "refused"
            },
            crate::pause::money(r.final_balance),
            r.verdict(),
            if expected { "" } else { " (UNEXPECTED)" }
        );
    }
    ok
}

/// Where one holder's lock lives.
pub enum LockAt {
    /// Redis nodes (one, or Redlock's five), those at the indexes of the second field
    /// unreachable for this holder.
    Redis(Vec<String>, Vec<usize>),
    /// Redis nodes, those that do not answer this holder's connection (frozen) unreachable for
    /// it.
    RedisAnswering(Vec<String>),
    /// A ZooKeeper connect string.
    Zk(String),
}

/// One holder's connections: its lock's servers and two PostgreSQL connections.
pub async fn ctx(kind: Kind, at: LockAt, pg: String, ttl: Duration) -> Result<Ctx, String> {
    let (redis, zk) = match at {
        LockAt::Redis(urls, cut) => (
            Some(crate::redis_lock::RedisNodes::connect_cut(&urls, ttl, &cut).await?),
            None,
        ),
        LockAt::RedisAnswering(urls) => (
            Some(crate::redis_lock::RedisNodes::connect_answering(&urls, ttl).await?),
            None,
        ),
        LockAt::Zk(connect) => {
            let session = Session::connect(
                SessionOptions::new(connect)
                    .session_timeout(ttl)
                    .connection_timeout(Duration::from_secs(30)),
            )
            .await
            .map_err(|e| format!("ZooKeeper: {e}"))?;
            let space =
                ZkLockSpace::new(&session, "/choosing-a-lock").map_err(|e| e.to_string())?;
            (None, Some((session, space)))
        }
    };
    Ok(Ctx {
        kind,
        pool: crate::store::Pool::new(&pg, 2).await?,
        conninfo: pg,
        redis,
        zk,
        ttl,
    })
}

/// A connection to the store and a fresh account row for one run, named
/// `{incident}-{kind}-{nonce}`: the connection and the row's name.
pub async fn new_account(
    pg: &str,
    incident: &str,
    kind: Kind,
    nonce: &str,
) -> Result<(tokio_postgres::Client, String), String> {
    let item = format!("{incident}-{kind}-{nonce}");
    let db = crate::store::connect(pg).await?;
    crate::store::create_item(&db, &item, OPENING).await?;
    Ok((db, item))
}

/// Holder 1's and holder 2's amounts.
pub const HOLDER_1: i64 = CHARGE;
pub const HOLDER_2: i64 = WITHDRAWAL;
