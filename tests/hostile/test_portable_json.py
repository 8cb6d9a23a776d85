"""Every JSON column stores NUL characters and lone surrogates, the same way on SQLite and
PostgreSQL (statecharts.models.fields), and a stored value too deep to decode still reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models
from django.utils import timezone
from rest_framework.test import APIClient

from invocations.models import Invocation
from routes.models import RouteDelivery
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.fields import (
    ESCAPE,
    PortableJSONDecoder,
    PortableJSONEncoder,
    PortableJSONField,
    PortableTextField,
    escape_text,
    unescape_text,
)
from statecharts.operations.inspection import TOO_DEEP
from timers.models import RouteTimer, Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
CHART = f"""<scxml {NS} name="keeper" datamodel="ecmascript" initial="open">
  <datamodel><data id="last" expr="null"/></datamodel>
  <state id="open">
    <onentry><send id="nudge" event="nudge" delay="1d"/></onentry>
    <transition event="keep"><assign location="last" expr="_event.data"/></transition>
  </state>
</scxml>"""

# Everything jsonb cannot hold, and the escape character itself, in values and keys.
AWKWARD: dict[str, Any] = {
    "a\x00b": ["\x00", "x\x00y\x00", "\ud800", "lone \udfff low", ESCAPE, ESCAPE + "0"],
    "escape " + ESCAPE + "e": {"nested \x00": [ESCAPE + "u0041", "\\u0000 is six characters"]},
    "plain": ["text", "\U0001f600", "é", 1, 2.5, True, None],
}

PROJECT_APPS = ("statecharts", "timers", "invocations", "routes")


def json_columns() -> list[tuple[type[models.Model], models.Field[Any, Any]]]:
    return [
        (model, field)
        for label in PROJECT_APPS
        if apps.is_installed(label)
        for model in apps.get_app_config(label).get_models()
        for field in model._meta.get_fields()
        if isinstance(field, models.JSONField)
    ]


def test_every_project_json_column_is_portable() -> None:
    columns = json_columns()
    assert len(columns) >= 13  # execution 3, history 6, outbox 1, timer 3
    plain = [f"{m.__name__}.{f.name}" for m, f in columns if not isinstance(f, PortableJSONField)]
    assert plain == []


def rows() -> dict[type[models.Model], models.Model]:
    execution = Execution.objects.start(Chart.objects.load(CHART))
    message = OutboxMessage.objects.create(
        sender=execution, target_session_id="other", event={}, created=timezone.now()
    )
    invocation = Invocation.objects.create(
        parent=execution, ordinal=1, invokeid="x", state="s", started_in=1,
        created=timezone.now(), updated=timezone.now(),
    )
    route_timer = RouteTimer.objects.create(
        execution=execution, send_id="nudge", key="k", route="email", config={}, message={},
        due=timezone.now(), created=timezone.now(),
    )
    delivery = RouteDelivery.objects.create(
        key="k", execution=execution, route="email", send_type="email", status="failed",
        created=timezone.now(),
    )
    return {
        Chart: execution.chart,
        Execution: execution,
        HistoryEntry: execution.history.get(seq=1),
        OutboxMessage: message,
        Timer: Timer.objects.get(execution_id=execution.pk),
        Invocation: invocation,
        RouteTimer: route_timer,
        RouteDelivery: delivery,
    }


def test_nul_and_lone_surrogates_round_trip_in_every_json_column() -> None:
    by_model = rows()
    for model, field in json_columns():
        row = by_model[model]
        model.objects.filter(pk=row.pk).update(**{field.name: AWKWARD})
        stored = model.objects.values_list(field.name, flat=True).get(pk=row.pk)
        assert stored == AWKWARD, f"{model.__name__}.{field.name}"
        row.refresh_from_db(fields=[field.name])
        assert getattr(row, field.name) == AWKWARD


def test_text_columns_a_chart_can_fill_store_nul_and_lone_surrogates() -> None:
    # Error messages and reasons: once chart code's strings leave the sandbox whole, a NUL
    # can reach them.
    by_model = rows()
    text = "threw 'a\x00b' \ud800 " + ESCAPE
    columns = [
        (model, field)
        for model in by_model
        for field in model._meta.get_fields()
        if isinstance(field, PortableTextField)
    ]
    assert {f"{m.__name__}.{f.name}" for m, f in columns} >= {
        "Execution.donedata_error",
        "Execution.failure_reason",
        "HistoryEntry.reason",
        "OutboxMessage.reason",
        "RouteDelivery.reason",
        "RouteDelivery.target",
    }
    for model, field in columns:
        row = by_model[model]
        model.objects.filter(pk=row.pk).update(**{field.name: text})
        assert model.objects.values_list(field.name, flat=True).get(pk=row.pk) == text
        assert model.objects.filter(pk=row.pk, **{field.name: text}).exists()


def test_strings_that_need_no_escape_are_stored_as_they_are() -> None:
    execution = rows()[Execution]
    Execution.objects.filter(pk=execution.pk).update(metadata={"k": "plain", "n": "a\x00b"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT metadata FROM statecharts_execution WHERE id = %s", [execution.pk])
        [text] = cursor.fetchone()
    stored = json.loads(text) if isinstance(text, str) else text
    assert stored == {"k": "plain", "n": f"a{ESCAPE}0b"}


def test_a_stored_value_nested_deeper_than_input_may_be_reads_back_and_still_displays() -> None:
    execution = rows()[Execution]
    # Written before input was bounded; as deep as the database takes (SQLite's JSON_VALID
    # check stops at 1000 levels), deeper than Python 3.11's JSON decoder reads. Python 3.13
    # reads 5,000 levels: there the value reads back as itself, and must display all the same.
    levels = 5000 if connection.vendor == "postgresql" else 999
    deep = "[" * levels + "]" * levels
    try:
        expected: Any = json.loads(deep)
    except RecursionError:
        expected = deep
    with connection.cursor() as cursor:
        cast = "::jsonb" if connection.vendor == "postgresql" else ""
        cursor.execute(
            f"UPDATE statecharts_execution SET metadata = %s{cast} WHERE id = %s",
            [deep, execution.pk],
        )
    execution.refresh_from_db()
    assert execution.metadata == expected
    client = APIClient()
    from django.contrib.auth.models import User

    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    response = client.get(f"/api/executions/{execution.pk}/")
    assert response.status_code == 200
    if expected is deep:  # read back as its text: shown as it is
        assert response.json()["metadata"] == deep
    else:  # read back as itself: shown cut where the display stops nesting
        assert TOO_DEEP in json.dumps(response.json()["metadata"])


@pytest.mark.parametrize(
    "text",
    ["", "plain", "\x00", ESCAPE, ESCAPE + "0", ESCAPE + "e", "\ud800\udc00", "a\udbffb\x00c"],
)
def test_the_escape_is_reversible(text: str) -> None:
    assert unescape_text(escape_text(text)) == text
    assert "\x00" not in escape_text(text)


def test_an_escape_character_left_by_an_older_row_is_kept() -> None:
    assert unescape_text(f"x{ESCAPE}zy{ESCAPE}") == f"x{ESCAPE}zy{ESCAPE}"


def test_the_encoder_and_decoder_round_trip_without_ensure_ascii_too() -> None:
    text = json.dumps(AWKWARD, cls=PortableJSONEncoder, ensure_ascii=False)
    stored = json.dumps(json.loads(text))  # what the database sees, as plain JSON
    assert "\\u0000" not in stored.replace("\\\\u0000", "")
    assert json.loads(text, cls=PortableJSONDecoder) == AWKWARD


def test_nul_in_event_data_and_metadata_round_trips_through_the_api() -> None:
    from django.contrib.auth.models import User

    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    chart = Chart.objects.load(CHART)
    created = client.post(
        "/api/executions/",
        {"chart": chart.pk, "metadata": {"ref\x00": "a\x00b"}, "business_key": "k"},
        format="json",
    )
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert created.json()["metadata"] == {"ref\x00": "a\x00b"}
    sent = client.post(
        f"/api/executions/{pk}/send/", {"name": "keep", "data": {"x\x00": "\x00"}}, format="json"
    )
    assert sent.status_code == 200, sent.content
    history = client.get(f"/api/executions/{pk}/history/").json()["results"]
    assert history[-1]["input"]["event"]["data"] == {"x\x00": "\x00"}
    assert Execution.objects.get(pk=pk).metadata == {"ref\x00": "a\x00b"}
