"""Events no transition takes (issue 36): SCXML consumes them, and the caller is told (the
core's step, the durable step, ``StepResult.handled``, the history, the API); in strict mode
(per call, or the ``STRICT_EVENTS`` setting) they are refused and nothing of the step is kept.
Runs on SQLite and PostgreSQL (the strict rollback is a transaction's)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core.compile import load_chart
from statecharts.core.events import external_event
from statecharts.core.interpreter import Interpreter
from statecharts.drivers.durable import Input, advance
from statecharts.exceptions import EventUnhandled
from statecharts.models import Chart, Execution, HistoryEntry, OutboxMessage
from statecharts.models.history import Disposition
from statecharts.operations.replay import replay
from statecharts.policies import refusals
from statecharts.stepper import UNHANDLED

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

COUNTER = f"""<scxml {NS} name="counter" initial="idle">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="idle">
    <transition event="add"><assign location="n" expr="n + 1"/></transition>
    <transition event="go" target="busy"/>
  </state>
  <state id="busy"/>
</scxml>"""


def _execution() -> Execution:
    return stepper.start(Chart.objects.load(COUNTER))


def test_the_core_says_when_no_transition_was_selected() -> None:
    interpreter = Interpreter(load_chart(COUNTER))
    state = interpreter.initialize("s").state
    taken = interpreter.handle_event(state, external_event("add"))
    assert not taken.unhandled
    bogus = interpreter.handle_event(taken.state, external_event("bogus"))
    assert bogus.unhandled
    assert bogus.state.configuration == taken.state.configuration


def test_the_durable_step_says_so_for_its_input_only() -> None:
    interpreter = Interpreter(load_chart(COUNTER))
    state = interpreter.initialize("s").state
    assert advance(interpreter, state, Input.external(external_event("bogus"))).unhandled
    assert not advance(interpreter, state, Input.external(external_event("go"))).unhandled


def test_an_unhandled_event_is_consumed_and_recorded_as_unhandled() -> None:
    execution = _execution()
    result = stepper.send(execution, "bogus")
    assert result.applied and not result.handled
    assert result.entry.reason == UNHANDLED
    taken = stepper.send(execution, "add")
    assert taken.applied and taken.handled and taken.entry.reason == ""
    assert replay(execution.pk).ok


def test_strict_refuses_and_keeps_nothing() -> None:
    execution = _execution()
    position = bytes(Execution.objects.get(pk=execution.pk).position)
    with pytest.raises(EventUnhandled, match="no transition takes 'bogus'"):
        stepper.send(execution, "bogus", strict=True)
    row = Execution.objects.get(pk=execution.pk)
    assert bytes(row.position) == position
    assert row.status == "active"
    entry = HistoryEntry.objects.filter(execution=row).last()
    assert entry is not None
    assert entry.disposition == Disposition.REFUSED
    assert entry.reason.startswith(UNHANDLED)
    # A strict event a transition takes is applied as any other.
    assert stepper.send(row, "add", strict=True).handled
    assert replay(execution.pk).ok


FINALIZING = f"""<scxml {NS} name="finalizing" initial="waiting">
  <datamodel><data id="finalized" expr="0"/></datamodel>
  <state id="waiting">
    <invoke id="child" type="scxml" autoforward="true">
      <content><scxml {NS} initial="c"><state id="c"/></scxml></content>
      <finalize><assign location="finalized" expr="finalized + 1"/></finalize>
    </invoke>
  </state>
</scxml>"""


def test_strict_rolls_back_finalize_and_autoforwarding() -> None:
    """An event finalized and autoforwarded that no transition selects is still unhandled:
    strict mode keeps neither the <finalize>'s assignment nor the forwarded copy."""
    execution = stepper.start(Chart.objects.load(FINALIZING))
    before = OutboxMessage.objects.count()
    position = bytes(Execution.objects.get(pk=execution.pk).position)
    with pytest.raises(EventUnhandled):
        stepper.send(execution, "update", strict=True, invokeid="child")
    assert bytes(Execution.objects.get(pk=execution.pk).position) == position
    assert OutboxMessage.objects.count() == before
    consumed = stepper.send(execution, "update", invokeid="child")
    assert not consumed.handled
    assert any(e.kind == "autoforward" for e in consumed.effects)
    assert replay(execution.pk).ok


@override_settings(STATECHARTS={"STRICT_EVENTS": True})
def test_the_setting_makes_every_door_strict_unless_the_call_says_otherwise() -> None:
    execution = _execution()
    with pytest.raises(EventUnhandled):
        stepper.send(execution, "bogus")
    assert not stepper.send(execution, "bogus", strict=False).handled


def test_the_refusal_table_has_the_row() -> None:
    assert refusals.refusal(EventUnhandled("x")).reason is refusals.Reason.UNHANDLED
    row = refusals.BY_REASON[refusals.Reason.UNHANDLED]
    assert (row.api, row.inbound) == (409, 409)


def _api() -> APIClient:
    user = User.objects.create_user("operator", password="pw")
    for codename in ("view_execution", "change_execution"):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="statecharts", codename=codename)
        )
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_api_says_handled_and_refuses_a_strict_unhandled_event_with_409() -> None:
    execution = _execution()
    api = _api()
    url = f"/api/executions/{execution.pk}/send/"
    body: dict[str, Any] = api.post(url, {"name": "bogus"}, format="json").json()
    assert (body["disposition"], body["handled"]) == ("applied", False)
    assert api.post(url, {"name": "add"}, format="json").json()["handled"] is True
    refused = api.post(url, {"name": "bogus", "strict": True}, format="json")
    assert refused.status_code == 409
    assert refused.json()["reason"] == "unhandled"
    cancelled = api.post(f"/api/executions/{execution.pk}/cancel/", format="json").json()
    assert cancelled["handled"] is None
