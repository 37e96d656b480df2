//! ZooKeeper coordination recipes for Rust services: a distributed mutex whose every grant
//! carries a **fencing token**, built on one contender queue that the other recipes share.
//!
//! # Why fencing
//!
//! A lock service can only promise that it *granted* one holder at a time. It cannot stop a
//! holder that froze (a GC pause, a stopped VM, `SIGSTOP`) past its session timeout from waking
//! up, believing it still holds the lock, and writing over the work of the holder that came
//! after it. Only the store can refuse that write, and only if every write carries a number
//! that grows with every grant and the store remembers the highest one it accepted:
//!
//! ```text
//! worker 1: lock -> token 41 ... frozen ...................... write(token 41) -> REFUSED
//! ZooKeeper:           session of worker 1 expires -> node deleted
//! worker 2:                       lock -> token 42, write(token 42) -> accepted (fence = 42)
//! ```
//!
//! ZooKeeper hands out exactly such a number: the sequence of the ephemeral sequential node a
//! contender creates under the lock's root. [`Grant::token`] returns it as a [`FencingToken`];
//! the storage-side rule is one condition, `... WHERE fence <= :token`, on every write and on
//! the read of a read-modify-write (see [`FencingToken`] for the rule and an example).
//!
//! # Quick start
//!
//! ```no_run
//! use zk_recipes::{Session, SessionOptions, ZkMutex};
//!
//! # async fn demo() -> Result<(), zk_recipes::Error> {
//! let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
//! let mutex = ZkMutex::new(&session, "/locks/orders-42")?;
//!
//! let guard = mutex.lock().await?;
//! let token = guard.token();
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lost the lock ({reason:?}); stopping"),
//!     _ = async { /* write to storage with `token`; storage refuses a stale one */ } => {}
//! }
//! guard.release().await?;
//! session.close().await;
//! # let _ = token; Ok(()) }
//! ```
//!
//! `cargo run --example quick_start` runs this against a ZooKeeper it starts in Docker; the
//! `examples/` directory has more complete programs (`leader_election`, the demo).
//!
//! # The pieces
//!
//! - [`Session`]: one ZooKeeper session at a time, its [`SessionState`] published, a new session
//!   after expiry; the [`LossPolicy`] says when grants count as lost and how to react to
//!   connection loss.
//! - [`ZkMutex`]: FIFO, no herd (a waiter watches only its predecessor), handoffs of one write
//!   round trip (the next waiter holds without a read), cancel-safe acquires,
//!   `'static` guards ([`Guard`], the one shape of everything held: `is_held()`, `lost()`,
//!   `release()`) that dereference to a [`Grant`]: [`Grant::token`],
//!   [`Grant::fenced_write`], [`Grant::confirm`]. Node names are Curator's
//!   (`lock-NNNNNNNNNN`, ordered by the suffix as Curator orders its `_c_{uuid}-lock-` nodes),
//!   so Rust and Java workers can share a lock.
//! - [`ZkLockSpace`]: a lock per key (`lock("order-42")`) whose directory the server reaps once
//!   idle, with the contender node's creation zxid as its token (it keeps growing across
//!   reaping).
//! - [`ZkLeaderElection`]: a [`ZkLeadership`] (a [`Guard`]) with a term (its fencing token);
//!   [`ZkLeaderObserver`] follows the leader without campaigning (Curator `LeaderLatch` names).
//! - [`ZkRwLock`]: shared readers, exclusive writers, FIFO between them (Curator
//!   `InterProcessReadWriteLock` names).
//! - [`ZkSemaphore`]: at most N leases, FIFO (Curator `InterProcessSemaphoreV2` layout).
//! - [`ZkSharedCount`]: a 32-bit count in one node, compare-and-set on its version (Curator
//!   `SharedCount` layout).
//! - [`ZkGroup`]: group membership, a member's node kept across session expiries (Curator
//!   `GroupMember` layout).
//! - [`ZkKeptNode`]: a node made again in each new session and after a deletion (Curator
//!   `PersistentNode`); [`discovery`]: service registration and discovery on
//!   `curator-x-discovery`'s layout.
//! - [`ZkMultiLock`]: several mutexes and keys taken together in one global order, a token
//!   per lock (Curator `InterProcessMultiLock`).
//! - [`ZkPartitioner`]: members of a group split a set of partitions, a lock per partition
//!   (kazoo `SetPartitioner`'s phases).
//! - [`ZkBarrier`], [`ZkDoubleBarrier`]: wait until a node is removed; enter when N members
//!   have arrived and leave when all have left (Curator `DistributedBarrier`,
//!   `DistributedDoubleBarrier` layouts).
//! - [`ZkAtomicLong`]: a 64-bit value, compare-and-set with bounded tries and an optional
//!   lock-backed round (Curator `DistributedAtomicLong` layout, `PromotedToLock`).
//! - [`Error`]: the one error type ([`Error::is_retryable`] says which to retry).
//! - [`layout`]: what the recipes leave in ZooKeeper (node names and their parsing, the owner
//!   record, each recipe's rule as a pure function), public for tools such as `zkr inspect`.
//! - [`zookeeper_client`]: the client crate, re-exported, for [`FencedWrite`]'s operations and
//!   [`Session::client`].
//!
//! The mutex, the election and the read/write lock are one contender queue each, differing only
//! in their node names and their rule (who holds, whom a waiter watches); the semaphore
//! composes two queues. `ARCHITECTURE.md` in the repository says where to start reading.
//!
//! # Time limits
//!
//! Every acquire future is cancel safe, so a time limit is `tokio::time::timeout` around it;
//! when it elapses, the contender's node is deleted in the background (one request) and nothing
//! is held. `try_lock` and the other `try_*` forms take one round trip and never wait.
//!
//! # Roots
//!
//! A recipe creates its root as a persistent node when missing and refuses an ephemeral one
//! ([`Error::UnsuitableRoot`]).
//! ZooKeeper reports containers and TTL nodes to clients as persistent, so those cannot be
//! refused; instead each root gets a persistent child `~zk-recipes-anchor` (sorting after every
//! contender, also in Curator's order), which keeps the server from ever deleting the root and
//! restarting its sequence. A root deleted and created again under a live recipe value is
//! refused with [`Error::RootReplaced`] rather than handing out tokens that went backwards.
//!
//! # TLS, SASL and ACLs
//!
//! Behind crate features, so that the default build carries none of their dependencies:
//!
//! - `tls`: `SessionOptions::tls` with a `TlsConfig` (the CA, optionally a client
//!   certificate). A failed handshake is a typed error: [`Error::TlsUntrustedServer`],
//!   [`Error::TlsClientCertRefused`], [`Error::TlsHandshake`].
//! - `sasl-digest-md5`: `SessionOptions::sasl_digest_md5`; a refusal is
//!   [`Error::SaslFailed`].
//! - `sasl-gssapi`: `SessionOptions::sasl_gssapi` (Kerberos; needs the system's GSSAPI
//!   library and headers to build).
//!
//! [`SessionOptions::node_acls`] sets the ACL of every node the recipes create, for example
//! [`zookeeper_client::Acls::creator_all`] for the session's authenticated identity only; its
//! docs say what ZooKeeper's ACLs can and cannot protect (deleting a child is governed by the
//! parent's ACL).
//!
//! ```
//! # #[cfg(feature = "tls")]
//! # fn demo() -> Result<(), zk_recipes::Error> {
//! use zk_recipes::{zookeeper_client::Acls, SessionOptions, TlsConfig};
//!
//! // As the README shows it; `TlsConfig::new` and `with_client_cert` take the PEM text itself.
//! let tls = TlsConfig::from_ca_file("/etc/zk/ca.pem")?
//!     .with_client_cert_files("/etc/zk/client.pem", "/etc/zk/client.key")?;
//! let opts = SessionOptions::new("zk1:2281,zk2:2281,zk3:2281/app")
//!     .tls(tls)
//!     .digest_auth("billing", "secret")
//!     .node_acls(Acls::creator_all());
//! # let _ = opts; Ok(()) }
//! ```
#![warn(missing_docs)]

