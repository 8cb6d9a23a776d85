"""``statecharts.fields.StatechartField``: a statechart on the host's own model (issue 35).

The host models are tests/fields/hostapp's: ``Order`` (started on its first save, cancelled
when deleted) and ``Ticket`` (started lazily, its delete refused while its execution is live).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import F
from django.db.models.deletion import ProtectedError
from django.test import override_settings

from statecharts import stepper
from statecharts.fields import StatechartField
from statecharts.models import Chart, Execution, OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.operations import health
from statecharts.operations.inspection import inspect
from tests.fields.hostapp.models import Customer, Order, Ticket
from timers.models import Timer

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'
ORDER = f"""<scxml {NS} name="order" initial="awaiting_payment">
  <datamodel><data id="total" expr="0"/><data id="notify" expr="''"/></datamodel>
  <state id="open" initial="awaiting_payment">
    <onentry><if cond="notify"><send event="order.opened" targetexpr="'#_scxml_' + notify"/>
    </if></onentry>
    <state id="awaiting_payment">
      <onentry><send id="reminder" event="remind" delay="1h"/></onentry>
      <onexit><cancel sendid="reminder"/></onexit>
      <transition event="pay" target="paid"/>
    </state>
    <state id="paid"><transition event="ship" target="shipped"/></state>
  </state>
  <final id="shipped"/>
</scxml>"""
LISTENER = f"""<scxml {NS} name="listener" initial="waiting">
  <state id="waiting"><transition event="order.opened" target="told"/></state>
  <state id="told"/>
