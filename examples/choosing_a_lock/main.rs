//! Choosing a lock, measured: the Redis lock (with its watchdog), Redis with an `INCR` token,
//! Redlock over 5, PostgreSQL `SELECT ... FOR UPDATE` (with and without an
//! idle-in-transaction timeout), an optimistic version column, and zk-recipes' `ZkLockSpace`
//! with and without its fencing token, on the same process-pause incident and the same flash
//! sale, against real servers the example starts itself; and the kinds each concerns on two
//! more incidents, a failover (a Redis primary dying before its replica has the lock; a Redlock
//! node restarted without its keys; a ZooKeeper leader killed) and a clock jump (one Redlock
//! node's wall clock; a ZooKeeper server's).
//!
//! ```text
//! cargo run --release --example choosing_a_lock                 # the incidents, then the sale
//! cargo run --release --example choosing_a_lock -- --pause      # the pause incident only
//! cargo run --release --example choosing_a_lock -- --failover --clock
//! cargo run --release --example choosing_a_lock -- --sale --rounds 5 --buyers 500
//! cargo run --release --example choosing_a_lock -- --sale --json docs/choosing-a-lock/sale.json
//! cargo run --release --example choosing_a_lock -- --plot-from docs/choosing-a-lock/sale.json
//! cargo run --release --example choosing_a_lock -- --kinds redis,zk-fenced
//! ```
//!
//! Servers: redis-server and PostgreSQL from Debian's packages, as local processes on free
//! ports (`servers/install.sh` installs them when missing; it needs root), ZooKeeper in Docker
//! through zk-testcontainers (or `ZK_CONNECT`). Exit code: 0 when every lock kind behaved as
//! its design says (a lost update exactly where the kind has no fence, no oversold seat where
//! the lock is correct, two holders at once in the failover and clock incidents exactly where
//! the design allows it: the Redis kinds), 1 otherwise, 2 when the run could not be carried out.
//!
//! Every worker process is this binary again, started with `--worker key=value...`.

mod clock;
mod duel;
mod failover;
mod kinds;
mod pause;
mod plots;
mod redis_lock;
mod sale;
mod servers;
mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kinds::{Ctx, Kind};
use zk_recipes::{Session, SessionOptions, ZkLockSpace};

/// Worker output lines for the orchestrator start with this.
pub const PREFIX: &str = "@choosing ";

/// Where the servers are, and the lease length every kind uses.
#[derive(Clone, Debug)]
pub struct Addrs {
    pub redis: Vec<String>,
    pub pg: String,
    pub zk: String,
    pub ttl: Duration,
}

impl Addrs {
    fn to_pairs(&self) -> Vec<String> {
        vec![
            format!("redis={}", self.redis.join(",")),
            format!("pg={}", self.pg),
            format!("zk={}", self.zk),
            format!("ttl_ms={}", self.ttl.as_millis()),
        ]
    }

    fn from_map(map: &HashMap<&str, &str>) -> Result<Addrs, String> {
        let get = |k: &str| map.get(k).copied().ok_or(format!("missing {k}"));
        Ok(Addrs {
            redis: get("redis")?.split(',').map(str::to_owned).collect(),
            pg: get("pg")?.to_owned(),
            zk: get("zk")?.to_owned(),
            ttl: Duration::from_millis(get("ttl_ms")?.parse().map_err(|e| format!("ttl_ms: {e}"))?),
        })
    }

