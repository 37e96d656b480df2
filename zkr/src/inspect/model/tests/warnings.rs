//! The warnings an operator must act on, and the words they are made of.

use std::collections::HashMap;

use zk_recipes::layout::kind::RecipeKind;

use super::*;
use crate::inspect::model::warnings::article;

#[test]
fn curator_in_a_container_warns_that_it_is_unanchored() {
    let c = node(&format!("_c_{UUID}-lock-0000000000"), 0x30, "172.17.0.1", 5);
    let q = &queues(
        &dir("/curator", 1, vec![c]),
        None,
        &Sessions::default(),
        NOW,
    )[0];
    assert_eq!(
        (q.kind, q.libraries.as_slice()),
        ("mutex", &["curator"][..])
    );
    assert_eq!(q.contenders[0].owner.as_deref(), Some("172.17.0.1"));
    assert_eq!(kinds(q), ["unanchored-root"]);
}

#[test]
fn a_persistent_squatter_blocks_everyone() {
    let squatter = node("lock-0000000000", 0, "", 3600);
    let root = dir(
        "/locks/stuck",
        3,
        vec![anchor(), squatter, ours(2, 0x40, "w/1")],
    );
    let q = &queues(&root, None, &Sessions::default(), NOW)[0];
    assert_eq!(q.contenders[0].session, None);
    assert_eq!(q.contenders[0].role, "holder");
    assert_eq!(kinds(q), ["persistent-node"]);
    assert!(q.warnings[0].message.contains("waits forever"));
    assert_eq!(q.warnings[0].node.as_deref(), Some("lock-0000000000"));
}

#[test]
fn counters_near_their_end_and_used_up() {
    let near = dir(
        "/near",
        i32::MAX - 1000,
        vec![anchor(), ours(i64::from(i32::MAX) - 1001, 0x1, "a")],
    );
    let q = &queues(&near, None, &Sessions::default(), NOW)[0];
    assert_eq!(q.counter.left, 1000);
    assert_eq!(kinds(q), ["counter-near-end"]);
    assert!(q.warnings[0].message.starts_with("1000 tokens left"));
    let wrapped = dir(
        "/wrapped",
        i32::MAX,
        vec![anchor(), node("lock-2147483647", 0x2, "", 1)],
    );
    let q = &queues(&wrapped, None, &Sessions::default(), NOW)[0];
    assert_eq!(kinds(q), ["counter-used-up"]);
    assert_eq!(q.contenders[0].token, None);
}

#[test]
fn sessions_without_a_connection_are_flagged() {
    let mut sessions = Sessions {
        all_answered: true,
        connected: HashMap::from([(0x2, "zk1:2181".to_owned())]),
        tracked: Some(HashMap::from([(0x1, Some(NOW + 25_000)), (0x2, None)])),
        heard: HashMap::new(),
    };
    let root = dir(
        "/l",
        3,
        vec![
            anchor(),
            ours(0, 0x1, "gone-host/1"),
            ours(1, 0x2, "b"),
            ours(2, 0x3, "c"),
        ],
    );
    let q = &queues(&root, None, &sessions, NOW)[0];
    let states: Vec<_> = q.contenders.iter().map(|c| c.session_state).collect();
    use SessionState::*;
    assert_eq!(states, [Some(Disconnected), Some(Connected), Some(Gone)]);
    assert_eq!(q.contenders[0].session_expires_in_ms, Some(25_000));
    assert_eq!(kinds(q), ["session-disconnected", "session-gone"]);
    assert!(q.warnings[0].message.contains("in about 25s"));
    assert!(q.warnings[0]
        .message
        .contains("holding the lock for nobody"));
    // A server that did not answer: nobody can be called disconnected.
    sessions.all_answered = false;
    let q = &queues(&root, None, &sessions, NOW)[0];
    assert_eq!(q.contenders[0].session_state, None);
}

fn marked(mut d: Dir, kind: RecipeKind) -> Dir {
    d.anchor = Some(kind.mark());
    d
}

