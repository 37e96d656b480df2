//! A workload run in a child process (this program again, with its own flags), so that its
//! memory is measured alone: the child prints one `RESULT {json}` line on stdout, read here.

use std::time::Duration;

use serde::de::DeserializeOwned;

/// Runs this program with `args`, within `limit`, and reads the `RESULT` line it prints.
pub async fn run<T: DeserializeOwned>(args: &[&str], limit: Duration) -> Result<T, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let output = tokio::process::Command::new(exe)
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(limit, output).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("child: {e}")),
        Err(_) => return Err(format!("child did not finish within {limit:?}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
        return Err(format!(
            "child printed no result: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    };
    serde_json::from_str(line).map_err(|e| format!("child's result unreadable ({e}): {line}"))
}