    /// Connections for one lock kind: the single Redis is the first process, Redlock's five
    /// are the next five.
    async fn ctx(&self, kind: Kind, pool: usize) -> Result<Ctx, String> {
        let redis = match kind.redis_nodes() {
            0 => None,
            1 => Some(redis_lock::RedisNodes::connect(&self.redis[..1], self.ttl).await?),
            n => Some(redis_lock::RedisNodes::connect(&self.redis[1..1 + n], self.ttl).await?),
        };
        let zk = if kind.uses_zk() {
            let session = Session::connect(
                SessionOptions::new(self.zk.clone())
                    .session_timeout(self.ttl)
                    .connection_timeout(Duration::from_secs(10)),
            )
            .await
            .map_err(|e| format!("ZooKeeper: {e}"))?;
            let space =
                ZkLockSpace::new(&session, "/choosing-a-lock").map_err(|e| e.to_string())?;
            Some((session, space))
        } else {
            None
        };
        Ok(Ctx {
            kind,
            conninfo: self.pg.clone(),
            pool: store::Pool::new(&self.pg, pool).await?,
            redis,
            zk,
            ttl: self.ttl,
        })
    }
}

struct Options {
    pause: bool,
    sale: bool,
    failover: bool,
    clock: bool,
    kinds: Vec<Kind>,
    rounds: usize,
    plan: sale::Plan,
    frozen_rounds: usize,
    ttl: Duration,
    freeze: Duration,
    /// The sale's rounds written here as JSON, its plots drawn next to it.
    json: Option<PathBuf>,
    /// Draw the plots of this earlier JSON and run nothing.
    plot_from: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Options {
    let mut o = Options {
        pause: false,
        sale: false,
        failover: false,
        clock: false,
        kinds: kinds::ALL.to_vec(),
        rounds: 3,
        plan: sale::Plan {
            buyers: 200,
            products: 4,
            stock: 25,
            pool: 32,
            frozen: None,
        },
        frozen_rounds: 1,
        ttl: Duration::from_secs(2),
        freeze: Duration::from_secs(4),
        json: None,
        plot_from: None,
    };
    let mut it = args.iter();
    let num = |v: Option<&String>, what: &str| -> u64 {
        v.and_then(|v| v.parse().ok())
            .unwrap_or_else(|| fail(&format!("{what} needs a number")))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--pause" => o.pause = true,
            "--sale" => o.sale = true,
            "--failover" => o.failover = true,
            "--clock" => o.clock = true,
            "--kinds" => {
                let list = it.next().unwrap_or_else(|| fail("--kinds needs a list"));
                o.kinds = list
                    .split(',')
                    .map(|k| Kind::parse(k).unwrap_or_else(|| fail(&format!("unknown kind {k}"))))
                    .collect();
            }
            "--rounds" => o.rounds = num(it.next(), a) as usize,
            "--frozen-rounds" => o.frozen_rounds = num(it.next(), a) as usize,
            "--buyers" => o.plan.buyers = num(it.next(), a) as usize,
            "--products" => o.plan.products = num(it.next(), a) as usize,
            "--stock" => o.plan.stock = num(it.next(), a) as i64,
            "--pool" => o.plan.pool = num(it.next(), a) as usize,
            "--ttl-ms" => o.ttl = Duration::from_millis(num(it.next(), a)),
            "--freeze-ms" => o.freeze = Duration::from_millis(num(it.next(), a)),
            "--json" => {
                o.json = Some(it.next().unwrap_or_else(|| fail("--json needs a path")).into())
            }
            "--plot-from" => {
                o.plot_from = Some(
                    it.next()
                        .unwrap_or_else(|| fail("--plot-from needs a path"))
                        .into(),
                )
            }
            other => fail(&format!(
                "unknown argument {other:?} (--pause, --sale, --failover, --clock, --kinds a,b, --rounds N, \
                 --frozen-rounds N, --buyers N, --products N, --stock N, --pool N, --ttl-ms N, \
                 --freeze-ms N, --json PATH, --plot-from PATH)"
            )),
        }
    }
    if !o.pause && !o.sale && !o.failover && !o.clock {
        o.pause = true;
        o.sale = true;
        o.failover = true;
        o.clock = true;
    }
    o
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        let worker = pause::WorkerArgs::from_pairs(&args[1..]).unwrap_or_else(|e| fail(&e));
        if let Err(e) = pause::worker(worker).await {
            println!("{PREFIX}error {e}");
            fail(&e);
        }
        return;
    }
    let o = parse_args(&args);
    if let Some(path) = &o.plot_from {
        let written = plots::redraw(path).unwrap_or_else(|e| fail(&e));
        for p in written {
            println!("drew {}", p.display());
        }
        return;
    }
    let servers = servers::Servers::start(6).unwrap_or_else(|e| fail(&format!("servers: {e}")));
    println!(
        "Redis at {}; PostgreSQL at {}",
        servers.redis.join(" "),
        servers.postgres
    );
    let zk = match zk_testcontainers::test_server().await {
        Ok(zk) => zk,
        Err(e) => {
            servers.stop();
            fail(&format!("cannot start ZooKeeper: {e}"))
        }
    };
    println!("ZooKeeper at {}", zk.connect_string());
    let addrs = Addrs {
        redis: servers.redis.clone(),
        pg: servers.postgres.clone(),
        zk: zk.connect_string(),
        ttl: o.ttl,
    };
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
        .to_string();
    // Every way out goes past the stops below: `process::exit` runs no destructor, and a
    // server left running (a Redis process, a container) would outlive the run.
    let ran = async {
        let db = store::connect(&addrs.pg).await?;
        store::create_schema(&db).await?;
        let mut ok = true;
        if o.pause {
            ok &= run_pause(&o, &addrs, &nonce).await?;
        }
        if o.failover {
            ok &= run_failover(&o, &servers, &addrs, &nonce).await?;
        }
        if o.clock {
            ok &= run_clock(&o, &servers, &addrs, &nonce).await?;
        }
        if o.sale {
            ok &= run_sale(&o, &args, &addrs, &nonce).await?;
        }
        Ok::<bool, String>(ok)
    }
    .await;
    drop(zk);
    servers.stop();
    match ran {
        Ok(ok) => std::process::exit(if ok { 0 } else { 1 }),
        Err(e) => fail(&e),
    }
}

