//! Waiting for the grant: bounded by `--timeout`, interrupted by a signal, saying whom it
//! waits behind.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use zk_recipes::Session;

use super::{signal_name, sleep_until, Reporter, Signals};
use crate::behind;
use crate::exit::{self, Failure, Result};

/// After this long without a grant, say that we wait.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(1);

type Boxed<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

/// Waits for `acquired`, bounded by `timeout`, interrupted by a signal. After a second of
/// waiting it says so, and whom it waits behind in the queue at `root` (node, owner, session;
/// see `behind.rs`), and again each time the node it waits for goes while it still waits.
/// `Ok(None)`: not granted (`--try`).
pub(super) async fn wait_for_grant<T>(
    session: &Session,
    signals: &mut Signals,
    out: &Reporter,
    (what, root): (&str, &str),
    timeout: Option<Duration>,
    acquired: impl std::future::Future<Output = zk_recipes::Result<Option<T>>>,
) -> Result<Option<T>> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut acquired = Box::pin(acquired);
    let say_waiting = tokio::time::sleep(SAY_WAITING_AFTER);
    tokio::pin!(say_waiting);
    let mut said = false;
    // Reading where our node stands, then waiting for the node ahead to go: one at a time.
    let mut reading: Option<
        Boxed<Option<(behind::Behind, zk_recipes::zookeeper_client::OneshotWatcher)>>,
    > = None;
    let mut ahead_gone: Option<Boxed<()>> = None;
    let mut last: Option<String> = None;
    let read_behind = |session: &Session| -> Boxed<_> {
        let session = session.clone();
        let root = root.to_owned();
        Box::pin(async move {
            let client = session.client().await.ok()?;
            behind::read(&client, &root).await
        })
    };
    let outcome = loop {
        tokio::select! {
            biased;
            result = &mut acquired => break Ok(result),
            signal = signals.recv() => {
                break Err(Failure::new(exit::SIGNAL_BASE + signal, format!("interrupted by {} while waiting for {what}", signal_name(signal)))
                    .event("interrupted")
                    .with("signal", signal_name(signal))
                    .with("root", root));
            }
            () = sleep_until(deadline) => {
                let waited = timeout.unwrap_or_default();
                break Err(Failure::new(exit::TIMEOUT, format!("timed out after {waited:?} waiting for {what}"))
                    .event("timeout")
                    .with("root", root)
                    .with("waited_ms", waited.as_millis() as u64));
            }
            () = &mut say_waiting, if !said => {
                said = true;
                reading = Some(read_behind(session));
            }
            found = async { reading.as_mut().expect("guarded").await }, if reading.is_some() => {
                reading = None;
                match found {
                    Some((behind, watcher)) => {
                        let text = behind.describe();
                        if last.as_deref() != Some(text.as_str()) {
                            let mut object = json!({"event": "waiting", "for": what, "root": root});
                            if let (Some(o), serde_json::Value::Object(b)) = (object.as_object_mut(), behind.json()) {
                                o.extend(b);
                            }
                            let again = if last.is_some() { "still " } else { "" };
                            out.event(object, format!("{again}waiting for {what}: {text}"));
                            last = Some(text);
                        }
                        ahead_gone = Some(Box::pin(async move { watcher.changed().await; }));
                    }
                    // Not told (our node not there yet, or the node ahead just went): said plainly
                    // the first time.
                    None if last.is_none() => {
                        out.event(json!({"event": "waiting", "for": what, "root": root}), format!("waiting for {what}"));
                        last = Some(String::new());
                    }
                    None => {}
                }
            }
            () = async { ahead_gone.as_mut().expect("guarded").await }, if ahead_gone.is_some() => {
                ahead_gone = None;
                reading = Some(read_behind(session));
            }
        }
    };
    // The abandoned acquisition goes first: it holds a handle of the session, and a session
    // closes (deleting our node at once) only once every handle is gone; so do our reads.
    drop(acquired);
    drop(reading);
    drop(ahead_gone);
    match outcome {
        Ok(Ok(held)) => Ok(held),
        Ok(Err(err)) => {
            session.close().await;
            Err(Failure::new(exit::code_of(&err), format!("{what}: {err}")).with("root", root))
        }
        Err(failure) => {
            session.close().await;
            Err(failure)
        }
    }
}
