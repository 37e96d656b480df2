//! ZkPartitioner against a real ZooKeeper: 6 members over 64 partitions (five in this
//! process, one in a child process of its own), with a member joining, one leaving, the child
//! frozen (SIGSTOP) past its session timeout and a member's session expired. Every member
//! reports what it owns with its tokens and writes to a fenced store per partition as long as
//! it believes it owns the partition (the child even after it wakes, without looking); the
//! history checker judges the store's log per partition: no two owners' writes interleave,
//! tokens grow, nothing lost or doubled. After each change every partition is owned again
//! within a session timeout plus a rebalance, by the members the plan names; a join moves a
//! bounded share. Bad input gets typed errors and leaves no node.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{rngs::StdRng, Rng, SeedableRng};
use support::bed::worker::{parse_event, Sink};
use support::history::{read_store, Grant, History, Outcome, Probe, Release, Write};
use support::{within, Zk};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use zk_recipes::{
    Error, PartitionState, Session, SessionOptions, ZkLockSpace, ZkPartitionMember, ZkPartitioner,
};
use zk_testcontainers::{expire_session, scaled};
use zookeeper_client as zkc;

const ROOT: &str = "/work/queues";
const COUNTERS: &str = "/counters";
const OPS: &str = "/ops";
const PERSISTENT: zkc::CreateOptions<'static> =
    zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// The variable that makes [`CHILD_TEST`] a member process: `connect|id`.
const CHILD_VAR: &str = "ZK_PARTITION_MEMBER";
const CHILD_TEST: &str = "partition_member_process";

fn partitions() -> Vec<String> {
    (0..64).map(|i| format!("p-{i:02}")).collect()
}

fn options(connect: &str) -> SessionOptions {
    SessionOptions::new(connect)
        .session_timeout(SESSION_TIMEOUT)
        .connection_timeout(scaled(Duration::from_secs(10)))
}

/// One fenced increment of partition `p`'s counter by `member`: the counter at the version
/// read plus one and the operation's node (data: the token), in one transaction that commits
/// only while the member holds the partition's lock.
async fn increment(
    session: &Session,
    member: &ZkPartitionMember,
    p: &str,
    token: u64,
    op: &str,
    sink: &Sink,
) {
    let limit = scaled(Duration::from_secs(10));
    let Ok(Ok(client)) = tokio::time::timeout(limit, session.client()).await else {
        return;
    };
    let counter = format!("{COUNTERS}/{p}");
    let Ok(Ok((data, stat))) = tokio::time::timeout(limit, client.get_data(&counter)).await else {
        return;
    };
    let count: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
    let believed_held = member.owns(p);
    let sent = Instant::now();
    let outcome = match member.fenced_write(p, &client) {
        Err(e) => Outcome::Refused(e.to_string()),
        Ok(mut write) => {
            write
                .add_set_data(
                    &counter,
                    (count + 1).to_string().as_bytes(),
                    Some(stat.version),
                )
                .unwrap();
            write
                .add_create(
                    &format!("{OPS}/{p}/{op}"),
                    token.to_string().as_bytes(),
                    &PERSISTENT,
                )
                .unwrap();
            match tokio::time::timeout(limit, write.commit()).await {
                Ok(Ok(_)) => Outcome::Accepted,
                Ok(Err(e @ Error::ConnectionLost)) => Outcome::Unknown(e.to_string()),
                Ok(Err(e)) => Outcome::Refused(e.to_string()),
                Err(_) => Outcome::Unknown(format!("no answer within {limit:?}")),
            }
        }
    };
    sink.write(Write {
        lock: p.to_owned(),
        token,
        session: session.session_id().unwrap_or(0),
        worker: member.id().to_owned(),
        op: op.to_owned(),
        believed_held,
        sent: Some(sent),
        done: Some(Instant::now()),
        outcome,
    });
}