async fn run_pause(o: &Options, addrs: &Addrs, nonce: &str) -> Result<bool, String> {
    println!(
        "\n== process pause: worker 1 frozen {:.1} s inside a {:.1} s TTL / session",
        o.freeze.as_secs_f64(),
        o.ttl.as_secs_f64()
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for &kind in &o.kinds {
        println!("\n-- {kind}");
        let outcome = pause::run(kind, addrs, o.freeze, nonce)
            .await
            .map_err(|e| format!("pause incident, {kind}: {e}"))?;
        for line in &outcome.timeline {
            println!("{line}");
        }
        let expected = outcome.as_expected();
        ok &= expected;
        println!(
            "=> {kind}: balance {} ({}){}",
            outcome.final_balance,
            if outcome.lost_update() {
                "LOST UPDATE"
            } else {
                "right"
            },
            if expected {
                ""
            } else {
                "  UNEXPECTED for this kind"
            }
        );
        rows.push(outcome);
    }
    println!("\n| lock kind | second writer done while the first is frozen | second writer done after | first frozen for | worker 1's write on resume | final balance | outcome |");
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| `{}` | {} | {:.2} s | {:.2} s | {} | {} | {} |",
            r.kind,
            if r.second_wrote_while_frozen {
                "yes"
            } else {
                "no (waits)"
            },
            r.second_waited.as_secs_f64(),
            r.frozen_for.as_secs_f64(),
            if r.stale_write_accepted {
                "accepted"
            } else {
                "refused, retried"
            },
            pause::money(r.final_balance),
            if r.lost_update() {
                format!("**lost update** ({} gone)", pause::money(pause::WITHDRAWAL))
            } else {
                "right".to_owned()
            },
        );
    }
    Ok(ok)
}

