//! Which image runs ZooKeeper, and building the default one when it is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use testcontainers::bollard::Docker;

use crate::{docker, HarnessError};

/// The image built by `image/build.sh` by default: ZooKeeper 3.8 from Debian (bookworm), no
/// registry needed. Its data directories `/data` and `/datalog` are volumes. `ZK_VERSION=3.9` picks
/// [`LOCAL_IMAGE_3_9`] instead.
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// zk_testcontainers::ensure_image(zk_testcontainers::DEFAULT_IMAGE).await?;
/// # Ok(()) }
/// ```
pub const DEFAULT_IMAGE: &str = "zk-recipes/zookeeper:3.8";

/// The local image of ZooKeeper 3.9 (Debian trixie's 3.9.3 on OpenJDK 21), built the same way.
///
/// ```
/// assert_eq!(zk_testcontainers::LOCAL_IMAGE_3_9, "zk-recipes/zookeeper:3.9");
/// ```
pub const LOCAL_IMAGE_3_9: &str = "zk-recipes/zookeeper:3.9";

/// Name of the variable that picks the ZooKeeper version of the local image: `3.8` (default)
/// or `3.9`.
///
/// ```
/// assert_eq!(zk_testcontainers::ZK_VERSION_VAR, "ZK_VERSION");
/// ```
pub const ZK_VERSION_VAR: &str = "ZK_VERSION";

/// The ZooKeeper version of a local image (`zk-recipes/zookeeper:3.8` or `:3.9`), which
/// `image/build.sh` can build; `None` for any other image.
fn local_version(image: &str) -> Option<&'static str> {
    match image {
        DEFAULT_IMAGE => Some("3.8"),
        LOCAL_IMAGE_3_9 => Some("3.9"),
        _ => None,
    }
}

/// Name of the variable that selects another image (e.g. the official `zookeeper:3.8`).
///
/// ```
/// assert_eq!(zk_testcontainers::ZK_IMAGE_VAR, "ZK_IMAGE");
/// ```
pub const ZK_IMAGE_VAR: &str = "ZK_IMAGE";

/// The image the harness runs: `ZK_IMAGE` if set, else the local image of `ZK_VERSION`
/// ([`DEFAULT_IMAGE`] for 3.8, the default; [`LOCAL_IMAGE_3_9`] for 3.9).
///
/// The harness passes its settings in the official `zookeeper` image's interface (`ZOO_MY_ID`,
/// `ZOO_SERVERS`, `ZOO_TICK_TIME`, `ZOO_CFG_EXTRA`, `ZOO_4LW_COMMANDS_WHITELIST`, `JVMFLAGS`;
/// data in `/data` and `/datalog`), which the local images speak too, so `ZK_IMAGE=zookeeper:3.9`
/// takes the same code path that every test here runs. The local images are the default
/// because they need no registry; the official image is untested here (no registry to pull it
/// from), and its JVM caches failed DNS lookups for 10 s, which can slow an ensemble's first
/// election.
///
/// ```
/// // With ZK_IMAGE unset:
/// # if std::env::var_os("ZK_IMAGE").is_none() {
/// assert_eq!(zk_testcontainers::configured_image(), zk_testcontainers::DEFAULT_IMAGE);
/// # }
/// ```
pub fn configured_image() -> String {
    let var = |name| {
        std::env::var(name)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    var(ZK_IMAGE_VAR).unwrap_or_else(|| match var(ZK_VERSION_VAR).as_deref() {
        Some("3.9") => LOCAL_IMAGE_3_9.to_owned(),
        _ => DEFAULT_IMAGE.to_owned(),
    })
}

/// Makes sure `image` is present locally, building it with `image/build.sh` if it is one of
/// the local images ([`DEFAULT_IMAGE`], [`LOCAL_IMAGE_3_9`]). Never pulls.
///
/// Parallel test processes (nextest runs each test in its own process) serialise the build
/// with a file lock, so the image is built once; the others wait and then reuse it.
/// Starting a server calls this; call it yourself to build the image ahead of a test run.
/// Any other missing image is reported as [`HarnessError::ImageMissing`] (when starting a
/// server, the harness instead lets Docker pull it, if a registry is reachable).
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// zk_testcontainers::ensure_image(zk_testcontainers::DEFAULT_IMAGE).await?;
/// # Ok(()) }
/// ```
pub async fn ensure_image(image: &str) -> Result<(), HarnessError> {
    if prepare(image).await? {
        Ok(())
    } else {
        Err(HarnessError::ImageMissing {
            image: image.to_owned(),
            reason: format!("it is not present locally; run `docker pull {image}`"),
        })
    }
}

/// The revision of `image/` that [`DEFAULT_IMAGE`] must be built from: `build.sh` records it in
/// the image's `zk-recipes.image-revision` label, and an image with another one is rebuilt.
fn revision() -> &'static str {
    include_str!("../image/revision").trim()
}

