//! The Rust locks under test behind one interface: `ZkMutex`, `ZkLockSpace` (a lock per key)
//! and zookeeper-client's `Client::lock`; and `ZkLeaderElection`'s candidates. Every use of the
//! library's lock and election API is in this file.

use std::sync::Arc;

use zk_recipes::{
    Session, SessionOptions, ZkLeaderElection, ZkLeadership, ZkLockSpace, ZkLockSpaceGuard,
    ZkMutex, ZkMutexGuard,
};
use zookeeper_client as zkc;

/// A Rust lock implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    /// zk-recipes' `ZkMutex`.
    Ours,
    /// zookeeper-client's `Client::lock` with `LockPrefix::new_curator`.
    ClientLock,
}

impl Lib {
    pub fn key(self) -> &'static str {
        match self {
            Lib::Ours => "zk-recipes",
            Lib::ClientLock => "client-lock",
        }
    }
}

/// One ZooKeeper session of a library.
#[derive(Clone)]
pub enum Conn {
    Ours(Session),
    ClientLock(zkc::Client),
}

impl Conn {
    pub async fn open(lib: Lib, connect: &str) -> Result<Conn, String> {
        match lib {
            Lib::Ours => Session::connect(SessionOptions::new(connect))
                .await
                .map(Conn::Ours)
                .map_err(|e| format!("zk-recipes session: {e}")),
            Lib::ClientLock => zkc::Client::connect(connect)
                .await
                .map(Conn::ClientLock)
                .map_err(|e| format!("zookeeper-client session: {e}")),
        }
    }

    /// This session's own ZooKeeper client (for zk-recipes, the one its recipes send on, with
    /// its socket options): for raw requests side by side with the locks.
    pub async fn raw_client(&self) -> Result<zkc::Client, String> {
        match self {
            Conn::Ours(session) => session
                .client()
                .await
                .map_err(|e| format!("zk-recipes session's client: {e}")),
            Conn::ClientLock(client) => Ok(client.clone()),
        }
    }

    pub async fn close(self) {
        match self {
            Conn::Ours(session) => session.close().await,
            Conn::ClientLock(client) => drop(client),
        }
    }

    /// A candidate of the election on `path` over this session (zk-recipes only: zookeeper-client
    /// has no leader election).
    pub fn candidate(&self, path: &str, info: &str) -> Option<Candidate> {
        match self {
            Conn::Ours(session) => Some(Candidate(
                ZkLeaderElection::new(session, path, info).expect("a valid election path"),
            )),
            Conn::ClientLock(_) => None,
        }
    }

    /// A contender on `path` over this session: a `ZkMutex` root, or for `Client::lock` a
    /// directory that must exist.
    pub fn locker(&self, path: &str) -> Locker {
        match self {
            Conn::Ours(session) => Locker::Ours(Arc::new(
                ZkMutex::new(session, path).expect("a valid lock path"),
            )),
            Conn::ClientLock(client) => Locker::ClientLock {
                client: client.clone(),
                dir: path.to_owned(),
                parents: None,
            },
        }
    }

    /// A lock per key under `space` over this session: a `ZkLockSpace`, or `Client::lock` on
    /// `{space}/{key}`, whose missing directories it creates as `parents` say (the space itself
    /// must exist for it to make only the key's directory).
    pub fn space(&self, space: &str, parents: Parents) -> Space {
        match self {
            Conn::Ours(session) => Space::Ours(Arc::new(
                ZkLockSpace::new(session, space).expect("a valid lock space path"),
            )),
            Conn::ClientLock(client) => Space::ClientLock {
                client: client.clone(),
                space: space.to_owned(),
                parents,
            },
        }
    }
}

/// How `Client::lock` creates a key's missing directory (`LockOptions::with_ancestor_options`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parents {
    /// Persistent: it stays after the key's last use.
    Persistent,
    /// A container: the server reaps it once empty (like `ZkLockSpace`'s and Curator's
    /// `creatingParentContainersIfNeeded`).
    Container,
}

