//! ZkMutex against a real ZooKeeper: exclusion, token order, FIFO, no herd, cancellation.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use support::{contenders, events, wait_children, within, Zk};
use zk_recipes::{FencingToken, ZkMutex};

const ROOT: &str = "/locks/shared";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_contenders_never_overlap_and_tokens_increase() {
    let zk = Zk::start("exclusion").await;
    let workers = 16;
    let rounds = std::env::var("ZK_MUTEX_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let inside = Arc::new(AtomicUsize::new(0));
    let grants: Arc<Mutex<Vec<FencingToken>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let session = zk.session().await;
        let (inside, grants) = (inside.clone(), grants.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = ZkMutex::new(&session, ROOT).unwrap();
            for _ in 0..rounds {
                let guard = mutex.lock().await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                grants.lock().unwrap().push(guard.token());
                tokio::task::yield_now().await;
                assert_eq!(
                    inside.fetch_sub(1, Ordering::SeqCst),
                    1,
                    "two holders at once"
                );
                guard.release().await.unwrap();
            }
            session.close().await;
        }));
    }
    within("all acquisitions", 600, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), workers * rounds);
    assert!(
        grants.windows(2).all(|w| w[0] < w[1]),
        "tokens in grant order must strictly increase"
    );
    let raw = zk.raw().await;
    assert!(
        contenders(&raw, ROOT).await.is_empty(),
        "no lock node may remain"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_granted_in_the_order_they_enqueued() {
    let zk = Zk::start("fifo").await;
    let raw = zk.raw().await;
    let holder = zk.session().await;
    let first = ZkMutex::new(&holder, ROOT).unwrap();
    let guard = first.lock().await.unwrap();
    let order: Arc<Mutex<Vec<usize>>> = Arc::default();
    let waiters = 10;
    let mut tasks = Vec::new();
    for i in 0..waiters {
        let session = zk.session().await;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let mutex = ZkMutex::new(&session, ROOT).unwrap();
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        // Waiter i is enqueued once its node is there: the next one queues behind it.
        wait_children(&raw, ROOT, i + 2).await;
    }
    guard.release().await.unwrap();
    within("every waiter", 60, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), (0..waiters).collect::<Vec<_>>());
}

/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn each_release_wakes_exactly_one_of_fifty_waiters() {
    support::counting_events(each_release_wakes_exactly_one_of_fifty_waiters_body());
}

async fn each_release_wakes_exactly_one_of_fifty_waiters_body() {
    let zk = Zk::start("herd").await;
    let counter = events();
    let raw = zk.raw().await;
    let holder = zk.session().await;
    let first = ZkMutex::new(&holder, ROOT).unwrap();
    let guard = first.lock().await.unwrap();
    let waiters = 50;
    let session = zk.session().await; // many waiters may share a session; each has its own node
    let mutex = Arc::new(ZkMutex::new(&session, ROOT).unwrap());
    let mut tasks = Vec::new();
    for _ in 0..waiters {
        let mutex = mutex.clone();
        tasks.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            guard.release().await.unwrap();
        }));
    }
    wait_children(&raw, ROOT, waiters + 1).await;
    // Each waiter watches the node ahead of it once queued (its watch set before the holder
    // releases, so that every wake-up is a watch firing).
    counter.wait_for("watching", waiters).await;
    let (fired_before, relisted_before) =
        (counter.get("watch fired"), counter.get("listing again"));
    guard.release().await.unwrap();
    within("every waiter", 60, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    // 51 releases; all but the last wake exactly their successor, and nobody else.
    assert_eq!(
        counter.get("watch fired") - fired_before,
        waiters,
        "wake-ups for {} releases",
        waiters + 1
    );
    // Every release here is a head release: a woken waiter holds without listing again,
    // however far back it was when it enqueued.
    assert_eq!(
        counter.get("listing again") - relisted_before,
        0,
        "listings after wake-ups"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cancelled_acquisitions_leave_no_node_behind() {
    let zk = Zk::start("cancel").await;
    let raw = zk.raw().await;
    let cancelled = 1000;
    let session = zk.session().await;
    let mutex = Arc::new(ZkMutex::new(&session, ROOT).unwrap());
    // Real contenders keep the lock busy meanwhile, on sessions of their own.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..3 {
        let s = zk.session().await;
        let stop = stop.clone();
        workers.push(tokio::spawn(async move {
            let m = ZkMutex::new(&s, ROOT).unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let g = m.lock().await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                g.release().await.unwrap();
                n += 1;
            }
            s.close().await;
            n
        }));
    }
    let mut granted = 0;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..cancelled {
        let mutex = mutex.clone();
        let after = Duration::from_micros(rand::rng().random_range(0..15_000));
        tasks.spawn(async move {
            tokio::time::timeout(after, mutex.lock())
                .await
                .map(|g| g.unwrap())
        });
        if tasks.len() >= 50 {
            if let Some(Ok(Ok(guard))) = tasks.join_next().await {
                granted += 1;
                drop(guard); // dropping a guard releases in the background too
            }
        }
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(guard) = r.unwrap() {
            granted += 1;
            drop(guard);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut worked = 0;
    for w in workers {
        worked += w.await.unwrap();
    }
    println!(
        "{cancelled} acquisitions: {} cancelled, {granted} granted; {worked} worker cycles",
        cancelled - granted
    );
    assert!(
        cancelled - granted > cancelled / 2,
        "most acquisitions must really be cancelled"
    );
    // The background deletions drain; then the lock still works.
    wait_children(&raw, ROOT, 0).await;
    let guard = within("lock after cancellations", 10, mutex.lock())
        .await
        .unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_outside_any_runtime_releases_in_the_background() {
    let zk = Zk::start("drop-outside").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let mutex = Arc::new(ZkMutex::new(&session, ROOT).unwrap());
    let guard = mutex.lock().await.unwrap();
    // A plain thread with no tokio runtime drops it: no panic, and the node goes.
    std::thread::spawn(move || drop(guard))
        .join()
        .expect("dropping must not panic");
    wait_children(&raw, ROOT, 0).await;
    let again = within("lock after the drop", 10, mutex.lock())
        .await
        .unwrap();
    again.release().await.unwrap();
}
