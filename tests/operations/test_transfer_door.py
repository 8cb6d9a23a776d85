"""``statechart import`` is a door like the others: what the document says about the
execution passes the one validator (statecharts.policies.validation), and a value no column can
hold is
a typed refusal (``ImportRefused``; a one-line ``CommandError`` from the command), with
nothing written, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.transfer import ImportRefused, export_execution, import_execution
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} name="moved" initial="a">
  <state id="a"><onentry><send id="nudge" event="nudge" delay="1h"/></onentry></state>
</scxml>"""


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture
def document() -> dict[str, Any]:
    """An exported execution whose rows are gone here (as if read in another database)."""
    execution = Execution.objects.start(Chart.objects.load(CHART))
    exported = json.loads(json.dumps(export_execution(execution)))
    Timer.objects.filter(execution=execution).delete()
    HistoryEntry.objects.filter(execution=execution).delete()
    execution.delete()
    return exported


def refused(document: dict[str, Any], change: Callable[[dict[str, Any]], object]) -> str:
    change(document)
    with pytest.raises(ImportRefused) as caught:
        import_execution(document)
    assert not Execution.objects.exists() and not Timer.objects.exists()
    return str(caught.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["execution"].update(business_key="k" * 500),
            "execution.business_key: is 500 characters long; the most its column holds is 200",
        ),
        (
            lambda d: d["execution"].update(business_key="k\x00"),
            "execution.business_key: must not contain a NUL character",
        ),
        (
            lambda d: d["execution"].update(metadata=deep(5000)),
            "execution.metadata.a.a",
        ),
        (
            lambda d: d["execution"].update(metadata={"n": float("nan")}),
            "execution.metadata.n: nan is not a finite number",
        ),
        (
            lambda d: d["execution"].update(created="2030-13-45T00:00:00"),
            "execution.created: '2030-13-45T00:00:00' is not a date and time",
        ),
        (
            lambda d: d["parts"]["timers"][0].update(send_id="x\x00"),
            "the part 'timers' cannot be read: send_id: must not contain a NUL character",
        ),
        (
            lambda d: d["parts"]["timers"][0].update(owner="o" * 201),
            "the part 'timers' cannot be read: owner: is 201 characters long",
        ),
    ],
    ids=[
        "long key",
        "NUL key",
        "deep metadata",
        "NaN metadata",
        "bad date",
        "NUL send id",
        "long owner",
    ],
)
def test_an_import_checks_what_it_writes_like_every_other_door(
    document: dict[str, Any], change: Callable[[dict[str, Any]], object], expected: str
) -> None:
    assert expected in refused(document, change)


def test_the_import_command_answers_a_bad_business_key_with_one_line(
    document: dict[str, Any], tmp_path: Path
) -> None:
    document["execution"]["business_key"] = "k\x00"
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        call_command("statechart", "import", str(path), stdout=io.StringIO())
    message = str(caught.value)
    assert message == f"{path}: execution.business_key: must not contain a NUL character"
    assert not Execution.objects.exists()


def test_a_document_that_passes_is_still_imported(document: dict[str, Any]) -> None:
    document["execution"].update(business_key="k" * 200, metadata=deep(10))
    imported = import_execution(document)
    assert imported.business_key == "k" * 200
    assert list(Timer.objects.filter(execution=imported).values_list("send_id", flat=True)) == [
        "nudge"
    ]
