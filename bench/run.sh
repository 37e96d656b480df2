#!/usr/bin/env bash
# The benchmark's one command: installs the Java peer's dependencies (Debian's Apache Curator,
# which brings ZooKeeper's Java client) when they are missing, then runs the benchmark (the
# `bench` binary of the zk-recipes-bench crate, bench/).
# Arguments go to the benchmark, e.g. `bench/run.sh --json bench.json`, after an
# optional `--runs N` (see below).
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

# --runs N (first argument): the whole benchmark N times, each with its own table (and JSON, as
# PATH-1.json ... for --json PATH.json), then each target's ratio per run and their median. The
# machine's write latency drifts between runs; a median over runs says more than any one run.
runs=1
if [ "${1:-}" = --runs ]; then
    runs=${2:?--runs needs a number}
    shift 2
fi
if [ "$runs" -le 1 ]; then
    exec cargo run --release -p zk-recipes-bench -- "$@"
fi
cargo build --release -p zk-recipes-bench
outputs=$(mktemp -d)
trap 'rm -rf "$outputs"' EXIT
given=("$@")
for run in $(seq "$runs"); do
    args=()
    for ((i = 0; i < ${#given[@]}; i++)); do
        if [ "${given[i]}" = --json ] && [ $((i + 1)) -lt ${#given[@]} ]; then
            i=$((i + 1))
            args+=(--json "${given[i]%.json}-$run.json")
        else
            args+=("${given[i]}")
        fi
    done
    echo "== run $run of $runs"
    cargo run -q --release -p zk-recipes-bench -- "${args[@]}" | tee "$outputs/$run.txt"
done
echo
echo "targets over $runs runs (each ratio from one run; median of the runs):"
cat "$outputs"/*.txt | awk '
    /wanted (>=|<=)/ {
        line = $0
        sub(/^ +/, "", line)
        split(line, parts, /  +/)   # name, ratio, "wanted ...", verdict
        name = parts[1]; ratio = parts[2]; sub(/x$/, "", ratio)
        wanted = parts[3]
        if (!(name in seen)) { order[++n] = name; seen[name] = 1 }
        values[name] = values[name] " " ratio
        want[name] = wanted
    }
    END {
        for (i = 1; i <= n; i++) {
            name = order[i]
            count = split(values[name], v, " ")
            # sort the values (insertion sort; a handful of runs)
            for (a = 2; a <= count; a++) {
                x = v[a]; b = a - 1
                while (b >= 1 && v[b] + 0 > x + 0) { v[b + 1] = v[b]; b-- }
                v[b + 1] = x
            }
            median = (count % 2) ? v[(count + 1) / 2] : (v[count / 2] + v[count / 2 + 1]) / 2
            split(want[name], w, " ")
            bound = w[3]; sub(/x$/, "", bound)
            met = (w[2] == ">=") ? (median + 0 >= bound + 0) : (median + 0 <= bound + 0)
            printf "  %-40s %s  median %.2fx  %s  %s\n", name, values[name], median, want[name], met ? "met" : "MISSED"
        }
    }'

