//! The queues read from a snapshot: kinds, libraries, queue order, tokens, counters.

use super::*;

#[test]
fn counters_come_back_from_cversion() {
    // 3 creates, 1 delete: cversion 2 * 3 - 2 = 4 with 2 children.
    let stat = Stat {
        cversion: 4,
        num_children: 2,
        ..Stat::default()
    };
    assert_eq!(Counter::of(&stat).next, 3);
    let near = Stat {
        cversion: (i32::MAX - 3).wrapping_mul(2),
        num_children: 0,
        ..Stat::default()
    };
    assert_eq!(
        Counter::of(&near),
        Counter {
            next: i64::from(i32::MAX) - 3,
            left: 3
        }
    );
    let full = Stat {
        cversion: i32::MAX.wrapping_mul(2).wrapping_sub(1),
        num_children: 1,
        ..Stat::default()
    };
    assert_eq!(Counter::of(&full).left, 0);
}

#[test]
fn a_mutex_holder_then_waiters_in_order() {
    let root = dir(
        "/locks/report",
        12,
        vec![
            ours(11, 0x12, "cron@b/2"),
            anchor(),
            ours(9, 0x10, "web-1/42"),
            ours(10, 0x11, "x"),
        ],
    );
    let qs = queues(&root, None, &Sessions::default(), NOW);
    assert_eq!(qs.len(), 1);
    let q = &qs[0];
    assert_eq!((q.kind, q.tokens, q.anchored), ("mutex", "sequence", true));
    assert_eq!(q.libraries, ["zk-recipes"]);
    assert_eq!(
        roles(q),
        [
            ("holder", "lock-0000000009", None),
            ("waiter", "lock-0000000010", Some("lock-0000000009")),
            ("waiter", "lock-0000000011", Some("lock-0000000010")),
        ]
    );
    let h = &q.contenders[0];
    assert_eq!(h.token, Some(9));
    assert_eq!(h.session.as_deref(), Some("0x10"));
    assert_eq!(h.owner.as_deref(), Some("web-1/42"));
    assert_eq!(h.age_ms, 91_000);
    assert_eq!(h.session_state, None);
    assert_eq!(
        q.counter,
        Counter {
            next: 12,
            left: i64::from(i32::MAX) - 12
        }
    );
    assert!(q.warnings.is_empty(), "{:?}", q.warnings);
}

#[test]
fn keyed_locks_have_zxid_tokens_and_a_key() {
    let key_dir = dir(
        "/locks/orders/a%2Fb",
        2,
        vec![ours(0, 0x20, "w/1"), ours(1, 0x21, "w/2")],
    );
    let space = dir("/locks/orders", 1, vec![sub("a%2Fb", key_dir)]);
    let qs = queues(&space, None, &Sessions::default(), NOW);
    assert_eq!(qs.len(), 1);
    let q = &qs[0];
    assert_eq!(
        (q.kind, q.tokens, q.key.as_deref()),
        ("keyed-lock", "czxid", Some("a/b"))
    );
    assert_eq!(q.contenders[0].token, Some(0x1_0000_0000));
    assert!(q.warnings.is_empty(), "{:?}", q.warnings);
}

#[test]
fn readers_share_and_wait_for_the_writer_ahead() {
    let rw = |kind: &str, seq: i64, sid: i64| {
        node(
            &format!("_c_{UUID}-{kind}{seq:010}"),
            sid,
            &format!("id={UUID}\nowner=o{seq}\n"),
            1,
        )
    };
    let root = dir(
        "/catalog",
        5,
        vec![
            anchor(),
            rw("__READ__", 0, 1),
            rw("__READ__", 1, 2),
            rw("__WRIT__", 2, 3),
            rw("__READ__", 3, 4),
        ],
    );
    let q = &queues(&root, None, &Sessions::default(), NOW)[0];
    assert_eq!(q.kind, "rwlock");
    let w = format!("_c_{UUID}-__WRIT__0000000002");
    assert_eq!(
        roles(q).iter().map(|r| (r.0, r.2)).collect::<Vec<_>>(),
        [
            ("holder", None),
            ("holder", None),
            (
                "waiter",
                Some(format!("_c_{UUID}-__READ__0000000001").as_str())
            ),
            ("waiter", Some(w.as_str())),
        ]
    );
    assert_eq!(q.contenders[3].wants, "read");
    assert_eq!(q.libraries, ["zk-recipes"]);
}

#[test]
fn a_semaphore_shows_leases_then_its_lock_queue() {
    let lease = |seq: i64, sid: i64| node(&format!("_c_{UUID}-lease-{seq:010}"), sid, "", 10 - seq);
    let leases = dir(
        "/pool/leases",
        3,
        vec![lease(0, 1), lease(1, 2), lease(2, 3)],
    );
    let locks = dir(
        "/pool/locks",
        7,
        vec![anchor(), ours(5, 3, "c"), ours(6, 4, "d")],
    );
    let mut root = dir("/pool", 2, vec![sub("leases", leases), sub("locks", locks)]);
    root.data = b"2".to_vec();
    let qs = queues(&root, None, &Sessions::default(), NOW);
    assert_eq!(qs.len(), 1, "locks and leases are parts of the semaphore");
    let q = &qs[0];
    assert_eq!((q.kind, q.permits), ("semaphore", Some(2)));
    assert_eq!(
        roles(q),
        [
            (
                "holder",
                format!("leases/_c_{UUID}-lease-0000000000").as_str(),
                None
            ),
            (
                "holder",
                format!("leases/_c_{UUID}-lease-0000000001").as_str(),
                None
            ),
            (
                "waiter",
                format!("leases/_c_{UUID}-lease-0000000002").as_str(),
                Some("a free lease (2 of 2 taken)")
            ),
            (
                "waiter",
                "locks/lock-0000000006",
                Some("locks/lock-0000000005")
            ),
        ]
    );
    assert_eq!(q.contenders[3].token, None);
    assert_eq!(q.contenders[3].wants, "lease");
}

