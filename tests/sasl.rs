//! SASL DIGEST-MD5 and ACLs against a real ZooKeeper that requires SASL
//! (`enforce.auth.enabled=true`, `enforce.auth.schemes=sasl`, a JAAS file copied into the
//! container): a user the root's ACL does not grant gets `NoAuth` and leaves no node; recipes
//! create their nodes for the authenticated identity only when asked (`node_acls`), and then
//! another identity can neither read nor delete them, except where the parent's ACL lets it
//! delete (ZooKeeper governs a child's deletion by the parent's ACL); a wrong password and a
//! client without SASL get typed errors in bounded time.
#![cfg(feature = "sasl-digest-md5")]

mod support;

use std::time::{Duration, Instant};

use support::within;
use zk_recipes::zookeeper_client::{self as zk, Acl, Acls, AuthId, CreateMode, Permission};
use zk_recipes::{
    Error, LossReason, Session, SessionOptions, ZkLeaderElection, ZkLockSpace, ZkMutex,
};
use zk_testcontainers::{scaled, ServerOptions, ServerSasl, ZkServer};

const USERS: [(&str, &str); 2] = [("admin", "admin-secret"), ("bob", "bob-secret")];

/// A server that requires SASL, with [`USERS`], or `None` (printed) where the test cannot
/// start one.
async fn sasl_server() -> Option<ZkServer> {
    if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
        println!("not run: {reason}");
        return None;
    }
    support::init_tracing();
    let opts = ServerOptions::default().with_sasl(ServerSasl::digest_md5(USERS).required(true));
    Some(
        ZkServer::start_with(opts)
            .await
            .expect("a server that requires SASL"),
    )
}

