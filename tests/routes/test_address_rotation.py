"""Rotating an execution's Basic HTTP address (routes.addresses, issue 28 item 6): the old
address is revoked, the new one works, the chart sees the new one through a recorded input
(replay stays equal), no view or export shows the token (by value, wherever the chart copied
it), an import mints a new address, and rotating needs ``routes.rotate_address``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from routes import addresses, inbound
from routes.models import InboundAddress
from statecharts import stepper
from statecharts.core.datamodel import plain
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry
from statecharts.operations.replay import replay
from statecharts.operations.transfer import export_execution, import_execution

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.routes.urls")]

BASE = "http://testserver/scxml/basichttp/"
MOUNT = "/scxml/basichttp/"
FORM = "application/x-www-form-urlencoded"
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
# Copies its _ioprocessors into its own data, whole and as text (as W3C tests do), and reads
# its address again on every event.
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel>
    <data id="procs" expr="_ioprocessors"/>
    <data id="note" expr="'write to ' + _ioprocessors['basichttp'].location + ' please'"/>
    <data id="mine" expr="''"/><data id="got" expr="[]"/>
  </datamodel>
  <state id="waiting">
    <transition event="stop" target="done"/>
    <transition event="*">
      <assign location="mine" expr="_ioprocessors['basichttp'].location"/>
      <assign location="got" expr="got.concat([_event.name])"/>
    </transition>
  </state>
  <final id="done"/>
</scxml>"""


def started() -> Execution:
    return inbound.start(Chart.objects.load(CHART), base_url=BASE)


def token_of(address: str) -> str:
    return address.rstrip("/").rsplit("/", 1)[1]


def current(execution: Execution) -> str:
    found = addresses.location_of(execution)
    assert found is not None
    return found


def path_of(address: str) -> str:
    return MOUNT + token_of(address) + "/"


def post(client: Client, address: str, name: str = "ping") -> int:
    answer = client.post(path_of(address), f"_scxmleventname={name}", content_type=FORM)
    return int(answer.status_code)