/// A member's life: joins, reports each partition it comes to own (with its token) and each
/// it gives back, and writes to two of what it believes it owns every 20 ms; `heeds` false:
/// it writes to what it last saw as its own without asking whether it still holds it (a
/// process that froze and does not look). Leaves when told to stop.
async fn member_life(
    session: Session,
    id: String,
    sink: Sink,
    heeds: bool,
    mut stop: watch::Receiver<bool>,
) {
    let partitioner = ZkPartitioner::new(&session, ROOT, partitions()).unwrap();
    let member = partitioner.join(&id).await.unwrap();
    let mut changes = member.subscribe();
    let mut reported: BTreeMap<String, u64> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(id.bytes().map(u64::from).sum());
    let mut ops = 0u64;
    let release = |p: &str, token: u64, how: &str| {
        sink.release(Release {
            lock: p.to_owned(),
            token,
            session: session.session_id().unwrap_or(0),
            worker: id.clone(),
            at: Some(Instant::now()),
            how: how.to_owned(),
        })
    };
    loop {
        let now: BTreeMap<String, u64> = member
            .assignment()
            .owned()
            .iter()
            .map(|(p, t)| (p.clone(), t.as_u64()))
            .collect();
        for (p, token) in reported.clone() {
            if now.get(&p) != Some(&token) {
                release(&p, token, "released");
                reported.remove(&p);
            }
        }
        for (p, token) in &now {
            if !reported.contains_key(p) {
                sink.grant(Grant {
                    lock: p.clone(),
                    token: *token,
                    session: session.session_id().unwrap_or(0),
                    worker: id.clone(),
                    at: Some(Instant::now()),
                });
                reported.insert(p.clone(), *token);
            }
        }
        let mine: Vec<(&String, &u64)> = reported.iter().collect();
        for _ in 0..2.min(mine.len()) {
            let (p, token) = mine[rng.random_range(0..mine.len())];
            if heeds && !member.owns(p) {
                continue;
            }
            ops += 1;
            increment(&session, &member, p, *token, &format!("{id}-{ops}"), &sink).await;
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    let _ = member.leave().await;
    for (p, token) in reported {
        release(&p, token, "left");
    }
    session.close().await;
}

/// The member process: runs [`member_life`] (not heeding) until its stdin closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_member_process() {
    let Ok(spec) = std::env::var(CHILD_VAR) else {
        return; // a mode of this binary, not a test of its own
    };
    let (connect, id) = spec.split_once('|').unwrap();
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut tokio::io::sink()).await;
        stop_tx.send_replace(true);
    });
    let session = Session::connect(options(connect)).await.unwrap();
    member_life(session, id.to_owned(), Sink::Stdout, false, stop).await;
    println!("EXITING");
}

/// A member running in this process.
struct Local {
    id: String,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    session: Session,
}

/// What each partition's owner is, by the members' own reports: the open grants (granted and
/// not given back), by partition.
fn open_grants(history: &History) -> BTreeMap<String, Vec<(String, u64)>> {
    history.read(|e| {
        let mut open: BTreeMap<(String, u64), String> = BTreeMap::new();
        for g in &e.grants {
            open.insert((g.lock.clone(), g.token), g.worker.clone());
        }
        for r in &e.releases {
            open.remove(&(r.lock.clone(), r.token));
        }
        let mut by_partition: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        for ((p, token), worker) in open {
            by_partition.entry(p).or_default().push((worker, token));
        }
        by_partition
    })
}

