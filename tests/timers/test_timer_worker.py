"""The timer worker's outcomes (docs/timers.md): per-fire timeouts and attempts, deliveries
named per row, the fired step's cause, and the snooze reasons of held executions.

The clock is injected everywhere: a claim that "expired" is a claim taken at one ``now`` and
looked at from a later one; nothing waits for time to pass. (The same behaviours with real
processes killed mid-fire, and with firers racing on PostgreSQL, are in test_timer_races.py.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from statecharts import stepper
from statecharts.core.position import decode
from statecharts.exceptions import Halted
from statecharts.models import Chart, Execution, HistoryEntry
from tests.timers import deliveries
from timers import firing
from timers.delivery import Fire, Snooze
from timers.inspection import read_timers, timers_document, timers_lines
from timers.models import Timer

pytestmark = pytest.mark.django_db

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
T0 = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(seconds=10)
S = timedelta(seconds=1)

# A nudge due 10 s after the start; every delivered nudge counts itself. "rearm" schedules
# another nudge (in a later step), "tick" is a step that does nothing, "spin" never settles.
CHART = f"""<scxml {NS} initial="waiting">
  <datamodel><data id="nudges" expr="0"/></datamodel>
  <state id="waiting">
    <onentry><send id="nudge" event="nudge" delay="10s"/></onentry>
    <transition event="nudge"><assign location="nudges" expr="nudges + 1"/></transition>
    <transition event="rearm"><send id="again" event="nudge" delay="1h"/></transition>
    <transition event="tick"/>
    <transition event="spin" target="b"/>
  </state>
  <state id="b"><transition target="c"/></state>
  <state id="c"><transition target="b"/></state>
