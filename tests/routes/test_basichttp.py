"""The Basic HTTP Event I/O Processor's route (routes.basichttp): what it sends, where it may
send it (the allow-list, deny by default), and how a send fails; driven through the in-memory
driver against a real loopback HTTP server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from routes.base import NotSent
from routes.basichttp import (
    BASICHTTP_TYPE,
    DEFAULT_OPTIONS,
    LOOPBACK_OPTIONS,
    BadInbound,
    DeliveryFailed,
    MemoryBasicHTTP,
    NotPosted,
    Request,
    build_request,
    decode_post,
    post,
    target_verdict,
)
from statecharts.core.host import RouteVerdict
from statecharts.drivers.memory import MemoryDriver

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


class Target:
    """A loopback server that records every request and answers as ``answer`` says."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer: tuple[int, dict[str, str], bytes] = (204, {}, b"")
        self.hang = threading.Event()  # set: the next request is never answered
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # (the name http.server calls)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if target.hang.is_set():
                    target.released.wait(5)
                    return
                status, headers, payload = target.answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.released = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/in"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target()
    yield server
    server.close()


def sender(url_expr: str, body: str = "") -> str:
    return f"""<scxml {NS} initial="a">
  <datamodel><data id="errors" expr="[]"/><data id="Var1" expr="2"/></datamodel>
  <state id="a">
    <transition event="go">
      <send type="{BASICHTTP_TYPE}" targetexpr="{url_expr}" event="hello" {body}/>
    </transition>
    <transition event="error.*">
      <assign location="errors" expr="errors.concat([[_event.name, _event.sendid]])"/>
    </transition>
  </state>
</scxml>"""


