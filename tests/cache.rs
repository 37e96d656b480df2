//! ZkTreeCache against a real ZooKeeper: the first view equal to a fresh read and reported as
//! one `Created` per node then `Initialized`; creates, updates and deletes of other sessions
//! followed; 10,000 nodes churned by another session while the cache's connection is cut and
//! its session expired, the cache ending equal to a fresh read of the tree and its stream,
//! replayed over the snapshot it came with, giving the same tree with no event lost or
//! repeated (each event checked against the replayed tree); stat-only mode, the filter, a
//! missing root, bad input, and streams that end when the cache stops.
//!
//! `ZK_CACHE_NODES` (default 10,000) and `ZK_CACHE_CHURN` (default 3,000 operations) size the
//! churn test.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::{rngs::StdRng, Rng, SeedableRng};
use support::{within, Zk};
use zk_recipes::{
    CachedNode, Error, Session, SessionOptions, TreeCacheOptions, TreeEvent, TreeEvents,
    TreeSnapshot, ZkTreeCache,
};
use zk_testcontainers::{expire_session, scaled, FaultProxy};
use zookeeper_client as zkc;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn persistent() -> zkc::CreateOptions<'static> {
    zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all())
}

/// The tree under `root` as the server has it now: path -> (czxid, mzxid, data).
type Fresh = BTreeMap<String, (i64, i64, Vec<u8>)>;

async fn fresh_read(raw: &zkc::Client, root: &str) -> Fresh {
    let mut out = BTreeMap::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for chunk in level.chunks(500) {
            let pending: Vec<_> = chunk
                .iter()
                .map(|p| (raw.get_data(p), raw.get_children(p)))
                .collect();
            for (path, (data, kids)) in chunk.iter().zip(pending) {
                let (Ok((data, stat)), Ok((kids, _))) = (data.await, kids.await) else {
                    continue; // gone meanwhile (nothing writes during the comparisons)
                };
                out.insert(path.clone(), (stat.czxid, stat.mzxid, data));
                next.extend(kids.into_iter().map(|k| format!("{path}/{k}")));
            }
        }
        level = next;
    }
    out
}

fn as_fresh(view: &TreeSnapshot) -> Fresh {
    view.iter()
        .map(|(p, n)| {
            let data = n.data().unwrap_or_default().to_vec();
            (p.to_owned(), (n.stat().czxid, n.stat().mzxid, data))
        })
        .collect()
}

/// Replays events over a tree, checking each one against it: a `Created` for a path not in
/// it, a `Changed` of the very node there into a newer version, a `Deleted` of the very node
/// there (and no children left). Counts them.
#[derive(Default)]
struct Replay {
    tree: BTreeMap<String, CachedNode>,
    created: usize,
    changed: usize,
    deleted: usize,
    initialized: usize,
}

impl Replay {
    fn over(view: &TreeSnapshot) -> Replay {
        Replay {
            tree: view
                .iter()
                .map(|(p, n)| (p.to_owned(), n.clone()))
                .collect(),
            ..Replay::default()
        }
    }

    fn apply(&mut self, event: TreeEvent) {
        match event {
            TreeEvent::Created { path, node } => {
                assert!(!self.tree.contains_key(&path), "created twice: {path}");
                self.tree.insert(path, node);
                self.created += 1;
            }
            TreeEvent::Changed { path, old, node } => {
                let cached = self.tree.get(&path).expect("changed: not there");
                assert_eq!(cached, &old, "changed from another node: {path}");
                assert_eq!(old.stat().czxid, node.stat().czxid, "{path}");
                assert!(node.stat().mzxid > old.stat().mzxid, "not newer: {path}");
                self.tree.insert(path, node);
                self.changed += 1;
            }
            TreeEvent::Deleted { path, node } => {
                assert_eq!(
                    self.tree.get(&path),
                    Some(&node),
                    "deleted: not that node {path}"
                );
                let prefix = format!("{path}/");
                assert!(
                    !self.tree.keys().any(|k| k.starts_with(&prefix)),
                    "deleted before its children: {path}"
                );
                self.tree.remove(&path);
                self.deleted += 1;
            }
            TreeEvent::Initialized => self.initialized += 1,
            other => panic!("an event this test does not know: {other:?}"),
        }
    }

