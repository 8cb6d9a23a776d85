"""Expressions the ECMAScript datamodel answers from its mirror (datamodel/scalar.py) give
exactly what QuickJS gives, or step aside; the engine sees every value they assign before it
runs anything else; the step's guard runs before each of them as before any evaluation.

The reference is QuickJS itself: random expressions of the subset, over integer and boolean
values near the edges (zero, signs, 2**53 - 1), evaluated both ways.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import quickjs

from statecharts.core import Event, Interpreter, load_chart
from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel
from statecharts.core.datamodel.scalar import MAX_SAFE_INT, NotScalar, compile_scalar
from statecharts.core.model import Expr

VALUES: dict[str, Any] = {
    "a": 0,
    "b": 1,
    "c": -1,
    "d": 7,
    "e": -4,
    "f": 2,
    "big": MAX_SAFE_INT,
    "low": -MAX_SAFE_INT,
    "yes": True,
    "no": False,
}
LITERALS = ["0", "1", "2", "3", "10", "9007199254740991", "true", "false"]
BINARY = ["+", "-", "*", "%", "<", "<=", ">", ">=", "==", "!=", "===", "!==", "&&", "||"]


def random_expression(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice([*VALUES, *LITERALS])
    if roll < 0.45:
        return rng.choice(["!", "- ", "+ ", "!!"]) + random_expression(rng, depth + 1)
    if roll < 0.55:
        return "(" + random_expression(rng, depth + 1) + ")"
    left, right = random_expression(rng, depth + 1), random_expression(rng, depth + 1)
    return f"{left} {rng.choice(BINARY)} {right}"


def quickjs_value(context: quickjs.Context, text: str) -> Any:
    """What the datamodel reads back for ``text``: an int for a safe integral number that
    is not -0 (the binding gives a float past 32 bits; the datamodel reads it as an int), a
    flagged float otherwise (NaN, fractions, -0, past 2**53 - 1), a bool."""
    kind = context.eval(f"(function () {{ const v = ({text}\n); return typeof v; }})()")
    value = context.eval(f"({text}\n)")
    if kind == "number":
        negative_zero = context.eval(f"Object.is(({text}\n), -0)")
        if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INT:
            value = int(value)
        if negative_zero or not isinstance(value, int):
            return ("not exact", value)
    return value


def test_random_expressions_answer_as_quickjs_or_step_aside() -> None:
    context = quickjs.Context()
    for name, value in VALUES.items():
        context.eval(f"var {name} = {str(value).lower()};")
    rng = random.Random(30)
    answered = stepped_aside = 0
    for _ in range(3000):
        text = random_expression(rng)
        program = compile_scalar(text)
        assert program is not None, text
        expected = quickjs_value(context, text)
        try:
            got = program(VALUES)
        except NotScalar:
            stepped_aside += 1
            continue
        answered += 1
        assert type(got) is type(expected) and got == expected, (text, got, expected)
    assert answered > 1500 and stepped_aside > 100  # (both ways were exercised)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count < 1000000000", True),
        ("consumed === count", False),
        ("ticks % 2 === 1", True),
        ("count + 1", 4),
        ("-ticks % 2", -1),
        ("!(count > 2) || ticks", 5),
        ("count && 0", 0),
        ("count\n+\n1", 4),
    ],
)
def test_the_benchmark_shapes_are_answered(text: str, expected: Any) -> None:
    program = compile_scalar(text)
    assert program is not None
    got = program({"count": 3, "consumed": 2, "ticks": 5})
    assert type(got) is type(expected) and got == expected


@pytest.mark.parametrize(
    "text",
    [
        "'a'",
        "f()",
        "In('s')",
        "a = 1",
        "a += 1",
        "a++",
        "--a",
        "1.5",
        "1e3",
        "0x10",
        "010",
        "a.b",
        "a[0]",
        "a // c",
        "a /* c */",
        "a <!-- b",
        "a\n--> b",
        "9007199254740992",
        "null",
        "undefined",
        "NaN",
        "typeof a",
        "a\x1c+ b",
        "a\u00a0+ b",
        "a / b",
        "a ? b : c",
        "a, b",
        "this",
        "(a",
        "a)",
        "",
        "   ",
        "a b",
        "_event.name",
        "a ** 2",
        "a & b",
        " + ".join(["a"] * 200),
    ],
)
def test_what_is_outside_the_subset_is_not_compiled(text: str) -> None:
    assert compile_scalar(text) is None


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("a + 1", {"a": MAX_SAFE_INT}),  # past 2**53 - 1
        ("a * -1", {"a": 0}),  # -0
        ("-a", {"a": 0}),
        ("a % 2", {"a": -4}),
        ("a % 0", {"a": 3}),  # NaN
        ("a + 1", {"a": "1"}),  # a string: concatenation
        ("a + 1", {"a": None}),
        ("a + 1", {"a": 1.5}),
        ("a + 1", {}),  # not held: ReferenceError is QuickJS's to raise
        ("a + 1", {"a": True}),
    ],
)
def test_values_outside_the_subset_step_aside(text: str, values: dict[str, Any]) -> None:
    program = compile_scalar(text)
    assert program is not None
    with pytest.raises(NotScalar):
        program(values)


def expr(index: int, source: str) -> Expr:
    return Expr(index, source, 1, 1)


def counter_datamodel() -> tuple[EcmascriptDatamodel, dict[int, Any]]:
    datamodel = EcmascriptDatamodel()
    datamodel.bind_system("s", None, {}, lambda _id: False, list)
    datamodel.declare_value("count", 0)
    datamodel.snapshot_value(datamodel.snapshot())  # (the mirror is set up from it)
    programs: dict[int, Any] = {}
    datamodel.use_scalar_programs(programs)
    return datamodel, programs


def test_an_assignment_from_the_mirror_reaches_the_engine_before_its_next_call() -> None:
    datamodel, programs = counter_datamodel()
    calls = []
    run = datamodel._run
    datamodel._run = lambda *args: calls.append(args) or run(*args)  # type: ignore[method-assign]
    datamodel.assign(expr(1, "count"), expr(2, "count + 1"))
    datamodel.assign(expr(1, "count"), expr(2, "count + 1"))
    assert datamodel.evaluate_cond(expr(3, "count === 2")) is True
    assert calls == [] and programs[2] is not None  # (no call into QuickJS so far)
    assert datamodel.snapshot() == '{"count":2}'
    # QuickJS runs what the subset does not hold, and sees the assigned value.
    assert datamodel.evaluate(expr(4, "String(count)")) == "2"
    assert len(calls) == 1 and programs[4] is None
    datamodel.assign(expr(1, "count"), expr(2, "count + 1"))
    assert datamodel.evaluate(expr(5, "[count][0]")) == 3
    datamodel.close()


def test_a_restore_drops_what_the_engine_was_not_yet_given() -> None:
    datamodel, _ = counter_datamodel()
    datamodel.assign(expr(1, "count"), expr(2, "count + 5"))
    datamodel.restore('{"count":1}')
    assert datamodel.evaluate(expr(4, "String(count)")) == "1"
    assert datamodel.snapshot() == '{"count":1}'
    datamodel.close()


def test_the_guard_runs_before_an_expression_the_mirror_answers() -> None:
    datamodel, _ = counter_datamodel()

    class Over(Exception):
        pass

    def guard() -> None:
        raise Over

    datamodel.set_evaluation_guard(guard)
    for run in (
        lambda: datamodel.evaluate_cond(expr(3, "count === 0")),
        lambda: datamodel.evaluate(expr(6, "count")),
        lambda: datamodel.assign(expr(1, "count"), expr(2, "count + 1")),
    ):
        with pytest.raises(Over):
            run()
    datamodel.set_evaluation_guard(None)
    assert datamodel.snapshot() == '{"count":0}'  # (nothing was assigned)
    datamodel.close()


EDGES = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
    initial="s"><datamodel><data id="n" expr="9007199254740990"/><data id="z" expr="0"/>
    <data id="flag" expr="true"/></datamodel>
  <state id="s">
    <transition event="step" cond="flag &amp;&amp; n % 2 === 0">
      <assign location="n" expr="n + 1"/><assign location="z" expr="z * -1"/>
      <log label="n" expr="n"/><log label="z" expr="1 / z"/>
    </transition>
    <transition event="step" cond="n &gt; 9007199254740990">
      <assign location="n" expr="n + 1"/><assign location="flag" expr="!flag"/>
      <log label="n" expr="n"/><log label="typed" expr="typeof n + flag"/>
    </transition>
  </state></scxml>"""


