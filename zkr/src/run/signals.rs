//! The signals `zkr` catches (SIGINT, SIGTERM, SIGHUP) and their names.

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::exit::{self, Failure, Result};

/// SIGINT, SIGTERM and SIGHUP, caught from the start.
pub struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Signals {
    pub fn new() -> Result<Signals> {
        let catch = |kind| {
            signal(kind)
                .map_err(|e| Failure::new(exit::ZOOKEEPER, format!("catching signals: {e}")))
        };
        Ok(Signals {
            int: catch(SignalKind::interrupt())?,
            term: catch(SignalKind::terminate())?,
            hup: catch(SignalKind::hangup())?,
        })
    }

    /// The next signal's number.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => libc::SIGINT,
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.hup.recv() => libc::SIGHUP,
        }
    }

    /// `fut`, or the exit for the signal that came first.
    pub async fn interruptible<T>(
        &mut self,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T> {
        tokio::select! {
            value = fut => Ok(value),
            signal = self.recv() => Err(Failure::new(exit::SIGNAL_BASE + signal, format!("interrupted by {}", signal_name(signal)))
                .event("interrupted")
                .with("signal", signal_name(signal))),
        }
    }
}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}
