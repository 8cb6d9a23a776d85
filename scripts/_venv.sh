# Sourced by the scripts: create or refresh .venv and install the project into it.
# Usage: . scripts/_venv.sh EXTRAS   (e.g. "test" or "" for runtime only)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STATECHARTS_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
if [ -n "${1:-}" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[$1]"
else
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