fn print_duel(outcome: &duel::Outcome) {
    for line in &outcome.timeline {
        println!("{line}");
    }
    println!(
        "=> {}: two holders {}, balance {} ({})",
        outcome.kind,
        if outcome.two_holders { "YES" } else { "no" },
        outcome.final_balance,
        outcome.verdict()
    );
}

async fn run_failover(
    o: &Options,
    servers: &servers::Servers,
    addrs: &Addrs,
    nonce: &str,
) -> Result<bool, String> {
    let kinds: Vec<Kind> = o
        .kinds
        .iter()
        .copied()
        .filter(|k| failover::applies(*k))
        .collect();
    if kinds.is_empty() {
        return Ok(true);
    }
    println!(
        "\n== failover: Redis primary killed before its replica has the lock; Redlock node restarted without its keys; ZooKeeper leader killed ({:.1} s TTL / session)",
        o.ttl.as_secs_f64()
    );
    let mut ensemble = None;
    if kinds.iter().any(|k| k.uses_zk()) {
        if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
            println!("ZooKeeper rows NOT RUN: {reason}");
        } else {
            let e = servers::zk_ensemble(3)
                .await
                .map_err(|e| format!("failover: {e}"))?;
            println!("ZooKeeper ensemble at {}", e.connect_string());
            ensemble = Some(e);
        }
    }
    let mut rows = Vec::new();
    for kind in kinds {
        println!("\n-- {kind}");
        let outcome = match (kind.uses_zk(), &ensemble) {
            (false, _) if kind == Kind::Redlock => {
                failover::run_redlock(servers, &addrs.pg, o.ttl, nonce).await
            }
            (false, _) => failover::run_redis(kind, servers, &addrs.pg, o.ttl, nonce).await,
            (true, Some(e)) => failover::run_zk(kind, e, &addrs.pg, o.ttl, nonce).await,
            (true, None) => continue,
        }
        .map_err(|e| format!("failover incident, {kind}: {e}"))?;
        print_duel(&outcome);
        rows.push(outcome);
    }
    Ok(duel::print_table("failover:", &rows, failover::two_allowed))
}

async fn run_clock(
    o: &Options,
    servers: &servers::Servers,
    addrs: &Addrs,
    nonce: &str,
) -> Result<bool, String> {
    let kinds: Vec<Kind> = o
        .kinds
        .iter()
        .copied()
        .filter(|k| clock::applies(*k))
        .collect();
    if kinds.is_empty() {
        return Ok(true);
    }
    println!(
        "\n== clock jump: one server's wall clock {:.1} s ahead ({:.1} s TTL / session)",
        clock::jump(o.ttl).as_secs_f64(),
        o.ttl.as_secs_f64()
    );
    let mut faked = None;
    if kinds.iter().any(|k| k.uses_zk()) {
        if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
            println!("ZooKeeper rows NOT RUN: {reason}");
        } else {
            let (server, fake) = servers::zk_with_faketime()
                .await
                .map_err(|e| format!("clock: {e}"))?;
            println!("ZooKeeper under libfaketime at {}", server.connect_string());
            faked = Some((server, fake));
        }
    }
    let mut ahead = Duration::ZERO;
    let mut rows = Vec::new();
    for kind in kinds {
        println!("\n-- {kind}");
        let outcome = match (kind.uses_zk(), &faked) {
            (false, _) => clock::run_redlock(servers, &addrs.pg, o.ttl, nonce).await,
            (true, Some((server, fake))) => {
                clock::run_zk(kind, server, fake, &mut ahead, &addrs.pg, o.ttl, nonce).await
            }
            (true, None) => continue,
        }
        .map_err(|e| format!("clock incident, {kind}: {e}"))?;
        print_duel(&outcome);
        rows.push(outcome);
    }
    Ok(duel::print_table("clock jump:", &rows, clock::two_allowed))
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (mid, v[0], v[v.len() - 1])
}

