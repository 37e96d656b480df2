#!/usr/bin/env bash
# Builds the local ZooKeeper image (tag zk-recipes/zookeeper:$ZK_VERSION) without any registry:
# a debootstrap root file system from Debian's packages (libzookeeper-java and a headless JRE),
# imported into Docker. ZK_VERSION picks the Debian release: 3.8 (the default) is bookworm's
# ZooKeeper 3.8.0 with OpenJDK 17, 3.9 is trixie's ZooKeeper 3.9.3 with OpenJDK 21. Idempotent: an existing image is reused unless --force,
# or unless it was built from an older revision of this directory (the `revision` file, recorded
# in the image as the label zk-recipes.image-revision; bump it when the image changes).
#
# The image speaks the official `zookeeper` image's interface (its ZOO_* variables, JVMFLAGS,
# /conf, and the volumes /data and /datalog; see entrypoint.sh). Its data directories are
# volumes because the server fsyncs its transaction log on every write, and in a container's own
# layer that goes through the storage driver (fuse-overlayfs on some hosts, where one write took
# 0.86-0.95 ms against 0.70-0.76 ms on a volume, measured with the benchmark's floor).
#
# The Debian mirror is read from this machine's apt configuration (override: ZK_DEBIAN_MIRROR).
# Needs root (debootstrap) and a running Docker Engine.
set -euo pipefail

version=${ZK_VERSION:-3.8}
case "$version" in
    3.8) release=bookworm jre=openjdk-17-jre-headless ;;
    3.9) release=trixie jre=openjdk-21-jre-headless ;;
    *) echo "build.sh: ZK_VERSION must be 3.8 or 3.9, not '$version'" >&2; exit 1 ;;
esac
tag=${ZK_IMAGE_TAG:-zk-recipes/zookeeper:$version}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
force=0
[ "${1:-}" = "--force" ] && force=1

if ! docker info >/dev/null 2>&1; then
    echo "build.sh: the Docker Engine does not answer (is it running, may this user use it?)" >&2
    exit 1
fi
revision=$(cat "$here/revision")
if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
    built=$(docker image inspect -f '{{ index .Config.Labels "zk-recipes.image-revision" }}' "$tag")
    if [ "$built" = "$revision" ]; then
        echo "build.sh: image $tag (revision $revision) exists; reusing it"
        exit 0
    fi
    echo "build.sh: image $tag is of revision '${built:-none}', not $revision; rebuilding it"
fi

suite=${ZK_DEBIAN_SUITE:-$release}

if ! command -v debootstrap >/dev/null 2>&1; then
    echo "build.sh: installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

mirror=${ZK_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
    # apt's own view of its sources: "500 <uri> <suite>/main <arch> Packages". This machine's
    # own release serves for the other one too (the same mirror carries both).
    [ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ] || apt-get update -qq
    . /etc/os-release
    for s in "$suite" "${VERSION_CODENAME:-bookworm}"; do
        mirror=$(apt-cache policy 2>/dev/null |
            awk -v s="$s/main" '$3 == s && $5 == "Packages" { print $2; exit }')
        [ -n "$mirror" ] && break
    done
fi
if [ -z "$mirror" ]; then
    echo "build.sh: no Debian mirror for suite '$suite' in the apt configuration; set ZK_DEBIAN_MIRROR" >&2
    exit 1
fi

work=$(mktemp -d /var/tmp/zk-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
echo "build.sh: debootstrap $suite from $mirror into $root"
start=$(date +%s)
debootstrap --variant=minbase --include="$jre,libzookeeper-java" \
    "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -30 "$work/debootstrap.log" >&2
    echo "build.sh: debootstrap failed" >&2
    exit 1
}

# Trim what a server never reads.
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*
install -m 0755 "$here/entrypoint.sh" "$root/usr/local/bin/zk-entrypoint"

tar -C "$root" -c . | docker import \
    --change 'ENTRYPOINT ["/usr/local/bin/zk-entrypoint"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'EXPOSE 2181 2888 3888' \
    --change 'WORKDIR /data' \
    --change 'VOLUME ["/data", "/datalog"]' \
    --change "LABEL zk-recipes.image-revision=$revision" \
    --change "LABEL zk-recipes.zookeeper-version=$version" \
    - "$tag" >/dev/null
echo "build.sh: built $tag in $(( $(date +%s) - start )) s"
docker image ls "$tag"
