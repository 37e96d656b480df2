#!/usr/bin/env bash
# The benchmark's one command: installs the Java peer's dependencies (Debian's Apache Curator,
# which brings ZooKeeper's Java client) when they are missing, then runs the benchmark (the
# `bench` binary of the zk-recipes-bench crate, bench/). Arguments go to the benchmark, e.g.
# `bench/run.sh --json bench.json` or `bench/run.sh --rounds 5`; `bench/run.sh --help` lists them.
#
# Without root or apt the benchmark still runs; its table then says why Curator was skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jars=/usr/share/java
if [ ! -e "$jars/curator-recipes.jar" ] || [ ! -e "$jars/curator-framework.jar" ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "bench: installing Apache Curator from Debian (libcurator-recipes-java)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends \
            libcurator-recipes-java libcurator-framework-java >/dev/null ||
            { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
                libcurator-recipes-java libcurator-framework-java >/dev/null; } ||
            echo "bench: could not install Curator; the Curator column will say so" >&2
    else
        echo "bench: Curator is not installed and apt-get needs root; skipping the Java peer" >&2
    fi
fi
if ! command -v javac >/dev/null 2>&1; then
    echo "bench: no javac (install openjdk-17-jdk-headless for the Curator peer)" >&2
fi
exec cargo run --release -p zk-recipes-bench --bin bench -- "$@"