def test_a_chart_at_the_edges_steps_the_same_with_the_accelerator_off() -> None:
    compiled = load_chart(EDGES)
    runs = []
    for accelerated in (True, False):
        interpreter = Interpreter(compiled, tracing=True, accelerated=accelerated)
        step = interpreter.initialize("s")
        seen = [(step.state.to_dict(), repr(step.effects))]
        for _ in range(4):
            step = interpreter.handle_event(step.state, Event("step"))
            seen.append((step.state.to_dict(), repr(step.effects)))
        runs.append(seen)
    assert runs[0] == runs[1]
    assert "-inf" in repr(runs[0])  # (z held -0: 1 / z saw it)
    assert "9007199254740992" in repr(runs[0])  # (n went past 2**53 - 1)


# ---- a restore of scalars waits for the first call that needs the engine -------------------


class Calls:
    """Counts the calls a datamodel makes into its engine's machinery, by function name."""

    def __init__(self, datamodel: EcmascriptDatamodel, *names: str) -> None:
        self.counts = dict.fromkeys(names, 0)
        for name in names:
            original = getattr(datamodel, name)

            def counted(*args: Any, _name: str = name, _original: Any = original) -> Any:
                self.counts[_name] += 1
                return _original(*args)

            setattr(datamodel, name, counted)


