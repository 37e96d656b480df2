//! Someone else's write, delete or create under a lock (an operator's zkCli, a cleanup
//! script, Curator's `Revoker`), done with a raw client behind the library's back: never two
//! holders, never a grant for a node that is gone, tokens that only grow, and a lock that
//! stays usable. Each scenario runs several times, for every recipe it applies to.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{within, Zk};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use zk_recipes::zookeeper_client as zk;
use zk_recipes::{
    Error, FencingToken, Grant, LossReason, Session, ZkLeaderElection, ZkLockSpace, ZkMutex,
    ZkRwLock,
};

/// How many times each scenario runs (`ZK_FOREIGN_RUNS`).
fn runs() -> usize {
    std::env::var("ZK_FOREIGN_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4)
}

/// Something held (a lock's guard, a leadership), boxed so that one test runs every recipe.
trait Holding: Send + Sync {
    fn grant(&self) -> &Grant;
    fn release(self: Box<Self>) -> futures_lite::BoxFuture<Result<(), Error>>;
}

mod futures_lite {
    pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;
}

impl<R: zk_recipes::Recipe> Holding for zk_recipes::Guard<R>
where
    zk_recipes::Guard<R>: std::ops::Deref<Target = Grant>,
{
    fn grant(&self) -> &Grant {
        self
    }
    fn release(self: Box<Self>) -> futures_lite::BoxFuture<Result<(), Error>> {
        Box::pin(zk_recipes::Guard::release(*self))
    }
}

type Acquire =
    Arc<dyn Fn() -> futures_lite::BoxFuture<Result<Box<dyn Holding>, Error>> + Send + Sync>;

/// A recipe under test: how to acquire on a session, and the directory its nodes are in.
#[derive(Clone, Copy, Debug)]
enum Recipe {
    Mutex,
    Keyed,
    RwWriter,
    Election,
}

const ALL: [Recipe; 4] = [
    Recipe::Mutex,
    Recipe::Keyed,
    Recipe::RwWriter,
    Recipe::Election,
];

impl Recipe {
    fn acquire(self, session: &Session, root: &str) -> Acquire {
        match self {
            Recipe::Mutex => {
                let m = Arc::new(ZkMutex::new(session, root).unwrap());
                Arc::new(move || {
                    let m = m.clone();
                    Box::pin(async move { Ok(Box::new(m.lock().await?) as Box<dyn Holding>) })
                })
            }
            Recipe::Keyed => {
                let s = Arc::new(ZkLockSpace::new(session, root).unwrap());
                Arc::new(move || {
                    let s = s.clone();
                    Box::pin(async move { Ok(Box::new(s.lock("k").await?) as Box<dyn Holding>) })
                })
            }
            Recipe::RwWriter => {
                let l = Arc::new(ZkRwLock::new(session, root).unwrap());
                Arc::new(move || {
                    let l = l.clone();
                    Box::pin(async move { Ok(Box::new(l.write().await?) as Box<dyn Holding>) })
                })
            }
            Recipe::Election => {
                let e = Arc::new(ZkLeaderElection::new(session, root, b"me".to_vec()).unwrap());
                Arc::new(move || {
                    let e = e.clone();
                    Box::pin(async move { Ok(Box::new(e.campaign().await?) as Box<dyn Holding>) })
                })
            }
        }
    }

    /// Where the contender nodes are.
    fn dir(self, root: &str) -> String {
        match self {
            Recipe::Keyed => format!("{root}/k"),
            _ => root.to_owned(),
        }
    }
}

/// The contender nodes of `dir` in queue order (by sequence), as full paths.
async fn queue(raw: &zk::Client, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = raw
        .list_children(dir)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| !c.starts_with('~'))
        .collect();
    names.sort_by_key(|n| n[n.len() - 10..].to_owned());
    names.into_iter().map(|n| format!("{dir}/{n}")).collect()
}

/// Waits (on watches) until `dir` has `n` contender nodes.
async fn wait_queue(raw: &zk::Client, dir: &str, n: usize) {
    support::wait_children(raw, dir, n).await;
}