#[test]
fn kazoo_and_zookeeper_recipes_are_recognised_and_mixing_is_flagged() {
    let kz = "6d1f0b7ab2c44a4fa0b1c2d3e4f5a6b7";
    let root = dir(
        "/mixed",
        3,
        vec![
            node(&format!("{kz}__lock__0000000000"), 1, "kazoo-worker", 3),
            node(&format!("_c_{UUID}-lock-0000000001"), 2, "10.0.0.2", 2),
            node("x-72057594037927936-0000000002", 3, "", 1),
        ],
    );
    let qs = queues(&root, None, &Sessions::default(), NOW);
    let libs: Vec<_> = qs
        .iter()
        .map(|q| (q.kind, q.libraries[0], q.tokens))
        .collect();
    assert_eq!(
        libs,
        [
            ("mutex", "curator", "sequence"),
            ("mutex", "kazoo", "none"),
            ("mutex", "zookeeper", "none")
        ]
    );
    for q in &qs {
        assert_eq!(
            q.contenders[0].role, "holder",
            "each protocol has its own holder"
        );
        assert!(kinds(q).contains(&"mixed-recipes"));
    }
    assert_eq!(qs[1].contenders[0].owner.as_deref(), Some("kazoo-worker"));
}

#[test]
fn a_kazoo_semaphore_shows_its_leases() {
    let lease = |hex: &str, sid: i64, who: &str| node(hex, sid, who, 3);
    let mut root = dir(
        "/kz-pool",
        2,
        vec![
            lease("a1b2c3d4e5f60718293a4b5c6d7e8f90", 2, "worker-2"),
            lease("3f2a9c0d5e6b4f718293a4b5c6d7e8f9", 1, "worker-1"),
        ],
    );
    root.children[1].stat.czxid = 1;
    root.children[0].stat.czxid = 2;
    root.data = b"3".to_vec();
    let q = &queues(&root, None, &Sessions::default(), NOW)[0];
    assert_eq!(
        (q.kind, q.permits, q.tokens),
        ("semaphore", Some(3), "none")
    );
    assert_eq!(q.libraries, ["kazoo"]);
    let owners: Vec<_> = q.contenders.iter().map(|c| c.owner.as_deref()).collect();
    assert_eq!(
        owners,
        [Some("worker-1"), Some("worker-2")],
        "in creation order"
    );
    assert!(q.contenders.iter().all(|c| c.role == "holder"));
}

#[test]
fn idle_anchored_roots_are_shown_and_plain_directories_are_not() {
    let idle = dir("/locks/idle", 40, vec![anchor()]);
    let parent = dir(
        "/locks",
        2,
        vec![sub("idle", idle), node("config", 0, "x", 1)],
    );
    let qs = queues(&parent, None, &Sessions::default(), NOW);
    assert_eq!(qs.len(), 1);
    assert_eq!((qs[0].path.as_str(), qs[0].kind), ("/locks/idle", "idle"));
    assert!(qs[0].contenders.is_empty());
}

#[test]
fn a_cut_listing_keeps_the_kind_and_the_head_of_the_queue() {
    // 20,000 waiters: only the head was read, the anchor by path.
    let mut root = dir(
        "/hot",
        20_002,
        vec![anchor(), ours(1, 0x70, "holder"), ours(2, 0x71, "w-2")],
    );
    root.stat.num_children = 20_002;
    root.cut = Some(Cut {
        shown: 2,
        of: 20_001,
    });
    let q = &queues(&root, None, &Sessions::default(), NOW)[0];
    assert_eq!((q.kind, q.tokens), ("mutex", "sequence"));
    let tokens: Vec<_> = q.contenders.iter().map(|c| c.token).collect();
    assert_eq!(tokens, [Some(1), Some(2)]);
    assert_eq!(
        q.cut,
        Some(Cut {
            shown: 2,
            of: 20_001
        })
    );
    assert_eq!(roles(q)[0].0, "holder");
}

#[test]
fn owner_records_and_text() {
    assert_eq!(
        owner_record(b"id=x\nowner=web-1/42\n").as_deref(),
        Some("web-1/42")
    );
    assert_eq!(owner_record(b"owner=a"), None);
    assert_eq!(text(b"  10.0.0.1\n").as_deref(), Some("10.0.0.1"));
    assert_eq!(text(b"\x00\x01"), None);
    assert_eq!(text(&[b'a'; 200]).unwrap().chars().count(), 121);
}
