"""Test helpers for projects that use statecharts: a clock you control, and a workbench that
runs everything due on it, so a test can check a three-day timer in milliseconds.

With pytest (pytest-django): the ``statecharts`` fixture (this module is a pytest plugin,
enabled by installing the package)::

    def test_the_nudge_goes_out_after_three_days(statecharts, db):
        signup = statecharts.start(SIGNUP_SOURCE)
        statecharts.advance(days=3)                     # fires the timer, on the clock
        statecharts.assert_in_state(signup, "nudged")
        statecharts.send(signup, "signed_up", {"email": "ada@example.com"})
        assert statecharts.refresh(signup).status == "completed"

With Django's test runner: ``StatechartsTestMixin`` gives a ``TestCase`` the same as
``self.statecharts``.

What the workbench does, in one process and with no django-q2 cluster: it sets
``STATECHARTS["CLOCK"]`` to its own clock (so every step, timer and answer is stamped with
it), runs invoke handlers inline, and after every action it takes (and on ``run_until_idle``)
it does all the work that is due (delivers the outbox, fires due timers, retries or times out
handlers: ``statecharts.work``), as the workers would. ``advance(...)`` moves the clock to
each due time in turn, so a timer scheduled by a timer fires when it should too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from statecharts.conf import statecharts_settings

DEFAULT_START = datetime(2030, 1, 1, tzinfo=UTC)


class TestClock:
    """A clock that moves only when told to (``STATECHARTS["CLOCK"]`` calls it)."""

    __test__ = False  # (not a test class)

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: datetime) -> None:
        if when < self.now:
            raise ValueError(f"the clock does not go back ({when} < {self.now})")
        self.now = when


class Workbench:
    """Drive executions in a test, with a clock you control (see the module docstring)."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self.clock = TestClock(start)
        self._override: Any = None

    # ---- the context (the fixture and the mixin enter it) --------------------------------------

    def __enter__(self) -> Workbench:
        from django.conf import settings
        from django.test import override_settings

        configured = dict(getattr(settings, "STATECHARTS", {}) or {})
        configured.update({"CLOCK": self.clock, "INVOKE_HANDLER_QUEUE": "inline"})
        self._override = override_settings(STATECHARTS=configured)
        self._override.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._override is not None:
            self._override.disable()
            self._override = None

    # ---- acting ----------------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        return self.clock.now

    def load(self, source: str, **options: Any) -> Any:
        from statecharts.models import Chart

        return Chart.objects.load(source, **options)

    def start(self, chart: Any, **options: Any) -> Any:
        """Start an execution of ``chart`` (a stored Chart, or SCXML source), then run what
        is due."""
        from statecharts import stepper
        from statecharts.models import Chart

        if not isinstance(chart, Chart):
            chart = self.load(chart)
        execution = stepper.start(chart, now=self.now, **options)
        self.run_until_idle()
        return self.refresh(execution)

    def send(self, execution: Any, name: str, data: Any = None, **fields: Any) -> Any:
        """Send one external event, then run what is due; returns the ``StepResult``."""
        from statecharts import stepper

        result = stepper.send(execution, name, data, now=self.now, **fields)
        self.run_until_idle()
        return result

    def cancel(self, execution: Any) -> Any:
        from statecharts import stepper

        result = stepper.cancel(execution, now=self.now)
        self.run_until_idle()
        return result

    def run_until_idle(self) -> int:
        """Do all the work due now (outbox, timers, handlers); how much was done."""
        from statecharts.work import run_due

        return run_due(self.now)

    def advance(self, delta: timedelta | None = None, **parts: float) -> int:
        """Move the clock forward (``advance(days=3)``, ``advance(timedelta(...))``), stopping
        at each due time on the way to do what is due then; how much was done."""
        from statecharts.work import next_due

        target = self.now + (delta or timedelta()) + timedelta(**parts)
        done = self.run_until_idle()
        stuck_at: datetime | None = None
        while True:
            due = next_due()
            if due is None or due > target:
                break
            when = max(due, self.now)
            if when == stuck_at:
                break  # (work due that nothing here can do, e.g. a kind no app registered)
            self.clock.set(when)
            ran = self.run_until_idle()
            stuck_at = when if not ran else None
            done += ran
        self.clock.set(target)
        return done + self.run_until_idle()

    # ---- reading and asserting ---------------------------------------------------------------

    def refresh(self, execution: Any) -> Any:
        execution.refresh_from_db()
        return execution

    def inspect(self, execution: Any) -> Any:
        from statecharts.operations.inspection import inspect

        return inspect(self.refresh(execution), now=self.now)

    def active_states(self, execution: Any) -> tuple[str, ...]:
        """Every active state id, ancestors included (the read model's)."""
        return tuple(self.inspect(execution).active_states)

    def datamodel(self, execution: Any) -> Any:
        return self.inspect(execution).datamodel

    def assert_in_state(self, execution: Any, *state_ids: str) -> None:
        """Each of ``state_ids`` (atomic or compound) is active."""
        active = self.active_states(execution)
        missing = [s for s in state_ids if s not in active]
        assert not missing, f"not in {missing}: active states are {list(active)}"

    def assert_history(self, execution: Any, *event_names: str) -> None:
        """The external events applied to it, in order, are exactly ``event_names``."""
        names = [
            (entry.input.get("event") or {}).get("name")
            for entry in execution.history.filter(disposition="applied").order_by("seq")
            if entry.input.get("kind") == "event"
        ]
        assert names == list(event_names), f"events applied: {names}"

    def pending_timers(self, execution: Any) -> list[Any]:
        """The execution's pending timer rows, soonest first (from the installed apps' work
        sources that keep timers: the timers app's)."""
        from statecharts.work import work_sources

        return [
            timer
            for source in work_sources()
            if source.pending_timers is not None
            for timer in source.pending_timers(execution)
        ]


class StatechartsTestMixin:
    """For Django's ``TestCase``: ``self.statecharts`` is a :class:`Workbench`, entered for
    each test."""

    statecharts: Workbench

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        self.statecharts = Workbench().__enter__()
        self.addCleanup(self.statecharts.__exit__, None, None, None)  # type: ignore[attr-defined]


# ---- the pytest plugin (registered by the package's "pytest11" entry point) -------------------

try:
    import pytest
except ImportError:  # pragma: no cover (pytest is only needed to use the fixture)
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def statecharts() -> Iterator[Workbench]:
        """A :class:`Workbench` for the test (needs database access: ``db`` or
        ``@pytest.mark.django_db``)."""
        with Workbench() as bench:
            yield bench


__all__ = ["StatechartsTestMixin", "TestClock", "Workbench", "statecharts_settings"]
