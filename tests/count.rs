//! ZkSharedCount against a real ZooKeeper: no addition lost however many sessions add at once,
//! compare-and-set refusing a stale read, a missing count created with its seed, `changed`
//! waking on another session's write (and across a session expiry and a deletion), and typed
//! errors for data that is no count, an overflow, a refused ACL and a malformed path.

mod support;

use std::collections::BTreeSet;

use support::{events, within, Zk};
use zk_recipes::{Error, SessionState, ZkSharedCount};
use zk_testcontainers::expire_session;
use zookeeper_client as zkc;

const COUNT: &str = "/counters/jobs/done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn additions_from_many_sessions_at_once_are_none_of_them_lost() {
    let zk = Zk::start("count-adds").await;
    let (sessions, per_session, adds) = (5, 4, 10);
    let mut tasks = Vec::new();
    for _ in 0..sessions {
        let session = zk.session().await;
        for _ in 0..per_session {
            let count = ZkSharedCount::new(&session, COUNT, 100).unwrap();
            tasks.push(tokio::spawn(async move {
                let mut wrote = Vec::new();
                for _ in 0..adds {
                    wrote.push(count.add(1).await.unwrap().value());
                }
                wrote
            }));
        }
    }
    let mut written = BTreeSet::new();
    within("every addition", 120, async {
        for task in tasks {
            for value in task.await.unwrap() {
                assert!(written.insert(value), "{value} written twice");
            }
        }
    })
    .await;
    let total = sessions * per_session * adds;
    // Every addition wrote its own value: exactly 101..=100+total, none twice, none lost.
    assert_eq!(written, (101..=100 + total).collect::<BTreeSet<i32>>());
    let session = zk.session().await;
    let count = ZkSharedCount::new(&session, COUNT, 0).unwrap();
    assert_eq!(count.get().await.unwrap().value(), 100 + total);
}

#[tokio::test]
async fn a_missing_count_is_created_with_its_seed_as_curator_stores_it() {
    let zk = Zk::start("count-seed").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let count = ZkSharedCount::new(&session, COUNT, 258).unwrap();
    let first = count.get().await.unwrap();
    assert_eq!((first.value(), first.version()), (258, 0));
    // 4 big-endian bytes, as Curator's SharedCount writes them; parents made too.
    assert_eq!(raw.get_data(COUNT).await.unwrap().0, vec![0, 0, 1, 2]);
    // A second value on the same path with another seed reads what is there.
    let other = ZkSharedCount::new(&session, COUNT, 7).unwrap();
    assert_eq!(other.get().await.unwrap().value(), 258);
    let set = other.set(-5).await.unwrap();
    assert_eq!((set.value(), set.version()), (-5, 1));
    assert_eq!(raw.get_data(COUNT).await.unwrap().0, (-5i32).to_be_bytes());
}

#[tokio::test]
async fn try_set_writes_only_over_the_value_it_read() {
    let zk = Zk::start("count-cas").await;
    let (a, b) = (zk.session().await, zk.session().await);
    let (ours, theirs) = (
        ZkSharedCount::new(&a, COUNT, 0).unwrap(),
        ZkSharedCount::new(&b, COUNT, 0).unwrap(),
    );
    let read = ours.get().await.unwrap();
    theirs.set(3).await.unwrap();
    assert_eq!(ours.try_set(&read, 9).await.unwrap(), None, "stale read");
    let fresh = ours.get().await.unwrap();
    assert_eq!(fresh.value(), 3);
    let wrote = ours.try_set(&fresh, 9).await.unwrap().expect("fresh read");
    assert_eq!(wrote.value(), 9);
    assert_eq!(theirs.get().await.unwrap(), wrote);
}

/// Counts the library's events (to know the waiter waits), so it runs on a runtime of its own.
#[test]
fn changed_wakes_on_another_sessions_write_across_an_expiry_and_a_deletion() {
    support::counting_events(changed_body());
}