impl Parents {
    fn mode(self) -> zkc::CreateMode {
        match self {
            Parents::Persistent => zkc::CreateMode::Persistent,
            Parents::Container => zkc::CreateMode::Container,
        }
    }
}

/// A lock per key (see [`Conn::space`]).
#[derive(Clone)]
pub enum Space {
    Ours(Arc<ZkLockSpace>),
    ClientLock {
        client: zkc::Client,
        space: String,
        parents: Parents,
    },
}

impl Space {
    /// A contender on `key`.
    pub fn locker(&self, key: &str) -> Locker {
        match self {
            Space::Ours(space) => Locker::Keyed {
                space: space.clone(),
                key: key.to_owned(),
            },
            Space::ClientLock {
                client,
                space,
                parents,
            } => Locker::ClientLock {
                client: client.clone(),
                dir: format!("{space}/{key}"),
                parents: Some(*parents),
            },
        }
    }
}

/// One contender on one lock.
pub enum Locker {
    Ours(Arc<ZkMutex>),
    Keyed {
        space: Arc<ZkLockSpace>,
        key: String,
    },
    ClientLock {
        client: zkc::Client,
        dir: String,
        /// How a missing directory is made; `None`: it must exist.
        parents: Option<Parents>,
    },
}

/// A held lock.
pub enum Held {
    Ours(ZkMutexGuard),
    Keyed(ZkLockSpaceGuard),
    ClientLock { client: zkc::Client, path: String },
}

impl Locker {
    /// Waits for the lock.
    pub async fn acquire(&self) -> Result<Held, String> {
        match self {
            Locker::Ours(mutex) => mutex
                .lock()
                .await
                .map(Held::Ours)
                .map_err(|e| format!("ZkMutex::lock: {e}")),
            Locker::Keyed { space, key } => space
                .lock(key)
                .await
                .map(Held::Keyed)
                .map_err(|e| format!("ZkLockSpace::lock: {e}")),
            Locker::ClientLock {
                client,
                dir,
                parents,
            } => {
                let prefix = zkc::LockPrefix::new_curator(dir, "lock-")
                    .map_err(|e| format!("LockPrefix: {e}"))?;
                let mut options = zkc::LockOptions::new(zkc::Acls::anyone_all());
                if let Some(parents) = parents {
                    options = options
                        .with_ancestor_options(parents.mode().with_acls(zkc::Acls::anyone_all()))
                        .map_err(|e| format!("LockOptions: {e}"))?;
                }
                let lock = client
                    .lock(prefix, b"", options)
                    .await
                    .map_err(|e| format!("Client::lock: {e}"))?;
                let path = lock.lock_path().to_owned();
                // Its Drop would delete in the background without waiting for the reply; we
                // delete explicitly (and wait), like the other two. Forgetting it leaks only
                // its copy of the path.
                std::mem::forget(lock);
                Ok(Held::ClientLock {
                    client: client.clone(),
                    path,
                })
            }
        }
    }
}

impl Held {
    /// Releases: deletes the node and waits for the reply.
    pub async fn release(self) -> Result<(), String> {
        match self {
            Held::Ours(guard) => guard.release().await.map_err(|e| format!("release: {e}")),
            Held::Keyed(guard) => guard.release().await.map_err(|e| format!("release: {e}")),
            Held::ClientLock { client, path } => client
                .delete(&path, None)
                .await
                .map_err(|e| format!("delete {path}: {e}")),
        }
    }
}

/// A candidate in a leader election (`ZkLeaderElection`).
pub struct Candidate(ZkLeaderElection);

/// Leading (`ZkLeadership`).
pub struct Leading(ZkLeadership);

impl Candidate {
    /// Campaigns until elected.
    pub async fn campaign(&self) -> Result<Leading, String> {
        self.0
            .campaign()
            .await
            .map(Leading)
            .map_err(|e| format!("ZkLeaderElection::campaign: {e}"))
    }
}

impl Leading {
    /// Resigns: deletes the node and waits for the reply.
    pub async fn resign(self) -> Result<(), String> {
        self.0
            .release()
            .await
            .map_err(|e| format!("ZkLeadership::release: {e}"))
    }
}
