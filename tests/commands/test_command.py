"""``manage.py statechart``: every subcommand's output, and its user errors as CommandError."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from statecharts import stepper
from statecharts.core.events import Event
from statecharts.management.statechart.common import find_chart, find_execution
from statecharts.models import Chart, Execution, ExecutionStatus, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations.replay import replay_many
from statecharts.policies.lookups import version_key

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]

LIGHT = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="light" initial="off">
  <datamodel><data id="level" expr="1"/></datamodel>
  <state id="off">
    <transition event="flip" target="on"/>
    <transition event="dim" cond="_event.data &amp;&amp; _event.data.to &gt; 0" target="on">
      <assign location="level" expr="_event.data.to"/>
    </transition>
  </state>
  <state id="on">
    <transition event="flip" target="off"/>
    <transition event="stop" target="done"/>
  </state>
  <final id="done"><donedata><param name="level" expr="level"/></donedata></final>
</scxml>
"""

# Two errors, at known places: line 1 (the initial) and line 3 (the target).
BROKEN = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="nowhere">
  <state id="a">
    <transition event="go" target="missing"/>
  </state>
</scxml>
"""


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("statechart", *args, stdout=out)
    return out.getvalue()


def fails(*args: str) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    return str(caught.value)


def lines(output: str) -> dict[str, str]:
    """The ``label: value`` lines of an output."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        label, sep, value = line.partition(": ")
        if sep and label not in found:
            found[label] = value
    return found


def write(tmp_path: Path, text: str, name: str = "chart.scxml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def light(*, name: str = "light", level: int = 1) -> str:
    """A variant of LIGHT: a different source (so a different chart) per name and level."""
    return LIGHT.replace('name="light"', f'name="{name}"').replace('expr="1"', f'expr="{level}"')


@pytest.fixture
def chart() -> Chart:
    return Chart.objects.load(LIGHT)


@pytest.fixture
def execution(chart: Chart) -> Execution:
    return stepper.start(chart)


# ---- validate ----------------------------------------------------------------------------------


def test_validate_a_valid_chart(tmp_path: Path) -> None:
    path = write(tmp_path, LIGHT)
    assert run("validate", path).splitlines() == [f"{path}: valid"]


def test_validate_the_example_chart() -> None:
    path = str(ROOT / "docs" / "examples" / "order.scxml")
    assert run("validate", path).strip() == f"{path}: valid"


def test_validate_prints_warnings_of_a_valid_chart(tmp_path: Path) -> None:
    path = write(tmp_path, LIGHT.replace('<state id="off">', '<state id="off" colour="red">'))
    output = run("validate", path).splitlines()
    assert output == [
        f"{path}:4:3: warning: <state> has no attribute 'colour'; it is ignored",
        f"{path}: valid",
    ]


def test_validate_lists_every_problem_with_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    message = fails("validate", path)
    assert message.splitlines() == [
        f"{path} is not a valid chart (2 problems):",
        f"{path}:1:1: initial state 'nowhere' does not exist",
        f"{path}:3:5: transition target 'missing' does not exist",
    ]


def test_validate_malformed_xml(tmp_path: Path) -> None:
    path = write(tmp_path, '<scxml xmlns="http://www.w3.org/2005/07/scxml">\n  <state id="a">\n')
    message = fails("validate", path)
    assert f"{path}:3:1: not well-formed XML" in message


def test_validate_a_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.scxml")
    assert fails("validate", path) == f"{path}: cannot read the file: No such file or directory"


def test_the_real_command_line_exits_non_zero_without_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    done = subprocess.run(
        [sys.executable, "manage.py", "statechart", "validate", path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "demo.settings.test"},
        timeout=120,
    )
    assert done.returncode != 0
    assert f"{path}:3:5: transition target 'missing' does not exist" in done.stderr
    assert f"{path}:1:1: initial state 'nowhere' does not exist" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_real_command_line_reports_a_bad_argument_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "statechart", "deliver", "--limit", "zero"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "expected a positive whole number, got 'zero'" in done.stderr
    assert "Traceback" not in done.stderr


# ---- load --------------------------------------------------------------------------------------


def test_load_stores_the_chart_and_prints_its_id_and_sha256(tmp_path: Path) -> None:
    output = run("load", write(tmp_path, LIGHT), "--version", "3")
    stored = Chart.objects.get()
    assert (stored.name, stored.version, stored.source) == ("light", "3", LIGHT)
    assert lines(output)["id"] == str(stored.pk)
    assert lines(output)["sha256"] == stored.content_hash
    assert "loaded" in output.splitlines()[0]


def test_load_the_same_source_twice_is_one_chart_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, LIGHT)
    first = run("load", path)
    second = run("load", path, "--name", "other", "--version", "9")
    assert Chart.objects.count() == 1
    assert lines(first)["id"] == lines(second)["id"]
    assert lines(first)["sha256"] == lines(second)["sha256"]
    assert "already holds this source; nothing stored" in second
    assert "note: it keeps its name 'light' and version '1'" in second