async fn changed_body() {
    let zk = Zk::start("count-changed").await;
    let counter = events();
    let waits = |n| counter.wait_for("waiting for the count to change", n);
    let raw = zk.raw().await;
    let (watching, writing) = (zk.session().await, zk.session().await);
    let count = std::sync::Arc::new(ZkSharedCount::new(&watching, COUNT, 0).unwrap());
    let writer = ZkSharedCount::new(&writing, COUNT, 0).unwrap();
    let start = count.get().await.unwrap();
    // Unchanged: it waits. Another session's write wakes it with the new value.
    let waiter = {
        let count = count.clone();
        tokio::spawn(async move { count.changed(&start).await })
    };
    waits(1).await;
    let wrote = writer.set(1).await.unwrap();
    let seen = within("the write seen", 30, waiter).await.unwrap().unwrap();
    assert_eq!(seen, wrote);
    // Already changed: it returns at once. The same value written again is a change too.
    assert_eq!(count.changed(&start).await.unwrap(), wrote);
    let again = writer.set(1).await.unwrap();
    assert_eq!(count.changed(&wrote).await.unwrap(), again);

    // The watching session expires while it waits: the wait goes on in the next session.
    let waiter = {
        let count = count.clone();
        tokio::spawn(async move { count.changed(&again).await })
    };
    waits(2).await;
    let info = watching.client().await.unwrap().session().clone();
    let mut states = watching.watch_state();
    expire_session(&zk.connect, &info).await.unwrap();
    within("a new session", 30, async {
        loop {
            match *states.borrow_and_update() {
                SessionState::Connected { session_id } if session_id != info.id().0 => break,
                _ => {}
            }
            states.changed().await.unwrap();
        }
    })
    .await;
    // It watches again on the new session.
    waits(3).await;
    assert!(!waiter.is_finished(), "an expiry is no change of the count");
    let wrote = writer.set(2).await.unwrap();
    let seen = within("the write after the expiry", 30, waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen, wrote);

    // Deleted: it waits until someone makes it again (here the writer's next read, with
    // its seed).
    let waiter = {
        let count = count.clone();
        tokio::spawn(async move { count.changed(&seen).await })
    };
    waits(4).await;
    // As an operator's `deleteall`: the count and its mark (one path, one kind).
    let anchor = format!("{COUNT}/{}", zk_recipes::layout::ANCHOR);
    let mut delete = raw.new_multi_writer();
    delete.add_delete(&anchor, None).unwrap();
    delete.add_delete(COUNT, None).unwrap();
    delete.commit().await.unwrap();
    waits(5).await;
    assert!(
        !waiter.is_finished(),
        "a deleted count is not made again by a waiter"
    );
    assert!(raw.check_stat(COUNT).await.unwrap().is_none());
    let made = writer.get().await.unwrap();
    let seen = within("the count made again", 30, waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((seen.value(), seen.version()), (0, 0));
    assert_eq!(seen, made);
    // Made again with its mark.
    let (mark, _) = raw.get_data(&anchor).await.unwrap();
    assert_eq!(mark, zk_recipes::layout::kind::RecipeKind::Count.mark());
}

#[tokio::test]
async fn data_that_is_no_count_an_overflow_and_a_refused_acl_are_typed_errors() {
    let zk = Zk::start("count-errors").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());

    raw.mkdir("/counters", &open).await.unwrap();
    raw.create("/counters/text", b"12345", &open).await.unwrap();
    let text = ZkSharedCount::new(&session, "/counters/text", 0).unwrap();
    let err = text.add(1).await.unwrap_err();
    assert!(matches!(err, Error::BadCount { .. }), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(raw.get_data("/counters/text").await.unwrap().0, b"12345");

    let full = ZkSharedCount::new(&session, "/counters/full", i32::MAX).unwrap();
    let err = full.add(1).await.unwrap_err();
    assert!(matches!(err, Error::BadCount { .. }), "{err}");
    assert_eq!(full.add(-1).await.unwrap().value(), i32::MAX - 1);

    let read_only = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_read());
    raw.create("/counters/frozen", &7i32.to_be_bytes(), &read_only)
        .await
        .unwrap();
    let frozen = ZkSharedCount::new(&session, "/counters/frozen", 0).unwrap();
    assert_eq!(frozen.get().await.unwrap().value(), 7);
    let err = frozen.add(1).await.unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");
    let err = frozen.set(1).await.unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");

    for bad in ["counters/relative", "/counters/", "/a//b", ""] {
        let err = ZkSharedCount::new(&session, bad, 0).unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
    }
    let long = format!("/{}", "x".repeat(2 << 20));
    let err = ZkSharedCount::new(&session, &long, 0).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
}
