//! [`ZkLeaderElection::lead`]: leadership that runs a job (Curator's `LeaderSelector`, kazoo's
//! `Election.run`).

use std::future::Future;
use std::ops::ControlFlow;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::election::{ZkLeaderElection, ZkLeadership};
use crate::error::{Error, Result};

impl ZkLeaderElection {
    /// Campaigns, runs `job` while leader, and campaigns again: the job gets the
    /// [`ZkLeadership`] (its [`term`](ZkLeadership::term) for fences, its
    /// [`fenced_write`](crate::Grant::fenced_write)), shared, for as long as it runs (a clone
    /// kept past the job's end keeps the node, and resigns only when it drops), and returns [`ControlFlow::Continue`] to step down and campaign again, or
    /// [`ControlFlow::Break`] with a value to step down and return it.
    ///
    /// The job is **dropped**, never polled again, the moment leadership is lost (the session
    /// expired, the node deleted, under `Suspension` the connection suspended) or the session's
    /// lease clock runs out (see [`Grant::is_held`](crate::Grant::is_held)): every poll of the
    /// job is preceded by that check, so a process resumed after a freeze does not run one more
    /// step of the job before it hears of the loss. Then the candidacy is withdrawn and the
    /// election campaigns again. What remains is the check-act window inside one poll of the
    /// job: a freeze between the check and an action in that very poll; fence the action with
    /// the term to close it.
    ///
    /// # Errors
    ///
    /// The first error of a campaign that [`Error::is_retryable`] says is not worth another
    /// attempt (a closed session, a refused root, an ACL refusal). Retryable ones (an expired
    /// session, a lost connection) campaign again after a short pause.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the job and withdraws the candidacy (its node is
    /// deleted in the background).
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// # async fn run_due_jobs(term: zk_recipes::FencingToken) -> bool { true }
    /// # async fn demo(election: zk_recipes::ZkLeaderElection) -> Result<(), zk_recipes::Error> {
    /// election
    ///     .lead(|leadership| async move {
    ///         let mut interval = tokio::time::interval(std::time::Duration::from_secs(1));
    ///         loop {
    ///             interval.tick().await;
    ///             // Every write fenced with the term; `false`: nothing left to schedule.
    ///             if !run_due_jobs(leadership.term()).await {
    ///                 return ControlFlow::Break(());
    ///             }
    ///         }
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn lead<F, Fut, T>(&self, mut job: F) -> Result<T>
    where
        F: FnMut(Arc<ZkLeadership>) -> Fut,
        Fut: Future<Output = ControlFlow<T>>,
    {
        let mut pause = Duration::from_millis(100);
        loop {
            let leadership = match self.campaign().await {
                Ok(leadership) => leadership,
                Err(err) if err.is_retryable() => {
                    debug!(%err, "campaign failed; campaigning again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(err) => return Err(err),
            };
            pause = Duration::from_millis(100);
            let term = leadership.term();
            let leadership = Arc::new(leadership);
            let outcome = {
                let mut run = pin!(job(leadership.clone()));
                // The job, polled only while leadership holds (the lease clock included).
                let guarded = std::future::poll_fn(|cx| {
                    if !leadership.is_held() {
                        return Poll::Ready(None);
                    }
                    run.as_mut().poll(cx).map(Some)
                });
                tokio::select! {
                    biased;
                    reason = leadership.lost() => {
                        warn!(%term, ?reason, "leadership lost; the job is dropped");
                        None
                    }
                    _ = leadership.lease_lapsed() => {
                        warn!(%term, "the lease clock ran out; the job is dropped");
                        None
                    }
                    outcome = guarded => outcome,
                }
            };
            // The job is gone; a clone it handed on keeps the node until it drops (see above).
            match (outcome, Arc::try_unwrap(leadership)) {
                (outcome, Err(_kept)) => {
                    warn!(%term, "the job kept its leadership past its end: resigned when that drops");
                    if let Some(ControlFlow::Break(value)) = outcome {
                        return Ok(value);
                    }
                }
                // Withdrawn in the background (a delete of a node that may be gone).
                (None, Ok(leadership)) => drop(leadership),
                (Some(flow), Ok(leadership)) => {
                    info!(%term, "the job returned; resigning");
                    match leadership.release().await {
                        Ok(()) | Err(Error::Lost { .. }) => {}
                        Err(err) => debug!(%err, "resign failed; the node goes with its session"),
                    }
                    if let ControlFlow::Break(value) = flow {
                        return Ok(value);
                    }
                }
            }
        }
    }
}
