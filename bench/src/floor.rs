//! The server's floor: the raw client's round trips, one request at a time.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};
use zookeeper_client as zkc;

use crate::measure::{cpu_time, now_ns, Latency};

/// The raw client's write round trips, one request at a time.
#[derive(Clone, Debug, Default)]
pub struct Floor {
    pub set_data: Vec<u64>,
    /// `get_children` of the run's root (a handful of children): one read round trip.
    pub list: Vec<u64>,
    /// `create` and `get_children` sent back to back, until both replies are in.
    pub create_list: Vec<u64>,
    /// `get_children` and `create` sent back to back (list first).
    pub list_create: Vec<u64>,
    /// How many of those listings were provably exact (sequence == listed cversion).
    pub list_create_exact: u64,
    pub create: Vec<u64>,
    pub delete: Vec<u64>,
    /// create + delete cycles and the seconds they took.
    pub cycles: u64,
    pub seconds: f64,
    pub cpu_ms: f64,
}

/// The floor's figures (µs, except where named otherwise).
#[derive(Clone, Debug, Default, Serialize)]
pub struct FloorFigures {
    pub set_data_p50_us: Option<f64>,
    pub set_data_p99_us: Option<f64>,
    pub get_children_p50_us: Option<f64>,
    pub create_p50_us: Option<f64>,
    pub create_p99_us: Option<f64>,
    pub delete_p50_us: Option<f64>,
    pub create_and_get_children_pipelined_p50_us: Option<f64>,
    pub get_children_and_create_pipelined_p50_us: Option<f64>,
    /// Percentage of the list-first pipelined pairs whose listing was provably exact.
    pub get_children_and_create_exact_pct: Option<f64>,
    pub create_delete_cycles_per_s: Option<f64>,
    pub cpu_ms_per_1000_cycles: Option<f64>,
}

impl Floor {
    pub fn figures(&self) -> FloorFigures {
        let of = |samples: &Vec<u64>| Latency::of(samples.clone());
        let (set_data, create) = (of(&self.set_data), of(&self.create));
        FloorFigures {
            set_data_p50_us: set_data.p50,
            set_data_p99_us: set_data.p99,
            get_children_p50_us: of(&self.list).p50,
            create_p50_us: create.p50,
            create_p99_us: create.p99,
            delete_p50_us: of(&self.delete).p50,
            create_and_get_children_pipelined_p50_us: of(&self.create_list).p50,
            get_children_and_create_pipelined_p50_us: of(&self.list_create).p50,
            get_children_and_create_exact_pct: (!self.list_create.is_empty())
                .then(|| 100.0 * self.list_create_exact as f64 / self.list_create.len() as f64),
            create_delete_cycles_per_s: (self.seconds > 0.0)
                .then(|| self.cycles as f64 / self.seconds),
            cpu_ms_per_1000_cycles: (self.cycles > 0)
                .then(|| self.cpu_ms * 1000.0 / self.cycles as f64),
        }
    }

    /// One round's floor as the report's JSON has it.
    pub fn to_json(&self) -> Value {
        let of = |samples: &Vec<u64>| Latency::of(samples.clone());
        let figures = self.figures();
        json!({
            "set_data": of(&self.set_data),
            "get_children": of(&self.list),
            "create_and_get_children_pipelined": of(&self.create_list),
            "get_children_and_create_pipelined": of(&self.list_create),
            "get_children_and_create_exact": self.list_create_exact,
            "create": of(&self.create),
            "delete": of(&self.delete),
            "create_delete_cycles_per_s": figures.create_delete_cycles_per_s,
            "cpu_ms_per_1000_cycles": figures.cpu_ms_per_1000_cycles,
        })
    }
}

/// `set_data` on one node for `secs`, `get_children` for `secs / 2`, then ephemeral sequential
/// `create` + `delete` for `secs`.
pub async fn measure_floor(connect: &str, dir: &str, secs: Duration) -> Result<Floor, String> {
    let client = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    let node = format!("{dir}/floor");
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    match client.create(&node, b"", &persistent).await {
        Ok(_) | Err(zkc::Error::NodeExists) => {}
        Err(e) => return Err(format!("create {node}: {e}")),
    }
    let mut floor = Floor::default();
    // A short warm-up of both request kinds.
    for _ in 0..50 {
        client
            .set_data(&node, b"x", None)
            .await
            .map_err(|e| e.to_string())?;
    }
    let until = Instant::now() + secs;
    while Instant::now() < until {
        let t = now_ns();
        client
            .set_data(&node, b"x", None)
            .await
            .map_err(|e| format!("set_data: {e}"))?;
        floor.set_data.push(now_ns() - t);
    }
    let until = Instant::now() + secs / 2;
    while Instant::now() < until {
        let t = now_ns();
        client
            .get_children(dir)
            .await
            .map_err(|e| format!("get_children: {e}"))?;
        floor.list.push(now_ns() - t);
    }
    let sequential = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
    let prefix = format!("{node}/n-");
    let cpu0 = cpu_time();
    let started = Instant::now();
    while started.elapsed() < secs {
        let t0 = now_ns();
        let (_, sequence) = client
            .create(&prefix, b"", &sequential)
            .await
            .map_err(|e| format!("create: {e}"))?;
        let t1 = now_ns();
        client
            .delete(&format!("{prefix}{sequence}"), None)
            .await
            .map_err(|e| format!("delete: {e}"))?;
        let t2 = now_ns();
        floor.create.push(t1 - t0);
        floor.delete.push(t2 - t1);
        floor.cycles += 1;
    }
    floor.seconds = started.elapsed().as_secs_f64();
    floor.cpu_ms = (cpu_time() - cpu0).as_secs_f64() * 1000.0;
    // What a one-round-trip acquire can at best cost: create and list sent back to back, in
    // either order (alternating, so that drift favours neither). Listing after the create
    // (what zk-recipes does) makes the listing wait for the create to commit; listing first
    // does not, and the listing is then exactly the queue ahead of the new node whenever no
    // child was created in between: ZooKeeper takes the sequence from the parent's count of
    // child creates, and reports `cversion = 2 * creates - children`.
    let until = Instant::now() + secs;
    let mut list_first = false;
    while Instant::now() < until {
        list_first = !list_first;
        let t0 = now_ns();
        let (created, listed) = if list_first {
            let list = client.get_children(&node);
            let create = client.create(&prefix, b"", &sequential);
            let (listed, created) = (list.await, create.await);
            (created, listed)
        } else {
            let create = client.create(&prefix, b"", &sequential);
            let list = client.get_children(&node);
            (create.await, list.await)
        };
        let elapsed = now_ns() - t0;
        let (_, sequence) = created.map_err(|e| format!("create: {e}"))?;
        let (children, parent) = listed.map_err(|e| format!("get_children: {e}"))?;
        if list_first {
            floor.list_create.push(elapsed);
            let creates = (i64::from(parent.cversion) + children.len() as i64) / 2;
            if sequence.into_i64() == creates {
                floor.list_create_exact += 1;
            }
        } else {
            floor.create_list.push(elapsed);
        }
        client
            .delete(&format!("{prefix}{sequence}"), None)
            .await
            .map_err(|e| format!("delete: {e}"))?;
    }
    Ok(floor)
}
