//! [`FaultProxy`]: a TCP proxy between a ZooKeeper client and one server that breaks the
//! connection in the ways networks do (dropped connections, blackholes, latency) and in the
//! way that is hardest to get right: a reply that never arrives for a request that was done.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::HarnessError;

/// ZooKeeper request opcodes (the `type` field after the `xid` of every request), for
/// predicates given to [`FaultProxy::lose_next_reply`].
///
/// ```
/// use zk_testcontainers::opcode;
/// assert_eq!(opcode::CREATE2, 15);
/// assert_eq!(opcode::MULTI, 14);
/// ```
pub mod opcode {
    /// `create` (also sent by clients for sequential and ephemeral nodes).
    pub const CREATE: i32 = 1;
    /// `delete`.
    pub const DELETE: i32 = 2;
    /// `exists`.
    pub const EXISTS: i32 = 3;
    /// `getData`.
    pub const GET_DATA: i32 = 4;
    /// `setData`.
    pub const SET_DATA: i32 = 5;
    /// `getChildren`.
    pub const GET_CHILDREN: i32 = 8;
    /// `sync`.
    pub const SYNC: i32 = 9;
    /// `ping` (xid -2).
    pub const PING: i32 = 11;
    /// `getChildren2` (children and the parent's stat).
    pub const GET_CHILDREN2: i32 = 12;
    /// `check` (version check, inside a multi).
    pub const CHECK: i32 = 13;
    /// `multi`: a transaction (what a fenced write is sent as).
    pub const MULTI: i32 = 14;
    /// `create2` (create returning the stat; what zookeeper-client sends for creates).
    pub const CREATE2: i32 = 15;
    /// `createContainer`.
    pub const CREATE_CONTAINER: i32 = 19;
    /// `createTTL`.
    pub const CREATE_TTL: i32 = 21;
    /// `closeSession`.
    pub const CLOSE_SESSION: i32 = -11;
}

/// Largest frame taken for ZooKeeper framing: a first length above it (or below 0) means the
/// connection speaks something else (a four-letter word such as `ruok` reads as ~1.9e9), which
/// is then forwarded as raw bytes.
const MAX_FRAME: i32 = 64 << 20;

/// A direction of traffic through a [`FaultProxy`].
///
/// ```no_run
/// use std::time::Duration;
/// use zk_testcontainers::{Direction, FaultProxy};
///
/// # async fn demo(proxy: FaultProxy) {
/// proxy.delay(Direction::ToServer, Duration::from_millis(50));
/// proxy.delay(Direction::ToClient, Duration::from_millis(200));
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server: requests.
    ToServer,
    /// Server to client: replies and watch events.
    ToClient,
}

/// A ZooKeeper request passing through a [`FaultProxy`], as its predicates see it: a frame
/// after the connect request, without its length prefix.
///
/// ```no_run
/// use zk_testcontainers::{opcode, FaultProxy};
///
/// # async fn demo(proxy: FaultProxy) {
/// // Lose the reply to the next create of a node whose path contains "-lock-".
/// proxy.lose_next_reply(|request| request.is_create() && request.contains(b"-lock-"));
/// // Or to the next transaction.
/// proxy.lose_next_reply(|request| request.opcode() == opcode::MULTI);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    frame: &'a [u8],
}

impl<'a> Request<'a> {
    /// The request's `xid`: the client's sequence number, echoed by the reply.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.lose_next_reply(|request| request.xid() > 0); // any request but pings and auth
    /// # }
    /// ```
    pub fn xid(&self) -> i32 {
        i32::from_be_bytes(self.frame[0..4].try_into().expect("checked length"))
    }

    /// The request's opcode (see [`opcode`]).
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// use zk_testcontainers::opcode;
    /// proxy.lose_next_reply(|request| request.opcode() == opcode::DELETE);
    /// # }
    /// ```
    pub fn opcode(&self) -> i32 {
        i32::from_be_bytes(self.frame[4..8].try_into().expect("checked length"))
    }