/// Whether `image` is available locally after building the default image if needed (or
/// rebuilding it when it was built from an older revision of `image/`).
pub(crate) async fn prepare(image: &str) -> Result<bool, HarnessError> {
    let docker = docker::client().await?;
    if present(&docker, image).await? {
        return Ok(true);
    }
    let Some(version) = local_version(image) else {
        return Ok(false);
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("image/build.sh");
    if !script.is_file() {
        return Err(HarnessError::ImageBuild(format!(
            "{image} is missing and its build script {} does not exist; \
             set ZK_IMAGE to an image you have",
            script.display()
        )));
    }
    // Parallel test processes: one builds, the others wait for the lock and find the image.
    let lock = lock_path();
    let _guard = blocking(move || {
        FileLock::acquire(&lock)
            .map_err(|e| HarnessError::ImageBuild(format!("cannot lock {}: {e}", lock.display())))
    })
    .await?;
    if present(&docker, image).await? {
        return Ok(true);
    }
    let tag = image.to_owned();
    blocking(move || build(&script, &tag, version)).await?;
    if present(&docker, image).await? {
        Ok(true)
    } else {
        Err(HarnessError::ImageBuild(format!(
            "build.sh succeeded but Docker lists no {image} of revision {}",
            revision()
        )))
    }
}

/// Whether `image` is present locally; for a local image, built from the current revision.
async fn present(docker: &Docker, image: &str) -> Result<bool, HarnessError> {
    match docker.inspect_image(image).await {
        Ok(found) if local_version(image).is_some() => {
            let built = found
                .config
                .and_then(|c| c.labels)
                .and_then(|mut labels| labels.remove("zk-recipes.image-revision"));
            Ok(built.as_deref() == Some(revision()))
        }
        Ok(_) => Ok(true),
        Err(testcontainers::bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }) => Ok(false),
        Err(e) => Err(HarnessError::docker(format!("inspecting image {image}"), e)),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, HarnessError> + Send + 'static,
) -> Result<T, HarnessError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| HarnessError::ImageBuild(format!("build task failed: {e}")))?
}

/// Runs `build.sh` for ZooKeeper `version`, tagging `tag` (the caller holds the lock).
fn build(script: &Path, tag: &str, version: &str) -> Result<(), HarnessError> {
    eprintln!(
        "zk-testcontainers: {tag} is missing or out of date; building it with {} (about a minute)",
        script.display()
    );
    let output = Command::new("bash")
        .arg(script)
        .env("ZK_IMAGE_TAG", tag)
        .env("ZK_VERSION", version)
        .output()
        .map_err(|e| HarnessError::ImageBuild(format!("cannot run {}: {e}", script.display())))?;
    if output.status.success() {
        return Ok(());
    }
    let mut log = String::from_utf8_lossy(&output.stdout).into_owned();
    log.push_str(&String::from_utf8_lossy(&output.stderr));
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(HarnessError::ImageBuild(format!(
        "{} exited with {}; last output:\n{}",
        script.display(),
        output.status,
        tail.join("\n")
    )))
}

fn lock_path() -> PathBuf {
    std::env::temp_dir().join("zk-testcontainers-image-build.lock")
}

/// An exclusive `flock(2)` on a file, released when dropped (or when the process dies).
struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    fn acquire(path: &Path) -> std::io::Result<FileLock> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            loop {
                // SAFETY: flock on a file descriptor we own; no memory is involved.
                let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
                if rc == 0 {
                    break;
                }
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
        Ok(FileLock { _file: file })
    }
}

/// Splits `repo[:tag]` into name and tag (a registry port is not a tag).
pub(crate) fn split_reference(image: &str) -> (&str, &str) {
    match image.rfind(':') {
        Some(i) if !image[i..].contains('/') => (&image[..i], &image[i + 1..]),
        _ => (image, "latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::split_reference;

    #[test]
    fn references() {
        assert_eq!(split_reference("zookeeper"), ("zookeeper", "latest"));
        assert_eq!(split_reference("zookeeper:3.8"), ("zookeeper", "3.8"));
        assert_eq!(
            split_reference("zk-recipes/zookeeper:3.8"),
            ("zk-recipes/zookeeper", "3.8")
        );
        assert_eq!(
            split_reference("localhost:5000/zookeeper"),
            ("localhost:5000/zookeeper", "latest")
        );
        assert_eq!(
            split_reference("localhost:5000/zookeeper:3.9"),
            ("localhost:5000/zookeeper", "3.9")
        );
    }
}
