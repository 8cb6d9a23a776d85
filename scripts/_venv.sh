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
# One stamp: what was installed (from which pyproject.toml, for which Python) and the extras
# that install covers, those named and the ones they include ("test" includes "demo"), so
# scripts/demo after scripts/test installs nothing again.
stamp="$VENV/.statecharts-installed"
wanted="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1) $("$VENV/bin/python" -V 2>&1)"
covered() {  # the extras named in $1 and, through "django-statecharts[...]", those they include
    "$VENV/bin/python" - "$ROOT/pyproject.toml" "$1" <<'PY'
import re, sys, tomllib
extras = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]
todo, seen = [e for e in sys.argv[2].split(",") if e], set()
while todo:
    extra = todo.pop()
    if extra not in seen:
        seen.add(extra)
        for requirement in extras.get(extra, []):
            if m := re.match(r"django-statecharts\[([^\]]+)\]", requirement):
                todo += [e.strip() for e in m.group(1).split(",")]
print(" ".join(sorted(seen)))
PY
}
installed_extras=""
if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$wanted" ]; then
    installed_extras=" $(sed -n 2p "$stamp") "
fi
missing=""
for extra in ${EXTRAS//,/ }; do
    case "$installed_extras" in *" $extra "*) ;; *) missing="$missing $extra" ;; esac
done
if [ -z "$installed_extras" ] || [ -n "$missing" ] \
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
    # (the extras installed before stay installed: still covered when pyproject.toml is same)
    printf '%s\n%s\n' "$wanted" "$(covered "$EXTRAS") ${installed_extras# }" >"$stamp"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
