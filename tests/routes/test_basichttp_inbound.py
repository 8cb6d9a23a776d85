"""The Basic HTTP processor's inbound door (routes.inbound): a POST to an execution's signed
address becomes one external event of it, through the stepper; everything else is refused
with the right status and nothing is applied."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core import signing
from django.test import Client

from routes import addresses, inbound
from routes.basichttp import BASICHTTP_SHORT, BASICHTTP_TYPE
from statecharts import stepper
from statecharts.core.datamodel import plain
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.routes.urls")]

BASE = "http://testserver/scxml/basichttp/"
FORM = "application/x-www-form-urlencoded"
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel>
    <data id="got" expr="[]"/><data id="raw" expr="''"/><data id="mine" expr="''"/>
  </datamodel>
  <state id="waiting">
    <onentry><assign location="mine" expr="_ioprocessors['basichttp'].location"/></onentry>
    <transition event="stop" target="done"/>
    <transition event="*">
      <assign location="got" expr="got.concat([[_event.name, _event.data, _event.origintype]])"/>
      <assign location="raw" expr="_event.raw"/>
    </transition>
  </state>
  <final id="done"/>
</scxml>"""


def started() -> Execution:
    return inbound.start(Chart.objects.load(CHART), base_url=BASE)


def url(execution: Execution) -> str:
    return addresses.location_of(execution, "/scxml/basichttp/")


def data(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    found: dict[str, Any] = plain(decode(bytes(execution.position)).state.datamodel)
    return found


def token_of(execution: Execution) -> str:
    """The token of the execution's current address (its last path segment)."""
    where = addresses.location_of(execution)
    assert where is not None
    return where.rstrip("/").rsplit("/", 1)[1]


def test_a_post_becomes_an_external_event_with_data_and_raw(client: Client) -> None:
    execution = started()
    assert data(execution)["mine"] == addresses.location_of(execution, BASE)
    answer = client.post(url(execution), "_scxmleventname=paid&amount=12", content_type=FORM)
    assert answer.status_code == 204
    seen = data(execution)
    assert seen["got"] == [["paid", {"amount": "12"}, BASICHTTP_TYPE]]
    # _event.raw: the message as received, the capability token masked.
    assert seen["raw"].startswith("POST /scxml/basichttp/<token>/ HTTP/1.1\r\n")
    assert seen["raw"].endswith("_scxmleventname=paid&amount=12")
    assert execution.session_id not in seen["raw"]
    # Without _scxmleventname the event is named after the method (C.2.1).
    client.post(url(execution), "hello", content_type="text/plain")
    assert data(execution)["got"][-1] == ["HTTP.POST", "hello", BASICHTTP_TYPE]


def test_the_address_is_in_ioprocessors_under_the_uri_and_the_short_name() -> None:
    where = inbound.io_processors(BASE, "abc")
    assert where[BASICHTTP_TYPE] == where[BASICHTTP_SHORT] == inbound.location(BASE, "abc")
    assert inbound.session_of(where[BASICHTTP_SHORT].rstrip("/").rsplit("/", 1)[1]) == "abc"
    assert inbound.token_for("abc") == inbound.token_for("abc")  # no clock in it
    assert inbound.token_for("abc", "n1") == inbound.token_for("abc", "n1")
    assert inbound.address_of(inbound.token_for("abc", "n1")) == ("abc", "n1")
    assert inbound.token_for("abc", "n2") != inbound.token_for("abc", "n1")


def test_a_forged_or_foreign_token_is_403_and_nothing_is_applied(client: Client) -> None:
    execution = started()
    before = HistoryEntry.objects.count()
    genuine = token_of(execution)
    forged = [
        genuine[:-2] + ("AA" if not genuine.endswith("AA") else "BB"),  # a bad signature
        signing.Signer(salt="another.purpose").sign_object(execution.session_id),  # replayed
        signing.dumps(execution.session_id, salt=inbound.SALT),  # timestamped: another shape
        signing.Signer(key="not-this-site", salt=inbound.SALT).sign_object(execution.session_id),
        execution.session_id,  # the bare session id
    ]
    for token in forged:
        answer = client.post(f"/scxml/basichttp/{token}/", "_scxmleventname=x", content_type=FORM)
        assert answer.status_code == 403, token
    assert HistoryEntry.objects.count() == before
    assert data(execution)["got"] == []


def test_a_rotated_secret_key_keeps_addresses_working(client: Client, settings: Any) -> None:
    execution = started()
    address = url(execution)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-key-for-the-site-after-rotation"
    assert client.post(address, "_scxmleventname=x", content_type=FORM).status_code == 204
    settings.SECRET_KEY_FALLBACKS = []
    assert client.post(address, "_scxmleventname=y", content_type=FORM).status_code == 403


def test_a_finished_execution_is_409_and_a_deleted_one_404(client: Client) -> None:
    execution = started()
    stepper.send(execution, "stop")
    entries = HistoryEntry.objects.filter(execution=execution).count()
    answer = client.post(url(execution), "_scxmleventname=late", content_type=FORM)
    assert answer.status_code == 409 and answer.json()["status"] == "completed"
    assert HistoryEntry.objects.filter(execution=execution).count() == entries
    address = url(execution)
    execution.delete()
    assert client.post(address, "_scxmleventname=x", content_type=FORM).status_code == 404


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        ("_scxmleventname=error.platform", FORM, "reserved"),
        ("_scxmleventname=done.invoke.x", FORM, "reserved"),
        ("_scxmleventname=a&_scxmleventname=b", FORM, "2 times"),
        ("{not json", "application/json", "cannot be read"),
        ("<x/>", "application/xml", "not accepted"),
        ("[" * 5000 + "]" * 5000, "application/json", "nested too deeply"),
        ('{"x": NaN}', "application/json", "finite"),
        ('{"$sc": "function", "source": "(function(){ return 1 })()"}', "application/json",
         "function"),
    ],
)
def test_bad_input_is_400_with_reasons_and_nothing_is_applied(
    client: Client, body: str, content_type: str, reason: str
) -> None:
    execution = started()
    entries = HistoryEntry.objects.filter(execution=execution).count()
    answer = client.post(url(execution), body, content_type=content_type)
    assert answer.status_code == 400
    assert reason in " ".join(answer.json()["reasons"])
    assert HistoryEntry.objects.filter(execution=execution).count() == entries


