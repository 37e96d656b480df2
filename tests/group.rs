//! ZkGroup against a real ZooKeeper: members joining, changing their payload and leaving as
//! another session sees it (on watches); a member's node made again after its session expires
//! and after someone deletes it; an id another session holds refused with a typed error; bad
//! ids and payloads refused; cancelled joins and dropped members leave no node; the directory
//! a container that the server reaps once the group is empty.

mod support;

use support::{stat_until, wait_children, within, Zk};
use zk_recipes::{Error, KeptState, LossReason, Members, ZkGroup, ZkGroupMember};
use zk_testcontainers::expire_session;
use zookeeper_client as zkc;

const GROUP: &str = "/services/billing";

/// Waits (on the group's watches) until `until` holds for its members.
async fn members_until(group: &ZkGroup, what: &str, until: impl Fn(&Members) -> bool) -> Members {
    within(what, 30, async {
        let mut members = group.members().await.unwrap();
        while !until(&members) {
            members = group.changed(&members).await.unwrap();
        }
        members
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_payloads_and_leaves_are_seen_by_another_session() {
    let zk = Zk::start("group-basics").await;
    let (observing, a, b) = (zk.session().await, zk.session().await, zk.session().await);
    let observer = ZkGroup::new(&observing, GROUP).unwrap();
    assert!(observer.members().await.unwrap().is_empty(), "no group yet");
    // An absent group: `changed` waits for its creation.
    let empty = observer.members().await.unwrap();
    let first_change = {
        let observer = ZkGroup::new(&observing, GROUP).unwrap();
        tokio::spawn(async move { observer.changed(&empty).await })
    };
    let member_a = ZkGroup::new(&a, GROUP)
        .unwrap()
        .join("worker-a", b"10.0.0.1:80")
        .await
        .unwrap();
    assert_eq!(
        (member_a.id(), member_a.path()),
        ("worker-a", "/services/billing/worker-a")
    );
    assert!(member_a.is_registered());
    let seen = within("the join seen", 30, first_change)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.payload("worker-a"), Some(&b"10.0.0.1:80"[..]));

    let member_b = ZkGroup::new(&b, GROUP)
        .unwrap()
        .join("worker-b", b"10.0.0.2:80")
        .await
        .unwrap();
    let both = members_until(&observer, "both members", |m| m.len() == 2).await;
    let ids: Vec<&str> = both.iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["worker-a", "worker-b"]);

    member_a.set_payload(b"draining").await.unwrap();
    members_until(&observer, "a's new payload", |m| {
        m.payload("worker-a") == Some(&b"draining"[..])
    })
    .await;

    member_a.release().await.unwrap();
    let left = members_until(&observer, "a gone", |m| !m.contains("worker-a")).await;
    assert!(left.contains("worker-b"));
    // Dropped: its node goes in the background.
    drop(member_b);
    members_until(&observer, "b gone", Members::is_empty).await;
}

/// Waits (on the kept node's state) until the member's node exists again as ours.
async fn registered_again(member: &ZkGroupMember) {
    let mut state = member.node().watch_state();
    within("the member registered again", 30, async {
        state
            .wait_for(|s| matches!(s, KeptState::Created(_)))
            .await
            .unwrap();
    })
    .await;
    assert!(member.is_held() && member.is_registered());
}

/// A member's `lost()` says why each lapse of its membership happened, and `is_held()` is true
/// again once the keeper made the node again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_is_made_again_after_its_session_expires_and_after_a_deletion() {
    let zk = Zk::start("group-kept").await;
    let raw = zk.raw().await;
    let (observing, joining) = (zk.session().await, zk.session().await);
    let observer = ZkGroup::new(&observing, GROUP).unwrap();
    let member = ZkGroup::new(&joining, GROUP)
        .unwrap()
        .join("worker-a", b"v1")
        .await
        .unwrap();
    let node = member.path().to_owned();
    let first = raw.get_data(&node).await.unwrap().1;
    member.set_payload(b"v2").await.unwrap();
    assert!(member.is_held());

    // The member's session expires: its node goes with it and comes back in the next session,
    // with the payload it has now.
    let info = joining.client().await.unwrap().session().clone();
    {
        let lapse = member.lost();
        tokio::pin!(lapse);
        expire_session(&zk.connect, &info).await.unwrap();
        assert_eq!(
            within("the expiry's lapse", 30, &mut lapse).await,
            LossReason::SessionExpired
        );
    }
    let back = stat_until(&raw, "the node made again", &node, |s| {
        s.is_some_and(|s| s.czxid != first.czxid)
    })
    .await
    .unwrap();
    assert_ne!(back.ephemeral_owner, info.id().0, "the new session's");
    assert_eq!(Some(back.ephemeral_owner), joining.session_id());
    assert_eq!(raw.get_data(&node).await.unwrap().0, b"v2");
    let seen = members_until(&observer, "the member back", |m| m.contains("worker-a")).await;
    assert_eq!(seen.payload("worker-a"), Some(&b"v2"[..]));
    registered_again(&member).await;

    // Deleted behind its back: made again at once, in the same session.
    {
        let lapse = member.lost();
        tokio::pin!(lapse);
        raw.delete(&node, None).await.unwrap();
        assert_eq!(
            within("the deletion's lapse", 30, &mut lapse).await,
            LossReason::NodeDeleted
        );
    }
    let again = stat_until(&raw, "the node made again after a delete", &node, |s| {
        s.is_some_and(|s| s.czxid != back.czxid)
    })
    .await
    .unwrap();
    assert_eq!(again.ephemeral_owner, back.ephemeral_owner);
    registered_again(&member).await;
    member.release().await.unwrap();
    wait_children(&raw, GROUP, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_another_session_holds_and_bad_input_are_typed_errors_that_touch_nothing() {
    let zk = Zk::start("group-errors").await;
    let raw = zk.raw().await;
    let (first, second) = (zk.session().await, zk.session().await);
    let holder = ZkGroup::new(&first, GROUP)
        .unwrap()
        .join("worker-a", b"first")
        .await
        .unwrap();
    let group = ZkGroup::new(&second, GROUP).unwrap();
    let err = group.join("worker-a", b"second").await.unwrap_err();
    assert!(matches!(err, Error::MemberIdTaken { .. }), "{err}");
    let (data, stat) = raw.get_data(holder.path()).await.unwrap();
    assert_eq!(
        (data.as_slice(), Some(stat.ephemeral_owner)),
        (&b"first"[..], first.session_id())
    );

    for bad in ["", "a/b", ".", "..", "zookeeper\u{0}"] {
        let err = group.join(bad, b"").await.unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
    }
    let err = group.join("big", &vec![0u8; 2 << 20]).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert!(ZkGroup::new(&second, "services/relative").is_err());
    assert_eq!(raw.list_children(GROUP).await.unwrap(), ["worker-a"]);

    // Once the holder leaves, the id is free.
    holder.release().await.unwrap();
    let taken = group.join("worker-a", b"second").await.unwrap();
    assert_eq!(raw.get_data(taken.path()).await.unwrap().0, b"second");
    taken.release().await.unwrap();
}

/// A join dropped at any point leaves no node: above all one dropped after its node was made
/// (seen here on a watch) but before it returned the member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_joins_leave_no_node() {
    let zk = Zk::start("group-cancel").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let group = ZkGroup::new(&session, GROUP).unwrap();
    // Make the directory first, so that the joins race their own create only.
    group
        .join("warm-up", b"")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let (mut after_node, mut finished) = (0, 0);
    for i in 0..30 {
        let node = format!("{GROUP}/m-{i}");
        let (stat, made) = raw.check_and_watch_stat(&node).await.unwrap();
        assert!(stat.is_none());
        let id = format!("m-{i}");
        // Boxed, so that dropping it below drops the future itself.
        let mut join = Box::pin(group.join(&id, b""));
        tokio::select! {
            biased;
            _ = made.changed() => after_node += 1,
            member = &mut join => {
                finished += 1;
                drop(member.unwrap());
            }
        }
        // Dropped here (unfinished, or finished and the member dropped): the node goes.
        drop(join);
        stat_until(&raw, "the node gone", &node, |s| s.is_none()).await;
    }
    println!("{after_node} joins dropped after their node was made, {finished} finished");
    assert!(
        after_node > 0,
        "no join was dropped after its node was made"
    );
    // Nothing left, and the ids are free again on this session.
    wait_children(&raw, GROUP, 0).await;
    group
        .join("m-0", b"")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

/// One member per id on a session: a second join of the same id there is refused (it would
/// share the first's node), and the id is free again once the first leaves.
#[tokio::test]
async fn a_second_join_of_an_id_on_the_same_session_is_refused() {
    let zk = Zk::start("group-twice").await;
    let session = zk.session().await;
    let group = ZkGroup::new(&session, GROUP).unwrap();
    let first = group.join("worker-a", b"first").await.unwrap();
    let err = group.join("worker-a", b"second").await.unwrap_err();
    assert!(matches!(err, Error::MemberIdTaken { .. }), "{err}");
    assert_eq!(
        group.members().await.unwrap().payload("worker-a"),
        Some(&b"first"[..])
    );
    first.release().await.unwrap();
    group
        .join("worker-a", b"second")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

/// Counts the library's events (to know the member stays out), so it runs on a runtime of
/// its own.
#[test]
fn a_member_whose_id_another_session_takes_stays_out_and_comes_back_after() {
    support::counting_events(id_taken_body());
}

/// Another session's member takes the id (deleting ours and creating its own in one
/// transaction): ours stays out without touching that node, even when its payload changes,
/// and comes back, with the new payload, once the other leaves.
async fn id_taken_body() {
    let zk = Zk::start("group-id-taken").await;
    let counter = support::events();
    let raw = zk.raw().await;
    let session = zk.session().await;
    let member = ZkGroup::new(&session, GROUP)
        .unwrap()
        .join("worker-a", b"ours")
        .await
        .unwrap();
    let node = member.path().to_owned();
    let ours = raw.get_data(&node).await.unwrap().1;
    let mut swap = raw.new_multi_writer();
    swap.add_delete(&node, None).unwrap();
    let ephemeral = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
    swap.add_create(&node, b"theirs", &ephemeral).unwrap();
    swap.commit().await.unwrap();
    counter
        .wait_for(
            "another session's member has this id; waiting for it to leave",
            1,
        )
        .await;
    assert!(!member.is_registered());
    member.set_payload(b"ours, later").await.unwrap();
    let (data, stat) = raw.get_data(&node).await.unwrap();
    assert_eq!(data, b"theirs", "another session's node is not written");
    assert_ne!(stat.ephemeral_owner, ours.ephemeral_owner);
    // The other leaves: ours is made again, with the payload it has now.
    raw.delete(&node, None).await.unwrap();
    let back = stat_until(&raw, "ours made again", &node, |s| {
        s.is_some_and(|s| s.ephemeral_owner == ours.ephemeral_owner)
    })
    .await
    .unwrap();
    assert!(back.czxid > ours.czxid);
    assert_eq!(raw.get_data(&node).await.unwrap().0, b"ours, later");
    member.release().await.unwrap();
    assert!(raw.check_stat(&node).await.unwrap().is_none());
}

/// The group's directory is a container, as Curator makes it: the server reaps it once the
/// last member has left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_directory_is_reaped_once_empty() {
    let Some((server, raw)) = support::fast_reaper_server().await else {
        return;
    };
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    raw.create("/services", &[], &options).await.unwrap();
    let session =
        zk_recipes::Session::connect(zk_recipes::SessionOptions::new(server.connect_string()))
            .await
            .unwrap();
    let member = ZkGroup::new(&session, GROUP)
        .unwrap()
        .join("worker-a", b"")
        .await
        .unwrap();
    member.release().await.unwrap();
    stat_until(&raw, "the directory reaped", GROUP, |s| s.is_none()).await;
    session.close().await;
}
