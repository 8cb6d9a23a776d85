"""``_event.origin`` of a Basic HTTP event (W3C C.2: "the URL of the sender, if known"): the
sender's own word in its ``SCXML-Origin`` header, checked as an absolute http(s) URL, recorded
with the input, and never trusted for anything (docs/basichttp.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from routes import addresses, inbound
from routes.basichttp import (
    BASICHTTP_TYPE,
    BASICHTTP_TYPES,
    LOOPBACK_OPTIONS,
    ORIGIN_HEADER,
    BadInbound,
    decode_post,
)
from statecharts.core.datamodel import plain
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, HistoryEntry

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.routes.urls")]

BASE = "http://testserver/scxml/basichttp/"
FORM = "application/x-www-form-urlencoded"
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel><data id="got" expr="[]"/><data id="raw" expr="''"/></datamodel>
  <state id="waiting">
    <transition event="*">
      <assign location="got" expr="got.concat([[_event.name, typeof _event.origin === 'string'
          ? _event.origin : null, _event.origintype]])"/>
      <assign location="raw" expr="_event.raw"/>
    </transition>
  </state>
</scxml>"""
# Answers whoever the event says it came from: the outbound allow-list still decides.
ANSWERING = f"""<scxml {NS} initial="waiting">
  <state id="waiting">
    <transition event="ask" target="answering"/>
  </state>
  <state id="answering">
    <onentry><send event="answer" type="basichttp" targetexpr="_event.origin"/></onentry>
    <transition event="error.execution" target="refused"/>
  </state>
  <final id="refused"/>
</scxml>"""
SENDER = "https://partner.example.org/scxml/basichttp/abc/"


def started(source: str = CHART) -> Execution:
    return inbound.start(Chart.objects.load(source), base_url=BASE)


def address(execution: Execution) -> str:
    return addresses.location_of(execution, "/scxml/basichttp/")


def datamodel(execution: Execution) -> dict[str, Any]:
    execution.refresh_from_db()
    found: dict[str, Any] = plain(decode(bytes(execution.position)).state.datamodel)
    return found


def post(client: Client, execution: Execution, body: str, **headers: str) -> Any:
    return client.post(address(execution), body, content_type=FORM, headers=headers)


def test_the_senders_address_is_event_origin_and_recorded(client: Client) -> None:
    execution = started()
    answer = post(client, execution, "_scxmleventname=paid", **{ORIGIN_HEADER: SENDER})
    assert answer.status_code == 204
    seen = datamodel(execution)
    assert seen["got"] == [["paid", SENDER, BASICHTTP_TYPE]]
    assert f"\r\n{ORIGIN_HEADER}: {SENDER}\r\n" in seen["raw"]  # the message as received
    entry = HistoryEntry.objects.get(execution=execution, seq=2)
    assert entry.input["event"]["origin"] == SENDER  # replay re-feeds the same event


def test_without_the_header_origin_is_not_set(client: Client) -> None:
    execution = started()
    assert post(client, execution, "_scxmleventname=paid").status_code == 204
    assert datamodel(execution)["got"] == [["paid", None, BASICHTTP_TYPE]]
    assert ORIGIN_HEADER not in datamodel(execution)["raw"]


@pytest.mark.parametrize(
    ("origin", "reason"),
    [
        ("ftp://partner.example.org/x", "must be an absolute http or https URL"),
        ("/scxml/basichttp/relative/", "must be an absolute http or https URL"),
        ("https://", "must be an absolute http or https URL"),
        ("https://user:secret@partner.example.org/", "must not carry credentials"),
        ("https://partner.example.org/a b", "must not contain whitespace"),
        ("https://partner.example.org:99999/", "is not a URL"),
        ("https://partner.example.org/" + "x" * 2100, "longer than 2048 characters"),
    ],
)
def test_a_bad_origin_is_400_with_the_reason_and_nothing_is_applied(
    client: Client, origin: str, reason: str
) -> None:
    execution = started()
    answer = post(client, execution, "_scxmleventname=paid", **{ORIGIN_HEADER: origin})
    assert answer.status_code == 400
    assert reason in " ".join(answer.json()["reasons"])
    assert HistoryEntry.objects.filter(execution=execution).count() == 1


def test_decoding_outside_django_strips_and_checks_the_origin() -> None:
    decoded = decode_post(path="/p", query="", content_type=FORM, body=b"a=1",
                          origin=f"  {SENDER} ")
    assert decoded.origin == SENDER and decoded.data == {"a": "1"}
    assert decode_post(path="/p", query="", content_type=FORM, body=b"", origin="  ").origin is None
    with pytest.raises(BadInbound, match="absolute http or https URL"):
        decode_post(path="/p", query="", content_type=FORM, body=b"", origin="mailto:x@y")


def test_the_origin_grants_nothing(client: Client) -> None:
    execution = started()
    # Naming the execution's own address (its capability) as the origin opens no door: a
    # post with a forged token is still a 403, and nothing is applied.
    own = addresses.location_of(execution, BASE)
    forged = f"/scxml/basichttp/{execution.session_id}/"
    answer = client.post(forged, "_scxmleventname=x", content_type=FORM,
                         headers={ORIGIN_HEADER: own})
    assert answer.status_code == 403
    assert HistoryEntry.objects.filter(execution=execution).count() == 1
    # The history records it as the event's field only: no user, no door, no credential.
    post(client, execution, "_scxmleventname=x", **{ORIGIN_HEADER: own})
    entry = HistoryEntry.objects.get(execution=execution, seq=2)
    assert "sender" not in entry.input
    assert "user" not in (entry.caller_context or {})


def test_answering_to_the_origin_goes_through_the_outbound_allow_list(client: Client) -> None:
    routes = {
        "basichttp": {
            "ROUTE": "routes.basichttp.BasicHTTPRoute",
            "TYPES": list(BASICHTTP_TYPES),
            "OPTIONS": {
                k: list(v) if isinstance(v, tuple) else v for k, v in LOOPBACK_OPTIONS.items()
            },
        }
    }
    with override_settings(STATECHARTS={"ROUTES": routes}):
        execution = started(ANSWERING)
        # A sender naming a metadata service as its origin: the chart's answer is refused
        # before anything is sent (error.execution), since the host is not on the list.
        answer = post(client, execution, "_scxmleventname=ask",
                      **{ORIGIN_HEADER: "http://169.254.169.254/latest/"})
        assert answer.status_code == 204
    execution.refresh_from_db()
    assert execution.configuration == ["refused"]