def test_a_send_is_one_form_encoded_post_with_the_event_name_and_params(target: Target) -> None:
    route = MemoryBasicHTTP(LOOPBACK_OPTIONS)
    session = MemoryDriver(routes={"basichttp": route}).start(
        sender("_event.data.url", 'namelist="Var1"')
    )
    session.send("go", {"url": target.url})
    [request] = target.requests
    assert request["body"] == b"_scxmleventname=hello&Var1=2"
    assert request["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert request["headers"]["Idempotency-Key"] == f"{session.session_id}:1"
    assert session.datamodel["errors"] == []


def test_content_is_the_body_and_the_name_goes_in_the_query() -> None:
    request = build_request("http://h/in", "hello", "a b&c", "content")
    assert request == Request("http://h/in?_scxmleventname=hello", b"a%20b%26c")
    assert build_request("http://h/in?x=1", None, {"k": [1]}, "content").url == "http://h/in?x=1"
    assert build_request("http://h/in", None, {"k": [1]}, "params").body == b"k=%5B1%5D"


def test_a_targetexpr_off_the_allow_list_is_error_execution_and_nothing_is_sent(
    target: Target,
) -> None:
    """An attack: the target comes from event data; only the allow-list's hosts are taken."""
    only_example = {**LOOPBACK_OPTIONS, "allowed_hosts": ("example.org",)}
    route = MemoryBasicHTTP(only_example)
    session = MemoryDriver(routes={"basichttp": route}).start(sender("_event.data.url"))
    for url in (
        target.url,  # loopback, not on this list
        "http://169.254.169.254/latest/meta-data",  # a cloud metadata address
        "file:///etc/passwd",  # not a scheme it speaks
        "http://user:secret@example.org/",  # credentials smuggled in the URL
        "http://example.org.evil.net/",  # a suffix trick
    ):
        session.send("go", {"url": url})
    assert session.datamodel["errors"] == [["error.execution", f"send_{n}"] for n in range(1, 6)]
    assert target.requests == [] and route.sent == []


def test_deny_by_default_and_no_target_is_error_communication() -> None:
    assert target_verdict(DEFAULT_OPTIONS, "https://example.org/").verdict is RouteVerdict.INVALID
    assert target_verdict(DEFAULT_OPTIONS, None).verdict is RouteVerdict.UNREACHABLE
    wildcard = {**DEFAULT_OPTIONS, "allowed_hosts": ("*.example.org", "api.test:8443")}
    assert target_verdict(wildcard, "https://a.example.org/x").verdict is RouteVerdict.OK
    assert target_verdict(wildcard, "https://example.org/x").verdict is RouteVerdict.INVALID
    assert target_verdict(wildcard, "https://api.test:8443/").verdict is RouteVerdict.OK
    assert target_verdict(wildcard, "https://api.test:9000/").verdict is RouteVerdict.INVALID
    assert target_verdict(wildcard, "http://a.example.org/").verdict is RouteVerdict.INVALID


def test_a_failed_delivery_is_error_communication_with_the_send_id(target: Target) -> None:
    target.answer = (500, {}, b"no")
    route = MemoryBasicHTTP(LOOPBACK_OPTIONS)
    session = MemoryDriver(routes={"basichttp": route}).start(sender("_event.data.url"))
    session.send("go", {"url": target.url})
    assert len(target.requests) == 1
    assert session.datamodel["errors"] == [["error.communication", None]]
    assert route.sent == []


def test_redirects_are_followed_only_onto_the_allow_list(target: Target) -> None:
    target.answer = (307, {"Location": "http://169.254.169.254/steal"}, b"")
    with pytest.raises(DeliveryFailed, match="off the allow-list"):
        post(LOOPBACK_OPTIONS, Request(target.url, b"a=1"))
    target.answer = (302, {"Location": target.url}, b"")
    no_redirects = {**LOOPBACK_OPTIONS, "max_redirects": 0}
    with pytest.raises(DeliveryFailed, match="redirects are not followed"):
        post(no_redirects, Request(target.url, b"a=1"))


def test_the_answer_is_read_up_to_the_cap_and_the_request_body_is_capped(target: Target) -> None:
    target.answer = (200, {}, b"x" * 100_000)
    capped = {**LOOPBACK_OPTIONS, "max_response_bytes": 10, "max_request_bytes": 8}
    assert post(capped, Request(target.url, b"a=1")) == 200
    with pytest.raises(DeliveryFailed, match="at most 8"):
        post(capped, Request(target.url, b"a=123456789"))
    assert len(target.requests) == 1


def test_a_target_that_never_answers_times_out(target: Target) -> None:
    target.hang.set()
    quick = {**LOOPBACK_OPTIONS, "timeout_seconds": 0.2}
    with pytest.raises(DeliveryFailed, match="timed out"):
        post(quick, Request(target.url, b"a=1"))


def test_a_refused_connection_or_an_unknown_host_is_not_sent_and_says_why() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there
    with pytest.raises(NotPosted, match="the POST was not sent") as refused:
        post(LOOPBACK_OPTIONS, Request(f"http://127.0.0.1:{port}/in", b"a=1"))
    assert isinstance(refused.value, NotSent) and isinstance(refused.value, DeliveryFailed)
    assert isinstance(refused.value.__cause__, ConnectionRefusedError)
    unknown = {**LOOPBACK_OPTIONS, "allowed_hosts": ["nothing.invalid"]}  # (RFC 2606: never)
    with pytest.raises(NotPosted) as unresolved:
        post(unknown, Request("http://nothing.invalid/in", b"a=1"))
    assert isinstance(unresolved.value.__cause__, socket.gaierror)


def test_a_failure_after_the_request_may_have_arrived_is_never_not_sent(target: Target) -> None:
    target.hang.set()  # the request arrives; the answer never does
    quick = {**LOOPBACK_OPTIONS, "timeout_seconds": 0.2}
    with pytest.raises(DeliveryFailed, match="timed out") as timed_out:
        post(quick, Request(target.url, b"a=1"))
    assert not isinstance(timed_out.value, NotSent)
    assert len(target.requests) == 1  # (it did arrive: a retry would deliver it twice)
    target.hang.clear()
    target.answer = (503, {}, b"later")
    with pytest.raises(DeliveryFailed, match="503") as refused:
        post(LOOPBACK_OPTIONS, Request(target.url, b"a=1"))
    assert not isinstance(refused.value, NotSent)


def test_decoding_names_data_and_raw() -> None:
    event = decode_post(
        path="/in/<token>/",
        query="",
        content_type="application/x-www-form-urlencoded",
        body=b"_scxmleventname=order.paid&amount=12&tag=a&tag=b",
    )
    assert (event.name, event.data) == ("order.paid", {"amount": "12", "tag": ["a", "b"]})
    assert event.raw.startswith("POST /in/<token>/ HTTP/1.1\r\n")
    assert event.raw.endswith("\r\n\r\n_scxmleventname=order.paid&amount=12&tag=a&tag=b")
    bare = decode_post(path="/", query="", content_type=None, body=b"some%20content")
    assert (bare.name, bare.data) == ("HTTP.POST", "some content")
    as_json = decode_post(
        path="/", query="_scxmleventname=x", content_type="application/json", body=b'{"a": 1}'
    )
    assert (as_json.name, as_json.data) == ("x", {"a": 1})


@pytest.mark.parametrize(
    ("query", "content_type", "body", "reason"),
    [
        ("", "application/x-www-form-urlencoded", b"_scxmleventname=error.boom", "reserved"),
        ("_scxmleventname=done.state.x", None, b"", "reserved"),
        ("_scxmleventname=a&_scxmleventname=b", None, b"", "2 times"),
        ("_scxmleventname=a%20b", None, b"", "not an event name"),
        ("", "application/json", b"{nope", "cannot be read"),
        ("", "image/png", b"\x89PNG", "not UTF-8"),
        ("", "application/xml", b"<a/>", "not accepted"),
    ],
)
def test_what_cannot_be_an_event_is_refused_with_a_reason(
    query: str, content_type: str | None, body: bytes, reason: str
) -> None:
    with pytest.raises(BadInbound, match=reason):
        decode_post(path="/", query=query, content_type=content_type, body=body)


def test_raw_is_on_received_events_only_and_other_types_need_no_event_name() -> None:
    """The core's part: ``_event.raw`` (only on events a processor received as a message),
    and a ``<send>`` of a non-SCXML type may have no event name (spec 6.2.1; W3C 531)."""
    chart = f"""<scxml {NS} initial="a">
  <datamodel><data id="seen" expr="[]"/></datamodel>
  <state id="a">
    <transition event="e">
      <assign location="seen" expr="seen.concat([[_event.raw, 'raw' in _event]])"/>
    </transition>
    <transition event="never"><send type="basichttp" target="https://x.example/"/></transition>
  </state>
</scxml>"""
    session = MemoryDriver().start(chart)
    session.send("e", raw="POST / HTTP/1.1\r\n\r\n")
    session.send("e")
    assert session.datamodel["seen"] == [["POST / HTTP/1.1\r\n\r\n", True], [None, False]]
    with pytest.raises(Exception, match="needs 'event'"):
        MemoryDriver().start(
            f'<scxml {NS}><state id="a"><onentry><send target="#_internal"/>'
            "</onentry></state></scxml>"
        )