async fn run_sale(
    o: &Options,
    args: &[String],
    addrs: &Addrs,
    nonce: &str,
) -> Result<bool, String> {
    let p = o.plan;
    let mut ok = true;
    let mut report = sale::Report {
        date: sale::utc_date(nonce.parse::<u64>().unwrap_or(0) / 1000),
        args: args.to_vec(),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        buyers: p.buyers,
        products: p.products,
        stock: p.stock,
        pool: p.pool,
        ttl_ms: o.ttl.as_millis() as u64,
        variants: Vec::new(),
    };
    for (variant, rounds, frozen) in [
        ("no pause", o.rounds, None),
        (
            "one buyer frozen inside product 0's lock",
            o.frozen_rounds,
            Some(o.freeze),
        ),
    ] {
        if rounds == 0 {
            continue;
        }
        println!(
            "\n== flash sale ({variant}): {} buyers, {} products x {} seats, {} rounds, pool {}",
            p.buyers, p.products, p.stock, rounds, p.pool
        );
        let mut results: HashMap<Kind, Vec<sale::Round>> = HashMap::new();
        for round in 0..rounds {
            // Interleaved, each round starting at another kind.
            for i in 0..o.kinds.len() {
                let kind = o.kinds[(i + round) % o.kinds.len()];
                let plan = sale::Plan { frozen, ..p };
                let tag = format!("{nonce}-{}-{round}", frozen.is_some() as u8);
                let r = sale::run(kind, addrs, plan, &tag)
                    .await
                    .map_err(|e| format!("flash sale, {kind}: {e}"))?;
                println!(
                    "round {round} {kind:<28} sold {:>4} oversold {:>3} still offered {:>3} {:>8.1}/s p50 {:>7.1} ms p99 {:>7.1} ms retries {} failed {}",
                    r.sold, r.oversold, r.offered, r.per_sec, r.p50_ms, r.p99_ms, r.retries, r.failed
                );
                let may_oversell = frozen.is_some() && kind.loses_update_on_pause();
                if (r.oversold > 0 || r.offered != 0) && !may_oversell {
                    println!("   UNEXPECTED: {kind} oversold");
                    ok = false;
                }
                results.entry(kind).or_default().push(r);
            }
        }
        println!("\n| lock kind | seats oversold | seats still offered | purchases/s | p50 ms | p99 ms | retries |");
        println!("|---|---|---|---|---|---|---|");
        for kind in &o.kinds {
            let rs = &results[kind];
            let col = |f: fn(&sale::Round) -> f64| median(rs.iter().map(f).collect());
            let fmt = |(m, lo, hi): (f64, f64, f64), d: usize| {
                if rs.len() > 1 {
                    format!("{m:.d$} ({lo:.d$}-{hi:.d$})")
                } else {
                    format!("{m:.d$}")
                }
            };
            println!(
                "| `{kind}` | {} | {} | {} | {} | {} | {} |",
                fmt(col(|r| r.oversold as f64), 0),
                fmt(col(|r| r.offered as f64), 0),
                fmt(col(|r| r.per_sec), 0),
                fmt(col(|r| r.p50_ms), 0),
                fmt(col(|r| r.p99_ms), 0),
                fmt(col(|r| r.retries as f64), 0),
            );
        }
        report.variants.push(sale::Variant {
            name: variant.to_owned(),
            frozen_ms: frozen.map(|f| f.as_millis() as u64),
            kinds: o
                .kinds
                .iter()
                .map(|k| sale::KindRounds {
                    kind: k.name().to_owned(),
                    rounds: results.remove(k).unwrap_or_default(),
                })
                .collect(),
        });
    }
    if let Some(path) = &o.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        println!("\nwrote {}", path.display());
        for p in plots::draw(&report, path)? {
            println!("drew {}", p.display());
        }
    }
    Ok(ok)
}

fn fail(msg: &str) -> ! {
    eprintln!("choosing_a_lock: {msg}");
    std::process::exit(2)
}