/// A contender waiting in a task: it reports its grant and holds until told to release.
struct Waiter {
    granted: oneshot::Receiver<Result<FencingToken, Error>>,
    release: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// Who holds right now, by label (the test's own record of grants and releases).
type Holders = Arc<Mutex<Vec<&'static str>>>;

fn spawn_waiter(acquire: &Acquire, label: &'static str, holders: &Holders) -> Waiter {
    let (granted_tx, granted) = oneshot::channel();
    let (release, release_rx) = oneshot::channel::<()>();
    let (acquire, holders) = (acquire.clone(), holders.clone());
    let task = tokio::spawn(async move {
        match acquire().await {
            Ok(held) => {
                {
                    let mut h = holders.lock().unwrap();
                    h.push(label);
                    assert_eq!(h.len(), 1, "two holders at once: {h:?}");
                }
                let _ = granted_tx.send(Ok(held.grant().token()));
                let _ = release_rx.await;
                holders.lock().unwrap().retain(|l| *l != label);
                let _ = held.release().await;
            }
            Err(err) => {
                let _ = granted_tx.send(Err(err));
            }
        }
    });
    Waiter {
        granted,
        release: Some(release),
        task,
    }
}

impl Waiter {
    async fn granted(&mut self, what: &str) -> Result<FencingToken, Error> {
        within(what, 30, &mut self.granted)
            .await
            .expect("the waiter's task")
    }

    /// Not granted yet, after everything this session was sent so far has been answered and
    /// a moment for the library's tasks to act on it.
    async fn still_waiting(&mut self, session: &Session, dir: &str) -> bool {
        let client = session.client().await.unwrap();
        client.sync(dir).await.unwrap();
        client.check_stat(dir).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        matches!(
            self.granted.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        )
    }

    async fn release(mut self) {
        let _ = self.release.take().unwrap().send(());
        within("the waiter's release", 30, self.task).await.unwrap();
    }
}

/// Holds with A; B and C wait behind it, in that order, all on one session (so that the
/// library sees every event in the server's order).
async fn a_holds_b_and_c_wait(
    recipe: Recipe,
    session: &Session,
    raw: &zk::Client,
    root: &str,
    holders: &Holders,
) -> (Box<dyn Holding>, Waiter, Waiter, Vec<String>) {
    let acquire = recipe.acquire(session, root);
    let a = acquire().await.unwrap();
    holders.lock().unwrap().push("a");
    let dir = recipe.dir(root);
    let b = spawn_waiter(&acquire, "b", holders);
    wait_queue(raw, &dir, 2).await;
    let c = spawn_waiter(&acquire, "c", holders);
    wait_queue(raw, &dir, 3).await;
    let nodes = queue(raw, &dir).await;
    assert_eq!(nodes[0], a.grant().path());
    (a, b, c, nodes)
}

async fn release_a(a: Box<dyn Holding>, holders: &Holders) -> Result<(), Error> {
    holders.lock().unwrap().retain(|l| *l != "a");
    a.release().await
}

/// A foreign write on a waiter's node (B, which C watches) and then on the holder's: nobody
/// moves until the holder releases; a revocation request reaches the holder as a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_write_on_any_node_moves_nobody() {
    let zk = Zk::start("foreign-write").await;
    let raw = zk.raw().await;
    for recipe in ALL {
        for run in 0..runs() {
            let root = format!("/write-{recipe:?}-{run}");
            let session = zk.session().await;
            let holders: Holders = Arc::default();
            let (a, mut b, mut c, nodes) =
                a_holds_b_and_c_wait(recipe, &session, &raw, &root, &holders).await;
            let dir = recipe.dir(&root);
            raw.set_data(&nodes[1], b"__REVOKE__", None).await.unwrap();
            raw.set_data(&nodes[2], b"someone else", None)
                .await
                .unwrap();
            raw.set_data(&nodes[0], b"__REVOKE__", None).await.unwrap();
            within(
                "the holder hears the request",
                10,
                a.grant().revoke_requested(),
            )
            .await;
            assert!(
                a.grant().is_held(),
                "{recipe:?}: a revocation request is no loss"
            );
            assert!(
                b.still_waiting(&session, &dir).await,
                "{recipe:?} run {run}: B moved while A held"
            );
            assert!(
                c.still_waiting(&session, &dir).await,
                "{recipe:?} run {run}: C moved while A held"
            );
            // Any other write on the holder's node: the holder is told (where the node is the
            // library's), and still nobody moves until it releases.
            raw.set_data(&nodes[0], b"someone else", None)
                .await
                .unwrap();
            if !matches!(recipe, Recipe::Election) {
                let reason = within("the holder hears the change", 10, a.grant().lost()).await;
                assert_eq!(reason, LossReason::NodeChanged);
                assert!(!a.grant().is_held());
            }
            assert!(
                b.still_waiting(&session, &dir).await,
                "{recipe:?} run {run}: B moved while A held"
            );
            assert!(
                c.still_waiting(&session, &dir).await,
                "{recipe:?} run {run}: C moved while A held"
            );
            let ta = a.grant().token();
            release_a(a, &holders).await.unwrap();
            let tb = b.granted("B after A's release").await.unwrap();
            assert!(
                c.still_waiting(&session, &dir).await,
                "{recipe:?}: C moved while B held"
            );
            b.release().await;
            let tc = c.granted("C after B's release").await.unwrap();
            assert!(ta < tb && tb < tc, "{recipe:?}: tokens {ta} {tb} {tc}");
            c.release().await;
            session.close().await;
        }
    }
}

