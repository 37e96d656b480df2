//! CMD as a child process in a process group of its own: found before anything is locked,
//! started with its environment, signalled as a group, and its exit status read as a shell
//! would (128 + N for a signal).
//!
//! The group lets `zkr` stop everything CMD started (a script's own children too) when the
//! lock is lost. When `zkr` runs in the foreground of a terminal, the terminal is handed to
//! CMD's group while it runs (as a shell does for a job), so that an interactive CMD can read
//! it and Ctrl-C reaches CMD directly; it is taken back afterwards. On Linux CMD also gets
//! SIGKILL should `zkr` itself die (`PR_SET_PDEATHSIG`): nothing runs on without the lock.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use crate::exit::{self, Failure};

/// Finds CMD as `execvp` would (a name with a `/` as it is, else along `PATH`), so that a
/// typo fails before any lock is taken: 127 when there is no such file, 126 when there is one
/// but it cannot be run.
pub fn resolve(cmd: &OsStr) -> Result<PathBuf, Failure> {
    let shown = Path::new(cmd).display().to_string();
    let candidates: Vec<PathBuf> = if cmd.as_encoded_bytes().contains(&b'/') {
        vec![PathBuf::from(cmd)]
    } else if cmd.is_empty() {
        Vec::new()
    } else {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        std::env::split_paths(&path)
            .map(|dir| dir.join(cmd))
            .collect()
    };
    let mut not_executable = None;
    for candidate in candidates {
        match std::fs::metadata(&candidate) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {
                return Ok(candidate)
            }
            Ok(_) => not_executable = not_executable.or(Some(candidate)),
            Err(_) => {}
        }
    }
    match not_executable {
        Some(path) => Err(Failure::new(
            exit::NOT_EXECUTABLE,
            format!("{}: not an executable file", path.display()),
        )),
        None => Err(Failure::new(
            exit::NOT_FOUND,
            format!("{shown}: command not found"),
        )),
    }
}

/// A running CMD: the child and its process group (whose id is the child's pid).
pub struct Running {
    child: tokio::process::Child,
    pgid: i32,
    terminal: Option<Terminal>,
}

/// Starts `program` (resolved CMD) with `args` and the extra environment `env` in a new
/// process group.
pub fn spawn(
    program: &Path,
    cmd: &[OsString],
    env: &[(&'static str, String)],
) -> Result<Running, Failure> {
    let terminal = Terminal::foreground();
    let take_terminal = terminal.is_some();
    let parent = std::process::id() as libc::pid_t;
    let mut command = std::process::Command::new(program);
    command
        .arg0(&cmd[0])
        .args(&cmd[1..])
        .envs(env.iter().map(|(k, v)| (k, v)));
    for secret in crate::connect::SECRETS {
        command.env_remove(secret);
    }
    command
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    // SAFETY: only async-signal-safe calls (setpgid, signal, tcsetpgrp, prctl, getppid, _exit)
    // between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::setpgid(0, 0);
            if take_terminal {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(libc::STDIN_FILENO, libc::getpid());
                libc::signal(libc::SIGTTOU, libc::SIG_DFL);
            }
            #[cfg(target_os = "linux")]
            {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(exit::LOST);
                }
            }
            let _ = parent;
            Ok(())
        });
    }
    let child = tokio::process::Command::from(command)
        .spawn()
        .map_err(|e| spawn_error(&cmd[0], e))?;
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    // As shells do, from both sides: whichever runs first, the group exists before it is used.
    unsafe {
        libc::setpgid(pgid, pgid);
    }
    if let Some(terminal) = &terminal {
        terminal.give(pgid);
    }
    Ok(Running {
        child,
        pgid,
        terminal,
    })
}

fn spawn_error(cmd: &OsStr, err: std::io::Error) -> Failure {
    let shown = Path::new(cmd).display();
    match err.kind() {
        std::io::ErrorKind::NotFound => {
            Failure::new(exit::NOT_FOUND, format!("{shown}: command not found"))
        }
        _ => Failure::new(exit::NOT_EXECUTABLE, format!("{shown}: {err}")),
    }
}

impl Running {
    /// CMD's pid (its group's id).
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Waits for CMD to exit (cancel safe).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await;
        if let Some(terminal) = self.terminal.take() {
            terminal.take_back();
        }
        status
    }

    /// Sends `signal` to CMD's whole process group.
    pub fn signal_group(&self, signal: i32) {
        if self.pgid > 0 {
            unsafe {
                libc::killpg(self.pgid, signal);
            }
        }
    }

    /// Whether any process is left in CMD's group.
    pub fn group_alive(&self) -> bool {
        self.pgid > 0 && unsafe { libc::killpg(self.pgid, 0) } == 0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(terminal) = self.terminal.take() {
            terminal.take_back();
        }
    }
}

/// The exit code a shell reports for `status`: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => exit::SIGNAL_BASE + signal,
        (None, None) => exit::NOT_EXECUTABLE,
    }
}

/// The controlling terminal, when `zkr` runs in its foreground.
struct Terminal {
    ours: libc::pid_t,
}

impl Terminal {
    fn foreground() -> Option<Terminal> {
        unsafe {
            if libc::isatty(libc::STDIN_FILENO) != 1 {
                return None;
            }
            let ours = libc::getpgrp();
            (libc::tcgetpgrp(libc::STDIN_FILENO) == ours).then_some(Terminal { ours })
        }
    }

    fn give(&self, pgid: libc::pid_t) {
        set_foreground(pgid);
    }

    fn take_back(self) {
        set_foreground(self.ours);
    }
}

/// Makes `pgid` the terminal's foreground group; SIGTTOU, which a background caller would
/// get, is ignored meanwhile.
fn set_foreground(pgid: libc::pid_t) {
    unsafe {
        let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::tcsetpgrp(libc::STDIN_FILENO, pgid);
        libc::signal(libc::SIGTTOU, old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_like_a_shell_finds_them() {
        assert!(resolve(OsStr::new("sh")).is_ok());
        assert!(resolve(OsStr::new("/bin/sh")).is_ok());
        let missing = resolve(OsStr::new("zkr-no-such-command-here")).unwrap_err();
        assert_eq!(missing.code, exit::NOT_FOUND);
        assert!(missing.message.contains("command not found"));
        assert_eq!(
            resolve(OsStr::new("/nonexistent/x")).unwrap_err().code,
            exit::NOT_FOUND
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "not a program").unwrap();
        assert_eq!(
            resolve(plain.as_os_str()).unwrap_err().code,
            exit::NOT_EXECUTABLE
        );
        assert_eq!(
            resolve(dir.path().as_os_str()).unwrap_err().code,
            exit::NOT_EXECUTABLE
        );
        assert_eq!(resolve(OsStr::new("")).unwrap_err().code, exit::NOT_FOUND);
    }

    #[test]
    fn statuses_read_as_a_shell_reads_them() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGINT)), 130);
    }
}
