//! `TCP_NODELAY` on a session's connections.
//!
//! zookeeper-client leaves Nagle's algorithm on, so a request sent while an earlier one on the
//! same connection is unanswered waits for that answer before it leaves: pipelined requests
//! (an acquire's create and listing, sent back to back) then cost two round trips instead of
//! one. Java's ZooKeeper client turns Nagle off. zookeeper-client has no option for it and does
//! not expose its socket, so a session looks, on Linux, for the sockets to its servers that
//! appeared while it connected (in `/proc/self/fd`) and sets `TCP_NODELAY` on them; after a
//! reconnect, on those that appeared since its last connect (the client reconnects by itself,
//! often before the session hears that it was gone). A connection another client of the
//! process opened to the same servers in that time gets it too, which changes nothing but its
//! latency. Elsewhere this does nothing.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

/// The hosts of a connect string (`[scheme://]host:port,...[/chroot]`), each with the scheme
/// it names, if any (zookeeper-client's `tcp://` and `tcp+tls://`).
pub(crate) fn hosts(connect: &str) -> Vec<(Option<&str>, &str)> {
    let mut parts: Vec<&str> = connect.split(',').collect();
    // The chroot follows the last host.
    if let Some(last) = parts.last_mut() {
        let start = last.find("://").map_or(0, |i| i + 3);
        if let Some(slash) = last[start..].find('/') {
            *last = &last[..start + slash];
        }
    }
    parts
        .into_iter()
        .map(|part| {
            let part = part.trim();
            match part.split_once("://") {
                Some((scheme, host)) => (Some(scheme), host),
                None => (None, part),
            }
        })
        .collect()
}

/// The chroot of a connect string (`/app` of `zk1:2181,zk2:2181/app`), if it names one.
pub(crate) fn chroot(connect: &str) -> Option<&str> {
    let last = connect.rsplit(',').next()?;
    let start = last.find("://").map_or(0, |i| i + 3);
    let slash = last[start..].find('/')?;
    Some(last[start + slash..].trim()).filter(|c| *c != "/")
}

/// The addresses of the servers in a connect string (`host:port,host:port/chroot`, hosts
/// perhaps with a scheme); names are resolved off the runtime's threads, and given up (none)
/// after `within`: a name server that does not answer must not hold up a session. A TLS
/// connection runs on such a socket too, so it gets `TCP_NODELAY` the same way.
pub(crate) async fn servers(connect: &str, within: Duration) -> Vec<SocketAddr> {
    let hosts: Vec<String> = hosts(connect)
        .into_iter()
        .map(|(_, h)| h.to_owned())
        .collect();
    let resolve = tokio::task::spawn_blocking(move || {
        use std::net::ToSocketAddrs;
        hosts
            .iter()
            .filter_map(|host| host.to_socket_addrs().ok())
            .flatten()
            .collect()
    });
    match tokio::time::timeout(within, resolve).await {
        Ok(Ok(servers)) => servers,
        _ => Vec::new(),
    }
}

/// The process's TCP connections, as (local, peer) address pairs.
#[derive(Debug, Default)]
pub(crate) struct Connections(HashSet<(SocketAddr, SocketAddr)>);

impl Connections {
    /// The connections now.
    pub fn now() -> Connections {
        Connections(sys::connections().into_iter().map(|c| c.1).collect())
    }

    /// Sets `TCP_NODELAY` on the connections to `servers` that were not there at `self`;
    /// returns how many.
    pub fn set_nodelay_on_new(&self, servers: &[SocketAddr]) -> usize {
        sys::connections()
            .into_iter()
            .filter(|(_, addrs)| servers.contains(&addrs.1) && !self.0.contains(addrs))
            .filter(|(fd, _)| sys::set_nodelay(*fd))
            .count()
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::net::SocketAddr;
    use std::os::fd::{BorrowedFd, RawFd};

    /// The open, connected TCP sockets: (fd, (local, peer)).
    pub fn connections() -> Vec<(RawFd, (SocketAddr, SocketAddr))> {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
            .filter_map(|fd| {
                let socket = borrow(fd);
                let socket = socket2::SockRef::from(&socket);
                let peer = socket.peer_addr().ok()?.as_socket()?;
                Some((fd, (socket.local_addr().ok()?.as_socket()?, peer)))
            })
            .collect()
    }

    pub fn set_nodelay(fd: RawFd) -> bool {
        socket2::SockRef::from(&borrow(fd))
            .set_tcp_nodelay(true)
            .is_ok()
    }

    fn borrow(fd: RawFd) -> BorrowedFd<'static> {
        // SAFETY: the descriptor is only used for getsockname, getpeername and setsockopt
        // right away. Closed meanwhile, they fail (EBADF); reused meanwhile, they act on
        // whatever it is now (setting TCP_NODELAY on a new connection to the same server at
        // worst).
        unsafe { BorrowedFd::borrow_raw(fd) }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::net::SocketAddr;

    pub fn connections() -> Vec<(i32, (SocketAddr, SocketAddr))> {
        Vec::new()
    }

    pub fn set_nodelay(_: i32) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolves_every_host_of_a_connect_string_without_the_chroot() {
        let servers = servers(
            "127.0.0.1:2181,127.0.0.2:2182/app/locks",
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(
            servers,
            [
                "127.0.0.1:2181".parse::<SocketAddr>().unwrap(),
                "127.0.0.2:2182".parse().unwrap()
            ]
        );
    }

    #[test]
    fn chroots_are_what_follows_the_last_host() {
        assert_eq!(chroot("zk1:2181,zk2:2181/app/x"), Some("/app/x"));
        assert_eq!(chroot("tcp+tls://zk1:2281/app"), Some("/app"));
        assert_eq!(chroot("zk1:2181"), None);
        assert_eq!(chroot("zk1:2181/"), None);
    }

    #[test]
    fn hosts_drop_the_chroot_and_keep_their_schemes() {
        assert_eq!(
            hosts("tcp+tls://zk1:2281,zk2:2281,tcp://zk3:2181/app/locks"),
            [
                (Some("tcp+tls"), "zk1:2281"),
                (None, "zk2:2281"),
                (Some("tcp"), "zk3:2181")
            ]
        );
        assert_eq!(hosts("/chroot"), [(None, "")]);
        assert_eq!(
            hosts("a:1,,b:2"),
            [(None, "a:1"), (None, ""), (None, "b:2")]
        );
    }

    #[tokio::test]
    async fn resolves_hosts_with_schemes() {
        let servers = servers("tcp+tls://127.0.0.1:2281/app", Duration::from_secs(5)).await;
        assert_eq!(servers, ["127.0.0.1:2281".parse::<SocketAddr>().unwrap()]);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn sets_nodelay_on_new_connections_to_the_servers_only() {
        use std::net::{TcpListener, TcpStream};
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let servers = [server.local_addr().unwrap()];
        let old = TcpStream::connect(servers[0]).unwrap();
        let before = Connections::now();
        let new = TcpStream::connect(servers[0]).unwrap();
        let elsewhere = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert_eq!(before.set_nodelay_on_new(&servers), 1);
        assert!(new.nodelay().unwrap());
        assert!(!old.nodelay().unwrap());
        assert!(!elsewhere.nodelay().unwrap());
    }
}
