//! Compile-time checks that what workers move into spawned tasks can move: every acquire
//! future and every guard is `Send` and `'static` (guards also `Sync`, so `&guard` can be shared
//! between tasks, as `lost()` in one and the work in another). The test passes by compiling.

use zk_recipes::{
    FencingToken, Grant, Session, ZkLeaderElection, ZkLeaderObserver, ZkLeadership, ZkMutex,
    ZkMutexGuard, ZkRwLock, ZkRwLockGuard, ZkSemaphore, ZkSemaphoreLease,
};

fn send<T: Send>(_: &T) {}
fn send_sync_static<T: Send + Sync + 'static>() {}

#[allow(dead_code)]
fn acquire_futures_are_send(
    session: &Session,
    mutex: &ZkMutex,
    rwlock: &ZkRwLock,
    semaphore: &ZkSemaphore,
    election: &ZkLeaderElection,
    observer: &mut ZkLeaderObserver,
    guard: &ZkMutexGuard,
) {
    send(&Session::connect(zk_recipes::SessionOptions::new(
        "127.0.0.1:2181",
    )));
    send(&session.close());
    send(&mutex.lock());
    send(&mutex.try_lock());
    send(&rwlock.read());
    send(&rwlock.try_read());
    send(&rwlock.write());
    send(&rwlock.try_write());
    send(&semaphore.acquire());
    send(&semaphore.try_acquire());
    send(&election.campaign());
    send(&election.leader());
    send(&observer.changed());
    send(&guard.lost());
}

#[test]
fn guards_and_recipes_are_send_sync_and_static() {
    send_sync_static::<ZkMutexGuard>();
    send_sync_static::<ZkRwLockGuard>();
    send_sync_static::<ZkSemaphoreLease>();
    send_sync_static::<ZkLeadership>();
    send_sync_static::<Grant>();
    send_sync_static::<ZkMutex>();
    send_sync_static::<ZkRwLock>();
    send_sync_static::<ZkSemaphore>();
    send_sync_static::<ZkLeaderElection>();
    send_sync_static::<Session>();
    send_sync_static::<FencingToken>();
    send_sync_static::<zk_recipes::Error>();
}

/// A guard outlives the recipe value it came from and moves into a task.
#[allow(dead_code)]
async fn a_guard_outlives_its_mutex(session: Session) -> zk_recipes::Result<()> {
    let guard = ZkMutex::new(&session, "/locks/a")?.lock().await?;
    let task = tokio::spawn(async move { guard.release().await });
    task.await.expect("task")
}
