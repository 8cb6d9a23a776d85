"""Each system check id means one thing: it is raised from one place in the code, and
docs/system-checks.md lists every id the code raises (and no other)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("statecharts", "timers", "invocations", "routes")
CHECK_ID = re.compile(r"(statecharts|timers|invocations|routes)\.[EW]\d{3}")


def check_id_sites(paths: list[Path], root: Path = ROOT) -> dict[str, set[str]]:
    """id -> the functions whose code names it (a string constant that is an id)."""
    sites: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                is_string = isinstance(node, ast.Constant) and isinstance(node.value, str)
                if is_string and CHECK_ID.fullmatch(node.value):
                    sites[node.value].add(f"{path.relative_to(root)}:{function.name}")
    return sites


def package_sources() -> list[Path]:
    return [
        path
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_no_two_places_raise_the_same_check_id() -> None:
    shared = {
        check_id: sorted(where)
        for check_id, where in check_id_sites(package_sources()).items()
        if len(where) > 1
    }
    assert shared == {}


def test_the_finder_sees_a_shared_id(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "def one():\n    return Error('a', id='statecharts.E001')\n"
        "def two():\n    return Error('b', id='statecharts.E001')\n"
    )
    assert len(check_id_sites([module], root=tmp_path)["statecharts.E001"]) == 2


def test_the_docs_list_every_check_id_the_code_raises() -> None:
    raised = set(check_id_sites(package_sources()))
    table = (ROOT / "docs" / "system-checks.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE))
    assert raised == listed
