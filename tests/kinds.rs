//! One path, one recipe kind, against a real server: every pair of recipe kinds on one path,
//! both ways round, gets a typed refusal that names the kind already there and leaves the
//! path as it was; nothing but the lock space takes a key's directory; and the operator slip
//! of an earlier version (a key's directory anchored as a mutex) is refused with the repair.

mod support;

use support::Zk;
use zk_recipes::layout::kind::RecipeKind;
use zk_recipes::layout::ANCHOR;
use zk_recipes::{
    Error, RootKind, Session, ZkGroup, ZkLeaderElection, ZkLockSpace, ZkMutex, ZkRwLock,
    ZkSemaphore, ZkSharedCount,
};
use zookeeper_client as zkc;

/// What a recipe of `kind` keeps while a test runs (a held lock, a member).
type Kept = Vec<Box<dyn std::any::Any + Send>>;

/// Uses `path` as a recipe of `kind` would on first use (takes the lock, joins, reads), keeping
/// what it holds in `kept`.
async fn take(
    session: &Session,
    kind: RecipeKind,
    path: &str,
    kept: &mut Kept,
) -> Result<(), Error> {
    match kind {
        RecipeKind::Mutex => {
            let mutex = ZkMutex::new(session, path)?;
            kept.push(Box::new(mutex.try_lock().await?));
        }
        RecipeKind::RwLock => {
            let lock = ZkRwLock::new(session, path)?;
            kept.push(Box::new(lock.try_read().await?));
        }
        RecipeKind::Election => {
            let election = ZkLeaderElection::new(session, path, "me")?;
            kept.push(Box::new(election.try_campaign().await?));
        }
        RecipeKind::Semaphore => {
            let semaphore = ZkSemaphore::new(session, path, 2)?;
            kept.push(Box::new(semaphore.try_acquire().await?));
        }
        RecipeKind::LockSpace => {
            let space = ZkLockSpace::new(session, path)?;
            kept.push(Box::new(space.try_lock("k").await?));
        }
        RecipeKind::Count => {
            ZkSharedCount::new(session, path, 7)?.add(1).await?;
        }
        RecipeKind::Group => {
            let group = ZkGroup::new(session, path)?;
            let id = format!("member-{}", kept.len());
            kept.push(Box::new(group.join(&id, b"up").await?));
        }
        RecipeKind::Barrier => {
            zk_recipes::ZkBarrier::new(session, path)?.set().await?;
        }
        RecipeKind::DoubleBarrier => {
            let id = format!("member-{}", kept.len());
            let barrier = zk_recipes::ZkDoubleBarrier::with_id(session, path, 1, &id)?;
            kept.push(Box::new(barrier.enter().await?));
        }
        RecipeKind::AtomicLong => {
            let retry = zk_recipes::RetryPolicy::default();
            zk_recipes::ZkAtomicLong::new(session, path, retry)?
                .increment()
                .await?;
        }
        other => panic!("no test for {other:?}"),
    }
    Ok(())
}

/// Every node below `path` (itself included) with its data, sorted.
async fn tree(raw: &zkc::Client, path: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![path.to_owned()];
    while let Some(node) = todo.pop() {
        let Ok((data, _)) = raw.get_data(&node).await else {
            continue;
        };
        for child in raw.list_children(&node).await.unwrap_or_default() {
            todo.push(format!("{node}/{child}"));
        }
        out.push((node, data));
    }
    out.sort();
    out
}

