# Sourced by scripts/test (it uses its run_pytest and record): the compatibility pass, at the
# other ends of what pyproject.toml declares: the newest Python it lists (3.13) with the lowest
# Django it accepts (5.2.0), and with the newest Django 6.0.x (6.0 needs Python 3.12 or newer,
# so the main passes on 3.11 cannot run it); on SQLite, over the Django-facing tests (the
# core's own tests do not depend on either). The main passes already run the oldest Python
# (3.11) with the newest Django 5.2.x.
# The interpreter: MATRIX_PYTHON, or a python3.13 found on this machine (pyenv's included).
# Set STATECHARTS_MATRIX=0 to skip it.
matrix_python() {
    if [ -n "${MATRIX_PYTHON:-}" ]; then echo "$MATRIX_PYTHON"; return; fi
    for candidate in python3.13 /root/.pyenv/versions/3.13*/bin/python3.13 \
                     /usr/local/bin/python3.13 /usr/bin/python3.13; do
        if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
            echo "$candidate"; return
        fi
    done
}

# One leg: the interpreter, a label (for the messages), the Django requirement, the virtualenv.
run_matrix_leg() {
    local python="$1" label="$2" django="$3" venv="$4"
    local stamp="$venv/.installed-from"
    local want
    want="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16) $django"
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "== compatibility pass: installing into $venv (Python 3.13, Django $label)"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip \
            >/dev/null
        if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                -e "$ROOT[test]" "$django" >"$venv/.install.log" 2>&1; then
            cat "$venv/.install.log" >&2
            record "compatibility (3.13, $label)" "FAILED: could not install its environment"
            FAILED=1
            return
        fi
        echo "$want" >"$stamp"
    fi
    "$venv/bin/python" -c 'import django, sys; print("  python", sys.version.split()[0], "django", django.get_version())'
    # The hostile property tests hunt for new failures in the main passes (150 examples each);
    # here they check the doors on another Python and Django, for which 40 are plenty.
    # The template database's own end-to-end test (three pytest processes, ~7.5 s of CPU) runs
    # in the main passes; here every database test already runs on a cloned database.
    DATABASE_URL= DATABASE_TEST_NAME="${DATABASE_TEST_NAME:-}" \
        STATECHARTS_HOSTILE_EXAMPLES="${STATECHARTS_HOSTILE_EXAMPLES:-40}" \
        run_pytest "compatibility (3.13, $label)" "$venv/bin/python" -q \
        tests/stepper tests/timers tests/invocations tests/api tests/admin tests/commands \
        tests/hostile tests/testing tests/project tests/architecture tests/policies/attribution tests/fields \
        --deselect tests/admin/test_admin_browser.py \
        --deselect tests/project/test_template_db.py
}

run_matrix() {
    if [ "${STATECHARTS_MATRIX:-1}" = "0" ]; then
        echo "== compatibility pass skipped (STATECHARTS_MATRIX=0)"
        record "compatibility" "NOT RUN: STATECHARTS_MATRIX=0"
        return
    fi
    local python
    python="$(matrix_python)"
    if [ -z "$python" ]; then
        echo "== compatibility pass: no Python 3.13 on this machine (set MATRIX_PYTHON): not run"
        record "compatibility" "NOT RUN: no Python 3.13 on this machine (set MATRIX_PYTHON)"
        return
    fi
    run_matrix_leg "$python" "5.2.0" "django==5.2" "$ROOT/.venv-matrix"
    run_matrix_leg "$python" "6.0.x" "django>=6.0,<6.1" "$ROOT/.venv-matrix-django6.0"
}