</scxml>"""

# The nudge itself starts the runaway: its step goes over the round budget.
RUNAWAY = CHART.replace(
    '<transition event="nudge"><assign location="nudges" expr="nudges + 1"/></transition>',
    '<transition event="nudge" target="b"/>',
)

RECORDING = "tests.timers.deliveries.RecordingDelivery"
ANSWER = "tests.timers.deliveries.AnswerDelivery"
DEFAULT = "timers.delivery.StepperDelivery"
NOT_A_DELIVERY = "tests.timers.deliveries.NotADelivery"


@pytest.fixture(autouse=True)
def _clean_deliveries() -> Iterator[None]:
    deliveries.calls.clear()
    deliveries.probes.clear()
    deliveries.answer.update(value=None, perform=False)
    yield
    deliveries.probes.clear()


def start(source: str = CHART, **kwargs: Any) -> Execution:
    return stepper.start(Chart.objects.load(source), now=T0, **kwargs)


def nudges(execution: Execution) -> int:
    execution.refresh_from_db()
    return int(decode(bytes(execution.position)).state.datamodel["nudges"])


def the_timer(execution: Execution, send_id: str = "nudge") -> Timer:
    return Timer.objects.get(execution=execution, send_id=send_id)


# ---- what a timer row records when it is scheduled ------------------------------------------


def test_a_timer_row_records_its_delivery_its_fire_timeout_and_the_step_that_scheduled_it() -> None:
    settings = {
        "TIMER_FIRE_TIMEOUT_SECONDS": 45,
        "TIMER_DELIVERIES": {"default": DEFAULT, "recording": RECORDING},
        "TIMER_DELIVERY": "recording",
    }
    with override_settings(STATECHARTS=settings):
        execution = start()
        stepper.send(execution.pk, "tick", now=T0)  # step 2
        stepper.send(execution.pk, "rearm", now=T0)  # step 3 schedules "again"
    first, again = the_timer(execution), the_timer(execution, "again")
    assert (first.scheduled_in, again.scheduled_in) == (1, 3)
    assert first.delivery == again.delivery == "recording"
    assert first.fire_timeout_seconds == 45
    assert (first.claimed_until, first.fire_deadline) == (None, None)


# ---- 1. per-fire timeout, attempts -----------------------------------------------------------


def test_an_expired_claim_spends_an_attempt_and_the_last_ends_the_timer_failed_timed_out() -> None:
    settings = {
        "TIMER_MAX_ATTEMPTS": 3,
        "TIMER_LEASE_SECONDS": 60,
        "TIMER_FIRE_TIMEOUT_SECONDS": 600,
    }
    with override_settings(STATECHARTS=settings):
        execution = start()
        timer = the_timer(execution)
        # A firer claims it, and dies before settling it (nothing else happens to the row).
        assert firing.claim(DUE, 10) == [timer.pk]
        timer.refresh_from_db()
        assert timer.claimed_until == DUE + 60 * S
        assert timer.fire_deadline == DUE + 600 * S
        assert firing.claim(DUE + 59 * S, 10) == []  # held while its lease lasts
        # The next claim after the lease spends that attempt, and is an attempt itself...
        assert firing.claim(DUE + 61 * S, 10) == [timer.pk]
        timer.refresh_from_db()
        assert (timer.status, timer.attempts) == ("pending", 1)
        assert timer.last_error.startswith("timed out: the claim's lease ended at")
        # ...whose firer dies too.
        assert firing.claim(DUE + 122 * S, 10) == [timer.pk]
        assert Timer.objects.get(pk=timer.pk).attempts == 2
        # The third attempt timed out as well: the claim that finds it ends the timer.
        report = firing.fire_due(now=DUE + 183 * S)
    assert report.outcomes == {"failed": 1}
    timer.refresh_from_db()
    assert (timer.status, timer.reason, timer.attempts) == ("failed", "timed out", 3)
    assert (timer.settled, timer.claimed_until) == (DUE + 183 * S, None)
    assert nudges(execution) == 0 and execution.steps == 1  # never delivered
    assert firing.fire_all_due(now=DUE + 365 * 86_400 * S).outcomes == {}
    # Visible where an operator looks: the read model's settled timers.
    [row] = read_timers(execution, DUE + 200 * S).past
    assert (row.status, row.reason, row.timer.attempts) == ("failed", "timed out", 3)


def test_the_per_fire_timeout_ends_an_attempt_before_a_longer_lease() -> None:
    settings = {"TIMER_LEASE_SECONDS": 600, "TIMER_FIRE_TIMEOUT_SECONDS": 30}
    with override_settings(STATECHARTS=settings):
        timer = the_timer(start())
        assert firing.claim(DUE, 10) == [timer.pk]
        assert firing.claim(DUE + 29 * S, 10) == []
        assert firing.claim(DUE + 31 * S, 10) == [timer.pk]
    timer.refresh_from_db()
    assert timer.attempts == 1
    assert timer.last_error.startswith("timed out: the per-fire timeout (30 s) passed at")


def test_the_timeout_that_counts_is_the_one_written_when_the_timer_was_scheduled() -> None:
    with override_settings(STATECHARTS={"TIMER_FIRE_TIMEOUT_SECONDS": 30}):
        timer = the_timer(start())
    settings = {"TIMER_LEASE_SECONDS": 600, "TIMER_FIRE_TIMEOUT_SECONDS": 300}
    with override_settings(STATECHARTS=settings):
        assert firing.claim(DUE, 10) == [timer.pk]
        assert firing.claim(DUE + 31 * S, 10) == [timer.pk]
    assert Timer.objects.get(pk=timer.pk).attempts == 1


def test_a_row_without_a_fire_timeout_is_bounded_by_its_lease_alone() -> None:
    timer = the_timer(start())
    Timer.objects.filter(pk=timer.pk).update(fire_timeout_seconds=None)  # an older row
    with override_settings(STATECHARTS={"TIMER_LEASE_SECONDS": 60}):
        assert firing.claim(DUE, 10) == [timer.pk]
        assert Timer.objects.get(pk=timer.pk).fire_deadline is None
        assert firing.claim(DUE + 59 * S, 10) == []
        assert firing.claim(DUE + 61 * S, 10) == [timer.pk]
    assert Timer.objects.get(pk=timer.pk).last_error.startswith("timed out: the claim's lease")


def test_a_timer_whose_attempt_timed_out_is_fired_alone_after_the_batchs_other_timers() -> None:
    executions = [start() for _ in range(4)]
    suspect = the_timer(executions[0])
    assert firing.claim(DUE, 1) == [suspect.pk]  # its firer dies
    settings = {
        "TIMER_DELIVERIES": {"default": RECORDING},
        "TIMER_FIRE_CHUNK": 50,
        "TIMER_LEASE_SECONDS": 60,
    }
    with override_settings(STATECHARTS=settings):
        report = firing.fire_due(now=DUE + 61 * S)
    assert report.outcomes == {"fired": 4}
    fired = [timer for _name, timer, _outbox in deliveries.calls]
    transactions = [outbox for _name, _timer, outbox in deliveries.calls]
    assert fired[-1] == suspect.pk  # last, after the three fresh ones...
    assert len(set(transactions[:3])) == 1  # ...which shared one transaction,
    assert transactions[3] not in transactions[:3]  # and not with the suspect
    assert Timer.objects.get(pk=suspect.pk).attempts == 1
    assert [nudges(execution) for execution in executions] == [1, 1, 1, 1]


def test_a_live_firer_renews_the_claim_of_what_it_has_not_fired_yet() -> None:
    """Six timers, fired two per transaction by one firer whose every clock reading is 25 s
    later than the one before: by its last chunk the batch's first lease is long over. Each
    fire looks at the database as another firer would (a claim at the fire's ``now``): the
    timers not fired yet are never claimable, so nobody else takes them and no attempt is
    spent."""
    executions = [start() for _ in range(6)]
    readings = iter(DUE + 25 * k * S for k in range(1_000))
    seen: list[list[int]] = []
    deliveries.probes.append(lambda fire: seen.append(firing.claim(fire.now, 100)))
    settings = {
        "CLOCK": lambda: next(readings),
        "TIMER_DELIVERIES": {"default": RECORDING},
        "TIMER_FIRE_CHUNK": 2,
        "TIMER_LEASE_SECONDS": 60,
        "TIMER_FIRE_TIMEOUT_SECONDS": 600,
    }
    with override_settings(STATECHARTS=settings):
        report = firing.fire_due()
    assert report.outcomes == {"fired": 6}
    assert seen == [[]] * 6
    assert set(Timer.objects.values_list("status", "attempts")) == {("fired", 0)}
    assert [nudges(execution) for execution in executions] == [1] * 6
    # The last chunk ran 125 s after the claim: more than twice the 60 s lease.
    assert max(Timer.objects.values_list("settled", flat=True)) == DUE + 125 * S


def test_a_system_check_wants_the_fire_timeout_longer_than_the_step_budget() -> None:
    def ids(**configured: Any) -> list[str]:
        with override_settings(STATECHARTS=configured):
            return [m.id for m in run_checks() if (m.id or "").startswith("timers.")]

    assert ids(TIMER_FIRE_TIMEOUT_SECONDS=5, STEP_TIME_BUDGET_MS=5_000) == ["timers.E001"]
    assert ids(TIMER_FIRE_TIMEOUT_SECONDS=6, STEP_TIME_BUDGET_MS=5_000) == []
    assert ids(STEP_TIME_BUDGET_MS=200_000) == ["timers.E001"]  # the default 120 s is not
    assert ids() == []


# ---- 2. deliveries named per row ------------------------------------------------------------


def test_the_row_names_its_delivery_and_the_class_registered_under_that_name_delivers_it() -> None:
    both = {"default": DEFAULT, "recording": RECORDING}
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": both, "TIMER_DELIVERY": "recording"}):
        recorded = start()
    plain = start()  # named "default"
    assert (the_timer(recorded).delivery, the_timer(plain).delivery) == ("recording", "default")
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": both}):
        assert firing.fire_all_due(now=DUE).outcomes == {"fired": 2}
    assert [timer for _n, timer, _o in deliveries.calls] == [the_timer(recorded).pk]
    assert nudges(recorded) == nudges(plain) == 1


@pytest.mark.parametrize(
    ("deliveries_setting", "said"),
    [
        ({"default": DEFAULT}, "delivery 'recording' is not in TIMER_DELIVERIES here"),
        (
            {"default": DEFAULT, "recording": "tests.timers.no_such_module.Delivery"},
            "delivery 'recording' (tests.timers.no_such_module.Delivery) cannot be loaded",
        ),
        (
            {"default": DEFAULT, "recording": "tests.timers.deliveries.NotADelivery"},
            "delivery 'recording' (tests.timers.deliveries.NotADelivery) is not a delivery class",
        ),
        (
            {"default": DEFAULT, "recording": "tests.timers.deliveries.not_a_class"},
            "is not a delivery class",
        ),
    ],
    ids=["unknown-name", "cannot-import", "no-deliver-method", "a-function"],
)
def test_a_delivery_that_cannot_be_resolved_now_snoozes_without_spending_an_attempt(
    deliveries_setting: dict[str, str], said: str
) -> None:
    """A rolling deploy: a newer node wrote rows naming a delivery this node does not have
    yet. Nothing is wrong with the row, so it is neither failed nor discarded."""
    execution = start()
    Timer.objects.update(delivery="recording")
    settings = {"TIMER_DELIVERIES": deliveries_setting, "TIMER_SNOOZE_SECONDS": 120}
    with override_settings(STATECHARTS=settings):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer = the_timer(execution)
    assert (timer.status, timer.attempts, timer.due) == ("pending", 0, DUE + 120 * S)
    assert said in timer.reason and timer.reason.endswith(": snoozed")
    assert nudges(execution) == 0 and execution.steps == 1
    # Once the deployment has it, the same row fires.
    both = {"default": DEFAULT, "recording": RECORDING}
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": both}):
        assert firing.fire_all_due(now=DUE + 120 * S).outcomes == {"fired": 1}
    assert nudges(execution) == 1


def test_a_dotted_path_written_on_a_row_is_a_name_never_imported() -> None:
    execution = start()
    Timer.objects.update(delivery=RECORDING)  # a path where a name belongs
    assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    assert deliveries.calls == []
    assert the_timer(execution).reason.startswith(f"delivery {RECORDING!r} is not in")


def test_a_delivery_may_answer_snooze_n_seconds_without_spending_an_attempt() -> None:
    execution = start()
    deliveries.answer["value"] = Snooze(42, "the mail server asked us to wait")
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": ANSWER}}):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer = the_timer(execution)
    assert (timer.status, timer.attempts, timer.due) == ("pending", 0, DUE + 42 * S)
    assert timer.reason == (
        "delivery 'default' asked to snooze 42 s: the mail server asked us to wait"
    )
    assert timer.claimed_until is None and timer.settled is None
    deliveries.answer["value"] = None
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": ANSWER}}):
        assert firing.fire_all_due(now=DUE + 41 * S).outcomes == {}  # not early
        assert firing.fire_all_due(now=DUE + 42 * S).outcomes == {"fired": 1}


@pytest.mark.parametrize(
    "answer",
    [Snooze(0), Snooze(-5), Snooze(1.5), Snooze(True), "later", 30, ("snooze", 30)],  # type: ignore[arg-type]
    ids=["zero", "negative", "float", "bool", "a-string", "a-bare-int", "a-tuple"],
)
def test_an_invalid_answer_retries_like_a_raise_and_rolls_the_delivery_back(answer: Any) -> None:
    execution = start()
    deliveries.answer.update(value=answer, perform=True)  # delivers, then answers badly
    settings = {"TIMER_DELIVERIES": {"default": ANSWER}, "TIMER_RETRY_SECONDS": 7}
    with override_settings(STATECHARTS=settings):
        assert firing.fire_all_due(now=DUE).outcomes == {"retrying": 1}
    timer = the_timer(execution)
    assert (timer.status, timer.attempts, timer.due) == ("pending", 1, DUE + 7 * S)
    assert timer.last_error.startswith("InvalidAnswer: delivery 'default' answered")
    assert nudges(execution) == 0 and execution.steps == 1  # the delivered step rolled back


def test_a_delayed_send_to_a_child_nobody_performs_here_is_snoozed_not_spent() -> None:
    """The row was written where an app delivers to invoked children; this deployment has no
    performer for deliver_child (``PERFORMERS`` disables it, as if the invocations app were
    not installed here): a fact about the deployment, so the timer waits, no attempt spent."""
    execution = start()
    Timer.objects.update(target={"kind": "invoke", "invokeid": "kid"})
    timer = Timer.objects.get(execution=execution)
    with override_settings(STATECHARTS={"PERFORMERS": {"deliver_child": None}}):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer.refresh_from_db()
    assert (timer.status, timer.attempts) == ("pending", 0)
    assert timer.reason.startswith("nothing performs deliver_child here")
    assert timer.reason.endswith(": snoozed")


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"TIMER_DELIVERIES": [DEFAULT]}, ["timers.E002"]),
        ({"TIMER_DELIVERIES": {"default": DEFAULT, "": DEFAULT}}, ["timers.E002"]),
        ({"TIMER_DELIVERIES": {"default": "timers.nope.Delivery"}}, ["timers.E003"]),
        ({"TIMER_DELIVERIES": {"default": NOT_A_DELIVERY}}, ["timers.E003"]),
        ({"TIMER_DELIVERIES": {"default": DEFAULT}, "TIMER_DELIVERY": "audit"}, ["timers.E004"]),
        ({"TIMER_DELIVERIES": {"default": DEFAULT, "a": RECORDING}, "TIMER_DELIVERY": "a"}, []),
        ({"TIMER_SWEEPER_FIRES": 1}, ["timers.E005"]),
        ({"TIMER_SWEEPER_FIRES": False}, []),
        ({"TIMER_SWEEP_AT_START": "yes"}, ["timers.E005"]),
        ({"TIMER_SWEEP_AT_START": False}, []),
    ],
    ids=[
        "not-a-dict",
        "empty-name",
        "unimportable",
        "not-a-delivery",
        "unknown-choice",
        "good",
        "sweeper-fires-not-a-bool",
        "sweeper-fires-off",
        "sweep-at-start-not-a-bool",
        "sweep-at-start-off",
    ],
)
def test_a_system_check_validates_the_delivery_settings(
    setting: dict[str, Any], expected: list[str]
) -> None:
    with override_settings(STATECHARTS=setting):
        found = [m.id for m in run_checks() if (m.id or "").startswith("timers.")]
    assert found == expected


# ---- 3. the fired step records the timer as its cause ----------------------------------------


def test_a_step_caused_by_a_timer_records_the_timer_its_ordinal_and_the_scheduling_step() -> None:
    execution = start()
    stepper.send(execution.pk, "rearm", now=T0)  # step 2 schedules "again" (ordinal 2)
    assert firing.fire_all_due(now=T0 + 2 * 3600 * S).outcomes == {"fired": 2}
    first, again = the_timer(execution), the_timer(execution, "again")
    causes = dict(execution.history.filter(seq__gt=2).values_list("seq", "cause"))
    assert causes == {
        3: {"timer": first.pk, "ordinal": 1, "scheduled_in": 1},
        4: {"timer": again.pk, "ordinal": 2, "scheduled_in": 2},
    }
    assert execution.history.get(seq=2).cause is None  # an input from outside


def test_a_refused_fire_records_its_cause_too() -> None:
    execution = start()
    Execution.objects.filter(pk=execution.pk).update(position=b"\x80\x04damaged")
    assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    entry = HistoryEntry.objects.get(execution=execution, seq=2)
    assert entry.disposition == "refused"
    assert entry.cause == {"timer": the_timer(execution).pk, "ordinal": 1, "scheduled_in": 1}


def test_the_timers_section_links_each_timer_to_the_steps_that_scheduled_and_fired_it() -> None:
    execution = start()
    stepper.send(execution.pk, "rearm", now=T0)
    firing.fire_all_due(now=DUE)  # the first nudge: step 3; "again" still pending
    execution.refresh_from_db()
    section = read_timers(execution, DUE)
    [pending], [past] = section.pending, section.past
    assert (pending.send_id, pending.scheduled_in, pending.fired_in) == ("again", 2, None)
    assert (past.send_id, past.scheduled_in, past.fired_in) == ("nudge", 1, 3)
    document = timers_document(section)
    assert document["past"][0]["scheduled_in"] == 1 and document["past"][0]["fired_in"] == 3
    assert document["pending"][0]["delivery"] == "default"
    lines = timers_lines(section)
    assert any(line.endswith("[scheduled in step 1, fired in step 3]") for line in lines)
    assert any(line.endswith("[scheduled in step 2]") for line in lines)


def test_the_admin_timers_panel_links_to_the_history_pages_showing_those_steps(
    admin_client: Client,
) -> None:
    """With 62 steps the history spans two admin pages (50 a page, newest first): the link
    of each step goes to the page whose table has it."""
    execution = start()  # step 1 schedules the nudge
    for k in range(59):  # steps 2..60
        stepper.send(execution.pk, "tick", now=T0 + k * S / 10)
    stepper.send(execution.pk, "rearm", now=T0 + 6 * S)  # step 61 schedules "again"
    firing.fire_all_due(now=DUE)  # step 62 is the nudge
    url = reverse("admin:statecharts_execution_change", args=[execution.pk])
    body = admin_client.get(url).content.decode()
    link = r'<span class="sc-\w+-in">(\w+) in <a href="\?history=(\d+)">step (\d+)</a>'
    found = re.findall(link, body)
    links = {f"{kind} {step}": page for kind, page, step in found}
    assert links == {"scheduled 1": "2", "fired 62": "1", "scheduled 61": "1"}

    def history_seqs(page: str) -> set[int]:
        html = admin_client.get(url, {"history": page}).content.decode()
        table = html.split('<table class="statecharts-history">', 1)[1]
        return {int(seq) for seq in re.findall(r"<tr[^>]*>\s*<td>(\d+)</td>", table)}

    assert 1 in history_seqs("2") and 62 in history_seqs("1") and 61 in history_seqs("1")


def test_the_api_shows_a_timers_delivery_timeout_and_scheduling_step() -> None:
    execution = start()
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("root", "root@example.com", "pw"))
    timer = api.get(f"/api/timers/{the_timer(execution).pk}/").json()
    assert timer["scheduled_in"] == 1
    assert timer["delivery"] == "default"
    assert timer["fire_timeout_seconds"] == 120
    assert timer["claimed_until"] is None and timer["fire_deadline"] is None


# ---- 4. snooze reasons name the status that held the timer -----------------------------------


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("halted", "execution halted: snoozed"),
        ("needs_migration", "execution needs migration: snoozed"),
        ("needs_repair", "execution needs repair: snoozed"),
    ],
)
def test_a_held_executions_timer_is_snoozed_with_its_status_as_the_reason(
    status: str, reason: str
) -> None:
    execution = start()
    Execution.objects.filter(pk=execution.pk).update(status=status)
    with override_settings(STATECHARTS={"TIMER_SNOOZE_SECONDS": 60}):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    timer = the_timer(execution)
    assert (timer.status, timer.attempts, timer.reason) == ("pending", 0, reason)
    assert timer.due == DUE + 60 * S
    assert execution.history.count() == 1  # held before anything was fed


@pytest.mark.parametrize(
    ("source", "damage", "status", "reason"),
    [
        (RUNAWAY, None, "halted", "execution halted: snoozed"),
        (
            CHART,
            "source",
            "needs_migration",
            "execution needs migration: snoozed",
        ),
        (CHART, "position", "needs_repair", "execution needs repair: snoozed"),
    ],
    ids=["its-step-runs-away", "its-chart-was-edited", "its-position-is-damaged"],
)
def test_a_fire_whose_step_turns_the_execution_held_snoozes_with_that_status(
    source: str, damage: str | None, status: str, reason: str
) -> None:
    """The execution was active when the fire looked; its own step found it cannot go on
    (the step is refused and recorded): the timer is held with the new status as the reason,
    and no attempt is spent."""
    execution = start(source)
    if damage == "source":
        edited = source.replace('target="b"/>', 'target="c"/>')
        Chart.objects.filter(pk=execution.chart_id).update(source=edited)
    elif damage == "position":
        Execution.objects.filter(pk=execution.pk).update(position=b"\x80\x04damaged")
    with override_settings(STATECHARTS={"ROUND_BUDGET": 40}):
        assert firing.fire_all_due(now=DUE).outcomes == {"snoozed": 1}
    execution.refresh_from_db()
    assert execution.status == status
    timer = the_timer(execution)
    assert (timer.status, timer.attempts, timer.reason) == ("pending", 0, reason)
    assert execution.history.get(seq=2).disposition == "refused"
    if status == "halted":
        with pytest.raises(Halted):
            stepper.send(execution.pk, "tick", now=DUE)


def test_a_delivery_is_handed_the_row_the_locked_execution_the_planned_delivery_and_cause() -> None:
    """What a delivery is handed: the claimed row, the locked execution, the planner's
    delivery of the row, the fire's clock, and the cause its step records."""
    execution = start()
    seen: list[Fire] = []
    deliveries.probes.append(seen.append)
    with override_settings(STATECHARTS={"TIMER_DELIVERIES": {"default": RECORDING}}):
        firing.fire_all_due(now=DUE)
    [fire] = seen
    assert fire.execution.pk == execution.pk and fire.timer.pk == the_timer(execution).pk
    assert fire.instruction.kind == "deliver_self" and fire.instruction.event is not None
    assert fire.instruction.event.name == "nudge"
    assert fire.now == DUE
    assert fire.cause == {"timer": fire.timer.pk, "ordinal": 1, "scheduled_in": 1}
