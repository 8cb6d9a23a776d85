"""The sandbox's refusal table (statecharts.core.datamodel.refusals), walked against a live
realm: every entry is refused, removed or fixed there, and every built-in it names is
frozen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from statecharts.core.datamodel import Limits, refusals
from statecharts.core.datamodel.ecmascript import _take_engine


@pytest.fixture(scope="module")
def realm() -> Iterator[Any]:
    """Chart code's view: a fresh engine, locked down, evaluating in its global scope."""
    engine = _take_engine(Limits())
    yield lambda code: engine.context.eval(code)


def thrown(realm: Any, code: str) -> str:
    """What ``code`` throws in the realm, as text ("" when it does not throw)."""
    return realm(
        f"(function () {{ try {{ {code}; return ''; }} catch (e) {{ return String(e); }} }})()"
    )


@pytest.mark.parametrize(("holder", "member", "what"), refusals.REFUSED_CALLS)
def test_each_refused_call_throws_saying_what_was_refused(
    realm: Any, holder: str, member: str, what: str
) -> None:
    assert thrown(realm, f"{holder}.{member}()") == (
        f"TypeError: {what} is not available inside a statechart (charts are deterministic)"
    )
    assert realm(f"Object.isFrozen({holder})") is True  # (it cannot be put back)


def test_the_clock_of_the_date_constructor_is_refused_and_dates_from_arguments_are_not(
    realm: Any,
) -> None:
    assert refusals.DATE_CALLED in thrown(realm, "Date()")
    assert refusals.DATE_CONSTRUCTED_WITHOUT_ARGUMENTS in thrown(realm, "new Date()")
    assert realm("new Date(0).getTime()") == 0


@pytest.mark.parametrize("name", refusals.REMOVED_GLOBALS)
def test_each_removed_global_is_absent(realm: Any, name: str) -> None:
    assert realm(f"typeof {name}") == "undefined"
    assert realm(f"Object.prototype.hasOwnProperty.call(globalThis, {json.dumps(name)})") is False


@pytest.mark.parametrize(("holder", "member"), refusals.FIXED_MEMBERS)
def test_each_fixed_member_is_a_read_only_value(realm: Any, holder: str, member: str) -> None:
    descriptor = json.loads(realm(
        f"JSON.stringify(Object.getOwnPropertyDescriptor({holder}, {json.dumps(member)}), "
        "(k, v) => typeof v === 'function' ? 'function' : v)"
    ) or "null")
    if descriptor is None:  # (a QuickJS without it: nothing to fix)
        return
    assert descriptor["writable"] is False
    assert descriptor["configurable"] is False
    assert "get" not in descriptor and "set" not in descriptor


@pytest.mark.parametrize(("holder", "member"), refusals.REFUSED_ON_THE_GLOBAL_OBJECT)
def test_each_refused_function_refuses_the_global_object_only(
    realm: Any, holder: str, member: str
) -> None:
    argument = ", null" if member == "setPrototypeOf" else ""
    if holder == "Reflect":
        assert realm(f"Reflect.{member}(globalThis{argument})") is False
    else:
        assert f"{member} is not allowed on the global object" in thrown(
            realm, f"Object.{member}(globalThis{argument})"
        )
    # (on any other object it does what it always did)
    assert thrown(realm, f"{holder}.{member}({{}}{argument})") == ""
    assert realm("Object.isExtensible(globalThis)") is True


@pytest.mark.parametrize("member", refusals.ACCESSORS_REFUSED_ON_THE_GLOBAL_OBJECT)
def test_each_accessor_definer_refuses_the_global_object(realm: Any, member: str) -> None:
    assert "an accessor is not allowed on the global object" in thrown(
        realm, f"globalThis.{member}('x', function () {{ return 1; }})"
    )
    assert thrown(realm, f"({{}}).{member}('x', function () {{ return 1; }})") == ""


def test_the_table_is_what_the_prelude_reads() -> None:
    table = json.loads(refusals.as_json())
    assert {name for name, *_ in table["refused_calls"]} == {"Date", "Math"}
    assert "Proxy" in table["removed_globals"]
    assert len(table["refused_on_the_global_object"]) == 6