/// Waits until the reports show every partition owned by exactly the member `plan` names
/// for it (`plan` of the members that should be in the group), and returns how long it took.
async fn settled(
    history: &History,
    partitioner: &ZkPartitioner,
    members: &[&str],
    what: &str,
) -> Duration {
    let want: BTreeMap<String, String> = partitioner.plan(members);
    let started = Instant::now();
    let bound = scaled(SESSION_TIMEOUT + Duration::from_secs(20));
    loop {
        let open = open_grants(history);
        let owners: BTreeMap<String, String> = open
            .iter()
            .filter(|(_, o)| o.len() == 1)
            .map(|(p, o)| (p.clone(), o[0].0.clone()))
            .collect();
        if owners == want && open.values().all(|o| o.len() == 1) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < bound,
            "{what}: not settled in {bound:?}; open grants {open:?}"
        );
        let changed = history.wait_until({
            let before = history.read(|e| e.grants.len() + e.releases.len());
            move |e| e.grants.len() + e.releases.len() != before
        });
        let _ = tokio::time::timeout(Duration::from_millis(200), changed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_members_never_share_a_partition_through_joins_leaves_a_freeze_and_an_expiry() {
    let zk = Zk::start("partition-six").await;
    let raw = zk.raw().await;
    for p in partitions() {
        raw.mkdir(&format!("{OPS}/{p}"), &PERSISTENT).await.unwrap();
        raw.mkdir(&format!("{COUNTERS}/{p}"), &PERSISTENT)
            .await
            .unwrap();
        raw.set_data(&format!("{COUNTERS}/{p}"), b"0", None)
            .await
            .unwrap();
    }
    let history = Arc::new(History::new());
    let observer = zk.session().await;
    let partitioner = ZkPartitioner::new(&observer, ROOT, partitions()).unwrap();
    let start_local = |id: &str| {
        let (history, id) = (history.clone(), id.to_owned());
        let options = options(&zk.connect);
        async move {
            let session = Session::connect(options).await.unwrap();
            let (stop, stopped) = watch::channel(false);
            let task = tokio::spawn(member_life(
                session.clone(),
                id.clone(),
                Sink::Local(history),
                true,
                stopped,
            ));
            Local {
                id,
                stop,
                task,
                session,
            }
        }
    };
    let mut locals = Vec::new();
    for i in 0..5 {
        locals.push(start_local(&format!("m{i}")).await);
    }
    // The sixth member in a process of its own, which the test can freeze.
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, format!("{}|c5", zk.connect))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let child_stdin = child.stdin.take().unwrap();
    let reader = {
        let history = history.clone();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(at) = line.find("EVT ") {
                    parse_event(&line[at..], &history);
                }
            }
        })
    };
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig}");
    };
    let mut figures = Vec::new();
    let took = settled(
        &history,
        &partitioner,
        &["c5", "m0", "m1", "m2", "m3", "m4"],
        "six members settled",
    )
    .await;
    figures.push(format!("6 members settled in {took:?}"));

    // A seventh joins: it moves a bounded share, and the owners follow the plan.
    let six = partitioner.plan(&["c5", "m0", "m1", "m2", "m3", "m4"]);
    let seven_members = ["c5", "m0", "m1", "m2", "m3", "m4", "m6"];
    let seven = partitioner.plan(&seven_members);
    let moved = six.iter().filter(|(p, m)| seven[*p] != **m).count();
    assert!(
        moved <= 2 * 64usize.div_ceil(7),
        "a join moved {moved} of 64"
    );
    locals.push(start_local("m6").await);
    let took = settled(&history, &partitioner, &seven_members, "m6 joined").await;
    figures.push(format!(
        "a join moved {moved} partitions, settled in {took:?}"
    ));

    // One leaves.
    let m0 = locals.remove(0);
    m0.stop.send_replace(true);
    within("m0 left", 30, m0.task).await.unwrap();
    let six_members = ["c5", "m1", "m2", "m3", "m4", "m6"];
    let took = settled(&history, &partitioner, &six_members, "m0 left").await;
    figures.push(format!("a leave settled in {took:?}"));

    // The child freezes past its session timeout: the others own its share again within a
    // session timeout plus a rebalance, while it still believes it owns it.
    let frozen_at = Instant::now();
    signal("-STOP");
    let five_members = ["m1", "m2", "m3", "m4", "m6"];
    let want = partitioner.plan(&five_members);
    let bound = scaled(SESSION_TIMEOUT + Duration::from_secs(20));
    within(
        "the frozen child's share owned again",
        bound.as_secs() + 1,
        async {
            loop {
                let open = open_grants(&history);
                let by_others: BTreeMap<String, String> = open
                    .iter()
                    .filter_map(|(p, o)| {
                        o.iter()
                            .find(|(w, _)| w != "c5")
                            .map(|(w, _)| (p.clone(), w.clone()))
                    })
                    .collect();
                if by_others == want {
                    return;
                }
                let before = history.read(|e| e.grants.len());
                let _ = tokio::time::timeout(
                    Duration::from_millis(200),
                    history.wait_until(move |e| e.grants.len() != before),
                )
                .await;
            }
        },
    )
    .await;
    let reowned = frozen_at.elapsed();
    figures.push(format!(
        "the frozen member's share owned again {reowned:?} after the freeze (session timeout {SESSION_TIMEOUT:?})"
    ));
    // Woken: it writes at once to what it believed it owned; the store refuses it, and it
    // takes a share again in its new session.
    let refused_before = history.read(|e| {
        e.writes
            .iter()
            .filter(|w| w.worker == "c5" && matches!(w.outcome, Outcome::Refused(_)))
            .count()
    });
    signal("-CONT");
    within("the woken member's stale write refused", 30, {
        let history = history.clone();
        async move {
            history
                .wait_until(move |e| {
                    e.writes
                        .iter()
                        .filter(|w| w.worker == "c5" && matches!(w.outcome, Outcome::Refused(_)))
                        .count()
                        > refused_before
                })
                .await
        }
    })
    .await;
    let took = settled(
        &history,
        &partitioner,
        &six_members,
        "the woken member back",
    )
    .await;
    figures.push(format!("the woken member back, settled in {took:?}"));

    // A member's session expires: its share moves and comes back when it is made again.
    let m1 = &locals[0];
    let before: Vec<(String, u64)> = open_grants(&history)
        .into_iter()
        .flat_map(|(p, o)| {
            o.into_iter()
                .filter(|(w, _)| *w == m1.id)
                .map(move |(_, t)| (p.clone(), t))
        })
        .collect();
    assert!(!before.is_empty(), "m1 owned a share");
    let info = m1.session.client().await.unwrap().session().clone();
    let expired_at = Instant::now();
    expire_session(&zk.connect, &info).await.unwrap();
    // Its grants of the old session are over (reported given back) before it settles again.
    within("m1's old grants reported over", 30, {
        let history = history.clone();
        async move {
            history
                .wait_until(move |e| {
                    before
                        .iter()
                        .all(|(p, t)| e.releases.iter().any(|r| r.lock == *p && r.token == *t))
                })
                .await
        }
    })
    .await;
    let took = settled(&history, &partitioner, &six_members, "m1 after its expiry").await;
    figures.push(format!(
        "{}'s session expired: settled again in {:?}",
        m1.id,
        expired_at.elapsed().max(took)
    ));

    // Every partition has had an accepted write by its owner (the members write on).
    within("every partition written", 60, {
        let history = history.clone();
        async move {
            history
                .wait_until(|e| {
                    let written: BTreeSet<&str> = e
                        .writes
                        .iter()
                        .filter(|w| matches!(w.outcome, Outcome::Accepted))
                        .map(|w| w.lock.as_str())
                        .collect();
                    written.len() == 64
                })
                .await
        }
    })
    .await;

    // Everyone stops; then every partition is locked once more, at once.
    drop(child_stdin);
    let status = within("the child exits", 60, child.wait()).await.unwrap();
    assert!(status.success(), "child: {status}");
    reader.await.unwrap();
    for local in locals {
        local.stop.send_replace(true);
        within("a member stops", 30, local.task).await.unwrap();
    }
    let healed_at = Instant::now();
    let prober = zk.session().await;
    let space = ZkLockSpace::new(&prober, &format!("{ROOT}/locks")).unwrap();
    for p in partitions() {
        let guard = within("a probe", 30, space.lock(&p)).await.unwrap();
        history.probe(Probe {
            lock: p.clone(),
            healed_at,
            acquired_at: Some(Instant::now()),
        });
        guard.release().await.unwrap();
    }
    prober.close().await;
    for p in partitions() {
        let left = raw
            .list_children(&format!("{ROOT}/locks/{p}"))
            .await
            .unwrap_or_default();
        history.leftovers(&p, left);
        history.store(&p, read_store(&raw, &p).await);
    }
    let report = history.check(scaled(Duration::from_secs(30)));
    for v in &report.violations {
        println!("VIOLATION: {v}");
    }
    for f in &figures {
        println!("{f}");
    }
    println!(
        "partitioner: {} grants over 64 partitions, {} fenced writes ({} accepted, {} refused)",
        report.grants, report.writes, report.accepted, report.refused
    );
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert!(
        report.refused >= 1,
        "the woken member's stale write was refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_typed_error_and_leaves_no_node() {
    let zk = Zk::start("partition-bad").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let none: [&str; 0] = [];
    let err = ZkPartitioner::new(&session, ROOT, none).unwrap_err();
    assert!(matches!(err, Error::InvalidSet { .. }), "{err:?}");
    let err = ZkPartitioner::new(&session, ROOT, ["a", "b", "a"]).unwrap_err();
    assert!(matches!(err, Error::InvalidSet { .. }), "{err:?}");
    let err = ZkPartitioner::new(&session, ROOT, [""]).unwrap_err();
    assert!(matches!(err, Error::InvalidKey { .. }), "{err:?}");
    let err = ZkPartitioner::new(&session, "no-slash", ["a"]).unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }), "{err:?}");
    assert_eq!(raw.check_stat(ROOT).await.unwrap(), None, "nothing sent");

    // A member id another session holds: refused, with whose it is.
    let partitioner = ZkPartitioner::new(&session, ROOT, ["a", "b", "c"]).unwrap();
    let first = partitioner.join("w1").await.unwrap();
    let mine = within("w1 acquired", 30, first.acquired()).await.unwrap();
    assert_eq!(mine.owned().len(), 3, "alone: every partition");
    assert_eq!(mine.state(), PartitionState::Acquired);
    let other = zk.session().await;
    let second = ZkPartitioner::new(&other, ROOT, ["a", "b", "c"]).unwrap();
    match within("refused", 30, second.join("w1")).await {
        Err(Error::MemberIdTaken { session_id, .. }) => {
            assert_eq!(session_id, session.session_id().unwrap())
        }
        other => panic!("{:?}", other.map(|m| m.id().to_owned())),
    }
    // The same id twice in one session: refused too.
    assert!(matches!(
        partitioner.join("w1").await.map(|m| m.id().to_owned()),
        Err(Error::MemberIdTaken { .. })
    ));
    let party = raw.list_children(&format!("{ROOT}/party")).await.unwrap();
    assert_eq!(party, ["w1"], "no node of the refused joins");

    // Leaving gives everything back at once: another member takes it all.
    let w2 = second.join("w2").await.unwrap();
    first.leave().await.unwrap();
    let all = within("w2 takes everything", 30, async {
        let mut rx = w2.subscribe();
        let all = rx
            .wait_for(|a| a.state() == PartitionState::Acquired && a.owned().len() == 3)
            .await
            .unwrap()
            .clone();
        all
    })
    .await;
    assert_eq!(all.members(), ["w2"]);
    assert!(w2.owns("a") && w2.token("a").is_some());
    w2.leave().await.unwrap();
    assert!(raw
        .list_children(&format!("{ROOT}/party"))
        .await
        .unwrap_or_default()
        .is_empty());
}

