//! A future that finishes in the background if it is dropped half way: the work runs in the
//! caller's task while the caller waits (no task of its own, no cross-task wake-up, on the
//! path of every acquisition), and is spawned only when the caller goes away first.
//!
//! For requests whose outcome must be seen through (a create in flight makes a node that
//! someone has to delete): dropped, the rest of the work runs as a task, and what it returns is
//! dropped there (an `OwnedNode` then deletes itself).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `F` in place; dropped before it is done, spawns the rest on the runtime it was
/// polled on (wherever the drop happens: a future may be dropped on a thread of no runtime).
pub(crate) struct Detach<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    work: Option<Pin<Box<F>>>,
    runtime: Option<tokio::runtime::Handle>,
}

impl<F> Detach<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub fn new(work: F) -> Detach<F> {
        Detach {
            work: Some(Box::pin(work)),
            runtime: None,
        }
    }
}

impl<F> Future for Detach<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.runtime.is_none() {
            self.runtime = tokio::runtime::Handle::try_current().ok();
        }
        let work = self
            .work
            .as_mut()
            .expect("a Detach future polled after it was done");
        let done = work.as_mut().poll(cx);
        if done.is_ready() {
            self.work = None;
        }
        done
    }
}

impl<F> Drop for Detach<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            // Never polled, it sent nothing. A runtime gone (shutting down) takes the session
            // with it, and what the work made ends with the session.
            if let Some(runtime) = self.runtime.take() {
                runtime.spawn(work);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn finishes_in_place_or_in_the_background_once_dropped() {
        assert_eq!(Detach::new(async { 7 }).await, 7);

        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let work = Detach::new(async move {
            let _ = wait.await;
            flag.store(true, Ordering::SeqCst);
            let _ = done_tx.send(());
        });
        // Polled once, then dropped half way.
        let mut work = Box::pin(work);
        assert!(futures_poll_once(work.as_mut()).await.is_pending());
        // Dropped on a thread of no runtime: the rest still runs, on the runtime it was polled on.
        std::thread::spawn(move || drop(work)).join().unwrap();
        assert!(!finished.load(Ordering::SeqCst));
        go.send(()).unwrap();
        done_rx.await.unwrap();
        assert!(finished.load(Ordering::SeqCst), "the rest ran as a task");
    }

    async fn futures_poll_once<F: Future + Unpin>(mut f: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await
    }
}
