"""The ``STATECHARTS`` settings tables in docs/ say what the code declares.

Every app declares its keys, their defaults and one line about each in its declaration
(``statecharts.conf.Declaration``, the ``declaration`` of its ``AppConfig``); that is the one
copy. Every table in docs/ that lists settings with a default column must
agree with it (the key exists, the default is the declared one), and every declared key is
documented in some table.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statecharts.conf import Declaration, declarations

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
APPS = ("statecharts", "timers", "invocations", "routes")
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
KEY = re.compile(r"`([A-Z][A-Z0-9_]+)`")


@dataclass(frozen=True)
class Row:
    where: str  # file:line
    key: str
    default: str | None  # the default as written (one key's share of the cell), or None


def package_declarations() -> list[Declaration]:
    """The declarations of the package's apps (all installed in the test settings)."""
    found = [declaration for declaration in declarations() if declaration.app in APPS]
    assert sorted(declaration.app for declaration in found) == sorted(APPS)
    return found


def declared() -> dict[str, Any]:
    """Every key the package's apps declare, with its default."""
    merged: dict[str, Any] = {}
    for declaration in package_declarations():
        merged.update(declaration.defaults())
    return merged


def test_every_declared_setting_says_in_one_line_what_it_is() -> None:
    settings = [s for declaration in package_declarations() for s in declaration.settings]
    assert len({s.name for s in settings}) == len(settings), "a key declared twice"
    unsaid = [s.name for s in settings if not s.doc.strip() or "\n" in s.doc]
    assert not unsaid, f"no one-line doc: {', '.join(unsaid)}"


def split_row(line: str) -> list[str]:
    """A markdown table row's cells (a ``|`` inside backticks stays in its cell)."""
    cells, cell, quoted = [], "", False
    for char in line.strip().strip("|"):
        if char == "`":
            quoted = not quoted
        if char == "|" and not quoted:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    return [*cells, cell.strip()]


def settings_rows(path: Path) -> list[Row]:
    """The rows of the tables in ``path`` whose header has a default column and whose first
    column names settings (backticked UPPER_CASE keys)."""
    lines = path.read_text().splitlines()
    rows: list[Row] = []
    for number, line in enumerate(lines[:-1]):
        if not line.startswith("|") or not SEPARATOR.match(lines[number + 1]):
            continue
        header = [cell.lower() for cell in split_row(line)]
        if "default" not in header:
            continue
        column = header.index("default")
        for offset, row in enumerate(lines[number + 2 :], start=number + 3):
            if not row.startswith("|"):
                break
            cells = split_row(row)
            keys = KEY.findall(cells[0])
            if not keys or cells[0] != ", ".join(f"`{key}`" for key in keys):
                continue  # not a settings row (`executions.held`, an option name, ...)
            for key, default in zip(keys, defaults_of(cells[column], len(keys)), strict=True):
                rows.append(Row(f"{path.name}:{offset}", key, default))
    return rows


def defaults_of(cell: str, count: int) -> list[str | None]:
    """One default per key of the row: ``"`500`, `300`, `True`"`` for three keys, or one
    for them all; an empty cell documents the keys elsewhere (a link) and gives no default."""
    if not cell:
        return [None] * count
    quoted = re.findall(r"`([^`]*)`", cell)
    if len(quoted) == 1:
        return quoted * count
    if quoted:
        if len(quoted) != count:
            raise AssertionError(f"{cell!r}: {len(quoted)} defaults for {count} keys")
        return list(quoted)
    # A bare number, as a reader writes it: 10,000.
    bare = [part.strip() for part in cell.split(";")] if count > 1 else [cell.split(" (")[0]]
    return [value.replace(",", "") for value in bare]


def parse(default: str) -> Any:
    return ast.literal_eval(default)


def all_rows() -> list[Row]:
    return [row for path in sorted(DOCS.glob("*.md")) for row in settings_rows(path)]


def test_the_docs_have_settings_tables_to_check() -> None:
    files = {row.where.split(":")[0] for row in all_rows()}
    assert {"durable-executions.md", "timers.md", "invocations.md", "routes.md"} <= files


def test_every_documented_setting_exists_with_the_declared_default() -> None:
    declared_defaults = declared()
    wrong = []
    for row in all_rows():
        if row.key not in declared_defaults:
            wrong.append(f"{row.where}: {row.key} is not a setting any app declares")
        elif row.default is not None and parse(row.default) != declared_defaults[row.key]:
            wrong.append(
                f"{row.where}: {row.key} documented as {row.default}, "
                f"declared {declared_defaults[row.key]!r}"
            )
    assert not wrong, "\n".join(wrong)


def test_every_declared_setting_is_documented_in_a_table() -> None:
    documented = {row.key for row in all_rows()}
    missing = sorted(set(declared()) - documented)
    assert not missing, f"declared, in no settings table of docs/: {', '.join(missing)}"


def test_every_declared_setting_has_its_default_written_in_some_table() -> None:
    with_default = {row.key for row in all_rows() if row.default is not None}
    missing = sorted(set(declared()) - with_default)
    assert not missing, f"declared, no table of docs/ gives the default: {', '.join(missing)}"


def test_the_basic_http_routes_options_table_is_its_default_options() -> None:
    """docs/basichttp.md's OPTIONS table (lower-case keys): the route's ``default_options``."""
    from routes.basichttp import BasicHTTPRoute

    lines = (DOCS / "basichttp.md").read_text().splitlines()
    start = lines.index("| option | default | meaning |")
    documented = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        option, default, _ = split_row(line)
        documented[option.strip("`")] = parse(re.findall(r"`([^`]*)`", default)[0])
    assert documented == dict(BasicHTTPRoute.default_options)


@pytest.mark.parametrize(
    ("table", "found"),
    [
        (
            "| Key | Default | |\n|---|---|---|\n| `ROUND_BUDGET` | `10000` | rounds |\n",
            [("ROUND_BUDGET", "10000")],
        ),
        (
            "| Setting | Default | Counts |\n|---|---|---|\n| `SEND_BUDGET` | 1,000 | sends |\n",
            [("SEND_BUDGET", "1000")],
        ),
        (
            "| key | default | |\n|---|---|---|\n"
            "| `PRUNE_BATCH`, `PRUNE_TASK_SECONDS` | `500`, `300` | pruning |\n"
            "| `INPUT_MAX_DEPTH` | | see above |\n",
            [("PRUNE_BATCH", "500"), ("PRUNE_TASK_SECONDS", "300"), ("INPUT_MAX_DEPTH", None)],
        ),
        (
            "| figure | default thresholds | |\n|---|---|---|\n| `outbox.pending` | — | |\n",
            [],
        ),
    ],
)
def test_the_tables_are_read_as_written(
    tmp_path: Path, table: str, found: list[tuple[str, str | None]]
) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Settings\n\n{table}\nText.\n")
    assert [(row.key, row.default) for row in settings_rows(page)] == found