/// A waiter's node deleted by someone else: that waiter is told (no grant for a node that is
/// gone), and the one behind it is granted only once the holder releases. Every other run
/// writes the node first: on 3.9 the write fires C's data watch on B with a transaction of its
/// own, and the deletion's comes in another, which proves no head release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_waiter_is_told_and_the_next_waits_for_the_holder() {
    let zk = Zk::start("foreign-delete-waiter").await;
    let raw = zk.raw().await;
    for recipe in ALL {
        for run in 0..runs() {
            let root = format!("/delwaiter-{recipe:?}-{run}");
            let session = zk.session().await;
            let holders: Holders = Arc::default();
            let (a, mut b, mut c, nodes) =
                a_holds_b_and_c_wait(recipe, &session, &raw, &root, &holders).await;
            let dir = recipe.dir(&root);
            if run % 2 == 1 {
                raw.set_data(&nodes[1], b"someone else", None)
                    .await
                    .unwrap();
            }
            raw.delete(&nodes[1], None).await.unwrap();
            match b.granted("B told of its node's deletion").await {
                Err(Error::Lost { path }) => assert_eq!(path, nodes[1]),
                other => panic!("{recipe:?} run {run}: B with its node deleted got {other:?}"),
            }
            assert!(
                c.still_waiting(&session, &dir).await,
                "{recipe:?} run {run}: C moved while A held"
            );
            release_a(a, &holders).await.unwrap();
            c.granted("C after A's release").await.unwrap();
            assert_eq!(
                queue(&raw, &dir).await,
                [nodes[2].clone()],
                "{recipe:?}: only C's node"
            );
            c.release().await;
            b.task.await.unwrap();
            session.close().await;
        }
    }
}