def data(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    found: dict[str, Any] = plain(decode(bytes(execution.position)).state.datamodel)
    return found


def user_with(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return User.objects.get(pk=user.pk)  # (a fresh permission cache)


def test_rotating_revokes_the_old_address_and_the_chart_reads_the_new_one(
    client: Client,
) -> None:
    execution = started()
    old = current(execution)
    assert post(client, old) == 204
    assert data(execution)["mine"] == old

    operator = user_with("operator", addresses.PERMISSION)
    result = addresses.rotate(execution, reason="leaked in a log", user=operator)
    assert result.applied
    new = current(execution)
    assert new != old and token_of(new) != token_of(old)
    assert post(client, old) == 403  # revoked, and nothing applied
    assert data(execution)["got"] == ["ping"]
    assert post(client, new) == 204
    seen = data(execution)
    assert seen["got"] == ["ping", "ping"]
    assert seen["mine"] == new  # _ioprocessors changed for the chart
    assert old in seen["note"]  # (a copy the chart kept is not updated: documented)

    entry = HistoryEntry.objects.get(execution=execution, seq=result.entry.seq)
    assert entry.input["kind"] == "readdress"
    assert entry.input["reason"] == "leaked in a log"
    assert entry.input["sender"]["username"] == "operator"
    assert entry.caller_context["user"]["username"] == "operator"
    assert replay(execution.pk).ok  # the readdress is re-applied: every position matches

    # Again: the second address is revoked too, the row counts both.
    addresses.rotate(execution, reason="again")
    assert post(client, new) == 403 and post(client, current(execution)) == 204
    assert InboundAddress.objects.get(execution=execution).rotations == 2
    assert replay(execution.pk).ok


def test_an_address_from_before_nonces_works_until_the_first_rotation(client: Client) -> None:
    chart = Chart.objects.load(CHART)
    legacy = inbound.io_processors(BASE, "legacy1")  # the session id alone, as before
    start = stepper.StartRequest(chart=chart, session_id="legacy1")
    execution = stepper.start_internal(start, io_processors=legacy).execution
    old = legacy["basichttp"]
    assert post(client, old) == 204
    addresses.rotate(execution, reason="move to a revocable address")
    assert post(client, old) == 403
    assert post(client, current(execution)) == 204
    assert replay(execution.pk).ok


def test_a_start_whose_row_was_not_written_still_answers_at_its_address(client: Client) -> None:
    execution = started()
    address = current(execution)
    InboundAddress.objects.filter(execution=execution).delete()  # a crash after the start
    assert post(client, address) == 204  # the position names the nonce; the row comes back
    assert InboundAddress.objects.filter(execution=execution).exists()
    forged = inbound.location(BASE, execution.session_id, inbound.new_nonce())
    assert post(client, forged) == 403  # a nonce this site never gave out


def test_rotating_a_finished_execution_revokes_it_and_records_it_discarded(
    client: Client,
) -> None:
    execution = started()
    old = current(execution)
    assert post(client, old, "stop") == 204
    result = addresses.rotate(execution, reason="closing the incident")
    assert result.disposition == "discarded"
    assert post(client, old) == 403


def test_no_view_and_no_export_shows_the_token(
    client: Client, admin_client: Client, tmp_path: Path
) -> None:
    execution = started()
    token = token_of(current(execution))
    assert token in json.dumps(data(execution))  # the chart did copy it (whole and as text)
    shown: dict[str, str] = {}
    for redact in ([], ["--redact"]):
        out = tmp_path / f"export{len(redact)}.json"
        call_command(
            "statechart", "export", str(execution.pk), *redact, "-o", str(out),
            stdout=io.StringIO(),
        )  # fmt: skip
        shown[f"export {redact}"] = out.read_text()
    for args in ([], ["--json"]):
        out_text = io.StringIO()
        call_command("statechart", "show", str(execution.pk), *args, stdout=out_text)
        shown[f"show {args}"] = out_text.getvalue()
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("root", password="pw"))
    shown["api detail"] = api.get(f"/api/executions/{execution.pk}/").content.decode()
    shown["api history"] = api.get(f"/api/executions/{execution.pk}/history/").content.decode()
    shown["api address"] = api.get(f"/api/basichttp-addresses/{execution.pk}/").content.decode()
    shown["admin"] = admin_client.get(
        reverse("admin:statecharts_execution_change", args=[execution.pk])
    ).content.decode()
    for where, text in shown.items():
        assert token not in text, where
    assert "(hidden: an Event I/O processor address is a capability)" in shown["show []"]
    document = json.loads(shown["export []"])
    state = json.loads(document["position"])["state"]
    assert "io_processors" not in state  # the address does not travel at all
    assert document["parts"]["basichttp"] == {"base_url": BASE}


def test_an_import_mints_a_new_address(client: Client) -> None:
    execution = started()
    old = current(execution)
    document = json.loads(json.dumps(export_execution(execution)))
    # As if in another database: this one's rows gone.
    HistoryEntry.objects.filter(execution=execution).delete()
    Execution.objects.filter(pk=execution.pk).delete()
    imported = import_execution(document)
    assert imported.session_id == execution.session_id
    new = current(imported)
    assert token_of(new) != token_of(old) and new.startswith(BASE)
    assert post(client, old) == 403  # same session id, but the exported address is dead
    assert post(client, new) == 204
    assert data(imported)["mine"] == new
    kinds = list(imported.history.order_by("seq").values_list("input__kind", flat=True))
    assert kinds == ["import", "readdress", "event"]
    assert replay(imported.pk).ok


def test_an_older_export_carrying_its_address_is_imported_without_it(client: Client) -> None:
    execution = started()
    old = current(execution)
    document = export_execution(execution)
    position = json.loads(document["position"])
    position["state"]["io_processors"] = {"basichttp": old}  # as an older release wrote it
    document["position"] = json.dumps(position)
    del document["parts"]["basichttp"]
    HistoryEntry.objects.filter(execution=execution).delete()
    Execution.objects.filter(pk=execution.pk).delete()
    imported = import_execution(json.loads(json.dumps(document)))
    assert decode(bytes(imported.position)).state.io_processors is None
    assert post(client, old) == 403
    assert replay(imported.pk).ok


def test_rotating_needs_its_permission_at_every_door(client: Client, tmp_path: Path) -> None:
    execution = started()
    nobody = user_with("nobody", "statecharts.view_execution", "statecharts.change_execution")
    with pytest.raises(addresses.RotationNotPermitted):
        addresses.rotate(execution, reason="x", user=nobody)
    api = APIClient()
    api.force_authenticate(nobody)
    url = f"/api/basichttp-addresses/{execution.pk}/rotate/"
    assert api.post(url, {"reason": "x"}, format="json").status_code == 403
    client.force_login(nobody)
    page = reverse("admin:routes_inboundaddress_rotate", args=[execution.pk])
    assert client.post(page, {"reason": "x"}).status_code == 403
    with pytest.raises(CommandError, match=r"lacks the permission routes\.rotate_address"):
        call_command(
            "rotate_address", str(execution.pk), "--reason", "x", "--as-user", "nobody",
            stdout=io.StringIO(),
        )  # fmt: skip
    assert InboundAddress.objects.get(execution=execution).rotations == 0  # nothing happened

    operator = user_with("operator", addresses.PERMISSION)
    api.force_authenticate(operator)
    answer = api.post(url, {"reason": "rotated by the API"}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["disposition"] == "applied" and answer.json()["rotations"] == 1
    assert token_of(current(execution)) not in answer.content.decode()
    client.force_login(operator)
    assert client.post(page, {"reason": "rotated in the admin"}).status_code == 302
    out = io.StringIO()
    call_command(
        "rotate_address", execution.session_id, "--reason", "rotated by the command",
        "--as-user", "operator", stdout=out,
    )  # fmt: skip
    assert "rotated" in out.getvalue()
    reasons = [
        e.input.get("reason")
        for e in HistoryEntry.objects.filter(execution=execution, input__kind="readdress")
    ]
    assert reasons == ["rotated by the API", "rotated in the admin", "rotated by the command"]
    assert replay(execution.pk).ok


def test_bad_rotation_requests_get_clear_answers_never_a_500(client: Client) -> None:
    execution = started()
    quiet = stepper.start(Chart.objects.load(f'<scxml {NS}><state id="a"/></scxml>'))
    api = APIClient()
    api.force_authenticate(user_with("operator", addresses.PERMISSION))
    url = f"/api/basichttp-addresses/{execution.pk}/rotate/"
    assert api.post(url, {}, format="json").status_code == 400
    assert api.post(url, {"reason": ""}, format="json").status_code == 400
    assert api.post(url, {"reason": "a\x00b"}, format="json").status_code == 400
    assert api.post(url, {"reason": "x" * 1001}, format="json").status_code == 400
    typo = api.post(url, {"reason": "leaked", "reasn": "x"}, format="json")  # unknown field
    assert typo.status_code == 400 and "reasn" in typo.json()
    for missing in ("999999", "99999999999999999999999"):
        answer = api.post(f"/api/basichttp-addresses/{missing}/rotate/", {"reason": "x"})
        assert answer.status_code == 404
    assert api.post(f"/api/basichttp-addresses/{quiet.pk}/rotate/", {"reason": "x"},
                    format="json").status_code == 409
    with pytest.raises(addresses.NoAddress):
        addresses.rotate(quiet, reason="x")
    with pytest.raises(ValueError, match="must not be blank"):
        addresses.rotate(execution, reason="  ")
    with pytest.raises(CommandError, match="not rotated"):
        call_command("rotate_address", str(quiet.pk), "--reason", "x", stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert InboundAddress.objects.get(execution=execution).rotations == 0


def test_the_admin_bulk_action_rotates_each_with_a_reason(admin_client: Client) -> None:
    executions = [started(), started()]
    before = {e.pk: current(e) for e in executions}
    changelist = reverse("admin:routes_inboundaddress_changelist")
    selected = {"action": "rotate_selected", "_selected_action": [e.pk for e in executions]}
    confirm = admin_client.post(changelist, selected)
    assert confirm.status_code == 200 and b"Rotate" in confirm.content
    assert all(current(e) == before[e.pk] for e in executions)  # nothing until confirmed
    done = admin_client.post(changelist, {**selected, "post": "yes", "reason": "bulk"})
    assert done.status_code == 302
    for execution in executions:
        assert current(execution) != before[execution.pk]
        assert InboundAddress.objects.get(execution=execution).rotations == 1


def test_hiding_works_on_any_shape_and_on_a_recorded_position() -> None:
    from statecharts.policies.addresses import HIDDEN_ADDRESS, hide, secrets_of, shown_input

    address = f"{BASE}{'t' * 40}/"
    secrets = secrets_of({"basichttp": address})
    assert secrets == (address, "t" * 40)  # the address, and its token on its own
    deep: list[Any] = []
    innermost = deep
    for _ in range(5_000):  # deeper than Python's recursion limit
        innermost.append([])
        innermost = innermost[0]
    innermost.append(f"see {address}")
    hidden = hide({"k": deep, address: 1, "token": "t" * 40, "n": 2}, secrets)
    assert address not in hidden and hidden["n"] == 2
    assert hidden[HIDDEN_ADDRESS] == 1 and hidden["token"] == HIDDEN_ADDRESS
    found = hidden["k"]
    for _ in range(5_000):
        found = found[0]
    assert found == [f"see {HIDDEN_ADDRESS}"]
    position = json.dumps({"state": {"io_processors": {"basichttp": address}}})
    shown = shown_input({"kind": "migrate", "position": position})
    assert address not in shown["position"] and HIDDEN_ADDRESS in shown["position"]
