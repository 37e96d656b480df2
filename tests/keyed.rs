//! `ZkLockSpace` against a real ZooKeeper: a lock per key, mutual exclusion and growing tokens
//! over many keys at once, tokens that keep growing when the server reaps a key's directory
//! and it is made again, a directory reaped at the worst moment, nothing left once idle, bad
//! keys, and a `ZkMutex` root where a key should be.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{fast_reaper_server, wait_deleted, within, Zk};
use zk_recipes::{
    Error, FencingToken, RootKind, Session, SessionOptions, ZkLockSpace, ZkLockSpaceGuard, ZkMutex,
};
use zk_testcontainers::scaled;

/// Keys of the many-keys test (default 1,000), each with 4 contenders.
const KEYS_VAR: &str = "ZK_KEYED_KEYS";

/// Per key: whether someone is inside, and the tokens granted, in grant order.
#[derive(Default)]
struct Ledger {
    inside: bool,
    tokens: Vec<FencingToken>,
    overlaps: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_keys_at_once_each_one_holder_at_a_time_and_growing_tokens() {
    let zk = Zk::start("keyed-many").await;
    let keys: usize = std::env::var(KEYS_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(zk.session().await);
    }
    let ledgers: Arc<Vec<Mutex<Ledger>>> = Arc::new((0..keys).map(|_| Mutex::default()).collect());
    let mut tasks = Vec::new();
    for session in &sessions {
        let space = Arc::new(ZkLockSpace::new(session, "/locks/orders").unwrap());
        for k in 0..keys {
            let (space, ledgers) = (space.clone(), ledgers.clone());
            tasks.push(tokio::spawn(async move {
                let key = format!("order-{k}");
                for _ in 0..2 {
                    let guard = space.lock(&key).await.unwrap();
                    {
                        let mut ledger = ledgers[k].lock().unwrap();
                        if ledger.inside {
                            ledger.overlaps += 1;
                        }
                        ledger.inside = true;
                        ledger.tokens.push(guard.token());
                    }
                    tokio::task::yield_now().await;
                    ledgers[k].lock().unwrap().inside = false;
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    within("every contender's rounds", 120, async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    for (k, ledger) in ledgers.iter().enumerate() {
        let ledger = ledger.lock().unwrap();
        assert_eq!(ledger.overlaps, 0, "order-{k}: two holders at once");
        assert_eq!(ledger.tokens.len(), 8, "order-{k}: 4 contenders x 2 rounds");
        assert!(
            ledger.tokens.windows(2).all(|w| w[0] < w[1]),
            "order-{k}: tokens not strictly growing in grant order: {:?}",
            ledger.tokens
        );
    }
    for session in sessions {
        session.close().await;
    }
}

/// The sequence of a reaped and re-created directory starts again at 0 (Curator's tokens
/// repeat there); the zxid token keeps growing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_growing_when_the_directory_is_reaped_and_made_again() {
    let Some((server, raw)) = fast_reaper_server().await else {
        return;
    };
    let session = Session::connect(SessionOptions::new(server.connect_string()))
        .await
        .unwrap();
    let space = ZkLockSpace::new(&session, "/locks/accounts").unwrap();
    let dir = space.key_path("acct-7").unwrap();
    let mut tokens = Vec::new();
    let mut dir_czxids = Vec::new();
    for _ in 0..6 {
        let guard = space.lock("acct-7").await.unwrap();
        let name = guard.path().rsplit('/').next().unwrap().to_owned();
        assert!(
            name.starts_with("_c_") && name.ends_with("-lock-0000000000"),
            "a fresh directory: its sequence restarts, the name unique by its uuid: {name}"
        );
        let (_, stat) = raw.get_data(&dir).await.unwrap();
        dir_czxids.push(stat.czxid);
        tokens.push(guard.token());
        assert_eq!(
            guard.token().as_i64(),
            guard.czxid(),
            "the token is the czxid"
        );
        guard.release().await.unwrap();
        wait_deleted(&raw, &dir).await;
    }
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens went back: {tokens:?}"
    );
    assert!(
        dir_czxids.windows(2).all(|w| w[0] < w[1]),
        "the directory was not made again each time: {dir_czxids:?}"
    );
    session.close().await;
}

/// A directory the client believes is there (it locked the key a moment ago) but that is gone:
/// the contender's create fails, the directory is made again and the lock granted, with a
/// larger token. And with another client deleting the empty directory as fast as it can while
/// the key is locked again and again, every acquisition still succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_reaped_at_the_worst_moment_costs_a_retry_not_an_error() {
    let zk = Zk::start("keyed-reaped").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let space = ZkLockSpace::new(&session, "/locks/race").unwrap();
    let dir = space.key_path("k").unwrap();
    let first = space.lock("k").await.unwrap();
    let before = first.token();
    first.release().await.unwrap();
    // "Reaped" behind the client's back, after it noted the key as known.
    raw.delete(&dir, None).await.unwrap();
    let again = within("lock after the directory vanished", 20, space.lock("k"))
        .await
        .unwrap();
    assert!(again.token() > before);
    again.release().await.unwrap();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reaper = {
        let (stop, dir) = (stop.clone(), dir.clone());
        let raw = zk.raw().await;
        tokio::spawn(async move {
            let mut deleted = 0u32;
            // Bounded: at most 100,000 attempts, until told to stop.
            for _ in 0..100_000 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                if raw.delete(&dir, None).await.is_ok() {
                    deleted += 1;
                }
            }
            deleted
        })
    };
    let mut last = FencingToken::new(0);
    for _ in 0..100 {
        let guard = within("lock under a hostile reaper", 20, space.lock("k"))
            .await
            .unwrap();
        assert!(guard.token() > last);
        last = guard.token();
        guard.release().await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let deleted = reaper.await.unwrap();
    assert!(deleted > 0, "the deleter never deleted the directory");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_left_once_the_keys_are_idle() {
    let Some((server, raw)) = fast_reaper_server().await else {
        return;
    };
    let session = Session::connect(SessionOptions::new(server.connect_string()))
        .await
        .unwrap();
    let space = ZkLockSpace::new(&session, "/locks/products").unwrap();
    for p in 0..200 {
        let guard = space.lock(&format!("product:{p}")).await.unwrap();
        guard.release().await.unwrap();
    }
    // A cancelled acquisition (a waiter behind a holder) leaves nothing either.
    let holder = space.lock("product:busy").await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(50), space.lock("product:busy")).await;
    assert!(waiting.is_err(), "the key is held");
    holder.release().await.unwrap();
    within("the reaper to empty the space", 30, async {
        loop {
            let (children, _, watcher) =
                raw.get_and_watch_children("/locks/products").await.unwrap();
            // Only the space's mark stays (one path, one kind): no key's directory.
            if children == [zk_recipes::layout::ANCHOR] {
                return;
            }
            tokio::time::timeout(scaled(Duration::from_millis(500)), watcher.changed())
                .await
                .ok();
        }
    })
    .await;
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_keys_are_encoded_and_bad_ones_refused_typed_leaving_nothing() {
    let zk = Zk::start("keyed-keys").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let space = ZkLockSpace::new(&session, "/locks/odd").unwrap();
    let odd = [
        ("a/b", "a%2Fb"),
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("nul\0here", "nul%00here"),
        ("line\nbreak", "line%0Abreak"),
        ("100%", "100%25"),
        ("ana@example.com", "ana@example.com"),
        ("~zk-recipes-anchor", "%7Ezk-recipes-anchor"),
    ];
    let mut held = HashMap::new();
    for (key, name) in odd {
        let guard = space.lock(key).await.unwrap();
        assert_eq!(guard.path().rsplit('/').nth(1), Some(name), "{key:?}");
        assert_eq!(ZkLockSpace::key_of(name).as_deref(), Some(key));
        held.insert(key, guard);
    }
    let mut listed = raw.list_children("/locks/odd").await.unwrap();
    listed.sort();
    // The keys' directories, and the space's own mark, which no key names.
    let mut expected: Vec<&str> = odd.iter().map(|(_, n)| *n).collect();
    expected.push(zk_recipes::layout::ANCHOR);
    expected.sort();
    assert_eq!(listed, expected);
    for (_, guard) in held {
        guard.release().await.unwrap();
    }
    for bad in [String::new(), "k".repeat(1025)] {
        let err = space.lock(&bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidKey { .. }), "{err}");
        assert!(!err.is_retryable());
        let err = space.try_lock(&bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidKey { .. }), "{err}");
    }
    let children = raw.list_children("/locks/odd").await.unwrap();
    for dir in children {
        let left = raw
            .list_children(&format!("/locks/odd/{dir}"))
            .await
            .unwrap_or_default();
        assert!(left.is_empty(), "{dir} keeps {left:?}");
    }
    session.close().await;
}

/// A `ZkMutex` on a key's directory hands out sequence numbers; the keyed lock refuses to mix
/// its zxids with them, and leaves no node behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_root_where_a_key_should_be_is_refused() {
    let zk = Zk::start("keyed-mutex-root").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let space = ZkLockSpace::new(&session, "/locks/mixed").unwrap();
    let mutex = ZkMutex::new(&session, &space.key_path("k").unwrap()).unwrap();
    mutex.lock().await.unwrap().release().await.unwrap();
    let err = space.lock("k").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsuitableRoot {
                kind: RootKind::AnchoredKey,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        support::contenders(&raw, "/locks/mixed/k").await,
        Vec::<String>::new()
    );
    // A try fails the same way.
    assert!(space.try_lock("k").await.is_err());
    session.close().await;
}

/// A key no one holds is taken in one burst (its directory and node made in one transaction,
/// the children listed): no second request. A key with a holder is still queued behind it. Counts the library's events, so it runs on a
/// runtime of its own (`support::counting_events`).
#[test]
fn a_free_key_is_taken_in_one_burst_and_a_held_one_still_queues() {
    support::counting_events(a_free_key_is_taken_in_one_burst_body());
}

async fn a_free_key_is_taken_in_one_burst_body() {
    let zk = Zk::start("keyed-burst").await;
    let counter = support::events();
    let (a, b) = (zk.session().await, zk.session().await);
    let space_a = ZkLockSpace::new(&a, "/locks/burst").unwrap();
    let space_b = ZkLockSpace::new(&b, "/locks/burst").unwrap();
    let asked = [
        "listed",
        "the transaction's create came without its stat; reading it",
        "watching",
    ];
    let before: Vec<usize> = asked.iter().map(|e| counter.get(e)).collect();
    let mut guards = Vec::new();
    for i in 0..20 {
        guards.push(space_a.lock(&format!("order-{i}")).await.unwrap());
    }
    let after: Vec<usize> = asked.iter().map(|e| counter.get(e)).collect();
    let n: Vec<usize> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    println!("20 free keys: {n:?} of {asked:?}");
    assert_eq!(n[0], 20, "one listing per key, in its burst");
    assert_eq!(n[1], 0, "stats read after the transaction");
    assert_eq!(n[2], 0, "watches for free keys");
    // Each token is its node's creation zxid, however the server answered the transaction.
    let raw = zk.raw().await;
    tokens_are_czxids(&raw, &guards, "/locks/burst/order").await;

    // Held: the other session's contender waits behind the holder, and gets it on release.
    let waiting = tokio::spawn(async move {
        let guard = space_b.lock("order-0").await.unwrap();
        let token = guard.token();
        guard.release().await.unwrap();
        token
    });
    support::wait_children(&raw, "/locks/burst/order-0", 2).await;
    assert!(!waiting.is_finished());
    let held = guards.remove(0);
    let first = held.token();
    held.release().await.unwrap();
    let second = within("the waiter's grant", 30, waiting).await.unwrap();
    assert!(second > first, "{second:?} after {first:?}");
    for guard in guards {
        guard.release().await.unwrap();
    }
    a.close().await;
    b.close().await;
}

/// Keys a space does not remember cost one burst once it has learnt their sort: a new space
/// value finds 20 directories someone else holds (a forgotten key's case) and pays a second
/// burst for the first only; then 20 keys nobody ever locked, of which the first two pay one
/// (its guess, settled on "there", turns on the second contrary key). Counts the library's
/// events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn keys_a_space_does_not_remember_cost_one_burst_once_it_has_learnt_their_sort() {
    support::counting_events(keys_a_space_does_not_remember_body());
}

async fn keys_a_space_does_not_remember_body() {
    let zk = Zk::start("keyed-unknown").await;
    let counter = support::events();
    let (a, b) = (zk.session().await, zk.session().await);
    let raw = zk.raw().await;
    // Held by another session, so that no directory can be reaped under the test.
    let holder = ZkLockSpace::new(&a, "/locks/unknown").unwrap();
    let mut held = Vec::new();
    for i in 0..20 {
        held.push(holder.lock(&format!("hot-{i}")).await.unwrap());
    }
    let asked = [
        "listed",
        "the key's directory is there; creating in it",
        "the key's directory is gone; creating it again",
    ];
    let count = || asked.map(|e| counter.get(e));
    let since = |before: [usize; 3]| {
        let now = count();
        [0, 1, 2].map(|i| now[i] - before[i])
    };
    let forgetful = ZkLockSpace::new(&b, "/locks/unknown").unwrap();
    let before = count();
    for i in 0..20 {
        let key = format!("hot-{i}");
        assert!(forgetful.try_lock(&key).await.unwrap().is_none(), "{key}");
    }
    let n = since(before);
    println!("20 keys held elsewhere: {n:?} of {asked:?}");
    assert_eq!(n[0], 20, "one listing per key");
    assert_eq!(n[1], 1, "a second burst for the first key only");
    assert_eq!(n[2], 0, "no directory taken to be there was missing");
    for i in 0..20 {
        let dir = format!("/locks/unknown/hot-{i}");
        assert_eq!(
            raw.list_children(&dir).await.unwrap().len(),
            1,
            "{dir}: the tries left nothing"
        );
    }

    let before = count();
    let mut guards = Vec::new();
    for i in 0..20 {
        guards.push(forgetful.lock(&format!("new-{i}")).await.unwrap());
    }
    let n = since(before);
    println!("20 keys never seen: {n:?} of {asked:?}");
    assert_eq!(n[0], 20, "one listing per key");
    assert_eq!(n[1], 0, "no directory taken to be missing was there");
    assert_eq!(n[2], 2, "a second burst for the first two keys only");
    tokens_are_czxids(&raw, &guards, "/locks/unknown/new").await;
    for guard in guards.into_iter().chain(held) {
        guard.release().await.unwrap();
    }
    a.close().await;
    b.close().await;
}

/// Each guard `i` holds the one node in `{prefix}-{i}`, and its token is that node's creation
/// zxid (however the server answered the create).
async fn tokens_are_czxids(
    raw: &zookeeper_client::Client,
    guards: &[ZkLockSpaceGuard],
    prefix: &str,
) {
    for (i, guard) in guards.iter().enumerate() {
        let dir = format!("{prefix}-{i}");
        let children = raw.list_children(&dir).await.unwrap();
        let [node] = &children[..] else {
            panic!("{dir}: {children:?}");
        };
        let stat = raw
            .check_stat(&format!("{dir}/{node}"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            guard.token(),
            FencingToken::new(stat.czxid as u64),
            "{dir}/{node}"
        );
    }
}

/// A try on a held key answers `None` at once and leaves no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_on_a_held_key_says_none_and_leaves_no_node() {
    let zk = Zk::start("keyed-try").await;
    let (a, b) = (zk.session().await, zk.session().await);
    let raw = zk.raw().await;
    let space_a = ZkLockSpace::new(&a, "/locks/try").unwrap();
    let space_b = ZkLockSpace::new(&b, "/locks/try").unwrap();
    let held = space_a.lock("x").await.unwrap();
    assert!(space_b.try_lock("x").await.unwrap().is_none());
    support::wait_children(&raw, "/locks/try/x", 1).await;
    held.release().await.unwrap();
    let next = space_b.try_lock("x").await.unwrap().expect("free now");
    assert!(next.token() > FencingToken::new(0));
    next.release().await.unwrap();
    a.close().await;
    b.close().await;
}

/// A release storm: 1,000 holders of different keys on one session whose session expires at
/// once. Every `lost()` resolves (with `SessionExpired`), every release answers in bounded
/// time, nothing hangs, and the keys can be locked again on the session's next ZooKeeper
/// session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_holders_on_one_expiring_session_all_hear_of_it() {
    let zk = Zk::start("keyed-storm").await;
    let session = zk.session().await;
    let space = Arc::new(ZkLockSpace::new(&session, "/locks/storm").unwrap());
    let mut guards = Vec::new();
    for k in 0..1000 {
        guards.push(space.lock(&format!("k{k}")).await.unwrap());
    }
    let first = guards[0].session_id();
    let info = session.client().await.unwrap().session().clone();
    let started = std::time::Instant::now();
    zk_testcontainers::expire_session(&zk.connect, &info)
        .await
        .unwrap();
    let losses = futures_all(guards.iter().map(|g| g.lost())).await;
    let heard = started.elapsed();
    assert!(
        losses
            .iter()
            .all(|r| *r == zk_recipes::LossReason::SessionExpired),
        "{:?}",
        losses
            .iter()
            .find(|r| **r != zk_recipes::LossReason::SessionExpired)
    );
    println!("1,000 holders heard of the expiry within {heard:?}");
    let released = within("1,000 releases after the expiry", 30, async {
        let mut errors = 0;
        for guard in guards {
            if guard.release().await.is_err() {
                errors += 1;
            }
        }
        errors
    })
    .await;
    assert_eq!(released, 1000, "every release says the session expired");
    let again = within("a key locked on the next session", 30, space.lock("k7"))
        .await
        .unwrap();
    assert_ne!(again.session_id(), first);
    again.release().await.unwrap();
    session.close().await;
}

/// Awaits every future in turn, all within one bound.
async fn futures_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    within("every lost() to resolve", 30, async {
        let mut out = Vec::with_capacity(set.len());
        for f in set {
            out.push(f.await);
        }
        out
    })
    .await
}
