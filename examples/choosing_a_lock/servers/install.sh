#!/usr/bin/env bash
# Installs the servers `examples/choosing_a_lock` starts as local processes, from Debian's
# packages: redis-server (bookworm: 7.0), PostgreSQL (bookworm: 15) and faketime. The example runs
# this itself when a binary is missing; run it by hand with
#
#   sudo bash examples/choosing_a_lock/servers/install.sh
#
# Idempotent: does nothing when everything is there. The packages' own services are not started
# (a policy-rc.d refuses them during the install); the example starts its own servers, on free
# ports, in a temporary directory, and stops them when it ends.
set -euo pipefail

have() {
    command -v redis-server >/dev/null 2>&1 &&
        ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 &&
        command -v faketime >/dev/null 2>&1
}
if have; then
    echo "install.sh: redis-server, PostgreSQL and faketime are installed"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install.sh: needs root (apt-get install redis-server postgresql faketime)" >&2
    exit 1
fi
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    made_policy=1
fi
trap '[ "$made_policy" = 1 ] && rm -f "$policy"' EXIT
echo "install.sh: apt-get install redis-server postgresql faketime"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    redis-server postgresql faketime >/dev/null
have || { echo "install.sh: the packages installed, but a binary is still missing" >&2; exit 1; }
echo "install.sh: done"
