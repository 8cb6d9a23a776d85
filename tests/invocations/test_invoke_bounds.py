"""Trees of child charts are bounded (depth, live children, live descendants), and an invoke
whose src cannot name anything is refused: each time the invoking execution gets
``error.execution`` (with ``_event.invokeid``), the invocation row says why, and no child is
created."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from invocations.models import Invocation
from invocations.tree import lineage
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution, OutboxMessage

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2033, 9, 1, tzinfo=UTC)
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'

# What every chart here does with a refused invoke: it keeps the error's invokeid and message.
ON_ERROR = """<transition event="error.execution">
      <assign location="refused" expr="refused.concat([[_event.invokeid, _event.data.message]])"/>
    </transition>"""


def self_invoking(invokes: int) -> Chart:
    """A chart that invokes itself ``invokes`` times, by name: the fork bomb."""
    name = "bomb" + uuid.uuid4().hex[:8]
    calls = "".join(
        f'<invoke id="kid{i}" type="scxml" src="chart:{name}"/>' for i in range(invokes)
    )
    return Chart.objects.load(
        f"""<scxml {NS} name="{name}" initial="a">
  <datamodel><data id="refused" expr="[]"/></datamodel>
  <state id="a">{calls}{ON_ERROR}</state>
</scxml>"""
    )


def tree(root: Execution) -> list[Execution]:
    """The root and every execution below it."""
    found, level = [root], [root.pk]
    while level:
        below = list(Execution.objects.filter(parent_id__in=level))
        found += below
        level = [e.pk for e in below]
    return found


def refused(execution: Execution) -> list[list[str]]:
    execution.refresh_from_db()
    value: list[list[str]] = decode(bytes(execution.position)).state.datamodel["refused"]
    return value


def test_a_self_invoking_chart_stops_at_the_depth_bound_with_error_execution() -> None:
    with override_settings(STATECHARTS={"INVOKE_MAX_DEPTH": 3}):
        root = stepper.start(self_invoking(1), now=T0)
    executions = tree(root)
    # Depths 0, 1, 2 and 3: exactly four executions, each running.
    assert len(executions) == 4
    assert {e.status for e in executions} == {"active"}
    deepest = executions[-1]
    assert [lineage(e)[0] for e in executions] == [0, 1, 2, 3]
    assert {lineage(e)[1] for e in executions} == {root.pk}
    # The deepest one was told why its invoke failed; the others were not told anything.
    assert refused(deepest) == [
        ["kid0", "the child would be at invoke depth 4, over INVOKE_MAX_DEPTH (3)"]
    ]
    assert all(refused(e) == [] for e in executions[:-1])
    failed = Invocation.objects.get(parent=deepest)
    assert (failed.status, failed.child_id, failed.depth) == ("failed", None, 4)
    assert "INVOKE_MAX_DEPTH" in failed.reason
    # Nothing is left for the sweeper: the cascade is over.
    assert not OutboxMessage.objects.filter(status="pending").exists()


def test_fan_out_stops_at_the_live_children_bound() -> None:
    name = "waiter" + uuid.uuid4().hex[:6]
    waiter = Chart.objects.load(f'<scxml {NS} name="{name}"><state id="w"/></scxml>')
    invokes = "".join(
        f'<invoke id="kid{i}" type="scxml" src="chart:{waiter.name}"/>' for i in range(3)
    )
    parent_chart = Chart.objects.load(
        f"""<scxml {NS} initial="a">
  <datamodel><data id="refused" expr="[]"/></datamodel>
  <state id="a">{invokes}{ON_ERROR}<transition event="again" target="b"/></state>
  <state id="b">{invokes.replace('id="kid', 'id="again')}{ON_ERROR}</state>
</scxml>"""
    )
    with override_settings(STATECHARTS={"INVOKE_MAX_CHILDREN": 2}):
        parent = stepper.start(parent_chart, now=T0)
        assert Execution.objects.filter(parent=parent).count() == 2
        [[invokeid, message]] = refused(parent)
        assert invokeid == "kid2"
        assert message == (
            "this execution already has 2 running child charts (INVOKE_MAX_CHILDREN: 2)"
        )
        # Leaving the state cancels both children: they no longer count, so the next state
        # gets its two again.
        stepper.send(parent, "again", now=T0)
    children = Execution.objects.filter(parent=parent)
    assert sorted(c.status for c in children) == ["active", "active", "cancelled", "cancelled"]
    assert [row[0] for row in refused(parent)] == ["kid2", "again2"]


def test_invokes_refused_together_cost_the_parent_one_error_event() -> None:
    """Past a bound, the other invokes the same step started are refused with the first: one
    error.execution for the lot (a chart starting thousands at once costs one step)."""
    name = "waiter" + uuid.uuid4().hex[:6]
    Chart.objects.load(f'<scxml {NS} name="{name}"><state id="w"/></scxml>')
    invokes = "".join(f'<invoke id="kid{i}" type="scxml" src="chart:{name}"/>' for i in range(6))
    chart = Chart.objects.load(
        f"""<scxml {NS} initial="a">
  <datamodel><data id="refused" expr="[]"/></datamodel>
  <state id="a">{invokes}{ON_ERROR}</state>