/// The holder's node deleted by someone else: the holder knows at once (is_held, lost) without
/// having asked, the next contender is granted, and the old holder's release deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_holder_knows_and_its_release_deletes_nothing() {
    let zk = Zk::start("foreign-delete-holder").await;
    let raw = zk.raw().await;
    for recipe in ALL {
        for run in 0..runs() {
            let root = format!("/delholder-{recipe:?}-{run}");
            let session = zk.session().await;
            let acquire = recipe.acquire(&session, &root);
            let a = acquire().await.unwrap();
            let dir = recipe.dir(&root);
            let holders: Holders = Arc::default();
            let mut b = spawn_waiter(&acquire, "b", &holders);
            wait_queue(&raw, &dir, 2).await;
            raw.delete(a.grant().path(), None).await.unwrap();
            let tb = b.granted("B after A's node went").await.unwrap();
            // Without anyone calling lost(): the grant watches its node from the start. (Its
            // task may run a moment after B's: events of one session reach different tasks.)
            within("A knows without asking", 10, async {
                while a.grant().is_held() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
            .await;
            assert_eq!(a.grant().lost().await, LossReason::NodeDeleted);
            assert!(a.grant().token() < tb);
            match a.release().await {
                Err(Error::Lost { .. }) => {}
                other => panic!("{recipe:?}: release of a deleted node gave {other:?}"),
            }
            assert_eq!(
                queue(&raw, &dir).await.len(),
                1,
                "{recipe:?}: B's node stays"
            );
            b.release().await;
            session.close().await;
        }
    }
}

/// The root (with every child, the anchor too) deleted and made again while held: the new
/// root's tokens come after the old one's, the old holder knows, and its release deletes
/// nothing of the new root's (whose first node has the old holder's very name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_made_again_never_repeats_a_token_nor_loses_a_node() {
    let zk = Zk::start("foreign-root").await;
    let raw = zk.raw().await;
    for recipe in [Recipe::Mutex, Recipe::RwWriter, Recipe::Election] {
        for run in 0..runs() {
            let root = format!("/root-{recipe:?}-{run}");
            let old = zk.session().await;
            let held = recipe.acquire(&old, &root);
            // A few grants first, so the old holder's number is not the new root's first.
            for _ in 0..3 {
                held().await.unwrap().release().await.unwrap();
            }
            let h = held().await.unwrap();
            for child in raw.list_children(&root).await.unwrap() {
                raw.delete(&format!("{root}/{child}"), None).await.unwrap();
            }
            raw.delete(&root, None).await.unwrap();
            assert_eq!(
                within("H told", 10, h.grant().lost()).await,
                LossReason::NodeDeleted
            );
            // The same numbers from the start, under a root made again.
            raw.create(
                &root,
                &[],
                &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
            let seq = |p: &str| p[p.len() - 10..].to_owned();
            let new = zk.session().await;
            let renewed = recipe.acquire(&new, &root);
            let mut n = None;
            for _ in 0..5 {
                let g = renewed().await.unwrap();
                if seq(g.grant().path()) == seq(h.grant().path()) {
                    n = Some(g);
                    break;
                }
                g.release().await.unwrap();
            }
            let n = n.expect("a node with the old holder's number");
            assert!(
                n.grant().token() > h.grant().token(),
                "{recipe:?}: {} after {}",
                n.grant().token(),
                h.grant().token()
            );
            match h.release().await {
                Err(Error::Lost { .. }) => {}
                other => panic!("{recipe:?} run {run}: the old holder's release gave {other:?}"),
            }
            assert!(
                raw.check_stat(n.grant().path()).await.unwrap().is_some(),
                "{recipe:?}: N's node deleted"
            );
            let third = zk.session().await;
            let p = recipe.acquire(&third, &root);
            let holders: Holders = Arc::new(Mutex::new(vec!["n"]));
            let mut waiter = spawn_waiter(&p, "p", &holders);
            assert!(
                waiter.still_waiting(&third, &root).await,
                "{recipe:?}: P granted while N holds"
            );
            holders.lock().unwrap().clear();
            n.release().await.unwrap();
            waiter.granted("P after N").await.unwrap();
            waiter.release().await;
            for s in [old, new, third] {
                s.close().await;
            }
        }
    }
}

/// Nodes someone made at the names the counter gives next (persistent, so nobody's
/// contenders): the lock steps over them, passes them in the queue, and stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_nodes_ahead_of_the_counter_neither_wedge_nor_hold() {
    let zk = Zk::start("foreign-create").await;
    let raw = zk.raw().await;
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for run in 0..runs() {
        let root = format!("/create-{run}");
        let session = zk.session().await;
        let mutex = ZkMutex::new(&session, &root).unwrap();
        let first = mutex.lock().await.unwrap();
        let mut last = first.token();
        first.release().await.unwrap();
        // k = 1 + run foreign nodes in a row, at the numbers the counter gives once they are
        // made: it counts the children ever created, `(cversion + numChildren) / 2` (a
        // client's cversion counts deletions too).
        let stat = raw.check_stat(&root).await.unwrap().unwrap();
        let next = (stat.cversion + stat.num_children) / 2;
        let k = 1 + run as i32;
        let foreign: Vec<String> = (0..k)
            .map(|i| format!("{root}/lock-{:010}", next + k + i))
            .collect();
        for f in &foreign {
            raw.create(f, b"not a contender", &persistent)
                .await
                .unwrap();
        }
        for _ in 0..3 {
            let guard = within("lock past foreign nodes", 30, mutex.lock())
                .await
                .unwrap();
            assert!(
                guard.token() > last,
                "tokens grow: {} after {last}",
                guard.token()
            );
            assert!(!foreign.iter().any(|f| f == guard.path()));
            last = guard.token();
            // A waiter behind it is granted on its release (the foreign nodes ahead of both are
            // passed, not waited for).
            let holders: Holders = Arc::new(Mutex::new(vec!["holder"]));
            let acquire = Recipe::Mutex.acquire(&session, &root);
            let mut w = spawn_waiter(&acquire, "w", &holders);
            assert!(w.still_waiting(&session, &root).await, "granted while held");
            holders.lock().unwrap().clear();
            guard.release().await.unwrap();
            last = last.max(w.granted("the waiter").await.unwrap());
            w.release().await;
        }
        let tried = within("try_lock past foreign nodes", 30, mutex.try_lock()).await;
        assert!(tried.unwrap().is_some());
        for f in &foreign {
            assert!(
                raw.check_stat(f).await.unwrap().is_some(),
                "the library deletes only its own nodes"
            );
        }
        session.close().await;
    }
}

