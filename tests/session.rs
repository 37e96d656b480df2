//! Session against a real ZooKeeper: its connections get `TCP_NODELAY` (zookeeper-client leaves
//! Nagle's algorithm on, which turns every pipelined pair of requests into two round trips),
//! after a reconnect too, and connections of other clients are left alone.

mod support;

use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

use support::{within, Zk};
use zk_recipes::{Session, SessionOptions, SessionState};
use zk_testcontainers::FaultProxy;

/// `TCP_NODELAY` of each of this process's TCP connections to `server`.
fn nodelay_of_connections_to(server: SocketAddr) -> Vec<bool> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Ok(fd) = entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .parse::<RawFd>()
        else {
            continue;
        };
        // SAFETY: only inspected right away; a descriptor closed meanwhile makes the calls fail.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let peer = socket.peer_addr().ok().and_then(|a| a.as_socket());
        // (A descriptor closed in between fails here: it is no connection any more.)
        if let (Some(true), Ok(on)) = (peer.map(|p| p == server), socket.tcp_nodelay()) {
            found.push(on);
        }
    }
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_connections_get_tcp_nodelay_and_no_one_elses_do() {
    let zk = Zk::start("nodelay").await;
    let (host, chroot) = zk.connect.split_at(zk.connect.find('/').unwrap());
    let proxy = FaultProxy::start(host).await.unwrap();
    let connect = format!("{}{}", proxy.addr(), chroot);
    let other = zookeeper_client::Client::connect(&connect).await.unwrap();
    assert_eq!(nodelay_of_connections_to(proxy.addr()), [false]);

    let session = Session::connect(SessionOptions::new(connect.clone()))
        .await
        .unwrap();
    assert_eq!(
        nodelay_of_connections_to(proxy.addr()),
        [false, true],
        "ours on, the other client's untouched"
    );
    let without = Session::connect(SessionOptions::new(connect.clone()).tcp_nodelay(false))
        .await
        .unwrap();
    assert_eq!(
        nodelay_of_connections_to(proxy.addr()),
        [false, false, true]
    );
    without.close().await;
    drop(other);
    within("the other connections to close", 10, async {
        while nodelay_of_connections_to(proxy.addr()) != [true] {
            tokio::task::yield_now().await;
        }
    })
    .await;

    // The client reconnects by itself on the same session: the new connection gets it too.
    let id = session.session_id().unwrap();
    let mut states = session.watch_state();
    proxy.drop_connections();
    within(
        "suspended",
        10,
        states.wait_for(|s| matches!(s, SessionState::Suspended { .. })),
    )
    .await
    .unwrap();
    let back =
        |s: &SessionState| matches!(s, SessionState::Connected { session_id } if *session_id == id);
    within("reconnected", 20, states.wait_for(back))
        .await
        .unwrap();
    assert_eq!(nodelay_of_connections_to(proxy.addr()), [true]);
    session.close().await;
}