def test_an_oversize_body_is_413_and_not_read(client: Client) -> None:
    execution = started()
    big = "a=" + "x" * (inbound.BasicHTTPInbound.max_body_bytes + 1)
    answer = client.post(url(execution), big, content_type=FORM)
    assert answer.status_code == 413
    assert data(execution)["got"] == []


def test_only_post_is_accepted(client: Client) -> None:
    execution = started()
    assert client.get(url(execution)).status_code == 405
    assert client.put(url(execution), "a=1", content_type=FORM).status_code == 405


def test_posts_are_throttled_per_execution(
    client: Client, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr(inbound.BasicHTTPInbound, "max_posts_per_minute", 2)
    # The count is per minute of the platform clock: pinned, so the posts cannot straddle a
    # minute's boundary (the real clock made this test fail when they did).
    pinned = datetime(2031, 5, 6, 7, 8, 30, tzinfo=UTC)
    settings.STATECHARTS = {**settings.STATECHARTS, "CLOCK": lambda: pinned}
    execution, other = started(), started()
    codes = [
        client.post(url(execution), f"_scxmleventname=e{n}", content_type=FORM).status_code
        for n in range(3)
    ]
    assert codes == [204, 204, 429]
    assert client.post(url(other), "_scxmleventname=x", content_type=FORM).status_code == 204
    assert [name for name, *_ in data(execution)["got"]] == ["e0", "e1"]


def test_a_repeated_idempotency_key_is_applied_once(client: Client) -> None:
    execution = started()
    for _ in range(2):
        answer = client.post(
            url(execution), "_scxmleventname=paid", content_type=FORM,
            headers={"Idempotency-Key": "sender-1:7"},
        )
        assert answer.status_code == 204
    assert [name for name, *_ in data(execution)["got"]] == ["paid"]
    clash = client.post(
        url(execution), "_scxmleventname=other", content_type=FORM,
        headers={"Idempotency-Key": "sender-1:7"},
    )
    assert clash.status_code == 409


@pytest.mark.django_db(transaction=True)  # the live server's thread reads committed rows
def test_an_in_memory_chart_posts_into_a_durable_execution_over_real_http(
    live_server: Any,
) -> None:
    """Both halves end to end: a Basic HTTP <send> (the route, a real POST) to Django's live
    server, whose inbound view feeds the durable execution the address names."""
    from routes.basichttp import LOOPBACK_OPTIONS, MemoryBasicHTTP
    from statecharts.drivers.memory import MemoryDriver

    receiver = inbound.start(
        Chart.objects.load(CHART), base_url=f"{live_server.url}/scxml/basichttp/"
    )
    address = data(receiver)["mine"]
    sender = f"""<scxml {NS} initial="a">
  <datamodel><data id="errors" expr="[]"/><data id="n" expr="3"/></datamodel>
  <state id="a">
    <transition event="go">
      <send type="basichttp" targetexpr="_event.data.to" event="order.paid" namelist="n"/>
      <send type="basichttp" targetexpr="_event.data.to"><content>a b</content></send>
    </transition>
    <transition event="error.*"><assign location="errors" expr="errors.concat([_event.name])"/>
    </transition>
  </state>
</scxml>"""
    route = MemoryBasicHTTP(LOOPBACK_OPTIONS)
    session = MemoryDriver(routes={"basichttp": route}).start(sender)
    session.send("go", {"to": address})
    assert session.datamodel["errors"] == []
    assert data(receiver)["got"] == [
        ["order.paid", {"n": "3"}, BASICHTTP_TYPE],
        ["HTTP.POST", "a b", BASICHTTP_TYPE],
    ]
    assert "\r\n\r\na%20b" in data(receiver)["raw"]
    # A forged address on the same server: the POST is refused, the sender told.
    forged = address.replace(token_of(receiver), "forged")
    session.send("go", {"to": forged})
    assert session.datamodel["errors"] == ["error.communication", "error.communication"]
    assert len(data(receiver)["got"]) == 2


def test_the_address_is_kept_for_replay_and_hidden_in_every_view() -> None:
    from statecharts.api.serializers import HistoryEntrySerializer
    from statecharts.operations.inspection import HIDDEN_ADDRESS, inspect

    quiet = f'<scxml {NS}><state id="a"><transition event="x"/></state></scxml>'
    execution = inbound.start(Chart.objects.load(quiet), base_url=BASE)
    token = token_of(execution)
    entry = HistoryEntry.objects.get(execution=execution, seq=1)
    assert token in entry.input["io_processors"][BASICHTTP_SHORT]  # recorded: replay sees it
    document = json.dumps(inspect(execution).document(history=True))
    api = json.dumps(HistoryEntrySerializer(entry).data)
    for shown in (document, api):
        assert token not in shown and HIDDEN_ADDRESS in shown


def test_the_admin_hides_the_address_too(admin_client: Client) -> None:
    from django.urls import reverse

    quiet = f'<scxml {NS}><state id="a"><transition event="x"/></state></scxml>'
    execution = inbound.start(Chart.objects.load(quiet), base_url=BASE)
    token = token_of(execution)
    entry = HistoryEntry.objects.get(execution=execution, seq=1)
    pages = [
        reverse("admin:statecharts_historyentry_change", args=[entry.pk]),
        reverse("admin:statecharts_historyentry_changelist"),
        reverse("admin:statecharts_execution_change", args=[execution.pk]),
    ]
    for page in pages:
        answer = admin_client.get(page)
        assert answer.status_code == 200, page
        assert token not in answer.content.decode(), page
    assert "io_processors" in admin_client.get(pages[0]).content.decode()