fn refused(err: &Error) -> Option<RootKind> {
    match err {
        Error::UnsuitableRoot { kind, .. } => Some(*kind),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_of_kinds_on_one_path_is_refused_both_ways() {
    let zk = Zk::start("kinds-pairs").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let mut pairs = 0;
    for (i, first) in RecipeKind::ALL.into_iter().enumerate() {
        let path = format!("/kinds/{}-{i}", first.name());
        let mut kept = Kept::new();
        take(&session, first, &path, &mut kept).await.unwrap();
        let before = tree(&raw, &path).await;
        for then in RecipeKind::ALL.into_iter().filter(|k| *k != first) {
            let err = take(&session, then, &path, &mut kept).await.unwrap_err();
            assert_eq!(
                refused(&err),
                Some(RootKind::Taken(first)),
                "{first} then {then}: {err}"
            );
            assert!(err.to_string().contains(first.type_name()), "{err}");
            assert!(!err.is_retryable());
            assert_eq!(tree(&raw, &path).await, before, "{first} then {then}");
            pairs += 1;
        }
        // Its own kind takes it again, from another value.
        take(&session, first, &path, &mut kept).await.unwrap();
    }
    let kinds = RecipeKind::ALL.len();
    assert_eq!(pairs, kinds * (kinds - 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_but_the_space_takes_a_keys_directory() {
    let zk = Zk::start("kinds-space").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let space = ZkLockSpace::new(&session, "/shop/locks/orders").unwrap();
    let held = space.lock("order-1").await.unwrap();
    let key_dir = space.key_path("order-1").unwrap();
    let idle_dir = space.key_path("order-2").unwrap();
    for kind in RecipeKind::ALL {
        for dir in [&key_dir, &idle_dir] {
            let before = tree(&raw, dir).await;
            let err = take(&session, kind, dir, &mut Kept::new())
                .await
                .unwrap_err();
            assert_eq!(
                refused(&err),
                Some(RootKind::InLockSpace),
                "{kind} on {dir}: {err}"
            );
            assert_eq!(tree(&raw, dir).await, before, "{kind} on {dir}");
        }
    }
    // The message names the fix.
    let err = ZkMutex::new(&session, &key_dir)
        .unwrap()
        .try_lock()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--key"), "{err}");
    held.release().await.unwrap();
    // The space's own anchor is no key.
    let names = raw.list_children("/shop/locks/orders").await.unwrap();
    assert!(names.iter().any(|n| n == ANCHOR), "{names:?}");
    assert!(names
        .iter()
        .all(|n| n == ANCHOR || ZkLockSpace::key_of(n).is_some()));
    assert_eq!(ZkLockSpace::key_of(ANCHOR), None);
    let tricky = space.lock(ANCHOR).await.unwrap();
    assert_eq!(
        tricky.path().rsplit_once('/').unwrap().0,
        "/shop/locks/orders/%7Ezk-recipes-anchor"
    );
    tricky.release().await.unwrap();
}

/// The slip as earlier versions let it happen: a key's directory anchored as a mutex root
/// (`zkr lock SPACE/KEY` without `--key`). Keyed workers refuse the key with the repair in the
/// message; once the anchor and the directory are gone (what `zkr repair` does, one multi-op),
/// they lock it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anchored_key_is_refused_with_the_repair_and_works_after_it() {
    let zk = Zk::start("kinds-slip").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    raw.mkdir("/shop/locks/orders/order-1", &open)
        .await
        .unwrap();
    let anchor = format!("/shop/locks/orders/order-1/{ANCHOR}");
    raw.create(&anchor, b"", &open).await.unwrap();
    let space = ZkLockSpace::new(&session, "/shop/locks/orders").unwrap();
    let err = space.try_lock("order-1").await.unwrap_err();
    assert_eq!(refused(&err), Some(RootKind::AnchoredKey), "{err}");
    assert!(err.to_string().contains("zkr repair"), "{err}");
    assert_eq!(
        raw.list_children("/shop/locks/orders/order-1")
            .await
            .unwrap(),
        [ANCHOR],
        "the refused contender left nothing"
    );
    // Other keys are not affected.
    space
        .lock("order-2")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let mut repair = raw.new_multi_writer();
    repair.add_delete(&anchor, None).unwrap();
    repair
        .add_delete("/shop/locks/orders/order-1", None)
        .unwrap();
    repair.commit().await.unwrap();
    let guard = space.lock("order-1").await.unwrap();
    assert!(guard.token().as_u64() > 0);
    guard.release().await.unwrap();
}