    /// The serialized request after `xid` and opcode (for a create: the path, the data, the
    /// ACL, the flags).
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.lose_next_reply(|request| request.body().len() > 1024);
    /// # }
    /// ```
    pub fn body(&self) -> &'a [u8] {
        &self.frame[8..]
    }

    /// Whether the body contains `needle` anywhere (a path fragment, a payload).
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.lose_next_reply(|request| request.contains(b"/orders/"));
    /// # }
    /// ```
    pub fn contains(&self, needle: &[u8]) -> bool {
        needle.is_empty() || self.body().windows(needle.len()).any(|w| w == needle)
    }

    /// The path a create (of any form) names, as the client sent it (with its chroot);
    /// `None` for other requests or a body too short to hold one.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// // Lose the reply to a sequential lock node's create, not to its directory's.
    /// proxy.lose_next_reply(|r| r.create_path().is_some_and(|p| p.ends_with("lock-")));
    /// # }
    /// ```
    pub fn create_path(&self) -> Option<&'a str> {
        if !self.is_create() {
            return None;
        }
        let body = self.body();
        let len = usize::try_from(i32::from_be_bytes(body.get(..4)?.try_into().ok()?)).ok()?;
        std::str::from_utf8(body.get(4..4 + len)?).ok()
    }

    /// Whether it creates a node, in any of its forms (`create`, `create2`, container, TTL).
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.lose_next_reply(|request| request.is_create());
    /// # }
    /// ```
    pub fn is_create(&self) -> bool {
        matches!(
            self.opcode(),
            opcode::CREATE | opcode::CREATE2 | opcode::CREATE_CONTAINER | opcode::CREATE_TTL
        )
    }
}

type Predicate = Box<dyn Fn(&Request<'_>) -> bool + Send + Sync>;

/// The faults in force, as every connection follows them.
#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    blackholed: bool,
    to_server: Duration,
    to_client: Duration,
    /// Bumped by `drop_connections`: connections of an older generation close.
    generation: u64,
    shutdown: bool,
}

impl Faults {
    fn delay(&self, direction: Direction) -> Duration {
        match direction {
            Direction::ToServer => self.to_server,
            Direction::ToClient => self.to_client,
        }
    }
}

struct Shared {
    upstream: String,
    faults: watch::Sender<Faults>,
    rule: Mutex<Option<Predicate>>,
    lost: watch::Sender<u64>,
    open: AtomicUsize,
}