fn options(server: &ZkServer, user: &str) -> SessionOptions {
    let password = USERS.iter().find(|(u, _)| *u == user).unwrap().1;
    SessionOptions::new(server.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connection_timeout(scaled(Duration::from_secs(10)))
        .sasl_digest_md5(user, password)
}

/// A raw client authenticated as `user`, for checks behind the library's back.
async fn raw(server: &ZkServer, user: &str) -> zk::Client {
    let password = USERS.iter().find(|(u, _)| *u == user).unwrap().1;
    zk::Client::connector()
        .with_sasl(zk::SaslOptions::digest_md5(
            user.to_owned(),
            password.to_owned(),
        ))
        .connect(&server.connect_string())
        .await
        .expect("a raw SASL client")
}

fn only(user: &str) -> Vec<Acl> {
    vec![Acl::new(Permission::ALL, AuthId::new("sasl", user))]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_the_roots_acl_does_not_grant_gets_no_auth_and_leaves_no_node() {
    let Some(server) = sasl_server().await else {
        return;
    };
    let admin = raw(&server, "admin").await;
    let admins = only("admin");
    admin
        .create(
            "/guarded",
            &[],
            &CreateMode::Persistent.with_acls(Acls::new(&admins)),
        )
        .await
        .unwrap();
    let bob = Session::connect(options(&server, "bob")).await.unwrap();

    // Roots bob would have to create below /guarded.
    let err = ZkMutex::new(&bob, "/guarded/orders")
        .unwrap()
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");
    let err = ZkLockSpace::new(&bob, "/guarded/keys")
        .unwrap()
        .lock("order-42")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");
    let err = ZkLeaderElection::new(&bob, "/guarded/election", "bob")
        .unwrap()
        .campaign()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");
    assert!(!err.is_retryable());

    // A root that exists, made by admin's recipe for admin only: bob cannot join its queue.
    let admin_session = Session::connect(options(&server, "admin").node_acls(Acls::creator_all()))
        .await
        .unwrap();
    let held = ZkMutex::new(&admin_session, "/guarded/held")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let err = ZkMutex::new(&bob, "/guarded/held")
        .unwrap()
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");
    let err = ZkMutex::new(&bob, "/guarded/held")
        .unwrap()
        .try_lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");

    // Nothing of bob's anywhere.
    let mut children = admin.list_children("/guarded").await.unwrap();
    children.sort();
    assert_eq!(children, ["held"], "bob's recipes left no node");
    let held_children = admin.list_children("/guarded/held").await.unwrap();
    assert_eq!(
        held_children.len(),
        2,
        "admin's lock node and the anchor: {held_children:?}"
    );
    let bob_client = bob.client().await.unwrap();
    assert!(
        bob_client.list_ephemerals("/").await.unwrap().is_empty(),
        "bob's session owns no node"
    );
    drop(bob_client);
    held.release().await.unwrap();
    bob.close().await;
    admin_session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creator_only_nodes_are_closed_to_other_identities_but_the_parent_governs_deletion() {
    let Some(server) = sasl_server().await else {
        return;
    };
    let admin = Session::connect(options(&server, "admin").node_acls(Acls::creator_all()))
        .await
        .unwrap();
    let bob = raw(&server, "bob").await;

    // Every node admin's recipes create is admin's only: root, parents, anchor, lock node.
    let guard = ZkMutex::new(&admin, "/private/orders")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let node = guard.path().to_owned();
    let admin_raw = raw(&server, "admin").await;
    for path in [
        "/private",
        "/private/orders",
        "/private/orders/~zk-recipes-anchor",
        &node,
    ] {
        let (acls, _) = admin_raw.get_acl(path).await.unwrap();
        assert_eq!(acls, only("admin"), "{path}");
    }
    assert_eq!(bob.get_data(&node).await.unwrap_err(), zk::Error::NoAuth);
    assert_eq!(
        bob.list_children("/private/orders").await.unwrap_err(),
        zk::Error::NoAuth
    );
    // The root denies bob DELETE, so the lock node is safe from him.
    assert_eq!(
        bob.delete(&node, None).await.unwrap_err(),
        zk::Error::NoAuth
    );
    // That the node exists, and its stat: ZooKeeper 3.8.0 tells anyone who asks (`exists` is
    // not ACL-checked); 3.9.3 wants READ for it too.
    match bob.check_stat(&node).await {
        Ok(stat) => assert!(stat.is_some(), "3.8: visible"),
        Err(err) => assert_eq!(err, zk::Error::NoAuth, "3.9: READ needed"),
    }

    // A keyed lock's directory is admin's too.
    let space = ZkLockSpace::new(&admin, "/private/keys").unwrap();
    let keyed = space.lock("order-42").await.unwrap();
    let (acls, _) = admin_raw
        .get_acl(&space.key_path("order-42").unwrap())
        .await
        .unwrap();
    assert_eq!(acls, only("admin"));
    keyed.release().await.unwrap();

    // Under a root anyone may write (made before, by someone else), the same creator-only lock
    // node can be read by no one else, but deleted by anyone: deletion is the parent's to
    // allow. The holder hears of it at once.
    bob.create(
        "/open",
        &[],
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let exposed = ZkMutex::new(&admin, "/open").unwrap().lock().await.unwrap();
    let node = exposed.path().to_owned();
    assert_eq!(admin_raw.get_acl(&node).await.unwrap().0, only("admin"));
    assert_eq!(bob.get_data(&node).await.unwrap_err(), zk::Error::NoAuth);
    bob.delete(&node, None).await.unwrap();
    let reason = within("the holder hears its node was deleted", 30, exposed.lost()).await;
    assert_eq!(reason, LossReason::NodeDeleted);

    guard.release().await.unwrap();
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_and_a_missing_sasl_are_typed_errors_in_bounded_time() {
    let Some(server) = sasl_server().await else {
        return;
    };
    let timeout = scaled(Duration::from_secs(5));
    let start = Instant::now();
    let err = within(
        "a refused SASL connect",
        60,
        Session::connect(
            SessionOptions::new(server.connect_string())
                .connection_timeout(timeout)
                .sasl_digest_md5("bob", "not-bobs-password"),
        ),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::SaslFailed { mechanism: "DIGEST-MD5", user } if user == "bob"),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert!(start.elapsed() < timeout, "took {:?}", start.elapsed());

    let start = Instant::now();
    let err = within(
        "a connect without SASL",
        60,
        Session::connect(SessionOptions::new(server.connect_string()).connection_timeout(timeout)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::AuthFailed), "{err}");
    assert!(start.elapsed() < timeout, "took {:?}", start.elapsed());

    let err = within(
        "an unknown user",
        60,
        Session::connect(
            SessionOptions::new(server.connect_string())
                .connection_timeout(timeout)
                .sasl_digest_md5("mallory", "guess"),
        ),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::SaslFailed { .. }), "{err}");
}
