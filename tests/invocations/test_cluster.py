"""The task handler on a real django-q2 cluster: the parent's step hands the start to the
cluster (through the outbox and django-q2's ORM broker); a worker process calls the registered
function and answers; the parent finishes with its return value."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

from invocations.models import Invocation
from statecharts import stepper
from statecharts.core.position import decode
from statecharts.models import Chart, Execution

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel><data id="result" expr="null"/></datamodel>
  <state id="waiting">
    <invoke id="calc" type="task" src="double"><param name="amount" expr="21"/></invoke>
    <transition event="done.invoke.calc" target="done">
      <assign location="result" expr="_event.data"/></transition>
  </state>
  <final id="done"/>
</scxml>"""


@pytest.mark.django_db(transaction=True)
def test_a_real_cluster_runs_the_task_and_the_parent_gets_its_answer(
    qcluster: Any, wait_for_cluster: Any
) -> None:
    execution = stepper.start(Chart.objects.load(CHART))
    invocation = Invocation.objects.get(parent=execution)
    assert invocation.status == "starting"  # queued for the cluster, not run here

    def answered() -> bool:
        return Execution.objects.filter(pk=execution.pk, status="completed").exists()

    with tempfile.TemporaryFile("w+") as log, qcluster(log) as cluster:
        wait_for_cluster(answered, cluster, log, "answered invocation")
    execution.refresh_from_db()
    assert decode(bytes(execution.position)).state.datamodel["result"] == {"doubled": 42}
    invocation.refresh_from_db()
    assert (invocation.status, invocation.attempts) == ("done", 1)
