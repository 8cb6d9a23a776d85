"""An operator's action on an invoke handler's invocation racing the machine, on PostgreSQL
with real threads (issue 34): one fate each time.

- **retry now** against the recovery sweep (``invocations.tasks.recover``, what the timer
  workers' heartbeat runs) on a start waiting for its retry: the handler's ``start`` runs once
  (the lease's claim lets one of them through), the parent hears one answer;
- **cancel** against the handler's own answer: the parent ends either paid or failed, never
  both, and the loser is refused (the cancel: ``NotActionable``) or ignored (the answer)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection, connections

from invocations import answers, operating, tasks
from invocations.handlers import Answer
from invocations.models import Invocation
from statecharts.models import HistoryEntry
from statecharts.models.history import Disposition
from tests.invocations.test_handlers import (  # noqa: F401 (the autouse fixture)
    PAYMENT,
    T0,
    calls,
    datamodel,
    failures,
    inline_cluster,
    start,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="row locks and real concurrency: PostgreSQL"
    ),
]

TRIALS = 12
SILENT = PAYMENT.replace('type="task" src="charge"', 'type="silent" src="x"')


def race(*actions: Callable[[], Any]) -> list[Any]:
    """Run the actions at once, each in its own thread (and connection); what each returned,
    or the exception it raised."""
    gate = threading.Barrier(len(actions))
    outcomes: list[Any] = [None] * len(actions)

    def run(i: int, action: Callable[[], Any]) -> None:
        try:
            gate.wait()
            outcomes[i] = action()
        except Exception as exc:
            outcomes[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def test_retry_now_and_the_recovery_sweep_start_a_waiting_retry_once() -> None:
    later = T0 + timedelta(seconds=60)  # past the retry's due time
    for _ in range(TRIALS):
        calls.clear()
        failures["left"] = 1  # the first start fails: the row waits for its retry
        execution = start()
        invocation = Invocation.objects.get(parent=execution)
        assert invocation.next_attempt_at is not None and len(calls) == 1
        by_operator, by_sweep = race(
            partial(operating.retry_now, invocation.pk, reason="provider back", now=later),
            partial(tasks.recover, later, run_inline=True),
        )
        assert len(calls) == 2, (by_operator, by_sweep)  # the failed start and ONE retry
        execution.refresh_from_db()
        assert execution.configuration == ["paid"]
        assert datamodel(execution)["receipt"] is not None
        if isinstance(by_operator, Exception):  # the sweep ran it first and it answered
            assert isinstance(by_operator, operating.NotActionable), by_operator
        else:
            assert by_operator in ("started", "skipped"), by_operator
        entries = HistoryEntry.objects.filter(execution=execution)
        assert entries.filter(input__event__name="done.invoke.pay").count() == 1


def test_cancel_and_the_handlers_answer_give_one_fate() -> None:
    fates = set()
    for n in range(TRIALS):
        execution = start(SILENT)
        invocation = Invocation.objects.get(parent=execution)
        cancelled, _answered = race(
            partial(operating.cancel, invocation.pk, reason="stuck", now=T0),
            partial(answers.answer, invocation, Answer.done({"n": n}), key="callback"),
        )
        execution.refresh_from_db()
        names = list(
            HistoryEntry.objects.filter(execution=execution, disposition=Disposition.APPLIED)
            .exclude(seq=1)
            .values_list("input__event__name", flat=True)
        )
        if execution.configuration == ["paid"]:
            fates.add("answered")
            assert isinstance(cancelled, operating.NotActionable), cancelled
            assert names == ["done.invoke.pay"]
            assert Invocation.objects.get(pk=invocation.pk).status == "done"
        else:
            fates.add("cancelled")
            assert execution.configuration == ["failed"], execution.configuration
            assert cancelled == "cancelled"
            assert datamodel(execution)["why"] == "cancelled by an operator: stuck"
            assert "done.invoke.pay" not in names  # the late answer was ignored
            assert Invocation.objects.get(pk=invocation.pk).status == "failed"
    assert fates  # (which side wins each time is the race's; each trial had one fate)