    fn drain(&mut self, events: &mut TreeEvents) {
        while let Some(event) = events.try_recv() {
            self.apply(event);
        }
    }
}

/// Waits (on the stream) until the replayed tree equals `want`.
async fn replay_until(replay: &mut Replay, events: &mut TreeEvents, what: &str, want: &Fresh) {
    within(what, 60, async {
        loop {
            replay.drain(events);
            if fresh_of(&replay.tree) == *want {
                return;
            }
            let event = events.recv().await.expect("the stream ended");
            replay.apply(event);
        }
    })
    .await
}

fn fresh_of(tree: &BTreeMap<String, CachedNode>) -> Fresh {
    tree.iter()
        .map(|(p, n)| {
            let data = n.data().unwrap_or_default().to_vec();
            (p.clone(), (n.stat().czxid, n.stat().mzxid, data))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_view_is_the_tree_and_other_sessions_changes_follow() {
    let zk = Zk::start("cache-basics").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    raw.create("/cfg", b"root", &persistent()).await.unwrap();
    for a in 0..10 {
        raw.create(&format!("/cfg/a{a}"), b"x", &persistent())
            .await
            .unwrap();
        for b in 0..10 {
            let data = format!("{a}-{b}");
            raw.create(&format!("/cfg/a{a}/b{b}"), data.as_bytes(), &persistent())
                .await
                .unwrap();
        }
    }
    let cache = ZkTreeCache::start(&session, "/cfg", TreeCacheOptions::new()).unwrap();
    let (before, mut events) = cache.subscribe();
    assert!(before.is_empty(), "subscribed before the first view");
    within("initialized", 30, cache.initialized())
        .await
        .unwrap();
    assert!(cache.is_initialized());
    let first = fresh_read(&raw, "/cfg").await;
    assert_eq!(first.len(), 111);
    assert_eq!(
        as_fresh(&cache.snapshot()),
        first,
        "the first view is the tree"
    );
    // The stream: one Created per node (parents first), then Initialized.
    let mut replay = Replay::over(&before);
    let mut seen = Vec::new();
    while replay.initialized == 0 {
        let event = events.recv().await.unwrap();
        if let TreeEvent::Created { path, .. } = &event {
            seen.push(path.clone());
        }
        replay.apply(event);
    }
    assert_eq!(replay.created, 111);
    assert_eq!(
        seen,
        first.keys().cloned().collect::<Vec<_>>(),
        "in path order"
    );
    assert_eq!(cache.get("/cfg/a3/b4").unwrap().data(), Some(&b"3-4"[..]));
    let view = cache.snapshot();
    assert_eq!(view.children("/cfg").count(), 10);
    assert_eq!(view.children("/cfg/a1").collect::<Vec<_>>().len(), 10);

    // Another session creates, changes and deletes; each change is seen once.
    raw.create("/cfg/new", b"n", &persistent()).await.unwrap();
    raw.create("/cfg/new/kid", b"k", &persistent())
        .await
        .unwrap();
    raw.set_data("/cfg/a0", b"changed", None).await.unwrap();
    raw.delete("/cfg/a9/b9", None).await.unwrap();
    let want = fresh_read(&raw, "/cfg").await;
    replay_until(&mut replay, &mut events, "the changes followed", &want).await;
    assert_eq!(
        (replay.created, replay.changed, replay.deleted),
        (113, 1, 1),
        "one event per change"
    );
    assert_eq!(as_fresh(&cache.snapshot()), want);
    // The snapshot taken before stays as it was.
    assert_eq!(as_fresh(&view), first);
    // A subscriber after the first view gets the view and then the changes only.
    let (late_view, mut late) = cache.subscribe();
    assert_eq!(as_fresh(&late_view), want);
    raw.delete("/cfg/new/kid", None).await.unwrap();
    let event = within("the late subscriber's event", 30, late.next())
        .await
        .unwrap();
    assert!(
        matches!(&event, TreeEvent::Deleted { path, .. } if path == "/cfg/new/kid"),
        "{event:?}"
    );
    // Closed: every stream ends.
    cache.close().await;
    within("the stream ends", 30, async {
        while late.next().await.is_some() {}
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_nodes_churned_through_cuts_and_an_expiry_end_equal_to_a_fresh_read() {
    let nodes = env_or("ZK_CACHE_NODES", 10_000);
    let churn = env_or("ZK_CACHE_CHURN", 3_000);
    let zk = Zk::start("cache-churn").await;
    let raw = zk.raw().await;
    // The tree: /tree/gN/nM, 100 nodes per group.
    raw.create("/tree", b"", &persistent()).await.unwrap();
    let groups = nodes.div_ceil(100);
    let started = Instant::now();
    let paths: Vec<String> = (0..groups)
        .map(|g| format!("/tree/g{g}"))
        .chain((0..nodes).map(|n| format!("/tree/g{}/n{}", n / 100, n)))
        .collect();
    let options = persistent();
    for chunk in paths.chunks(500) {
        let pending: Vec<_> = chunk
            .iter()
            .map(|p| raw.create(p, b"v0", &options))
            .collect();
        for p in pending {
            p.await.unwrap();
        }
    }
    println!("{} nodes made in {:?}", paths.len(), started.elapsed());

    let (host, chroot) = zk.connect.split_at(zk.connect.find('/').unwrap());
    let proxy = FaultProxy::start(host).await.unwrap();
    let session = Session::connect(
        SessionOptions::new(format!("{}{}", proxy.addr(), chroot))
            .session_timeout(Duration::from_secs(4))
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .unwrap();
    let cache = ZkTreeCache::start(&session, "/tree", TreeCacheOptions::new()).unwrap();
    let started = Instant::now();
    within("initialized", 60, cache.initialized())
        .await
        .unwrap();
    println!(
        "{} nodes read into the cache in {:?}",
        cache.snapshot().len(),
        started.elapsed()
    );
    let (view, mut events) = cache.subscribe();
    assert_eq!(as_fresh(&view), fresh_read(&raw, "/tree").await);
    let mut replay = Replay::over(&view);
    let first_session = session.session_id();

    // Churn from another session: creates, updates, deletes (leaves only), in bursts, with
    // two connection cuts and an expiry of the cache's session in between.
    let mut rng = StdRng::seed_from_u64(7);
    let mut extra = 0usize;
    let started = Instant::now();
    let mut faults = 0;
    for round in 0..churn.div_ceil(100) {
        let mut batch = Vec::new();
        for _ in 0..100 {
            let g = rng.random_range(0..groups);
            let op = match rng.random_range(0..3) {
                0 => {
                    extra += 1;
                    (0, format!("/tree/g{g}/x{extra}"))
                }
                1 => (
                    1,
                    format!("/tree/g{g}/n{}", g * 100 + rng.random_range(0..100)),
                ),
                _ => (
                    2,
                    format!("/tree/g{g}/n{}", g * 100 + rng.random_range(0..100)),
                ),
            };
            batch.push(op);
        }
        let pending: Vec<_> = batch
            .iter()
            .map(|(op, path)| {
                let raw = &raw;
                let options = &options;
                async move {
                    match op {
                        0 => raw.create(path, b"new", options).await.map(|_| ()),
                        1 => raw
                            .set_data(path, format!("r{round}").as_bytes(), None)
                            .await
                            .map(|_| ()),
                        _ => raw.delete(path, None).await,
                    }
                }
            })
            .collect();
        for result in futures::future::join_all(pending).await {
            match result {
                Ok(()) | Err(zkc::Error::NoNode) | Err(zkc::Error::NodeExists) => {}
                Err(e) => panic!("churn: {e}"),
            }
        }
        let step = churn.div_ceil(100) / 4;
        if step > 0 && round % step == step - 1 && faults < 3 {
            faults += 1;
            if faults == 2 {
                let info = session.client().await.unwrap().session().clone();
                expire_session(&zk.connect, &info).await.unwrap();
                println!("round {round}: the cache's session expired");
            } else {
                proxy.drop_connections();
                println!("round {round}: the cache's connection cut");
            }
        }
    }
    println!(
        "{churn} operations in {:?}, {faults} faults",
        started.elapsed()
    );
    assert_eq!(faults, 3, "two cuts and an expiry happened");
    // Nothing writes any more: the cache must end equal to a fresh read.
    let want = fresh_read(&raw, "/tree").await;
    let started = Instant::now();
    replay_until(
        &mut replay,
        &mut events,
        "the stream's replay converged",
        &want,
    )
    .await;
    println!(
        "converged {:?} after the churn: {} created, {} changed, {} deleted events",
        started.elapsed(),
        replay.created,
        replay.changed,
        replay.deleted
    );
    within("the cache converged", 60, async {
        while as_fresh(&cache.snapshot()) != want {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(replay.initialized, 0, "subscribed after the first view");
    assert_ne!(
        session.session_id(),
        first_session,
        "the cache went on in a new session"
    );
    drop(cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_only_the_filter_and_a_missing_root() {
    let zk = Zk::start("cache-modes").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    // A missing root: empty, then followed once made.
    let cache = ZkTreeCache::start(
        &session,
        "/later",
        TreeCacheOptions::new()
            .stat_only()
            .filter(|p| !p.ends_with("/tmp")),
    )
    .unwrap();
    within("initialized", 30, cache.initialized())
        .await
        .unwrap();
    assert!(cache.snapshot().is_empty());
    let (view, mut events) = cache.subscribe();
    let mut replay = Replay::over(&view);
    raw.create("/later", b"r", &persistent()).await.unwrap();
    raw.create("/later/a", b"data", &persistent())
        .await
        .unwrap();
    raw.create("/later/tmp", b"", &persistent()).await.unwrap();
    raw.create("/later/tmp/x", b"", &persistent())
        .await
        .unwrap();
    raw.set_data("/later/a", b"data2", None).await.unwrap();
    let mut want = fresh_read(&raw, "/later").await;
    want.retain(|p, _| !p.starts_with("/later/tmp"));
    for v in want.values_mut() {
        v.2.clear(); // stat only: no data
    }
    replay_until(&mut replay, &mut events, "followed", &want).await;
    assert_eq!((replay.created, replay.changed), (2, 1));
    let a = cache.get("/later/a").unwrap();
    assert_eq!(a.data(), None, "stat only");
    assert_eq!(a.stat().data_length, 5);
    assert!(cache.get("/later/tmp").is_none() && cache.get("/later/tmp/x").is_none());
    // The root deleted (its children first): the cache empties, one Deleted each.
    raw.delete("/later/tmp/x", None).await.unwrap();
    raw.delete("/later/tmp", None).await.unwrap();
    raw.delete("/later/a", None).await.unwrap();
    raw.delete("/later", None).await.unwrap();
    replay_until(&mut replay, &mut events, "emptied", &Fresh::new()).await;
    assert_eq!(replay.deleted, 2);
    drop(cache);
    within("the stream ends when the cache is dropped", 30, async {
        while events.next().await.is_some() {}
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_typed_error_and_a_closed_session_stops_the_cache() {
    let zk = Zk::start("cache-bad").await;
    let session = zk.session().await;
    for path in ["", "no-slash", "/a//b", "/a/"] {
        let err = ZkTreeCache::start(&session, path, TreeCacheOptions::new()).unwrap_err();
        assert!(
            matches!(err, Error::InvalidPath { .. }),
            "{path:?}: {err:?}"
        );
    }
    let cache = ZkTreeCache::start(&session, "/x", TreeCacheOptions::new()).unwrap();
    within("initialized", 30, cache.initialized())
        .await
        .unwrap();
    let (_, mut events) = cache.subscribe();
    session.close().await;
    within("the stream ends with the session", 30, async {
        while events.next().await.is_some() {}
    })
    .await;
    assert!(!cache.is_initialized(), "stopped");
    // Started on a closed session: a typed error, at once.
    let late = ZkTreeCache::start(&session, "/x", TreeCacheOptions::new()).unwrap();
    let err = within("refused", 30, late.initialized()).await.unwrap_err();
    assert!(matches!(err, Error::SessionClosed), "{err:?}");
}

/// The Java peer's next line of output.
async fn next_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    what: &str,
) -> String {
    within(what, 60, lines.next_line())
        .await
        .unwrap()
        .expect("the Java cache ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_cache_and_ours_on_one_tree_end_with_the_same_view() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let classes = tempfile::tempdir().unwrap();
    let jars: Vec<&str> = include_str!("../examples/bench-peers/classpath.txt")
        .lines()
        .collect();
    let classpath = match support::compile_java(
        "tests/java/CacheView.java",
        &jars,
        "libcurator-recipes-java libcurator-framework-java",
        classes.path(),
    )
    .await
    {
        Ok(classpath) => classpath,
        Err(why) => {
            println!("not run: Curator's CuratorCache needs Java ({why})");
            return;
        }
    };
    let zk = Zk::start("cache-curator").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let options = persistent();
    raw.create("/shared", b"", &options).await.unwrap();
    for g in 0..10 {
        raw.create(&format!("/shared/g{g}"), b"g", &options)
            .await
            .unwrap();
        for n in 0..100 {
            raw.create(&format!("/shared/g{g}/n{n}"), b"v0", &options)
                .await
                .unwrap();
        }
    }
    let mut java = tokio::process::Command::new("java")
        .arg("-cp")
        .arg(classpath)
        .arg("CacheView")
        .arg(&zk.connect)
        .arg("/shared")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = java.stdin.take().unwrap();
    let mut lines = BufReader::new(java.stdout.take().unwrap()).lines();
    assert_eq!(
        next_line(&mut lines, "Curator's cache initialized").await,
        "initialized"
    );
    let cache = ZkTreeCache::start(&session, "/shared", TreeCacheOptions::new()).unwrap();
    within("ours initialized", 30, cache.initialized())
        .await
        .unwrap();

    // Churn from a third session while both follow.
    let mut rng = StdRng::seed_from_u64(11);
    for round in 0..10 {
        let pending: Vec<_> = (0..100)
            .map(|i| {
                let (g, n) = (rng.random_range(0..10), rng.random_range(0..120));
                let path = format!("/shared/g{g}/n{n}");
                let (raw, options) = (&raw, &options);
                let op = rng.random_range(0..3);
                async move {
                    let r = match op {
                        0 => raw.create(&path, b"new", options).await.map(|_| ()),
                        1 => raw
                            .set_data(&path, format!("r{round}-{i}").as_bytes(), None)
                            .await
                            .map(|_| ()),
                        _ => raw.delete(&path, None).await,
                    };
                    match r {
                        Ok(()) | Err(zkc::Error::NoNode) | Err(zkc::Error::NodeExists) => {}
                        Err(e) => panic!("churn: {e}"),
                    }
                }
            })
            .collect();
        futures::future::join_all(pending).await;
    }
    raw.create("/shared/zz-marker", b"end", &options)
        .await
        .unwrap();
    stdin.write_all(b"wait /shared/zz-marker\n").await.unwrap();
    assert_eq!(
        next_line(&mut lines, "Curator saw the marker").await,
        "seen /shared/zz-marker"
    );
    let want = fresh_read(&raw, "/shared").await;
    within("ours converged", 60, async {
        while as_fresh(&cache.snapshot()) != want {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    stdin.write_all(b"dump\n").await.unwrap();
    let mut curator = Fresh::new();
    loop {
        let l = next_line(&mut lines, "Curator's dump").await;
        if l == "end" {
            break;
        }
        let f: Vec<&str> = l.split('\t').collect();
        let data = (0..f[3].len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&f[3][i..i + 2], 16).unwrap())
            .collect();
        curator.insert(
            f[0].to_owned(),
            (f[1].parse().unwrap(), f[2].parse().unwrap(), data),
        );
    }
    println!("{} nodes in both views", curator.len());
    assert_eq!(curator, want, "Curator's view is the tree");
    assert_eq!(as_fresh(&cache.snapshot()), curator, "ours is Curator's");
    drop(stdin);
    let _ = within("Java exits", 30, java.wait()).await;
}