mod atomic;
mod barrier;
mod cache;
mod claim;
mod count;
mod detach;
pub mod discovery;
mod election;
mod error;
mod fence;
mod grant;
mod group;
mod guard;
mod kept;
mod key;
mod keyed;
pub mod layout;
mod lead;
mod multilock;
mod mutex;
mod nodelay;
mod ops;
mod partition;
mod path;
mod queue;
mod rwlock;
mod semaphore;
mod session;
#[cfg(feature = "tls")]
mod tls;

pub use atomic::{AtomicStats, AtomicValue, PromotedToLock, RetryPolicy, ZkAtomicLong};
pub use barrier::{DoubleBarrierEntry, ZkBarrier, ZkDoubleBarrier};
pub use cache::{CachedNode, TreeCacheOptions, TreeEvent, TreeEvents, TreeSnapshot, ZkTreeCache};
pub use count::{VersionedCount, ZkSharedCount};
#[allow(deprecated)]
pub use election::Leadership;
pub use election::{Leader, ZkLeaderElection, ZkLeaderObserver, ZkLeadership};
pub use error::{Error, Result, RootKind};
pub use fence::{FencedWrite, FencingToken};
pub use grant::{Grant, LossReason};
pub use group::{Members, ZkGroup, ZkGroupMember};
pub use guard::{Guard, Recipe};
pub use kept::{KeptMode, KeptState, ZkKeptNode};
pub use keyed::{ZkLockSpace, ZkLockSpaceGuard};
pub use multilock::{LockRef, MultiFencedWrite, MultiLoss, ZkMultiLock, ZkMultiLockGuard};
pub use mutex::{ZkMutex, ZkMutexGuard};
pub use partition::{Assignment, PartitionState, ZkPartitionMember, ZkPartitioner};
pub use rwlock::{ZkRwLock, ZkRwLockGuard};
pub use semaphore::{ZkSemaphore, ZkSemaphoreLease};
pub use session::{LossPolicy, Session, SessionOptions, SessionState};
#[cfg(feature = "tls")]
pub use tls::TlsConfig;
pub use zookeeper_client;

/// [`ZkLeaderElection`]'s old name, kept for a while so that code written for it still builds.
#[deprecated(note = "renamed `ZkLeaderElection`: every recipe's type carries the `Zk` prefix")]
pub type LeaderElection = ZkLeaderElection;

/// [`ZkLeaderObserver`]'s old name, kept for a while so that code written for it still builds.
#[deprecated(note = "renamed `ZkLeaderObserver`: every recipe's type carries the `Zk` prefix")]
pub type LeaderObserver = ZkLeaderObserver;