def test_load_with_a_name_overrides_the_document_name(tmp_path: Path) -> None:
    run("load", write(tmp_path, LIGHT), "--name", "lamp")
    assert Chart.objects.get().name == "lamp"


def test_load_refuses_an_invalid_chart_with_every_problem(tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    message = fails("load", path)
    assert f"{path}:1:1: initial state 'nowhere' does not exist" in message
    assert f"{path}:3:5: transition target 'missing' does not exist" in message
    assert not Chart.objects.exists()


def test_load_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.scxml"
    path.write_bytes(LIGHT.replace("light", "lümière").encode("latin-1"))
    message = fails("load", str(path))
    assert f"{path}:2:15: byte 0xFC is not valid UTF-8" in message
    assert "cannot read the file" in fails("load", str(tmp_path / "missing.scxml"))


def test_load_refuses_an_endless_file_without_reading_it_whole() -> None:
    assert "/dev/zero:1:1: document is over" in fails("load", "/dev/zero")
    assert not Chart.objects.exists()


# ---- start -------------------------------------------------------------------------------------


def test_start_by_chart_id(chart: Chart) -> None:
    output = lines(run("start", str(chart.pk)))
    execution = Execution.objects.get()
    assert output["execution"] == str(execution.pk)
    assert output["session"] == execution.session_id
    assert output["status"] == "active"
    assert output["configuration"] == "off"
    assert execution.chart == chart


def test_start_by_name_with_data_and_key(chart: Chart) -> None:
    output = lines(run("start", "light", "--data", '{"level": 7}', "--key", "hall"))
    execution = Execution.objects.get(pk=int(output["execution"]))
    assert execution.business_key == "hall"
    stepper.send(execution, "flip")
    stepper.send(execution, "stop")
    execution.refresh_from_db()
    assert execution.donedata == {"level": 7}  # the --data value replaced <data expr="1">


def test_start_refuses_a_business_key_in_use(chart: Chart) -> None:
    run("start", "light", "--key", "hall")
    assert "already has an execution with business key 'hall'" in fails(
        "start", "light", "--key", "hall"
    )
    assert Execution.objects.count() == 1


def test_start_refuses_bad_json(chart: Chart) -> None:
    assert fails("start", "light", "--data", "{level: 7}").startswith("--data is not valid JSON:")
    assert fails("start", "light", "--data", "[7]") == (  # (the stepper's gate's words)
        "--data is refused: data: must be a JSON object of data ids to initial values"
    )
    assert not Execution.objects.exists()


def test_start_an_unknown_chart() -> None:
    assert fails("start", "nothing") == "no chart with id or name 'nothing'"
    assert fails("start", "12345") == "no chart with id or name '12345'"


def test_a_chart_name_means_its_highest_version() -> None:
    Chart.objects.load(light(level=2), version="2")
    newest = Chart.objects.load(light(level=10), version="1.10", new_version=True)
    Chart.objects.load(light(level=9), version="1.9.5", new_version=True)
    output = lines(run("start", "light"))
    assert Execution.objects.get(pk=int(output["execution"])).chart == Chart.objects.get(
        version="2"
    )
    newest.version = "10"
    newest.save()
    assert find_chart("light") == newest


def test_an_ambiguous_chart_name_is_refused() -> None:
    one = Chart.objects.load(light(level=1), version="1")
    two = Chart.objects.load(light(level=2), version="01", new_version=True)  # the same number
    message = fails("start", "light")
    assert message == (
        "several charts named 'light' have the latest version '01': "
        f"give a chart id, one of {one.pk} (v1), {two.pk} (v01)"
    )
    two.version = ""
    two.save()
    message = fails("start", "light")
    assert "2 charts are named 'light' and not all of them have a version" in message
    assert f"{two.pk} (no version)" in message
    assert not Execution.objects.exists()
    run("start", str(two.pk))  # an id always works
    assert Execution.objects.get().chart == two


def test_a_chart_named_like_another_charts_id_is_refused() -> None:
    first = Chart.objects.load(light(level=1))
    Chart.objects.load(light(level=2, name=str(first.pk)))  # another name: its own version 1
    assert f"is the id of chart {first.pk} and the name of chart(s)" in fails(
        "start", str(first.pk)
    )


def test_versions_compare_as_dotted_numbers() -> None:
    versions = ["1.10", "1.9", "2", "1.9.1", "1.0"]
    assert sorted(versions, key=version_key) == ["1.0", "1.9", "1.9.1", "1.10", "2"]


# ---- send --------------------------------------------------------------------------------------


def test_send_by_id(execution: Execution) -> None:
    output = lines(run("send", str(execution.pk), "flip"))
    assert output == {
        "execution": str(execution.pk),
        "disposition": "applied",
        "status": "active",
        "configuration": "on",
    }


def test_send_by_session_id_with_data(execution: Execution) -> None:
    run("send", execution.session_id, "dim", "--data", '{"to": 4}')
    output = lines(run("send", execution.session_id, "stop"))
    assert output["status"] == "completed"
    assert output["configuration"] == "done"
    assert json.loads(output["donedata"]) == {"level": 4}
    entry = execution.history.get(seq=2)
    assert entry.input["event"]["data"] == {"to": 4}


def test_send_strict_refuses_an_event_no_transition_takes(execution: Execution) -> None:
    consumed = run("send", str(execution.pk), "stop")  # "off" has no transition on "stop"
    assert lines(consumed)["disposition"] == "applied"
    assert "note: no transition took the event (consumed; --strict refuses it)" in consumed
    steps = Execution.objects.get(pk=execution.pk).steps
    said = fails("send", str(execution.pk), "stop", "--strict")
    assert "stop" in said, said
    refused = Execution.objects.get(pk=execution.pk)
    assert refused.configuration == ["off"] and refused.steps == steps + 1  # recorded
    assert execution.history.order_by("-seq").first().disposition == "refused"
    with override_settings(STATECHARTS={"STRICT_EVENTS": True}):
        assert "stop" in fails("send", str(execution.pk), "stop")
        relaxed = run("send", str(execution.pk), "stop", "--no-strict")
        assert lines(relaxed)["disposition"] == "applied"
    handled = run("send", str(execution.pk), "flip", "--strict")
    assert "note: no transition" not in handled and lines(handled)["configuration"] == "on"


def test_send_to_a_finished_execution_is_discarded(execution: Execution) -> None:
    stepper.cancel(execution)
    output = run("send", str(execution.pk), "flip")
    assert lines(output)["disposition"] == "discarded"
    assert "note: the input was not applied: the execution is cancelled" in output


def test_send_user_errors(execution: Execution) -> None:
    assert fails("send", "424242", "flip") == "no execution with id or session id '424242'"
    assert fails("send", "no-such-session", "flip") == (
        "no execution with id or session id 'no-such-session'"
    )
    assert fails("send", str(execution.pk), "flip", "--data", "{oops").startswith(
        "--data is not valid JSON:"
    )
    assert "is not an event name" in fails("send", str(execution.pk), "")
    assert "is not an event name" in fails("send", str(execution.pk), "two words")
    assert execution.history.count() == 1  # nothing was fed


def test_send_to_an_execution_whose_position_is_damaged(execution: Execution) -> None:
    Execution.objects.filter(pk=execution.pk).update(position=b"not a position")
    message = fails("send", str(execution.pk), "flip")
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.NEEDS_REPAIR
    assert message == (
        f"execution {execution.session_id} needs repair: {execution.failure_reason}"
    )
    assert execution.failure_reason.startswith("NotAPositionError")
    message = fails("send", str(execution.pk), "flip")
    assert message == (
        f"execution {execution.session_id} needs repair: {execution.failure_reason}"
    )
    assert list(execution.history.values_list("disposition", flat=True)) == [
        "applied",
        "refused",
        "refused",
    ]


def test_an_id_that_is_also_another_executions_session_id_is_refused(chart: Chart) -> None:
    first = stepper.start(chart)
    second = stepper.start(chart, session_id=str(first.pk))
    message = fails("show", str(first.pk))
    assert f"(executions {first.pk}, {second.pk})" in message
    third = stepper.start(chart, session_id="s-3")
    assert find_execution("s-3") == third


# ---- show --------------------------------------------------------------------------------------


def test_show(chart: Chart) -> None:
    execution = stepper.start(chart, business_key="hall")
    stepper.send(execution, "flip")
    stepper.send(execution, "stop")
    output = run("show", execution.session_id)
    fields = lines(output)
    assert fields["execution"] == str(execution.pk)
    assert fields["status"] == "completed"
    assert fields["chart"] == f"{chart.pk} (light v1) sha256 {chart.content_hash}"
    assert fields["business key"] == "hall"
    assert fields["configuration"] == "done"
    assert json.loads(fields["donedata"]) == {"level": 1}
    assert fields["steps"] == "3"
    history = output.split("history:\n", 1)[1].splitlines()
    assert history == [
        "  #1 start: applied -> active [off]",
        "  #2 event flip: applied -> active [on]",
        "  #3 event stop: applied -> completed [done]",
    ]


def test_show_json(execution: Execution) -> None:
    stepper.send(execution, "dim", {"to": 3})
    document = json.loads(run("show", str(execution.pk), "--json"))
    assert document["id"] == execution.pk
    assert document["session_id"] == execution.session_id
    assert document["status"] == "active"
    assert document["configuration"] == ["on"]
    assert document["donedata"] is None
    assert document["steps"] == 2
    assert document["chart"]["name"] == "light"
    assert document["chart"]["sha256"] == execution.chart.content_hash
    assert [h["seq"] for h in document["history"]] == [1, 2]
    second = document["history"][1]
    assert second["input"]["kind"] == "event"
    assert second["input"]["event"]["name"] == "dim"
    assert second["input"]["event"]["data"] == {"to": 3}
    assert (second["disposition"], second["status_after"]) == ("applied", "active")
    assert second["configuration_after"] == ["on"]


REMINDER = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"
       name="reminder" initial="outer">
  <datamodel><data id="count" expr="0"/></datamodel>
  <state id="outer" initial="waiting">
    <state id="waiting">
      <onentry><send id="ping" event="ping" delay="90s"/></onentry>
      <transition event="ping" target="waiting"><assign location="count" expr="count + 1"/>
      </transition>
    </state>
  </state>
</scxml>
"""


def test_show_prints_the_read_model_with_the_timers_section() -> None:
    t0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    with override_settings(STATECHARTS={"CLOCK": lambda: t0}):
        execution = stepper.start(Chart.objects.load(REMINDER), business_key="r-1")
        output = run("show", str(execution.pk))
        document = json.loads(run("show", str(execution.pk), "--json"))
    fields = lines(output)
    assert fields["title"] == "reminder v1 · r-1"
    assert fields["configuration"] == "waiting"
    assert fields["active states"] == "outer waiting"  # ancestors too, as the admin shows
    assert fields["datamodel"] == '{"count": 0}'
    assert fields["timers"] == "1 pending, 0 settled"
    assert "  ping [ping] pending, due 2030-01-01T12:01:30+00:00 (in 1 min 30 s)" in output
    assert document["active_states"] == ["outer", "waiting"]
    assert document["where"] == "status: active; in state waiting"
    [timer] = document["timers"]["pending"]
    assert (timer["event"], timer["due_in_seconds"]) == ("ping", 90.0)


def test_django_options_are_accepted_after_the_subcommand(execution: Execution) -> None:
    output = run("show", str(execution.pk), "-v", "0", "--no-color", "--skip-checks")
    assert lines(output)["status"] == "active"


def test_show_an_unknown_execution() -> None:
    assert fails("show", "7") == "no execution with id or session id '7'"
    assert fails("show", "99999999999999999999999") == (
        "no execution with id or session id '99999999999999999999999'"
    )


# ---- cancel ------------------------------------------------------------------------------------


def test_cancel(execution: Execution) -> None:
    output = lines(run("cancel", execution.session_id))
    assert output["disposition"] == "applied"
    assert output["status"] == "cancelled"
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.history.get(seq=2).input == {"kind": "cancel"}
    assert "  #2 cancel: applied -> cancelled" in run("show", str(execution.pk))
    assert lines(run("cancel", str(execution.pk)))["disposition"] == "discarded"


def test_cancel_an_unknown_execution() -> None:
    assert fails("cancel", "nope") == "no execution with id or session id 'nope'"


# ---- replay ------------------------------------------------------------------------------------


def test_replay_matches(execution: Execution) -> None:
    stepper.send(execution, "flip")
    stepper.send(execution, "nothing-listens")
    assert run("replay", str(execution.pk)).strip() == (
        f"execution {execution.pk}: replayed 3 step(s): every position matches"
    )


def test_replay_that_diverges_fails(execution: Execution) -> None:
    stepper.send(execution, "flip")
    execution.history.filter(seq=2).update(position_sha256="0" * 64)
    message = fails("replay", execution.session_id)
    assert message.startswith(f"execution {execution.pk}: replay diverged at step 2 (event flip)")


def test_replay_an_unknown_execution() -> None:
    assert fails("replay", "31337") == "no execution with id or session id '31337'"


def test_replay_all_checks_every_chosen_execution_and_names_those_that_diverge(
    execution: Execution,
) -> None:
    other = stepper.start(execution.chart)
    stepper.send(other, "flip")
    stepper.send(other, "stop")
    out = io.StringIO()
    call_command("statechart", "replay", "--all", stdout=out)
    text = out.getvalue()
    # Not a terminal: plain progress lines, one per execution here (at most about ten).
    assert f"1 of 2: execution {execution.pk}: matches" in text
    assert f"2 of 2: execution {other.pk}: matches" in text
    assert text.splitlines()[-1] == "replayed 2 execution(s): 2 matches"
    assert run("replay", "--all", "--status", "completed", "-v", "0").strip() == (
        "replayed 1 execution(s): 1 matches"
    )
    assert run("replay", "--all", "--chart", "light", "-v", "0").strip().endswith("2 matches")
    assert run("replay", "--all", "--chart", "nope", "-v", "0").strip() == (
        "replayed 0 execution(s): none"
    )

    other.history.filter(seq=2).update(position_sha256="0" * 64)
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("statechart", "replay", "--all", "-v", "0", stdout=out)
    assert str(caught.value) == "replayed 2 execution(s): 1 diverged, 1 matches"
    assert out.getvalue().startswith(
        f"execution {other.pk}: replay diverged at step 2 (event flip)"
    )


def test_replay_all_goes_on_past_an_execution_it_cannot_replay(execution: Execution) -> None:
    broken = stepper.start(execution.chart)
    Execution.objects.filter(pk=broken.pk).update(position=b"not a position")
    summary = replay_many(Execution.objects.order_by("pk"))
    assert summary.checked == 2 and not summary.ok
    assert [pk for pk, _ in summary.unreplayable] == [broken.pk]
    assert str(summary) == "replayed 2 execution(s): 1 matches, 1 could not be replayed"


def test_replay_takes_one_execution_or_all() -> None:
    assert fails("replay") == "replay needs one execution, or --all (with --chart / --status)"
    assert fails("replay", "3", "--all").startswith("replay needs one execution")
    assert fails("replay", "3", "--status", "active") == (
        "--chart and --status choose executions for --all"
    )


# ---- deliver -----------------------------------------------------------------------------------


def _pending(sender: Execution, target: Execution, name: str) -> OutboxMessage:
    # What a sender's step leaves when its process dies right after the commit.
    return OutboxMessage.objects.create(
        sender=sender,
        target_session_id=target.session_id,
        event=Event(name).to_dict(),
        created=timezone.now(),
    )


def test_deliver_pending_messages(chart: Chart) -> None:
    sender, target = stepper.start(chart), stepper.start(chart)
    first = _pending(sender, target, "flip")
    second = _pending(sender, target, "flip")
    assert run("deliver", "--limit", "1").strip() == "delivered 1 message(s)"
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (OutboxStatus.DELIVERED, OutboxStatus.PENDING)
    target.refresh_from_db()
    assert target.configuration == ["on"]
    assert run("deliver").strip() == "delivered 1 message(s)"
    target.refresh_from_db()
    assert target.configuration == ["off"]
    assert run("deliver").strip() == "delivered 0 message(s)"


def test_deliver_refuses_a_bad_limit() -> None:
    assert "expected a positive whole number, got '0'" in fails("deliver", "--limit", "0")


def test_a_subcommand_is_required() -> None:
    assert "SUBCOMMAND" in fails()


def test_trace_turns_tracing_on_and_off_as_the_admins_actions_do() -> None:
    ns = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="null"'
    chart = Chart.objects.load(f'<scxml {ns} initial="s"><state id="s"/></scxml>')
    execution = stepper.start(chart)
    out = io.StringIO()
    call_command("statechart", "trace", str(execution.pk), execution.session_id, stdout=out)
    assert out.getvalue().strip() == "Tracing on: 1 changed, 1 already on."
    assert Execution.objects.get(pk=execution.pk).tracing is True
    out = io.StringIO()
    call_command("statechart", "trace", str(execution.pk), "--off", stdout=out)
    assert out.getvalue().strip() == "Tracing off: 1 changed, 0 already off."
    assert Execution.objects.get(pk=execution.pk).tracing is False
