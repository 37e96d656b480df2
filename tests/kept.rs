//! ZkKeptNode against a real ZooKeeper, as Curator's `PersistentNode` users rely on it: a node
//! that someone deletes again and again is made again each time with its latest data; an
//! ephemeral node comes back in the session after an expiry; the protected mode's names are
//! Curator's; a persistent node outlives its session; a TTL node the server reaps is made
//! again (and a server without TTL nodes gives a typed error); a node someone else made at the
//! path (a namesake) is never written or deleted; bad input gets typed errors in bounded time
//! and leaves nothing behind; `close` and drop delete the node.
//!
//! `ZK_KEPT_DELETIONS` (default 100) sets how many times the first test deletes the node.

mod support;

use std::time::Duration;

use support::{stat_until, wait_deleted, within, Zk};
use zk_recipes::{Error, KeptMode, KeptState, ZkKeptNode};
use zk_testcontainers::{expire_session, scaled};
use zookeeper_client as zkc;

/// Waits until the kept node's state satisfies `until`, and returns it.
async fn state_until(
    node: &ZkKeptNode,
    what: &str,
    until: impl Fn(&KeptState) -> bool,
) -> KeptState {
    let mut state = node.watch_state();
    within(what, 30, async {
        state.wait_for(|s| until(s)).await.unwrap().clone()
    })
    .await
}

/// Someone deletes our node at `path` and makes their own ("theirs") in one transaction, so
/// the keeper cannot make ours again in between.
async fn swap_in_a_namesake(raw: &zkc::Client, path: &str) {
    let mut multi = raw.new_multi_writer();
    multi.add_delete(path, None).unwrap();
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    multi.add_create(path, b"theirs", &persistent).unwrap();
    multi.commit().await.unwrap();
}