/// The anchor deleted while contenders wait: the queue goes on, and a new value on the root
/// works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_anchor_changes_nothing() {
    let zk = Zk::start("foreign-anchor").await;
    let raw = zk.raw().await;
    for recipe in [Recipe::Mutex, Recipe::RwWriter, Recipe::Election] {
        let root = format!("/anchor-{recipe:?}");
        let session = zk.session().await;
        let holders: Holders = Arc::default();
        let (a, mut b, mut c, _) =
            a_holds_b_and_c_wait(recipe, &session, &raw, &root, &holders).await;
        raw.delete(&format!("{root}/~zk-recipes-anchor"), None)
            .await
            .unwrap();
        assert!(b.still_waiting(&session, &root).await);
        release_a(a, &holders).await.unwrap();
        b.granted("B").await.unwrap();
        assert!(c.still_waiting(&session, &root).await);
        b.release().await;
        c.granted("C").await.unwrap();
        c.release().await;
        let other = zk.session().await;
        let again = recipe.acquire(&other, &root);
        again().await.unwrap().release().await.unwrap();
        session.close().await;
        other.close().await;
    }
}

/// A key's directory deleted (after its nodes) while a contender waits: the waiter is told,
/// and the key locks again with a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_key_directory_is_made_again_with_larger_tokens() {
    let zk = Zk::start("foreign-keydir").await;
    let raw = zk.raw().await;
    let root = "/space";
    let session = zk.session().await;
    let holders: Holders = Arc::default();
    let (a, mut b, mut c, nodes) =
        a_holds_b_and_c_wait(Recipe::Keyed, &session, &raw, root, &holders).await;
    for n in nodes.iter().rev() {
        raw.delete(n, None).await.unwrap();
    }
    raw.delete(&format!("{root}/k"), None).await.unwrap();
    assert!(matches!(b.granted("B").await, Err(Error::Lost { .. })));
    assert!(matches!(c.granted("C").await, Err(Error::Lost { .. })));
    assert_eq!(
        within("A told", 10, a.grant().lost()).await,
        LossReason::NodeDeleted
    );
    let space = ZkLockSpace::new(&session, root).unwrap();
    let again = space.lock("k").await.unwrap();
    assert!(again.token() > a.grant().token());
    assert!(matches!(a.release().await, Err(Error::Lost { .. })));
    again.release().await.unwrap();
    session.close().await;
}