/// A partition's lock node deleted by someone else while its member lives: the member stops
/// owning it, a fenced write prepared before the delete (or asked for after it) is refused and
/// changes nothing, and the member takes the partition again with a larger token; the other
/// partition's lock is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitions_lock_deleted_behind_a_live_member_is_refused_then_retaken() {
    let zk = Zk::start("partition-deleted").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    raw.create("/data", b"0", &PERSISTENT).await.unwrap();
    let partitioner = ZkPartitioner::new(&session, ROOT, ["a", "b"]).unwrap();
    let member = partitioner.join("w1").await.unwrap();
    within("w1 acquired", 30, member.acquired()).await.unwrap();
    let (before_a, before_b) = (member.token("a").unwrap(), member.token("b").unwrap());
    let client = session.client().await.unwrap();

    let dir = format!("{ROOT}/locks/a");
    let nodes = support::contenders(&raw, &dir).await;
    assert_eq!(nodes.len(), 1, "one lock node for a: {nodes:?}");
    let b_nodes = support::contenders(&raw, &format!("{ROOT}/locks/b")).await;
    let mut prepared = member.fenced_write("a", &client).unwrap();
    assert_eq!(prepared.token(), before_a);
    prepared.add_set_data("/data", b"stale", None).unwrap();
    raw.delete(&format!("{dir}/{}", nodes[0]), None)
        .await
        .unwrap();

    // The prepared write: refused by the server's check, nothing changed.
    let err = within("prepared write", 30, prepared.commit())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err:?}");
    assert_eq!(raw.get_data("/data").await.unwrap().0, b"0");

    // Taken again, with a larger token; b untouched.
    let mut rx = member.subscribe();
    let started = Instant::now();
    let again = within("a retaken", 30, async {
        rx.wait_for(|a| a.owned().get("a").is_some_and(|t| *t > before_a))
            .await
            .unwrap()
            .owned()["a"]
    })
    .await;
    let retaken_in = started.elapsed();
    eprintln!("a retaken in {retaken_in:?} with token {again} (was {before_a})");
    assert!(member.owns("a"));
    assert_eq!(member.token("b"), Some(before_b), "b's grant untouched");
    assert_eq!(
        support::contenders(&raw, &format!("{ROOT}/locks/b")).await,
        b_nodes
    );
    let mut write = member.fenced_write("a", &client).unwrap();
    assert_eq!(write.token(), again, "the write is fenced by the new grant");
    write.add_set_data("/data", b"fresh", None).unwrap();
    within("fresh write", 30, write.commit()).await.unwrap();
    assert_eq!(raw.get_data("/data").await.unwrap().0, b"fresh");
    member.leave().await.unwrap();
}