fn deletions() -> usize {
    std::env::var("ZK_KEPT_DELETIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_deleted_again_and_again_is_made_again_each_time_with_its_latest_data() {
    let zk = Zk::start("kept-deleted").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let node = ZkKeptNode::start(&session, "/workers/w-7", KeptMode::Ephemeral, b"v0").unwrap();
    assert_eq!(node.created().await.unwrap(), "/workers/w-7");
    let owner = session.session_id().unwrap();
    let (data, mut stat) = raw.get_data("/workers/w-7").await.unwrap();
    assert_eq!((data.as_slice(), stat.ephemeral_owner), (&b"v0"[..], owner));
    let n = deletions();
    let started = std::time::Instant::now();
    for round in 1..=n {
        // Every tenth round the data changes first: the next node is made with it.
        let want = format!("v{}", round / 10 * 10).into_bytes();
        if round % 10 == 0 {
            node.set_data(&want).await.unwrap();
        }
        raw.delete("/workers/w-7", None).await.unwrap();
        let before = stat.czxid;
        stat = stat_until(&raw, "the node made again", "/workers/w-7", |s| {
            s.is_some_and(|s| s.czxid > before)
        })
        .await
        .unwrap();
        assert_eq!(
            stat.ephemeral_owner, owner,
            "round {round}: made in its session"
        );
        let (data, _) = raw.get_data("/workers/w-7").await.unwrap();
        assert_eq!(data, want, "round {round}: made with the latest data");
    }
    let per = started.elapsed() / n as u32;
    println!("{n} deletions, each made again: {per:?} per deletion and re-creation");
    // The raw client can see the last node before the keeper has its create's reply: the
    // state says Created once it has, with no Missing or error on the way to the close.
    let state = state_until(&node, "the keeper knows its node", |s| {
        *s != KeptState::Missing
    })
    .await;
    assert_eq!(state, KeptState::Created("/workers/w-7".into()));
    node.close().await.unwrap();
    assert_eq!(
        raw.check_stat("/workers/w-7").await.unwrap(),
        None,
        "closed: deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_node_comes_back_in_the_next_session_with_the_data_set_last() {
    let zk = Zk::start("kept-expiry").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let node = ZkKeptNode::start(&session, "/workers/w-1", KeptMode::Ephemeral, b"idle").unwrap();
    node.created().await.unwrap();
    let first = raw.check_stat("/workers/w-1").await.unwrap().unwrap();
    node.set_data(b"busy").await.unwrap();
    let mut states = node.watch_state();
    states.mark_unchanged();

    let info = session.client().await.unwrap().session().clone();
    expire_session(&zk.connect, &info).await.unwrap();
    let back = stat_until(
        &raw,
        "the node made in the next session",
        "/workers/w-1",
        |s| s.is_some_and(|s| s.czxid > first.czxid),
    )
    .await
    .unwrap();
    let new_owner = session.session_id().unwrap();
    assert_ne!(new_owner, first.ephemeral_owner, "a new session");
    assert_eq!(back.ephemeral_owner, new_owner);
    assert_eq!(raw.get_data("/workers/w-1").await.unwrap().0, b"busy");
    // The state went through Missing (the expiry) and is Created again.
    within("the state changed", 30, states.changed())
        .await
        .unwrap();
    state_until(&node, "created again", |s| {
        *s == KeptState::Created("/workers/w-1".into())
    })
    .await;
    drop(node);
    wait_deleted(&raw, "/workers/w-1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_node_has_curators_name_and_a_new_one_after_each_re_creation() {
    let zk = Zk::start("kept-protected").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let node = ZkKeptNode::start(
        &session,
        "/workers/w-",
        KeptMode::ProtectedEphemeralSequential,
        b"p",
    )
    .unwrap();
    let first = node.created().await.unwrap();
    // Curator's protected form: `_c_{uuid}-{name}{10 digits}`.
    let curator_name = |path: &str| {
        let name = path.strip_prefix("/workers/_c_").unwrap_or("");
        let (uuid, rest) = name.split_at(name.len().min(36));
        uuid.len() == 36
            && uuid.chars().filter(|c| *c == '-').count() == 4
            && rest
                .strip_prefix("-w-")
                .is_some_and(|seq| seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()))
    };
    assert!(curator_name(&first), "Curator's protected name: {first}");
    assert_eq!(node.path(), "/workers/w-");
    assert_eq!(raw.list_children("/workers").await.unwrap().len(), 1);

    // Deleted: made again under a new name, the state says which.
    raw.delete(&first, None).await.unwrap();
    let second = state_until(&node, "made again", |s| {
        s.path().is_some_and(|p| p != first)
    })
    .await;
    let second = second.path().unwrap().to_owned();
    assert!(curator_name(&second), "{second}");
    assert_eq!(raw.get_data(&second).await.unwrap().0, b"p");

    // Expired: the next session's node, the old one gone with its session.
    let info = session.client().await.unwrap().session().clone();
    expire_session(&zk.connect, &info).await.unwrap();
    let third = state_until(&node, "made in the next session", |s| {
        s.path().is_some_and(|p| p != second)
    })
    .await;
    let third = third.path().unwrap().to_owned();
    let children = raw.list_children("/workers").await.unwrap();
    assert_eq!(
        children,
        [third.trim_start_matches("/workers/").to_owned()],
        "one node: the live one"
    );
    let stat = raw.check_stat(&third).await.unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, session.session_id().unwrap());
    node.close().await.unwrap();
    assert!(raw.list_children("/workers").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_node_outlives_its_session_and_is_made_again_when_deleted() {
    let zk = Zk::start("kept-persistent").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let node = ZkKeptNode::start(&session, "/config/flags", KeptMode::Persistent, b"a=1").unwrap();
    node.created().await.unwrap();
    let stat = raw.check_stat("/config/flags").await.unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, 0, "persistent");
    raw.delete("/config/flags", None).await.unwrap();
    stat_until(&raw, "made again", "/config/flags", |s| {
        s.is_some_and(|s| s.czxid > stat.czxid)
    })
    .await;
    node.set_data(b"a=2").await.unwrap();
    // The session ends: a persistent node stays, and the handle says the keeper stopped.
    session.close().await;
    state_until(&node, "stopped with its session", |s| {
        *s == KeptState::Stopped
    })
    .await;
    assert_eq!(raw.get_data("/config/flags").await.unwrap().0, b"a=2");
    drop(node);

    // A new handle in another session finds the node it did not make: a namesake, refused.
    let other = zk.session().await;
    let again = ZkKeptNode::start(&other, "/config/flags", KeptMode::Persistent, b"a=3").unwrap();
    let refused = within("the namesake refused", 30, again.created()).await;
    assert!(
        matches!(refused, Err(Error::MemberIdTaken { .. })),
        "{refused:?}"
    );
    drop(again);
    assert_eq!(
        raw.get_data("/config/flags").await.unwrap().0,
        b"a=2",
        "not written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namesake_is_never_written_or_deleted_and_ours_comes_back_once_it_goes() {
    let zk = Zk::start("kept-namesake").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    for mode in [KeptMode::Ephemeral, KeptMode::Persistent] {
        let path = if mode.is_ephemeral() {
            "/ns/eph"
        } else {
            "/ns/per"
        };
        let node = ZkKeptNode::start(&session, path, mode, b"ours").unwrap();
        node.created().await.unwrap();
        // In one transaction someone deletes ours and makes their own at the path.
        swap_in_a_namesake(&raw, path).await;
        let theirs = raw.check_stat(path).await.unwrap().unwrap();
        state_until(&node, "ours missing", |s| *s == KeptState::Missing).await;
        // Our data changes while the namesake is there: only the kept data does.
        node.set_data(b"ours-2").await.unwrap();
        assert_eq!(node.data(), b"ours-2");
        let (data, stat) = raw.get_data(path).await.unwrap();
        assert_eq!(
            (data.as_slice(), stat.version),
            (&b"theirs"[..], theirs.version)
        );
        // They delete theirs: ours is made again, with the data set meanwhile.
        raw.delete(path, None).await.unwrap();
        state_until(&node, "ours made again", |s| {
            *s == KeptState::Created(path.into())
        })
        .await;
        assert_eq!(raw.get_data(path).await.unwrap().0, b"ours-2", "{mode:?}");

        // And once more, but then we close while theirs is there: theirs stays.
        swap_in_a_namesake(&raw, path).await;
        state_until(&node, "ours missing again", |s| *s == KeptState::Missing).await;
        node.close().await.unwrap();
        assert_eq!(
            raw.get_data(path).await.unwrap().0,
            b"theirs",
            "{mode:?}: not deleted"
        );
        raw.delete(path, None).await.unwrap();
    }
    // Another session's ephemeral node at the path before we start: a typed error at once,
    // their node untouched, ours never made.
    let holder = zk.session().await;
    let theirs = ZkKeptNode::start(&holder, "/ns/taken", KeptMode::Ephemeral, b"h").unwrap();
    theirs.created().await.unwrap();
    let late = ZkKeptNode::start(&session, "/ns/taken", KeptMode::Ephemeral, b"late").unwrap();
    let refused = within("refused", 30, late.created()).await;
    match refused {
        Err(Error::MemberIdTaken { session_id, .. }) => {
            assert_eq!(session_id, holder.session_id().unwrap())
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(late.state(), KeptState::Stopped);
    assert_eq!(raw.get_data("/ns/taken").await.unwrap().0, b"h");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_node_the_server_reaps_is_made_again_and_a_server_without_ttl_says_so() {
    // The shared server has no TTL nodes (zookeeper.extendedTypesEnabled is off): a typed
    // error in bounded time, and no node.
    let zk = Zk::start("kept-ttl").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let node = ZkKeptNode::start(
        &session,
        "/ttl/a",
        KeptMode::Ttl(Duration::from_secs(5)),
        b"t",
    )
    .unwrap();
    let refused = within("TTL refused", 30, node.created()).await;
    assert!(
        matches!(refused, Err(Error::TtlRefused { .. })),
        "{refused:?}"
    );
    assert_eq!(raw.check_stat("/ttl/a").await.unwrap(), None);
    // A TTL out of range: refused before anything is sent.
    for ttl in [Duration::ZERO, Duration::from_millis(1 << 40)] {
        let err = ZkKeptNode::start(&session, "/ttl/b", KeptMode::Ttl(ttl), b"").unwrap_err();
        assert!(matches!(err, Error::TtlRefused { .. }), "{ttl:?}: {err:?}");
    }

    // A server with TTL nodes and a fast reaper: the node goes after its TTL without a
    // change, and the keeper makes it again, each time.
    if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
        println!("TTL re-creation not run: needs its own server ({reason})");
        return;
    }
    let server = zk_testcontainers::ZkServer::start_with(
        zk_testcontainers::ServerOptions::default().with_env(
            "JVMFLAGS",
            "-Xmx256m -XX:+UseSerialGC -Dzookeeper.extendedTypesEnabled=true \
             -Dznode.container.checkIntervalMs=100",
        ),
    )
    .await
    .unwrap();
    let raw = zkc::Client::connect(&server.connect_string())
        .await
        .unwrap();
    let options = zk_recipes::SessionOptions::new(server.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connection_timeout(scaled(Duration::from_secs(10)));
    let session = zk_recipes::Session::connect(options).await.unwrap();
    let node = ZkKeptNode::start(
        &session,
        "/ttl/lease",
        KeptMode::Ttl(Duration::from_millis(300)),
        b"t",
    )
    .unwrap();
    node.created().await.unwrap();
    let mut czxid = raw.check_stat("/ttl/lease").await.unwrap().unwrap().czxid;
    let started = std::time::Instant::now();
    for round in 0..3 {
        let made = stat_until(&raw, "reaped and made again", "/ttl/lease", |s| {
            s.is_some_and(|s| s.czxid > czxid)
        })
        .await
        .unwrap();
        // A TTL node shows no owner to clients (the server keeps its TTL apart).
        assert_eq!(made.ephemeral_owner, 0, "round {round}");
        czxid = made.czxid;
    }
    println!(
        "a 300 ms TTL node reaped and made again 3 times in {:?}",
        started.elapsed()
    );
    node.close().await.unwrap();
    assert_eq!(raw.check_stat("/ttl/lease").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_typed_error_in_bounded_time_and_leaves_no_node() {
    let zk = Zk::start("kept-bad").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    for path in ["/", "", "no-slash", "/a//b", "/a/", "/a/./b", "/a/\u{0}"] {
        let err = ZkKeptNode::start(&session, path, KeptMode::Ephemeral, b"").unwrap_err();
        assert!(
            matches!(err, Error::InvalidPath { .. }),
            "{path:?}: {err:?}"
        );
    }
    let big = vec![0u8; 2 << 20];
    let err = ZkKeptNode::start(&session, "/bad/big", KeptMode::Ephemeral, &big).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");

    // One kept node per path and session; the path is free again once the first closes.
    let first = ZkKeptNode::start(&session, "/bad/one", KeptMode::Ephemeral, b"1").unwrap();
    let err = ZkKeptNode::start(&session, "/bad/one", KeptMode::Persistent, b"2").unwrap_err();
    assert!(matches!(err, Error::MemberIdTaken { .. }), "{err:?}");
    first.created().await.unwrap();
    let err = first.set_data(&big).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");
    assert_eq!(first.data(), b"1", "a refused set_data changes nothing");
    first.close().await.unwrap();
    let second = ZkKeptNode::start(&session, "/bad/one", KeptMode::Ephemeral, b"2").unwrap();
    second.created().await.unwrap();
    second.close().await.unwrap();

    // Below an ephemeral node: no children there, a typed error.
    raw.create(
        "/bad/eph",
        b"",
        &zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let below = ZkKeptNode::start(&session, "/bad/eph/x", KeptMode::Persistent, b"").unwrap();
    let err = within("under an ephemeral", 30, below.created())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnsuitableRoot { .. }), "{err:?}");

    // A parent whose ACL lets nobody create: NoAuth.
    raw.create(
        "/bad/closed",
        b"",
        &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_read()),
    )
    .await
    .unwrap();
    let refused = ZkKeptNode::start(&session, "/bad/closed/x", KeptMode::Ephemeral, b"").unwrap();
    let err = within("no auth", 30, refused.created()).await.unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err:?}");
    assert_eq!(refused.state(), KeptState::Stopped);

    let mut left = raw.list_children("/bad").await.unwrap();
    left.sort();
    assert_eq!(left, ["closed", "eph"], "nothing of ours left behind");
    assert!(raw.list_children("/bad/eph").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_deletes_at_once_and_a_dropped_handle_deletes_in_the_background() {
    let zk = Zk::start("kept-close").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    for mode in [KeptMode::Ephemeral, KeptMode::Persistent] {
        let node = ZkKeptNode::start(&session, "/c/closed", mode, b"x").unwrap();
        node.created().await.unwrap();
        node.close().await.unwrap();
        assert_eq!(raw.check_stat("/c/closed").await.unwrap(), None, "{mode:?}");

        let node = ZkKeptNode::start(&session, "/c/dropped", mode, b"x").unwrap();
        node.created().await.unwrap();
        drop(node);
        wait_deleted(&raw, "/c/dropped").await;
    }
    // Dropped before its node was made: none is left either.
    let node = ZkKeptNode::start(&session, "/c/early", KeptMode::Persistent, b"x").unwrap();
    drop(node);
    let again = ZkKeptNode::start(&session, "/c/marker", KeptMode::Persistent, b"").unwrap();
    again.created().await.unwrap();
    again.close().await.unwrap();
    wait_deleted(&raw, "/c/early").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_create_reply_leaves_one_node_that_the_keeper_knows_for_its_own() {
    let zk = Zk::start("kept-lost-reply").await;
    let raw = zk.raw().await;
    let (host, chroot) = zk.connect.split_at(zk.connect.find('/').unwrap());
    let proxy = zk_testcontainers::FaultProxy::start(host).await.unwrap();
    let session = zk_recipes::Session::connect(
        zk_recipes::SessionOptions::new(format!("{}{}", proxy.addr(), chroot))
            .session_timeout(Duration::from_secs(4))
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .unwrap();
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    raw.create("/lost", b"", &persistent).await.unwrap();
    for (i, mode) in [
        KeptMode::Persistent,
        KeptMode::Ephemeral,
        KeptMode::ProtectedEphemeralSequential,
    ]
    .into_iter()
    .enumerate()
    {
        let parent = format!("/lost/{i}");
        let path = format!("{parent}/node");
        raw.create(&parent, b"", &persistent).await.unwrap();
        let lost = proxy.lost_replies();
        let wanted = path.clone();
        proxy.lose_next_reply(move |r| {
            r.create_path()
                .is_some_and(|p| p.ends_with(&*wanted) || p.ends_with("-node"))
        });
        let node = ZkKeptNode::start(&session, &path, mode, b"ours").unwrap();
        let made = within("made through a lossy proxy", 30, node.created())
            .await
            .unwrap();
        assert_eq!(
            proxy.lost_replies(),
            lost + 1,
            "{mode:?}: the reply was lost"
        );
        let children = raw.list_children(&parent).await.unwrap();
        assert_eq!(children.len(), 1, "{mode:?}: one node, {children:?}");
        assert_eq!(format!("{parent}/{}", children[0]), made, "{mode:?}");
        assert_eq!(raw.get_data(&made).await.unwrap().0, b"ours");
        // Ours: the keeper writes it and deletes it.
        node.set_data(b"ours-2").await.unwrap();
        assert_eq!(raw.get_data(&made).await.unwrap().0, b"ours-2", "{mode:?}");
        node.close().await.unwrap();
        assert!(
            raw.list_children(&parent).await.unwrap().is_empty(),
            "{mode:?}"
        );
    }
}