fn keyed(seq: i64, sid: i64, owner: &str) -> Child {
    node(
        &format!("_c_{UUID}-lock-{seq:010}"),
        sid,
        &format!("id={UUID}\nowner={owner}\n"),
        5,
    )
}

#[test]
fn an_anchor_in_a_lock_spaces_key_is_flagged_with_the_fix() {
    // The slip of an earlier version (an empty anchor), idle, and a ZkMutex holder in
    // another key taken the same way; a key in use beside them.
    let idle = dir("/shop/orders/order-1", 1, vec![anchor()]);
    let held = dir(
        "/shop/orders/order-2",
        2,
        vec![anchor(), ours(1, 0x51, "cron/7")],
    );
    let fine = dir("/shop/orders/order-3", 1, vec![keyed(0, 0x52, "w/1")]);
    let space = marked(
        dir(
            "/shop/orders",
            3,
            vec![
                sub("order-1", idle),
                sub("order-2", held),
                sub("order-3", fine),
            ],
        ),
        RecipeKind::LockSpace,
    );
    let qs = queues(&space, None, &Sessions::default(), NOW);
    let paths: Vec<_> = qs.iter().map(|q| (q.path.as_str(), q.kind)).collect();
    assert_eq!(
        paths,
        [
            ("/shop/orders/order-1", "idle"),
            ("/shop/orders/order-2", "mutex"),
            ("/shop/orders/order-3", "keyed-lock"),
        ],
        "the space itself is shown by its keys"
    );
    assert_eq!(kinds(&qs[0]), ["anchored-key"]);
    assert_eq!(
        qs[0].warnings[0].message,
        "key order-1: anchored as a ZkMutex root (`zkr lock` without --key?): ZkLockSpace \
         workers refuse it; fix: zkr repair /shop/orders/order-1"
    );
    assert_eq!(qs[0].key.as_deref(), Some("order-1"));
    assert_eq!(qs[0].lock_space.as_deref(), Some("/shop/orders"));
    assert_eq!(qs[0].mark.as_deref(), Some(""));
    assert_eq!(
        qs[1].tokens, "sequence",
        "the mutex hands out sequence numbers"
    );
    assert!(
        qs[1].warnings[0].message.ends_with(
            "fix, once its holders and waiters are gone: zkr repair /shop/orders/order-2"
        ),
        "{:?}",
        qs[1].warnings
    );
    assert_eq!(kinds(&qs[2]), Vec::<&str>::new());
    assert_eq!(qs[2].lock_space.as_deref(), Some("/shop/orders"));

    // The same space made before the marks: told by its key in use.
    let mut unmarked = space.clone();
    unmarked.anchor = None;
    let qs = queues(&unmarked, None, &Sessions::default(), NOW);
    assert_eq!(kinds(&qs[0]), ["anchored-key"]);
    assert!(qs[0].warnings[0]
        .message
        .contains("its key \"order-3\" in use"));
    // Without a key in use, an unmarked directory of anchored roots is just that.
    let mut plain = unmarked.clone();
    plain.children.pop();
    let qs = queues(&plain, None, &Sessions::default(), NOW);
    assert!(qs.iter().all(|q| q.warnings.is_empty()), "{qs:#?}");
    assert!(qs.iter().all(|q| q.lock_space.is_none()));

    // PATH itself a key: told by its parent's anchor, read by path.
    let alone = dir("/shop/orders/order-1", 1, vec![anchor()]);
    let space_mark = RecipeKind::LockSpace.mark();
    let qs = queues(&alone, Some(&space_mark), &Sessions::default(), NOW);
    assert_eq!(kinds(&qs[0]), ["anchored-key"]);
    // A count's anchor in a key: flagged, but repair does not remove that recipe's root.
    let count = marked(dir("/shop/orders/n", 1, vec![]), RecipeKind::Count);
    let qs = queues(&count, Some(&space_mark), &Sessions::default(), NOW);
    assert_eq!(qs[0].tokens, "none");
    assert!(
        qs[0].warnings[0]
            .message
            .contains("zkr repair does not remove a ZkSharedCount"),
        "{:?}",
        qs[0].warnings
    );
}

