# Sourced by the scripts: create .venv if needed and install the project into it (editable)
# when it is not installed yet or pyproject.toml changed since; otherwise nothing is run.
# Usage: . scripts/_venv.sh EXTRAS   (e.g. "test" or "demo"; "" for runtime only)
# Quiet: pip's and the build's output are shown only when the install fails.
# STATECHARTS_VENV picks another virtualenv; PYTHON the interpreter that creates it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STATECHARTS_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
EXTRAS="${1:-}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
# One stamp per set of extras: what was installed, from which pyproject.toml, for which Python.
stamp="$VENV/.statecharts-installed${EXTRAS:+-$EXTRAS}"
wanted="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1) $("$VENV/bin/python" -V 2>&1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ] \
        || ! "$VENV/bin/python" -c "import statecharts, django" >/dev/null 2>&1; then
    echo "== installing the project into $VENV${EXTRAS:+ (with $EXTRAS extras)}"
    target="$ROOT${EXTRAS:+[$EXTRAS]}"
    log="$(mktemp)"
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip \
            && "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$target"; \
         } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "scripts/_venv.sh: installing the project failed (pip's output above)" >&2
        exit 1
    fi
    rm -f "$log"
    echo "$wanted" >"$stamp"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
