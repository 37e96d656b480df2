//! ZkRwLock against a real ZooKeeper: shared readers, exclusive writers, queue order, wake-ups.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use support::{contenders, events, wait_children, within, Zk};
use zk_recipes::{FencingToken, ZkRwLock};

const ROOT: &str = "/locks/rw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_overlap_and_writers_hold_alone() {
    let zk = Zk::start("rw-mixed").await;
    let readers_in = Arc::new(AtomicUsize::new(0));
    let writer_in = Arc::new(AtomicBool::new(false));
    let max_readers = Arc::new(AtomicUsize::new(0));
    let writes: Arc<Mutex<Vec<FencingToken>>> = Arc::default();
    let mut tasks = Vec::new();
    for id in 0..8 {
        let session = zk.session().await;
        let (readers_in, writer_in, max_readers, writes) = (
            readers_in.clone(),
            writer_in.clone(),
            max_readers.clone(),
            writes.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let lock = ZkRwLock::new(&session, ROOT).unwrap();
            for round in 0..25 {
                if (id + round) % 4 == 0 {
                    let guard = lock.write().await.unwrap();
                    assert!(!writer_in.swap(true, Ordering::SeqCst), "two writers");
                    assert_eq!(
                        readers_in.load(Ordering::SeqCst),
                        0,
                        "a reader with the writer"
                    );
                    writes.lock().unwrap().push(guard.token());
                    tokio::task::yield_now().await;
                    writer_in.store(false, Ordering::SeqCst);
                    guard.release().await.unwrap();
                } else {
                    let guard = lock.read().await.unwrap();
                    let now = readers_in.fetch_add(1, Ordering::SeqCst) + 1;
                    max_readers.fetch_max(now, Ordering::SeqCst);
                    assert!(
                        !writer_in.load(Ordering::SeqCst),
                        "a reader with the writer"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    readers_in.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }
            session.close().await;
        }));
    }
    within("mixed workload", 180, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    let writes = writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 50);
    assert!(
        writes.windows(2).all(|w| w[0] < w[1]),
        "write tokens in grant order increase"
    );
    let max = max_readers.load(Ordering::SeqCst);
    println!("max concurrent readers: {max}");
    assert!(max > 1, "readers must overlap");
    assert!(contenders(&zk.raw().await, ROOT).await.is_empty());
}

/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn grants_follow_queue_order_and_a_writer_release_wakes_only_the_readers_it_held() {
    support::counting_events(
        grants_follow_queue_order_and_a_writer_release_wakes_only_the_readers_it_held_body(),
    );
}

async fn grants_follow_queue_order_and_a_writer_release_wakes_only_the_readers_it_held_body() {
    let zk = Zk::start("rw-order").await;
    let counter = events();
    let raw = zk.raw().await;
    let session = zk.session().await;
    let lock = Arc::new(ZkRwLock::new(&session, ROOT).unwrap());
    let first = lock.write().await.unwrap();
    let (granted_tx, mut granted) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    // Queue: W0 (holds) R1 R2 R3 W4 R5.
    let plan: [(&'static str, bool); 5] = [
        ("R1", false),
        ("R2", false),
        ("R3", false),
        ("W4", true),
        ("R5", false),
    ];
    let (go_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut tasks = Vec::new();
    for (i, (name, writer)) in plan.into_iter().enumerate() {
        let (lock, granted_tx) = (lock.clone(), granted_tx.clone());
        let mut go = go_tx.subscribe();
        tasks.push(tokio::spawn(async move {
            let guard = if writer {
                lock.write().await
            } else {
                lock.read().await
            }
            .unwrap();
            granted_tx.send(name).unwrap();
            // Hold until told, so the test can count who was woken by whom.
            let _ = go.recv().await;
            guard.release().await.unwrap();
        }));
        wait_children(&raw, ROOT, i + 2).await;
    }
    let fired = counter.get("watch fired");
    first.release().await.unwrap();
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(within("R1..R3 granted", 20, granted.recv()).await.unwrap());
    }
    order.sort();
    assert_eq!(
        order,
        ["R1", "R2", "R3"],
        "the readers behind the writer, together"
    );
    // Exactly the three readers the writer held back were woken; W4 and R5 were not.
    assert_eq!(counter.get("watch fired") - fired, 3);
    go_tx.send(()).unwrap();
    within("everyone", 30, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    drop(granted_tx);
    while let Some(name) = granted.recv().await {
        order.push(name);
    }
    assert_eq!(
        &order[3..],
        ["W4", "R5"],
        "the writer before the reader behind it"
    );
}

/// Only a contender known to be the head releases as one. The second of two readers is not
/// (the first is ahead of it): when it goes first, the writer behind it lists again and waits
/// for the first; the first one's release then lets the writer in without another listing.
///
/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn a_writer_behind_two_readers_waits_for_both_whichever_goes_first() {
    support::counting_events(
        a_writer_behind_two_readers_waits_for_both_whichever_goes_first_body(),
    );
}

async fn a_writer_behind_two_readers_waits_for_both_whichever_goes_first_body() {
    let zk = Zk::start("rw-head").await;
    let counter = events();
    let raw = zk.raw().await;
    let session = zk.session().await;
    let lock = Arc::new(ZkRwLock::new(&session, ROOT).unwrap());
    let first = lock.read().await.unwrap();
    let second = lock.read().await.unwrap();
    let listed = counter.get("listing again");
    let writer = tokio::spawn({
        let lock = lock.clone();
        async move {
            let guard = lock.write().await.unwrap();
            let token = guard.token();
            guard.release().await.unwrap();
            token
        }
    });
    wait_children(&raw, ROOT, 3).await;
    second.release().await.unwrap();
    counter.wait_for("listing again", listed + 1).await;
    assert!(first.is_held());
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    let first_token = first.token();
    first.release().await.unwrap();
    let writer_token = within("the writer", 20, writer).await.unwrap();
    assert!(writer_token > first_token);
    assert_eq!(
        counter.get("listing again"),
        listed + 1,
        "a head release lets the writer in without listing"
    );
    wait_children(&raw, ROOT, 0).await;
}
