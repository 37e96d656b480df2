//! A hot lock: hundreds of waiters on one ZkMutex. They join the queue by name, not by
//! listing it (the cost of an enqueue does not grow with the depth), one release wakes one
//! waiter, grants follow the queue's order, and a node no probe can name (a peer's protected
//! name) or a cancelled waiter in the middle changes none of that.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use support::{events, wait_children, within, Zk};
use zk_recipes::{FencingToken, ZkMutex};
use zookeeper_client as zkc;

const ROOT: &str = "/locks/hot";

/// Spawns `n` waiters on `mutex`, each holding once: it checks that nobody else holds, notes
/// its token in `grants` and releases.
fn spawn_waiters(
    mutex: &Arc<ZkMutex>,
    n: usize,
    inside: &Arc<AtomicUsize>,
    grants: &Arc<Mutex<Vec<FencingToken>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let (mutex, inside, grants) = (mutex.clone(), inside.clone(), grants.clone());
            tokio::spawn(async move {
                let guard = mutex.lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                grants.lock().unwrap().push(guard.token());
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            })
        })
        .collect()
}

/// A holder holding the lock on a session of its own, and the waiters' session and mutex.
struct Bed {
    holder_session: zk_recipes::Session,
    held: zk_recipes::ZkMutexGuard,
    session: zk_recipes::Session,
    mutex: Arc<ZkMutex>,
    inside: Arc<AtomicUsize>,
    grants: Arc<Mutex<Vec<FencingToken>>>,
}

impl Bed {
    async fn holding(zk: &Zk) -> Bed {
        let holder_session = zk.session().await;
        let held = ZkMutex::new(&holder_session, ROOT)
            .unwrap()
            .lock()
            .await
            .unwrap();
        let session = zk.session().await;
        let mutex = Arc::new(ZkMutex::new(&session, ROOT).unwrap());
        Bed {
            holder_session,
            held,
            session,
            mutex,
            inside: Arc::default(),
            grants: Arc::default(),
        }
    }
}

async fn join_all(what: &str, tasks: Vec<tokio::task::JoinHandle<()>>) {
    within(what, 120, async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
}

/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn five_hundred_waiters_join_by_name_and_each_release_wakes_one() {
    support::counting_events(five_hundred_waiters_body());
}

async fn five_hundred_waiters_body() {
    let zk = Zk::start("hot-lock").await;
    let counter = events();
    let raw = zk.raw().await;
    let Bed {
        holder_session,
        held,
        session,
        mutex,
        inside,
        grants,
    } = Bed::holding(&zk).await;
    let waiters = 500;
    let listed_before = counter.get("listed children");
    let tasks = spawn_waiters(&mutex, waiters, &inside, &grants);
    wait_children(&raw, ROOT, waiters + 1).await;
    // Every waiter watches its node ahead once queued: the server holds a watch for each.
    counter.wait_for("watching", waiters).await;
    let listed = counter.get("listed children") - listed_before;
    // Listing the queue on every enqueue would return about 500 * 500 / 2 = 125,000 names.
    // Only an enqueue that met a queue seen short lists in its burst; others list only where
    // no plain node is near theirs.
    assert!(
        listed <= 64 * 65,
        "{listed} names listed by 500 enqueues (one listing each would be about 125,000)"
    );
    let (fired, relisted, listed) = (
        counter.get("watch fired"),
        counter.get("listing again"),
        counter.get("listed children"),
    );
    held.release().await.unwrap();
    join_all("the queue drained", tasks).await;
    assert_eq!(
        counter.get("watch fired") - fired,
        waiters,
        "one wake-up per release"
    );
    assert_eq!(counter.get("listing again") - relisted, 0, "re-listings");
    assert_eq!(
        counter.get("listed children") - listed,
        0,
        "names listed while the queue drained"
    );
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), waiters);
    assert!(
        grants.windows(2).all(|w| w[0] < w[1]),
        "grants follow the queue's order"
    );
    session.close().await;
    holder_session.close().await;
}

/// A node with a protected name (Curator's `_c_{uuid}-lock-NNNNNNNNNN`) in the middle of a
/// deep queue cannot be found by name; the waiter behind it must not hold while it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_node_in_a_deep_queue_is_not_stepped_over() {
    let zk = Zk::start("hot-lock-peer").await;
    let raw = zk.raw().await;
    let Bed {
        holder_session,
        held,
        session,
        mutex,
        inside,
        grants,
    } = Bed::holding(&zk).await;
    let ahead = 100;
    let tasks = spawn_waiters(&mutex, ahead, &inside, &grants);
    wait_children(&raw, ROOT, ahead + 1).await;
    // The peer's node, as Curator names it, behind the hundred.
    let peer = zk.raw().await;
    let prefix = format!("{ROOT}/_c_01234567-89ab-cdef-0123-456789abcdef-lock-");
    let (_, peer_sequence) = peer
        .create(
            &prefix,
            b"peer",
            &zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let peer_node = format!("{prefix}{peer_sequence}");
    // Our waiter right behind it.
    let mut behind = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock().await.unwrap() })
    };
    wait_children(&raw, ROOT, ahead + 3).await;
    held.release().await.unwrap();
    join_all("the hundred ahead", tasks).await;
    // The peer's node is now the first: it holds, as Curator would see it. Ours must wait.
    // (A bounded wait for what must not happen.)
    let early = tokio::time::timeout(
        zk_testcontainers::scaled(std::time::Duration::from_secs(2)),
        &mut behind,
    )
    .await;
    assert!(
        early.is_err(),
        "granted while the peer's node ahead of it held the lock"
    );
    peer.delete(&peer_node, None).await.unwrap();
    let guard = within("granted once the peer released", 30, behind)
        .await
        .unwrap();
    let grants = grants.lock().unwrap().clone();
    assert!(guard.token() > *grants.last().unwrap());
    guard.release().await.unwrap();
    session.close().await;
    holder_session.close().await;
}

/// Cancelled waiters in the middle of a deep queue: the ones behind step over their gaps by
/// name, and every remaining waiter is granted once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_in_a_deep_queue_are_stepped_over() {
    let zk = Zk::start("hot-lock-cancel").await;
    let raw = zk.raw().await;
    let Bed {
        holder_session,
        held,
        session,
        mutex,
        inside,
        grants,
    } = Bed::holding(&zk).await;
    let waiters = 300;
    let mut tasks = spawn_waiters(&mutex, waiters, &inside, &grants);
    wait_children(&raw, ROOT, waiters + 1).await;
    // Cancel runs of one, two and three waiters along the queue, and one of ten (longer than
    // a probe looks): their nodes are deleted in the background.
    let mut kept = Vec::new();
    let mut cancelled = 0;
    for (i, task) in tasks.drain(..).enumerate() {
        if matches!(i % 30, 1 | 10 | 11 | 20 | 21 | 22) || (150..160).contains(&i) {
            task.abort();
            cancelled += 1;
        } else {
            kept.push(task);
        }
    }
    wait_children(&raw, ROOT, waiters - cancelled + 1).await;
    held.release().await.unwrap();
    join_all("the rest of the queue", kept).await;
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), waiters - cancelled);
    assert!(grants.windows(2).all(|w| w[0] < w[1]), "grants in order");
    session.close().await;
    holder_session.close().await;
}
