#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the browser test (tests/admin/test_admin_browser.py): /usr/bin/chromium and
# /usr/bin/chromedriver, from the packages chromium and chromium-driver (one source package, so
# the two versions always match). Installs them when missing; quiet and idempotent.
# Usage: bash scripts/_chromium.sh
#
# Root (as CI is) installs with apt-get; anyone else through `sudo -n` when it needs no
# password. When neither can, it says so and exits 0, so the rest of the suite still runs and
# the browser test fails, naming what is missing. A failed install is a failure (exit 1).
set -euo pipefail

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver

if [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "scripts/_chromium.sh: $CHROMIUM or $CHROMEDRIVER is missing and this user cannot" \
        "install them; run: sudo apt-get install chromium chromium-driver" >&2
    echo "(the browser test in tests/admin/test_admin_browser.py will fail until they are installed)" >&2
    exit 0
fi

echo "== installing Debian's chromium and chromium-driver for the browser test"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { "${as_root[@]}" apt-get -qq update \
        && "${as_root[@]}" apt-get -qq install -y --no-install-recommends \
            chromium chromium-driver; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/_chromium.sh: installing chromium and chromium-driver failed" >&2
    exit 1
fi
for binary in "$CHROMIUM" "$CHROMEDRIVER"; do
    if [ ! -x "$binary" ]; then
        echo "scripts/_chromium.sh: $binary is still missing after the install" >&2
        exit 1
    fi
done
