//! This process's TCP connections to a server, and whether each has `TCP_NODELAY` (Linux:
//! found through `/proc/self/fd`).

use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

/// `TCP_NODELAY` of each of this process's TCP connections to `server`, sorted.
pub fn nodelay_of_connections_to(server: SocketAddr) -> Vec<bool> {
    let mut found: Vec<bool> = connections_to(server)
        .into_iter()
        .map(|(_, on)| on)
        .collect();
    found.sort();
    found
}

/// This process's TCP connections to `server`: each one's local address and `TCP_NODELAY`.
pub fn connections_to(server: SocketAddr) -> Vec<(SocketAddr, bool)> {
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
        let local = socket.local_addr().ok().and_then(|a| a.as_socket());
        // (A descriptor closed in between fails here: it is no connection any more.)
        if let (Some(true), Some(local), Ok(on)) =
            (peer.map(|p| p == server), local, socket.tcp_nodelay())
        {
            found.push((local, on));
        }
    }
    found
}