/// A fault-injecting TCP proxy in front of one ZooKeeper server (or anything else speaking
/// TCP): point a client at [`addr`](FaultProxy::addr) instead of the server, then break the
/// path between them.
///
/// - [`drop_connections`](FaultProxy::drop_connections): every open connection is closed now
///   (the client reconnects, through the proxy, to the same session).
/// - [`blackhole`](FaultProxy::blackhole) until [`heal`](FaultProxy::heal): connections stay
///   open but nothing gets through, like a network partition; the session expires if the
///   blackhole outlasts it.
/// - [`delay`](FaultProxy::delay): latency per direction.
/// - [`lose_next_reply`](FaultProxy::lose_next_reply): the next request matching a predicate
///   reaches the server and is done, but its reply never reaches the client, which sees its
///   connection drop instead: the outcome of that request is unknown to it.
///
/// The proxy understands ZooKeeper's framing (a 4-byte big-endian length before every
/// message; after the connect request, requests start with `xid` and opcode, replies with
/// `xid`). A connection whose first bytes are no plausible frame (a four-letter word) is
/// forwarded as raw bytes, with every fault but the lost reply.
///
/// Dropping the proxy closes its listener and every connection through it.
///
/// # Example
///
/// ```no_run
/// use zk_testcontainers::{test_server, FaultProxy};
/// use zookeeper_client::Client;
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let zk = test_server().await?;
/// let proxy = FaultProxy::start(zk.connect_string()).await?;
/// let client = Client::connect(&proxy.addr().to_string()).await.unwrap();
/// proxy.drop_connections(); // the client reconnects through the proxy, same session
/// let children = client.list_children("/").await;
/// # Ok(()) }
/// ```
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .field("faults", &*self.shared.faults.borrow())
            .field("open_connections", &self.open_connections())
            .field("lost_replies", &self.lost_replies())
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1` (a free port) forwarding to `upstream`, a `host:port`.
    /// A connect string with several hosts or a chroot is cut to its first host. Each
    /// connection accepted opens its own connection upstream. Must be called inside a tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when no local port can be bound.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// // A client that reaches member 0 only through the proxy.
    /// let proxy = zk_testcontainers::FaultProxy::start(ensemble.member(0).connect_string()).await?;
    /// let connect = format!("{}/app", proxy.addr());
    /// # Ok(()) }
    /// ```
    pub async fn start(upstream: impl Into<String>) -> Result<FaultProxy, HarnessError> {
        let upstream = first_host(&upstream.into());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| HarnessError::Io("binding a proxy port on 127.0.0.1".into(), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| HarnessError::Io("reading the proxy's address".into(), e))?;
        let shared = Arc::new(Shared {
            upstream,
            faults: watch::channel(Faults::default()).0,
            rule: Mutex::new(None),
            lost: watch::channel(0).0,
            open: AtomicUsize::new(0),
        });
        let accepting = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, accepting.clone()));
            }
        });
        Ok(FaultProxy {
            addr,
            shared,
            accept,
        })
    }

    /// The address clients connect to instead of the server (`127.0.0.1:<port>`); append a
    /// chroot to use it as a connect string.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// let client = zookeeper_client::Client::connect(&proxy.addr().to_string()).await.unwrap();
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `host:port` the proxy forwards to.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let proxy = zk_testcontainers::FaultProxy::start("127.0.0.1:2181/app").await?;
    /// assert_eq!(proxy.upstream(), "127.0.0.1:2181");
    /// # Ok(()) }
    /// ```
    pub fn upstream(&self) -> &str {
        &self.shared.upstream
    }

    /// Closes every open connection now, both ways (the client sees its connection reset;
    /// the server sees the client go). New connections are accepted as before.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.drop_connections();
    /// # }
    /// ```
    pub fn drop_connections(&self) {
        self.shared.faults.send_modify(|f| f.generation += 1);
    }

    /// Lets nothing through from now until [`heal`](Self::heal), like a network partition:
    /// open connections stay open, and whatever either side sends is dropped (whole
    /// messages). New connections are accepted but not connected upstream until the heal.
    /// When the blackhole heals, connections that lost something to it are closed (their
    /// streams have a hole); the others carry on.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.blackhole();
    /// // ... the client's requests and pings go unanswered; it reports Disconnected ...
    /// proxy.heal();
    /// # }
    /// ```
    pub fn blackhole(&self) {
        self.shared.faults.send_modify(|f| f.blackholed = true);
    }

    /// Ends a [`blackhole`](Self::blackhole), sets every [`delay`](Self::delay) back to zero
    /// and disarms a [`lose_next_reply`](Self::lose_next_reply) that has not fired yet.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.heal();
    /// # }
    /// ```
    pub fn heal(&self) {
        self.shared.faults.send_modify(|f| {
            f.blackholed = false;
            f.to_server = Duration::ZERO;
            f.to_client = Duration::ZERO;
        });
        *self.shared.rule.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Delays everything sent in `direction` by `latency` (replacing an earlier setting;
    /// zero removes it). Each message is held from the moment it was read, so this adds
    /// latency without limiting throughput, and order is kept.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_testcontainers::Direction;
    ///
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.delay(Direction::ToClient, Duration::from_millis(300)); // slow replies
    /// # }
    /// ```
    pub fn delay(&self, direction: Direction, latency: Duration) {
        self.shared.faults.send_modify(|f| match direction {
            Direction::ToServer => f.to_server = latency,
            Direction::ToClient => f.to_client = latency,
        });
    }

    /// Loses the reply to the next request (on any connection) for which `matches` is true:
    /// the request is forwarded and done by the server, replies to earlier requests still
    /// reach the client, but requests sent after it on that connection are dropped, and when
    /// its reply arrives the proxy swallows it and closes the connection. The client sees a
    /// connection loss for a request that took effect, reconnects (through the proxy, to the
    /// same session) and must find out for itself what happened.
    ///
    /// Fires once; arming again replaces a rule that has not fired. See
    /// [`lost_replies`](Self::lost_replies) and [`wait_for_lost_replies`](Self::wait_for_lost_replies).
    ///
    /// ```no_run
    /// use zk_testcontainers::opcode;
    ///
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.lose_next_reply(|request| request.is_create() && request.contains(b"-lock-"));
    /// // ... the client locks; its create succeeds on the server, the reply is lost ...
    /// proxy.wait_for_lost_replies(1).await;
    /// # }
    /// ```
    pub fn lose_next_reply(&self, matches: impl Fn(&Request<'_>) -> bool + Send + Sync + 'static) {
        *self.shared.rule.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(matches));
    }

    /// How many replies [`lose_next_reply`](Self::lose_next_reply) has lost so far.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// assert_eq!(proxy.lost_replies(), 0);
    /// # }
    /// ```
    pub fn lost_replies(&self) -> u64 {
        *self.shared.lost.borrow()
    }

    /// Waits until `n` replies in all have been lost. Wrap it in a timeout.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_testcontainers::scaled;
    ///
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// proxy.lose_next_reply(|request| request.is_create());
    /// tokio::time::timeout(scaled(Duration::from_secs(30)), proxy.wait_for_lost_replies(1))
    ///     .await
    ///     .expect("a create reply was lost");
    /// # }
    /// ```
    pub async fn wait_for_lost_replies(&self, n: u64) {
        let mut lost = self.shared.lost.subscribe();
        let _ = lost.wait_for(|lost| *lost >= n).await;
    }

    /// How many client connections are open through the proxy right now.
    ///
    /// ```no_run
    /// # async fn demo(proxy: zk_testcontainers::FaultProxy) {
    /// println!("{} clients connected", proxy.open_connections());
    /// # }
    /// ```
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.shared.faults.send_modify(|f| f.shutdown = true);
    }
}

