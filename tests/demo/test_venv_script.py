"""scripts/_venv.sh installs once for every set of extras an install covers: ``bash
scripts/demo`` after ``bash scripts/test`` installs nothing again ("test" includes "demo").
Run against a stand-in virtualenv whose python records pip instead of running it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_install_serves_the_extras_it_covers(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    pip_log = tmp_path / "pip.log"
    python = venv / "bin" / "python"
    python.write_text(
        "#!/bin/bash\n"
        f'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$*" >> {pip_log}; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)

    def installs(extras: str) -> int:
        before = len(pip_log.read_text().splitlines()) if pip_log.exists() else 0
        subprocess.run(
            ["bash", "-c", f'. scripts/_venv.sh "{extras}"'],
            cwd=ROOT,
            env={**os.environ, "STATECHARTS_VENV": str(venv)},
            check=True,
            capture_output=True,
        )
        after = len(pip_log.read_text().splitlines()) if pip_log.exists() else 0
        return after - before

    assert installs("test") == 2  # pip upgraded, then the project with the test extras
    assert installs("demo") == 0  # covered by test's install
    assert installs("") == 0 and installs("apidocs") == 0
    assert "-e " + str(ROOT) + "[test]" in pip_log.read_text()