</scxml>"""


@pytest.fixture
def order_chart(db: None) -> Chart:
    return Chart.objects.load(ORDER)


# ---- starting -------------------------------------------------------------------------------


def test_the_first_save_starts_the_execution_about_the_object(order_chart: Chart) -> None:
    order = Order.objects.create(number="42", total=30)
    execution = order.flow
    assert isinstance(execution, Execution)
    assert execution.chart == order_chart
    assert execution.in_state("awaiting_payment") and execution.in_state("open")
    assert not execution.in_state("paid")
    assert execution.subject == order  # the generic relation sees it too
    assert list(Execution.objects.for_subject(order)) == [execution]
    assert execution.order == order  # the reverse accessor
    assert Order.objects.get(pk=order.pk).flow_id == execution.pk
    assert Timer.objects.get(execution=execution).status == "pending"
    order.number = "43"
    order.save()  # a later save starts nothing
    assert Execution.objects.count() == 1


def test_the_start_reads_its_data_from_the_object(order_chart: Chart) -> None:
    order = Order.objects.create(number="7", total=99)
    assert order.flow.send("pay").applied
    assert inspect(order.flow).datamodel["total"] == 99


def test_a_save_without_the_chart_loaded_fails_and_writes_nothing(db: None) -> None:
    with pytest.raises(Chart.DoesNotExist, match="no chart named 'order'"), transaction.atomic():
        Order.objects.create(number="1")
    assert not Order.objects.exists() and not Execution.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_start_rolls_back_with_the_hosts_transaction() -> None:
    Chart.objects.load(ORDER)
    with pytest.raises(RuntimeError, match="the host changed its mind"), transaction.atomic():
        order = Order.objects.create(number="42")
        assert order.flow.status == "active"
        raise RuntimeError("the host changed its mind")
    assert not Order.objects.exists()
    assert not Execution.objects.exists() and not Timer.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_what_a_joined_start_sent_is_delivered_after_the_outer_commit() -> None:
    chart = Chart.objects.load(ORDER)
    listener = Execution.objects.start(Chart.objects.load(LISTENER))
    with transaction.atomic():
        started = stepper.start(chart, data={"notify": listener.session_id}, joined=True)
        message = OutboxMessage.objects.get(sender=started)
        assert message.status == OutboxStatus.PENDING  # not delivered inside the block
        listener.refresh_from_db()
        assert listener.in_state("waiting")
    message.refresh_from_db()
    assert message.status != OutboxStatus.PENDING
    listener.refresh_from_db()
    assert listener.in_state("told")


@pytest.mark.django_db(transaction=True)
def test_a_durable_start_inside_an_outer_transaction_is_still_refused() -> None:
    chart = Chart.objects.load(ORDER)
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        stepper.start(chart)
    assert not Execution.objects.exists()


def test_a_lazy_field_starts_on_the_first_read(order_chart: Chart) -> None:
    ticket = Ticket.objects.create(title="broken")
    assert ticket.flow_id is None and not Execution.objects.exists()
    execution = ticket.flow
    assert execution.in_state("awaiting_payment")
    again = Ticket.objects.get(pk=ticket.pk)
    assert again.flow_id == execution.pk and again.flow == execution
    assert Execution.objects.count() == 1
    assert Ticket().flow is None  # an unsaved object starts nothing


def test_start_for_starts_one_for_a_row_saved_before_the_field(order_chart: Chart) -> None:
    order = Order.objects.create(number="1")
    Order.objects.filter(pk=order.pk).update(flow=None)
    older = Order.objects.get(pk=order.pk)
    assert older.flow is None
    field = Order._meta.get_field("flow")
    assert isinstance(field, StatechartField)
    started = field.start_for(older)
    assert older.flow == started and Order.objects.get(pk=order.pk).flow_id == started.pk
    assert field.start_for(older) == started  # one per object


# ---- the facade ------------------------------------------------------------------------------


def test_the_field_is_the_execution_facade(order_chart: Chart) -> None:
    clerk = User.objects.create_superuser("clerk", "clerk@example.com", "pw")
    order = Order.objects.create(number="42")
    assert [event.name for event in order.flow.available_events(user=clerk)] == ["pay"]
    result = order.flow.send("pay", {"by": "card"}, user=clerk)
    assert result.applied
    assert order.flow.in_state("paid") and not order.flow.in_state("awaiting_payment")
    assert result.entry.caller_context["user"] == {"id": clerk.pk, "username": "clerk"}


# ---- queries ---------------------------------------------------------------------------------


def test_the_host_filters_orders_and_annotates_by_the_charts_state(order_chart: Chart) -> None:
    first, second, third = (Order.objects.create(number=str(n)) for n in range(3))
    second.flow.send("pay")
    third.flow.cancel()
    assert list(Order.objects.filter(flow__in_state="paid")) == [second]
    assert list(Order.objects.filter(flow__in_state="open").order_by("pk")) == [first, second]
    assert list(Order.objects.exclude(flow__in_state="paid").order_by("pk")) == [first, third]
    assert not Order.objects.filter(flow__in_state="shipped").exists()
    annotated = Order.objects.annotate(status=F("flow__status"))
    statuses = dict(annotated.values_list("number", "status"))
    assert statuses == {"0": "active", "1": "active", "2": "cancelled"}
    ordered = list(Order.objects.order_by("flow__status", "pk").values_list("number", flat=True))
    assert ordered == ["0", "1", "2"]
    assert list(Order.objects.filter(flow__status="cancelled")) == [third]


def test_in_state_takes_a_state_id(order_chart: Chart) -> None:
    with pytest.raises(TypeError, match="state id"):
        list(Order.objects.filter(flow__in_state=["paid"]))


# ---- deleting --------------------------------------------------------------------------------


def _delete_one(order: Order) -> None:
    order.delete()


def _delete_as_queryset(order: Order) -> None:
    Order.objects.filter(pk=order.pk).delete()


def _delete_by_cascade(order: Order) -> None:
    assert order.customer is not None
    order.customer.delete()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("delete", [_delete_one, _delete_as_queryset, _delete_by_cascade])
def test_deleting_the_object_cancels_its_execution_after_the_commit(delete: object) -> None:
    Chart.objects.load(ORDER)
    order = Order.objects.create(number="42", customer=Customer.objects.create(name="ada"))
    execution, pk = order.flow, order.pk
    with transaction.atomic():
        delete(order)  # type: ignore[operator]
        execution.refresh_from_db()
        assert execution.status == "active"  # cancelled once the delete is committed
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert not Order.objects.exists()
    assert execution.history.last().input["reason"] == f"fields_hostapp.Order {pk} was deleted"


@pytest.mark.django_db(transaction=True)
def test_a_delete_rolled_back_cancels_nothing() -> None:
    Chart.objects.load(ORDER)
    order = Order.objects.create(number="42")
    with pytest.raises(RuntimeError), transaction.atomic():
        order.delete()
        raise RuntimeError("no")
    order.flow.refresh_from_db()
    assert order.flow.status == "active"


def _delete_ticket(ticket: Ticket) -> None:
    ticket.delete()


def _delete_tickets(ticket: Ticket) -> None:
    Ticket.objects.filter(pk=ticket.pk).delete()


def _delete_tickets_customer(ticket: Ticket) -> None:
    assert ticket.customer is not None
    ticket.customer.delete()


@pytest.mark.parametrize("delete", [_delete_ticket, _delete_tickets, _delete_tickets_customer])
def test_a_protecting_field_refuses_the_delete_while_the_execution_is_live(
    order_chart: Chart, delete: object
) -> None:
    ticket = Ticket.objects.create(title="t", customer=Customer.objects.create(name="ada"))
    assert ticket.flow.status == "active"
    with pytest.raises(ProtectedError, match="while its flow execution"), transaction.atomic():
        delete(ticket)  # type: ignore[operator]
    assert Ticket.objects.filter(pk=ticket.pk).exists()
    ticket.flow.send("pay")
    ticket.flow.send("ship")
    assert ticket.flow.status == "completed"
    delete(ticket)  # type: ignore[operator]
    assert not Ticket.objects.filter(pk=ticket.pk).exists()


def test_a_ticket_never_started_deletes(order_chart: Chart) -> None:
    ticket = Ticket.objects.create(title="t")
    ticket.delete()
    assert not Execution.objects.exists()


def _orphans() -> int:
    (figure,) = health.measure_orphans(datetime.now(UTC))
    return int(figure.value)


def test_health_counts_executions_orphaned_by_a_raw_sql_delete(order_chart: Chart) -> None:
    kept, gone, finished = (Order.objects.create(number=str(n)) for n in range(3))
    finished.flow.cancel()
    assert _orphans() == 0
    with connection.cursor() as cursor:
        table = connection.ops.quote_name(Order._meta.db_table)
        cursor.execute(f"DELETE FROM {table} WHERE id IN (%s, %s)", [gone.pk, finished.pk])
    assert _orphans() == 1  # the cancelled one is no one's worry
    report = health.assess()
    (orphaned,) = [a for a in report.figures if a.figure.name == "executions.orphaned"]
    assert orphaned.level == "warning" and "fields_hostapp.Order: 1" in orphaned.figure.detail
    assert kept.flow.status == "active"


# ---- the system check -------------------------------------------------------------------------


class HostAppElsewhere:
    def db_for_write(self, model: type, **hints: object) -> str | None:
        return "other" if model._meta.app_label == "fields_hostapp" else None


def test_a_host_model_on_another_database_than_the_steps_is_refused() -> None:
    field = Order._meta.get_field("flow")
    assert [message.id for message in field.check() if message.id.startswith("statecharts")] == []
    with override_settings(DATABASE_ROUTERS=[f"{__name__}.HostAppElsewhere"]):
        ids = [message.id for message in field.check()]
    assert "statecharts.E011" in ids


def test_check_command_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management.base import SystemCheckError

    routed = override_settings(DATABASE_ROUTERS=[f"{__name__}.HostAppElsewhere"])
    with routed, pytest.raises(SystemCheckError, match=r"statecharts\.E011"):
        call_command("check")


# ---- the field itself -------------------------------------------------------------------------


def test_the_field_deconstructs_to_what_the_migration_says() -> None:
    _, path, _args, kwargs = Ticket._meta.get_field("flow").deconstruct()
    assert path == "statecharts.fields.StatechartField"
    assert kwargs == {"chart": "order", "start": "lazy", "on_instance_delete": "protect"}
    _, _, _, kwargs = Order._meta.get_field("flow").deconstruct()
    assert kwargs == {"chart": "order"}


def test_no_migration_is_missing(db: None) -> None:
    call_command("makemigrations", "fields_hostapp", "--check", "--dry-run", verbosity=0)


@pytest.mark.parametrize(
    ("option", "value"), [("start", "at_midnight"), ("on_instance_delete", "cascade")]
)
def test_an_unknown_option_is_refused(option: str, value: str) -> None:
    with pytest.raises(ValueError, match=option):
        StatechartField("order", **{option: value})


def test_the_lookup_reads_the_state_index(order_chart: Chart) -> None:
    order = Order.objects.create(number="1")
    order.flow.send("pay")
    query = str(Order.objects.filter(flow__in_state="paid").query)
    assert "statecharts_executionstate" in query  # (Execution.objects.in_state's table)
    assert list(Order.objects.filter(flow__in_state="paid")) == [order]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_first_reads_of_a_lazy_field_at_once_start_one_execution() -> None:
    """The object's row is locked while its execution is decided: the second reader waits,
    then finds the first one's execution."""
    import threading

    from django.db import connections

    Chart.objects.load(ORDER)
    ticket_id = Ticket.objects.create(title="t").pk
    barrier = threading.Barrier(2)
    started: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            ticket = Ticket.objects.get(pk=ticket_id)
            barrier.wait(timeout=10)
            started.append(ticket.flow.pk)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=60)
    assert errors == []
    assert len(started) == 2 and started[0] == started[1]
    assert Execution.objects.count() == 1
    assert Ticket.objects.get(pk=ticket_id).flow_id == started[0]