/// `host:port` of the first host of a connect string.
fn first_host(connect: &str) -> String {
    let hosts = connect.split('/').next().unwrap_or_default();
    hosts
        .split(',')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Counts an open connection for as long as it lives.
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a connection's bytes are cut into messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Framed,
    Raw,
}

/// What a reader hands its writer.
enum Item {
    Data(Instant, Vec<u8>),
    /// The peer closed its side: shut ours down.
    Eof,
    /// Close the whole connection once everything before this has been written.
    Cut,
}

/// Why a connection ends early.
struct Closed;

/// State shared by the two directions of one connection.
struct Conn {
    shared: Arc<Shared>,
    /// Decided by the first bytes the client sends; the server says nothing before.
    mode: watch::Sender<Option<Mode>>,
    /// The xid of the request whose reply is to be lost, once it has been seen.
    doomed: Mutex<Option<i32>>,
    /// Whether something was dropped by a blackhole.
    holed: AtomicBool,
}

async fn serve(client: TcpStream, shared: Arc<Shared>) {
    shared.open.fetch_add(1, Ordering::SeqCst);
    let _open = OpenGuard(shared.clone());
    let faults = shared.faults.subscribe();
    let generation = faults.borrow().generation;
    let mut ended = faults.clone();
    let ended = async move {
        let _ = ended
            .wait_for(|f| f.shutdown || f.generation != generation)
            .await;
    };
    tokio::pin!(ended);
    // A connection accepted during a blackhole reaches the server only after the heal, and
    // what it sent meanwhile is lost: it is closed then.
    let mut healed = faults.clone();
    let accepted_in_blackhole = healed.borrow().blackholed;
    if accepted_in_blackhole {
        tokio::select! {
            _ = &mut ended => return,
            _ = healed.wait_for(|f| !f.blackholed) => return,
        }
    }
    let server = tokio::select! {
        _ = &mut ended => return,
        server = TcpStream::connect(&shared.upstream) => match server {
            Ok(server) => server,
            Err(e) => {
                tracing::debug!("proxy: connecting to {}: {e}", shared.upstream);
                return;
            }
        },
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let conn = Conn {
        shared: shared.clone(),
        mode: watch::channel(None).0,
        doomed: Mutex::new(None),
        holed: AtomicBool::new(false),
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pipe(&conn, client_read, server_write, Direction::ToServer);
    let down = pipe(&conn, server_read, client_write, Direction::ToClient);
    let holes = async {
        let mut faults = shared.faults.subscribe();
        loop {
            let _ = faults.wait_for(|f| f.blackholed).await;
            let _ = faults.wait_for(|f| !f.blackholed).await;
            if conn.holed.load(Ordering::SeqCst) {
                return;
            }
        }
    };
    tokio::select! {
        _ = &mut ended => {}
        _ = holes => {}
        _ = async { tokio::try_join!(up, down) } => {}
    }
}

/// One direction: a reader and a writer joined by a channel, so that delays hold messages
/// without stopping the reading.
async fn pipe(
    conn: &Conn,
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    direction: Direction,
) -> Result<(), Closed> {
    let (tx, rx) = mpsc::channel(256);
    tokio::try_join!(
        reader(conn, read, tx, direction),
        writer(conn, write, rx, direction)
    )?;
    Ok(())
}

async fn reader(
    conn: &Conn,
    mut read: OwnedReadHalf,
    tx: mpsc::Sender<Item>,
    direction: Direction,
) -> Result<(), Closed> {
    let send = |item| async { tx.send(item).await.map_err(|_| Closed) };
    // The first message each way is the connect request / response: not inspected.
    let mut first = true;
    let mode = match direction {
        Direction::ToServer => {
            let mut len = [0u8; 4];
            if read.read_exact(&mut len).await.is_err() {
                conn.mode.send_replace(Some(Mode::Raw));
                return send(Item::Eof).await;
            }
            let n = i32::from_be_bytes(len);
            let mode = if (0..=MAX_FRAME).contains(&n) {
                Mode::Framed
            } else {
                Mode::Raw
            };
            conn.mode.send_replace(Some(mode));
            let mut data = len.to_vec();
            if mode == Mode::Framed {
                data.resize(4 + n as usize, 0);
                read.read_exact(&mut data[4..]).await.map_err(|_| Closed)?;
                first = false;
            }
            send(Item::Data(Instant::now(), data)).await?;
            mode
        }
        Direction::ToClient => {
            let mut mode = conn.mode.subscribe();
            let decided = *mode.wait_for(Option::is_some).await.map_err(|_| Closed)?;
            decided.expect("waited for")
        }
    };
    loop {
        let data = match mode {
            Mode::Raw => {
                let mut buf = vec![0u8; 16 << 10];
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => return send(Item::Eof).await,
                    Ok(n) => {
                        buf.truncate(n);
                        buf
                    }
                }
            }
            Mode::Framed => {
                let mut len = [0u8; 4];
                if read.read_exact(&mut len).await.is_err() {
                    return send(Item::Eof).await;
                }
                let n = i32::from_be_bytes(len);
                if !(0..=MAX_FRAME).contains(&n) {
                    return Err(Closed);
                }
                let mut data = vec![0u8; 4 + n as usize];
                data[..4].copy_from_slice(&len);
                read.read_exact(&mut data[4..]).await.map_err(|_| Closed)?;
                data
            }
        };
        if mode == Mode::Framed && !std::mem::take(&mut first) {
            let body = &data[4..];
            match direction {
                Direction::ToServer => {
                    let mut doomed = conn.doomed.lock().unwrap_or_else(|e| e.into_inner());
                    if doomed.is_some() {
                        continue; // the connection is doomed: the server hears no more
                    }
                    if body.len() >= 8 {
                        let request = Request { frame: body };
                        let mut rule = conn.shared.rule.lock().unwrap_or_else(|e| e.into_inner());
                        if rule.as_ref().is_some_and(|matches| matches(&request)) {
                            *rule = None;
                            *doomed = Some(request.xid());
                        }
                    }
                }
                Direction::ToClient => {
                    let doomed = *conn.doomed.lock().unwrap_or_else(|e| e.into_inner());
                    if let (Some(xid), true) = (doomed, body.len() >= 4) {
                        if i32::from_be_bytes(body[0..4].try_into().expect("4 bytes")) == xid {
                            conn.shared.lost.send_modify(|n| *n += 1);
                            // The writer closes the connection once the replies before
                            // this one are delivered.
                            return send(Item::Cut).await;
                        }
                    }
                }
            }
        }
        send(Item::Data(Instant::now(), data)).await?;
    }
}

async fn writer(
    conn: &Conn,
    mut write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Item>,
    direction: Direction,
) -> Result<(), Closed> {
    let faults = conn.shared.faults.subscribe();
    while let Some(item) = rx.recv().await {
        match item {
            Item::Data(read_at, data) => {
                let delay = faults.borrow().delay(direction);
                if !delay.is_zero() {
                    tokio::time::sleep_until(read_at + delay).await;
                }
                if faults.borrow().blackholed {
                    conn.holed.store(true, Ordering::SeqCst);
                    continue;
                }
                write.write_all(&data).await.map_err(|_| Closed)?;
            }
            Item::Eof => {
                let _ = write.shutdown().await;
                return Ok(());
            }
            Item::Cut => return Err(Closed),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_from_frames() {
        let mut frame = Vec::new();
        frame.extend_from_slice(&7i32.to_be_bytes());
        frame.extend_from_slice(&opcode::CREATE2.to_be_bytes());
        frame.extend_from_slice(b"\0\0\0\x0b/a/b-lock-x");
        let request = Request { frame: &frame };
        assert_eq!(request.xid(), 7);
        assert_eq!(request.opcode(), opcode::CREATE2);
        assert!(request.is_create());
        assert!(request.contains(b"-lock-"));
        assert!(!request.contains(b"-unlock-"));
    }

    #[test]
    fn connect_strings_are_cut_to_the_first_host() {
        assert_eq!(first_host("127.0.0.1:2181"), "127.0.0.1:2181");
        assert_eq!(first_host("a:1,b:2/chroot"), "a:1");
        assert_eq!(first_host("a:1/chroot/x"), "a:1");
    }
}