#[test]
fn each_root_shows_its_mark_and_a_mark_that_disagrees_is_flagged() {
    let rw = |seq: i64| {
        node(
            &format!("_c_{UUID}-__WRIT__{seq:010}"),
            0x60 + seq,
            &format!("id={UUID}\nowner=o{seq}\n"),
            1,
        )
    };
    let root = marked(dir("/jobs", 2, vec![ours(0, 0x61, "a")]), RecipeKind::Mutex);
    let q = &queues(&root, None, &Sessions::default(), NOW)[0];
    assert_eq!(
        (q.mark.as_deref(), q.marked_as),
        (Some("zk-recipes:mutex"), Some("ZkMutex"))
    );
    assert!(q.warnings.is_empty(), "{:?}", q.warnings);
    let wrong = marked(dir("/jobs", 2, vec![rw(0)]), RecipeKind::Mutex);
    let q = &queues(&wrong, None, &Sessions::default(), NOW)[0];
    assert_eq!(q.kind, "rwlock");
    assert_eq!(kinds(q), ["mark-mismatch"]);
    assert!(
        q.warnings[0].message.starts_with(
            "marked as a ZkMutex root (zk-recipes:mutex), but it holds read/write lock contenders"
        ),
        "{}",
        q.warnings[0].message
    );
    // A count with contenders in it; an election's anchor of an earlier version is fine.
    let count = marked(dir("/n", 2, vec![ours(0, 0x62, "a")]), RecipeKind::Count);
    assert_eq!(
        kinds(&queues(&count, None, &Sessions::default(), NOW)[0]),
        ["mark-mismatch"]
    );
    let latch = node(&format!("_c_{UUID}-latch-0000000000"), 0x63, "info", 1);
    let election = dir("/e", 2, vec![anchor(), latch]);
    assert!(queues(&election, None, &Sessions::default(), NOW)[0]
        .warnings
        .is_empty());
    // An idle root marked as a group's (its data) shows as such.
    let mut group = dir("/g", 0, vec![]);
    group.data = RecipeKind::Group.mark();
    let q = &queues(&group, None, &Sessions::default(), NOW)[0];
    assert_eq!((q.kind, q.marked_as), ("idle", Some("ZkGroup")));
}

#[test]
fn a_session_silent_past_half_its_timeout_is_flagged() {
    let sessions = Sessions {
        heard: HashMap::from([
            (
                0x80,
                Heard {
                    silent_ms: Some(3100),
                    timeout_ms: 4000,
                },
            ),
            (
                0x81,
                Heard {
                    silent_ms: Some(600),
                    timeout_ms: 4000,
                },
            ),
        ]),
        connected: HashMap::from([(0x80, "zk1:2181".to_owned()), (0x81, "zk1:2181".to_owned())]),
        ..Sessions::default()
    };
    let root = dir(
        "/l",
        2,
        vec![anchor(), ours(0, 0x80, "frozen"), ours(1, 0x81, "ok")],
    );
    let q = &queues(&root, None, &sessions, NOW)[0];
    assert_eq!(kinds(q), ["session-silent"]);
    assert!(
        q.warnings[0]
            .message
            .starts_with("no ping for 3.1 s of a 4 s session: frozen or cut off? (session 0x80 of lock-0000000000, connected to zk1:2181;"),
        "{}",
        q.warnings[0].message
    );
    assert_eq!(q.contenders[0].silent_ms, Some(3100));
    assert_eq!(q.contenders[1].session_timeout_ms, Some(4000));
    assert!(!silent_too_long(2000, 4000));
    let said: Vec<_> = [
        "4 s", "8 s", "11 s", "18 s", "80 s", "110 s", "850 ms", "1.5 s",
    ]
    .iter()
    .map(|n| article(n))
    .collect();
    assert_eq!(said, ["a", "an", "an", "an", "an", "a", "an", "a"]);
    assert!(silent_too_long(2001, 4000));
}
