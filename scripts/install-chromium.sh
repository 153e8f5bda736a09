#!/usr/bin/env bash
# install-chromium.sh installs Chromium when it is not in PATH, so that the
# dashboard's browser test (dashboard/browsertest, driven by chromedp) runs
# on a fresh machine.
#
# It uses apt-get (Debian's chromium package; Ubuntu's chromium-browser),
# as root or through sudo. Elsewhere, install Chromium yourself so that
# `chromium` is in PATH.
set -euo pipefail

for b in chromium chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "install-chromium: found $(command -v "$b"): $("$b" --version 2>/dev/null || true)"
		exit 0
	fi
done

fail() {
	echo "install-chromium: error: $*" >&2
	echo "install-chromium: install Chromium so that chromium is in PATH, then retry." >&2
	exit 1
}

command -v apt-get >/dev/null 2>&1 ||
	fail "chromium is not in PATH and apt-get is not available on this system."

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		fail "chromium is not in PATH; installing it needs root, and sudo is not available."
	sudo=(sudo)
fi

echo "install-chromium: chromium is not in PATH; running: ${sudo[*]:+${sudo[*]} }apt-get update && ${sudo[*]:+${sudo[*]} }apt-get install -y chromium"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update || fail "apt-get update failed."
"${sudo[@]}" apt-get install -y --no-install-recommends chromium || fail "apt-get install -y chromium failed."

command -v chromium >/dev/null 2>&1 ||
	fail "apt-get installed chromium, but it is still not in PATH."
echo "install-chromium: installed $(command -v chromium): $(chromium --version 2>/dev/null || true)"