</scxml>"""
    )
    with override_settings(STATECHARTS={"INVOKE_MAX_CHILDREN": 2}):
        parent = stepper.start(chart, now=T0)
    assert Execution.objects.filter(parent=parent).count() == 2
    assert [row[0] for row in refused(parent)] == ["kid2"]
    rows = Invocation.objects.filter(parent=parent).order_by("ordinal")
    assert [r.status for r in rows] == ["active"] * 2 + ["failed"] * 4
    assert [r.reason.endswith("(refused with 'kid2')") for r in rows[3:]] == [True] * 3
    assert parent.history.count() == 2  # the start, and the one error
    assert not OutboxMessage.objects.filter(status="pending").exists()


def test_a_forking_chart_stops_at_the_live_descendants_bound() -> None:
    with override_settings(STATECHARTS={"INVOKE_MAX_DESCENDANTS": 5}):
        root = stepper.start(self_invoking(2), now=T0)
    executions = tree(root)
    assert len(executions) == 1 + 5  # the root is not a descendant
    failed = Invocation.objects.filter(status="failed")
    assert failed.exists() and not failed.filter(child__isnull=False).exists()
    reason = "its tree already has 5 running child charts (INVOKE_MAX_DESCENDANTS: 5)"
    assert all(i.reason.startswith(reason) for i in failed)
    assert not OutboxMessage.objects.filter(status="pending").exists()


def test_the_fork_bomb_settles_at_the_tree_bound_and_leaves_no_work_behind() -> None:
    """A chart that invokes itself twice: each delivery call starts at most
    INVOKE_STARTS_PER_DELIVERY (20) of its charts, the tree stops at INVOKE_MAX_DESCENDANTS,
    and then nothing is pending: no delivery finds anything more to do."""
    with override_settings(STATECHARTS={"INVOKE_MAX_DESCENDANTS": 30}):
        root = stepper.start(self_invoking(2), now=T0)
        assert len(tree(root)) == 1 + 20
        calls = 0
        while OutboxMessage.objects.filter(status="pending").exists():
            stepper.deliver_pending()
            calls += 1
            assert calls < 5
    assert len(tree(root)) == 1 + 30
    assert stepper.deliver_pending() == 0
    assert len(tree(root)) == 1 + 30


def test_one_delivery_call_starts_a_bounded_number_of_charts_of_one_tree() -> None:
    """Children start inline, in the loop delivering what their parent sent: past
    INVOKE_STARTS_PER_DELIVERY, the start waits, pending, for the sweeper's next call."""
    with override_settings(STATECHARTS={"INVOKE_STARTS_PER_DELIVERY": 3}):
        root = stepper.start(self_invoking(1), now=T0)
        assert len(tree(root)) == 1 + 3
        [waiting] = OutboxMessage.objects.filter(status="pending")
        assert (waiting.attempts, waiting.last_error) == (0, "")
        assert stepper.deliver_pending() == 3  # three starts; the fourth waits again
        assert len(tree(root)) == 1 + 6
        stepper.deliver_pending()
        stepper.deliver_pending()  # the depth bound (8) stops it
    assert len(tree(root)) == 1 + 8
    assert not OutboxMessage.objects.filter(status="pending").exists()


NUL = "String.fromCharCode(0)"


@pytest.mark.parametrize(
    ("invoke", "settings"),
    [
        (f'<invoke id="kid" type="scxml" srcexpr="\'chart:x\' + {NUL}"/>', {}),
        (
            f'<invoke id="kid" type="task" srcexpr="\'double\' + {NUL}"/>',
            {
                "INVOKE_HANDLER_QUEUE": "inline",
                "TASKS": {"double": "tests.invocations.task_functions.double"},
            },
        ),
    ],
    ids=["scxml", "task"],
)
def test_a_src_with_a_nul_character_is_refused_with_error_execution(
    invoke: str, settings: dict[str, Any]
) -> None:
    chart = Chart.objects.load(
        f"""<scxml {NS} initial="a">
  <datamodel><data id="refused" expr="[]"/></datamodel>
  <state id="a">{invoke}{ON_ERROR}</state>
</scxml>"""
    )
    with override_settings(STATECHARTS=settings):
        parent = stepper.start(chart, now=T0)
    assert refused(parent) == [["kid", "the invoke's src contains a NUL character"]]
    invocation = Invocation.objects.get(parent=parent)
    assert (invocation.status, invocation.child_id) == ("failed", None)
    assert invocation.src.endswith("\x00")  # kept as it was, on either database
    assert not Execution.objects.filter(parent=parent).exists()
    assert not OutboxMessage.objects.filter(status="pending").exists()


@pytest.mark.parametrize("value", [0, -1, "8", 2.5, True, None])
@pytest.mark.parametrize(
    "key",
    [
        "INVOKE_MAX_DEPTH",
        "INVOKE_MAX_CHILDREN",
        "INVOKE_MAX_DESCENDANTS",
        "INVOKE_STARTS_PER_DELIVERY",
    ],
)
def test_a_system_check_wants_each_invoke_bound_a_positive_integer(key: str, value: Any) -> None:
    with override_settings(STATECHARTS={key: value}):
        found = [m for m in run_checks() if m.id == "invocations.E004"]
    assert [m.msg for m in found] == [
        f"STATECHARTS[{key!r}] must be a positive integer, not {value!r}."
    ]


def test_the_default_invoke_bounds_pass_the_system_check() -> None:
    with override_settings(STATECHARTS={}):  # every key at its default
        assert not [m for m in run_checks() if (m.id or "").startswith("invocations.")]


def test_any_positive_integer_bound_passes_the_system_check() -> None:
    with override_settings(STATECHARTS={"INVOKE_MAX_DEPTH": 1, "INVOKE_MAX_CHILDREN": 10_000}):
        assert not [m for m in run_checks() if (m.id or "").startswith("invocations.")]
