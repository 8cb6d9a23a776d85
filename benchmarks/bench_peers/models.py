"""The peers' rows: one document per execution and one audit row per event, for each peer.

django-fsm-2: ``FsmDocument`` (an ``FSMField`` and the ``advance`` transition, stacked
``@transition`` decorators, one per source); python-statemachine: ``PysmDocument`` bound to
``CycleMachine`` through its ``MachineMixin`` (the documented Django integration). Both
carry the chart's datamodel as columns (``count``, ``limit``), and each audit row records
what the project's history row records about a step: which row, which event, from and to.
"""

from __future__ import annotations

from django.db import models
from django_fsm import FSMField, transition
from statemachine.mixins import MachineMixin

LIMIT = 1_000_000_000  # the guard's bound: never reached, so every event is applied


def _under_limit(document: FsmDocument) -> bool:
    return document.count < document.limit


class FsmDocument(models.Model):
    state = FSMField(default="a")
    count = models.IntegerField(default=0)
    limit = models.IntegerField(default=LIMIT)
    updated = models.DateTimeField(null=True)

    @transition(field=state, source="c", target="a")
    @transition(field=state, source="b", target="c", conditions=[_under_limit])
    @transition(field=state, source="a", target="b")
    def advance(self) -> None:
        if self.state == "b":  # django-fsm runs the body before it changes the state
            self.count += 1


class FsmAudit(models.Model):
    document = models.ForeignKey(FsmDocument, on_delete=models.CASCADE)
    event = models.CharField(max_length=50)
    source = models.CharField(max_length=50)
    target = models.CharField(max_length=50)
    created = models.DateTimeField()


class PysmDocument(MachineMixin, models.Model):
    state_machine_name = "bench_peers.statemachines.CycleMachine"
    state = models.CharField(max_length=50, default="a")
    count = models.IntegerField(default=0)
    limit = models.IntegerField(default=LIMIT)
    updated = models.DateTimeField(null=True)


class PysmAudit(models.Model):
    document = models.ForeignKey(PysmDocument, on_delete=models.CASCADE)
    event = models.CharField(max_length=50)
    source = models.CharField(max_length=50)
    target = models.CharField(max_length=50)
    created = models.DateTimeField()
