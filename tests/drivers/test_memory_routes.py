"""Routes (host-registered ``<send type>``s) in the in-memory driver, and what the core says
about them while a ``<send>`` executes: an unsupported type or a target the route calls
invalid is ``error.execution``; one it cannot dispatch is ``error.communication``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statecharts.core.host import ROUTE_OK, RouteAnswer, RouteVerdict
from statecharts.core.plan import Instruction
from statecharts.drivers.memory import MemoryDriver, MemorySession

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


@dataclass
class Outbox:
    types: tuple[str, ...] = ("mail", "urn:example:mail")
    sent: list[tuple[str, str | None, Any, str]] = field(default_factory=list)

    def check(self, send_type: str, target: str | None) -> RouteAnswer:
        if target is None:
            return RouteAnswer(RouteVerdict.UNREACHABLE, "no address")
        if "@" not in target:
            return RouteAnswer(RouteVerdict.INVALID, "not an address")
        return ROUTE_OK

    def deliver(self, session: MemorySession, instruction: Instruction, key: str) -> None:
        assert instruction.event is not None and instruction.target is not None
        self.sent.append(
            (instruction.event.name, instruction.target.address, instruction.event.data, key)
        )


CHART = f"""<scxml {NS} initial="a">
  <datamodel><data id="errors" expr="[]"/></datamodel>
  <state id="a">
    <transition event="go">
      <send type="mail" target="ada@example.com" event="hello"><param name="n" expr="1"/></send>
      <send type="urn:example:mail" target="bob@example.com" event="later" delay="5s"/>
    </transition>
    <transition event="bad"><send type="mail" target="nobody" event="x"/></transition>
    <transition event="lost"><send type="mail" event="x"/></transition>
    <transition event="fax"><send type="fax" target="123" event="x"/></transition>
    <transition event="error.*">
      <assign location="errors" expr="errors.concat([_event.name])"/></transition>
  </state>
</scxml>"""


def test_a_route_gets_immediate_and_delayed_sends_with_a_key_per_send() -> None:
    mail = Outbox()
    driver = MemoryDriver(routes={"mail": mail})
    session = driver.start(CHART)
    session.send("go")
    assert mail.sent == [("hello", "ada@example.com", {"n": 1}, f"{session.session_id}:1")]
    driver.advance(5_000)
    assert mail.sent[-1][:2] == ("later", "bob@example.com")
    assert mail.sent[-1][3] == f"{session.session_id}:2"  # the send's ordinal makes the key


def test_the_core_refuses_what_the_route_and_the_registered_types_refuse() -> None:
    mail = Outbox()
    session = MemoryDriver(routes={"mail": mail}).start(CHART)
    for event in ("bad", "lost", "fax"):
        session.send(event)
    assert session.datamodel["errors"] == [
        "error.execution",  # an invalid target, the route says
        "error.communication",  # no target: it cannot be dispatched
        "error.execution",  # a type nobody registered
    ]
    assert mail.sent == []


def test_without_the_route_every_route_send_is_error_execution() -> None:
    session = MemoryDriver().start(CHART)
    session.send("go")
    assert session.datamodel["errors"] == ["error.execution"]  # the rest of the block skipped
