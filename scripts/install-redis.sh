#!/usr/bin/env bash
# install-redis.sh installs redis-server when it is not in PATH, so that the
# tests, which start their own redis-server processes, work on a fresh machine.
#
# It uses apt-get (Debian, Ubuntu), as root or through sudo. It does not start
# a Redis service: the tests start and stop their own servers on free ports.
# Elsewhere, install Redis 7 yourself (e.g. `brew install redis`).
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
	echo "install-redis: found $(command -v redis-server): $(redis-server --version)"
	exit 0
fi

fail() {
	echo "install-redis: error: $*" >&2
	echo "install-redis: install Redis 7 (redis-server) so that it is in PATH, then retry." >&2
	exit 1
}

command -v apt-get >/dev/null 2>&1 ||
	fail "redis-server is not in PATH and apt-get is not available on this system."

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		fail "redis-server is not in PATH; installing it needs root, and sudo is not available."
	sudo=(sudo)
fi

# Debian's package starts a redis-server service on port 6379 when installed.
# Unless the system already has a policy, deny service starts for the duration
# of the install (the documented invoke-rc.d mechanism: exit code 101).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	echo "install-redis: temporarily creating $policy so that the install starts no service"
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

echo "install-redis: redis-server is not in PATH; running: ${sudo[*]:+${sudo[*]} }apt-get update && ${sudo[*]:+${sudo[*]} }apt-get install -y redis-server"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update || fail "apt-get update failed."
"${sudo[@]}" apt-get install -y redis-server || fail "apt-get install -y redis-server failed."

command -v redis-server >/dev/null 2>&1 ||
	fail "apt-get installed redis-server, but it is still not in PATH."
echo "install-redis: installed $(command -v redis-server): $(redis-server --version)"