def restored_counter(snapshot: str) -> tuple[EcmascriptDatamodel, Calls]:
    datamodel = EcmascriptDatamodel()
    calls = Calls(datamodel, "_install", "_restore", "_run_script")
    datamodel.use_scalar_programs({})
    datamodel.bind_system("s", None, {}, lambda _id: False, list)
    datamodel.restore(snapshot)
    return datamodel, calls


def test_a_restore_of_scalars_reaches_the_engine_only_when_a_call_needs_it() -> None:
    # A first restore under these names is written at once (the engine accepts the names).
    first, calls = restored_counter('{"count":1,"flag":true,"label":"x"}')
    assert calls.counts == {"_install": 1, "_restore": 1, "_run_script": 0}
    first.close()
    # The next session on the same engine: the mirror answers, nothing reaches QuickJS.
    datamodel, calls = restored_counter('{"count":5,"flag":false,"label":"y"}')
    assert datamodel.evaluate_cond(expr(3, "count === 5 && !flag")) is True
    datamodel.assign(expr(1, "count"), expr(2, "count + 1"))
    assert datamodel.snapshot() == '{"count":6,"flag":false,"label":"y"}'
    assert calls.counts == {"_install": 0, "_restore": 0, "_run_script": 0}
    # The first call that needs the engine installs the system variables, restores, then
    # writes what the mirror assigned since: QuickJS sees the step as it is.
    assert datamodel.evaluate(expr(4, "String(count) + label + _sessionid")) == "6ys"
    assert calls.counts == {"_install": 1, "_restore": 1, "_run_script": 0}
    assert datamodel.evaluate(expr(7, "String(count)")) == "6"
    assert calls.counts["_restore"] == 1
    datamodel.close()


@pytest.mark.parametrize(
    "snapshot",
    [
        '{"count": 5}',  # (spacing)
        '{"count":5.0}',  # (a float's text)
        '{"count":-0}',
        '{"label":"\\u0079"}',  # (an escape)
        '{"count":9007199254740993}',  # (past 2**53 - 1)
        '{"count":5,"count":6}',
        '{"nested":{"count":5}}',
    ],
)
def test_a_snapshot_not_written_as_the_sandbox_writes_it_is_restored_at_once(
    snapshot: str,
) -> None:
    warm, _ = restored_counter('{"count":1,"label":"x","nested":1}')
    warm.close()
    datamodel, calls = restored_counter(snapshot)
    assert calls.counts["_restore"] == 1
    reference = EcmascriptDatamodel()  # (no scalar programs: the plain restore)
    reference.bind_system("s", None, {}, lambda _id: False, list)
    reference.restore(snapshot)
    probe = expr(8, "JSON.stringify([typeof count, Object.is(globalThis.count, -0),"
                    " globalThis.count, globalThis.label, globalThis.nested])")
    assert datamodel.evaluate(probe) == reference.evaluate(probe)
    assert datamodel.snapshot() == reference.snapshot()
    datamodel.close()
    reference.close()


def test_a_restore_under_a_name_of_the_realm_is_refused_at_once() -> None:
    from statecharts.core.position import DamagedDatamodelError

    warm, _ = restored_counter('{"count":1}')
    warm.close()
    for snapshot in ('{"Math":1}', '{"count":1,"_event":2}', '{"In":true}'):
        datamodel = EcmascriptDatamodel()
        datamodel.use_scalar_programs({})
        datamodel.bind_system("s", None, {}, lambda _id: False, list)
        with pytest.raises(DamagedDatamodelError):
            datamodel.restore(snapshot)
        datamodel.close()


def test_an_engine_nothing_reached_goes_back_without_a_reset() -> None:
    first, _ = restored_counter('{"count":1}')
    engine = first._engine
    assert engine is not None
    first.close()  # (used: reset)
    resets = []
    reset = engine.functions["reset"]
    engine.functions["reset"] = lambda: resets.append(1) or reset()
    try:
        datamodel, calls = restored_counter('{"count":2}')
        assert datamodel._engine is engine
        datamodel.set_evaluation_time_limit(5)
        assert datamodel.evaluate_cond(expr(3, "count === 2")) is True
        datamodel.close()
        assert resets == [] and calls.counts["_install"] == 0
        # Given back as it was taken, its own time limit again: the next session runs on it.
        again, _ = restored_counter('{"count":3}')
        assert again._engine is engine
        loop = "(function () { let i = 0; while (i < 2e6) i++; return i; })()"
        assert again.evaluate(expr(9, loop)) == 2000000
        assert again.evaluate(expr(4, "String(count)")) == "3"
        again.close()
        assert resets == [1]
    finally:
        engine.functions["reset"] = reset
