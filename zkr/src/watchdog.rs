//! A watchdog that outlives a frozen `zkr`: a second process (this binary again, started as
//! `zkr __watchdog GRACE_MS [text|json|quiet]` before CMD, in a process group of its own, so that a stop of zkr's
//! group does not stop it) that reads CMD's process group and then deadlines from a pipe, and
//! ends CMD's group once the last deadline has passed. The group and the first deadline are
//! written in one write right after CMD is started: a freeze of `zkr` in the few instructions
//! between the two is the one moment it does not cover.
//!
//! `zkr` writes a deadline on `CLOCK_BOOTTIME` (shared by every process of the machine, and
//! counting while a process is stopped) every [`FEED_EVERY`]: the later of the session's lease
//! end and a short liveness window from now. A `zkr` that freezes stops writing; once its last
//! deadline passes, the watchdog sends CMD's group SIGTERM, then SIGKILL after the grace. The
//! lease ends a third of the session timeout before the server can expire the session, so CMD
//! is signalled before anyone else can be granted the lock, give or take the grace. When the
//! pipe closes (zkr exited or was killed), the watchdog ends what is left of the group the same
//! way and exits. What remains: a frozen *host* freezes the watchdog too (only a fence covers
//! that), and a VM paused by its hypervisor may not see the pause on any clock.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

/// How often `zkr` writes a deadline.
pub const FEED_EVERY: Duration = Duration::from_millis(100);

/// How the watchdog reports what it does, as `zkr` itself does (`--json`, `--quiet`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
    Quiet,
}

impl Output {
    fn arg(self) -> &'static str {
        match self {
            Output::Text => "text",
            Output::Json => "json",
            Output::Quiet => "quiet",
        }
    }

    fn parse(arg: Option<&str>) -> Option<Output> {
        match arg {
            None | Some("text") => Some(Output::Text),
            Some("json") => Some(Output::Json),
            Some("quiet") => Some(Output::Quiet),
            Some(_) => None,
        }
    }

    /// One line on stderr: `zkr watchdog: ...`, or a JSON object with `event` and these fields.
    fn say(self, text: &str, object: serde_json::Value) {
        match self {
            Output::Text => eprintln!("zkr watchdog: {text}"),
            Output::Json => eprintln!("{object}"),
            Output::Quiet => {}
        }
    }
}

/// The liveness window: how long after a live zkr's last word CMD may run on without it.
pub fn liveness(session_timeout: Duration) -> Duration {
    (session_timeout / 4).min(Duration::from_secs(1))
}

/// Now on `CLOCK_BOOTTIME`, in nanoseconds.
pub fn boottime() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// zkr's end of the pipe.
pub struct Watchdog {
    pipe: std::fs::File,
    child: std::process::Child,
}

impl Watchdog {
    /// Starts a watchdog, before CMD; [`arm`](Watchdog::arm) names CMD's group.
    pub fn spawn(grace: Duration, output: Output) -> std::io::Result<Watchdog> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just made and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut command = std::process::Command::new(std::env::current_exe()?);
        command
            .arg("__watchdog")
            .arg(grace.as_millis().to_string())
            .arg(output.arg())
            .stdin(Stdio::from(read))
            .stdout(Stdio::null());
        // SAFETY: only setpgid between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::setpgid(0, 0);
                Ok(())
            });
        }
        let child = command.spawn()?;
        // Never block zkr on a watchdog that stopped reading (a full pipe drops a deadline,
        // which only ends CMD sooner).
        // SAFETY: fcntl on our own descriptor.
        unsafe {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&write);
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        Ok(Watchdog {
            pipe: std::fs::File::from(write),
            child,
        })
    }

    /// Names CMD's process group and the first deadline, in one write.
    pub fn arm(&mut self, pgid: i32, deadline: u64) {
        let mut message = [0u8; 16];
        message[..8].copy_from_slice(&(pgid as u64).to_be_bytes());
        message[8..].copy_from_slice(&deadline.to_be_bytes());
        let _ = self.pipe.write_all(&message);
    }

    /// Tells the watchdog to let CMD run until `deadline` (boottime nanoseconds) at least.
    pub fn feed(&mut self, deadline: u64) {
        let _ = self.pipe.write_all(&deadline.to_be_bytes());
    }

    /// CMD is over: closes the pipe and reaps the watchdog.
    pub fn finish(mut self) {
        drop(self.pipe);
        let _ = self.child.wait();
    }
}

/// `zkr __watchdog GRACE_MS [OUTPUT]`: CMD's group, then deadlines, on stdin. Never returns.
pub fn main(args: &[String]) -> ! {
    let grace = args.first().and_then(|g| g.parse::<u64>().ok());
    let output = Output::parse(args.get(1).map(String::as_str));
    let (Some(grace), Some(output)) = (grace, output) else {
        eprintln!("zkr: __watchdog GRACE_MS [text|json|quiet]");
        std::process::exit(2);
    };
    // SAFETY: plain signal dispositions: this process ignores job-control and terminal stops.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTSTP, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        // A background group writing to a terminal with `tostop` would be stopped.
        libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::signal(libc::SIGTTIN, libc::SIG_IGN);
    }
    let grace = Duration::from_millis(grace);
    // Unbuffered: poll(2) must see every byte not yet read.
    // SAFETY: fd 0 is ours for the process's life; ManuallyDrop keeps it open.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let mut group = [0u8; 8];
    if stdin.read_exact(&mut group).is_err() {
        // zkr never started CMD.
        std::process::exit(0);
    }
    let pgid = u64::from_be_bytes(group) as i32;
    let mut deadline: Option<u64> = None;
    let mut buf = [0u8; 8];
    let trace = std::env::var_os("ZKR_WATCHDOG_TRACE").is_some();
    loop {
        let wait_ms = match deadline {
            None => -1,
            Some(d) => {
                let now = boottime();
                if now >= d {
                    end_group(pgid, grace, output, "zkr fell silent past its lease");
                }
                ((d - now) / 1_000_000 + 1).min(i32::MAX as u64) as i32
            }
        };
        let mut poll = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, wait_ms) };
        if trace {
            eprintln!(
                "zkr watchdog: poll({wait_ms} ms) = {ready}, deadline {deadline:?}, now {}",
                boottime()
            );
        }
        if ready <= 0 {
            continue;
        }
        match stdin.read_exact(&mut buf) {
            Ok(()) => {
                let d = u64::from_be_bytes(buf);
                deadline = Some(deadline.map_or(d, |old| old.max(d)));
            }
            // The pipe closed: zkr is done (or gone).
            Err(_) => end_group(pgid, grace, output, "zkr is gone"),
        }
    }
}

/// SIGTERM to the group, SIGKILL after `grace` if anything is left, then exit.
fn end_group(pgid: i32, grace: Duration, output: Output, why: &str) -> ! {
    // SAFETY: kill(2) of a process group; 0 probes whether it still exists.
    let alive = || unsafe { libc::kill(-pgid, 0) } == 0;
    if alive() {
        output.say(
            &format!("{why}: SIGTERM to CMD's process group {pgid}"),
            serde_json::json!({"event": "watchdog", "signal": "SIGTERM", "pid": pgid, "why": why, "grace_ms": grace.as_millis() as u64}),
        );
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let until = boottime() + grace.as_nanos() as u64;
        while alive() && boottime() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive() {
            output.say(
                &format!("SIGKILL to CMD's process group {pgid}"),
                serde_json::json!({"event": "watchdog", "signal": "SIGKILL", "pid": pgid}),
            );
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    std::process::exit(0);
}
