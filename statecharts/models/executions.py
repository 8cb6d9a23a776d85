"""An execution: one running instance of a chart, its position stored as a blob in its row.

``Execution.objects.start``, ``execution.send`` and ``execution.cancel`` are conveniences: a
thin facade over ``statecharts.stepper``, which does the work. Models never import the
stepper (it imports them): the ``statecharts`` app installs it behind the facade when it is
ready (``install_stepper``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from statecharts.models.fields import (
    PortableJSONField,
    PortableTextField,
    nul_matches_nothing,
)
from statecharts.statuses import LIVE_STATUSES, TERMINAL_STATUSES, ExecutionStatus

__all__ = [
    "LIVE_STATUSES",
    "TERMINAL_STATUSES",
    "Execution",
    "ExecutionState",
    "ExecutionStatus",
]

if TYPE_CHECKING:
    from statecharts.stepper import StepResult


class StepperFacade(Protocol):
    """What the facade needs of the stepper (``statecharts.stepper`` provides it)."""

    def start(self, chart: Any, **options: Any) -> Execution: ...

    def send(self, execution: Any, name: str, data: Any = None, **fields: Any) -> StepResult: ...

    def cancel(self, execution: Any, **options: Any) -> StepResult: ...

    def admit_chart(self, name: str, version: str) -> None: ...


_stepper: StepperFacade | None = None


def install_stepper(stepper: StepperFacade) -> None:
    """Called once by ``StatechartsConfig.ready()``."""
    global _stepper
    _stepper = stepper


# statecharts.policies.availability.available_events, installed with the stepper (it imports the
# models, so the models cannot import it).
_available_events: Callable[..., Any] | None = None


def install_available_events(function: Callable[..., Any]) -> None:
    """Called once by ``StatechartsConfig.ready()``."""
    global _available_events
    _available_events = function


def _the_stepper() -> StepperFacade:
    if _stepper is None:
        raise ImproperlyConfigured(
            "the statecharts app is not ready: add 'statecharts' to INSTALLED_APPS"
        )
    return _stepper


class ExecutionQuerySet(models.QuerySet["Execution"]):
    def active(self) -> ExecutionQuerySet:
        return self.filter(status__in=LIVE_STATUSES)

    def finished(self) -> ExecutionQuerySet:
        return self.filter(status__in=TERMINAL_STATUSES)

    def for_key(self, chart: Any, business_key: str) -> ExecutionQuerySet:
        return self.filter(chart=chart, business_key=business_key)

    def in_state(self, state_id: str) -> ExecutionQuerySet:
        """Executions where ``state_id`` (atomic, compound or parallel) is active now, as the
        step that put it there committed it: ``in_state("paid")``.

        Answered by the ``ExecutionState`` table (one row per active state, kept by the
        database's triggers in the statement that writes ``active_states``) through its
        primary key: fast with millions of executions, on PostgreSQL and SQLite alike.
        """
        return self.in_states([state_id])

    def for_subject(self, subject: models.Model) -> ExecutionQuerySet:
        """The executions about ``subject`` (``Execution.subject``, set when they started)."""
        return self.filter(
            subject_content_type=ContentType.objects.get_for_model(subject),
            subject_object_id=str(subject.pk),
        )

    def in_states(self, state_ids: Any, *, every: bool = False) -> ExecutionQuerySet:
        """Executions in any of ``state_ids`` (all of them with ``every=True``).

        The one lookup by state every other one delegates to (the admin's and the API's
        filters, ``in_state``). Each state is an ``EXISTS`` on the membership table keyed by
        (state, chart, execution): correlated on the chart too, so a query that also filters
        by chart uses the whole key."""
        ids = list(dict.fromkeys(state_ids))
        if not ids:
            return self.none()

        def member_of(states: list[str]) -> models.Exists:
            return models.Exists(
                ExecutionState.objects.filter(
                    state__in=states,
                    chart_id=models.OuterRef("chart_id"),
                    execution_id=models.OuterRef("pk"),
                )
            )

        if every:
            return self.filter(*(member_of([state_id]) for state_id in ids))
        return self.filter(member_of(ids))


class ExecutionManager(models.Manager.from_queryset(ExecutionQuerySet)):  # type: ignore[misc]
    def start(
        self,
        chart: Any,
        *,
        data: dict[str, Any] | None = None,
        business_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        subject: models.Model | None = None,
        caller_context: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        tracing: bool = False,
        user: Any = None,
    ) -> Execution:
        """Create an execution of ``chart`` and run it to its first stable configuration
        (``statecharts.stepper.start``); ``subject``: the object it is about;
        ``caller_context`` is recorded with the start; ``idempotency_key`` makes a retried
        start start nothing twice; ``tracing`` keeps its steps' trace effects; ``user``:
        check that this user may start it (``statecharts.policies.authorization``;
        ``StartNotPermitted`` otherwise) and record them."""
        options: dict[str, Any] = {"data": data, "business_key": business_key}
        options["metadata"] = metadata
        if subject is not None:
            options["subject"] = subject
        if caller_context is not None:
            options["caller_context"] = caller_context
        if idempotency_key is not None:
            options["idempotency_key"] = idempotency_key
        if tracing:
            options["tracing"] = True
        if user is not None:
            options["user"] = user
        return _the_stepper().start(chart, **options)


class Execution(models.Model):
    chart = models.ForeignKey(
        "statecharts.Chart", on_delete=models.PROTECT, related_name="executions"
    )
    status = models.CharField(
        max_length=20,
        choices=ExecutionStatus.choices,
        default=ExecutionStatus.ACTIVE,
        db_index=True,
    )
    session_id = models.CharField(
        max_length=64, unique=True, help_text="What the chart sees as _sessionid."
    )
    position = models.BinaryField(help_text="The interpreter state (statecharts.core.position).")
    configuration = PortableJSONField(
        default=list, help_text="Active atomic states after the last step (for reading only)."
    )
    active_states = PortableJSONField(
        default=list,
        help_text="Every active state, ancestors included, after the last step (for queries: "
        "Execution.objects.in_state, through ExecutionState).",
    )
    steps = models.PositiveIntegerField(default=0, help_text="Inputs recorded in the history.")
    donedata = PortableJSONField(null=True, blank=True)
    donedata_error = PortableTextField(
        blank=True, help_text="Why <donedata> could not be evaluated (then donedata is null)."
    )
    outcome = models.CharField(max_length=40, blank=True)
    failure_reason = PortableTextField(blank=True)
    business_key = models.CharField(max_length=200, null=True, blank=True)
    # Set for the child of an <invoke>: its parent, and the invocation's ordinal there (an
    # invoke id can repeat; the ordinal cannot). Unique together: one child per invocation.
    parent = models.ForeignKey(
        "statecharts.Execution",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        # (no index of its own: the unique (parent, invoke_ordinal) one, partial on a parent,
        # serves "the children of X"; every index is one more write per step's UPDATE)
        db_index=False,
        related_name="children",
    )
    invoke_ordinal = models.PositiveIntegerField(null=True, blank=True)
    invokeid = models.CharField(max_length=200, blank=True)
    metadata = PortableJSONField(default=dict, blank=True)
    tracing = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Its steps keep the core's trace effects (transitions selected, states "
        "exited and entered, guards, ...): shown as a trace in its timeline.",
    )
    # The object this execution is about (an order, a loan application), set at start:
    # statecharts.policies.subjects. The id is text so any primary key type fits.
    subject_content_type = models.ForeignKey(
        ContentType,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,  # (the subject index below starts with it)
        help_text="The model of the object this execution is about.",
    )
    subject_object_id = models.CharField(
        max_length=64, null=True, blank=True, help_text="The primary key of that object."
    )
    subject = GenericForeignKey("subject_content_type", "subject_object_id")
    created = models.DateTimeField()
    updated = models.DateTimeField()
    ended = models.DateTimeField(null=True, blank=True)
    erased = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its personal data was erased (statecharts.operations.erasure.erase): its "
        "datamodel, donedata, metadata, business key and the data of its inputs are gone.",
    )

    objects = ExecutionManager()

    class Meta:
        ordering = ["-created", "-id"]
        permissions = [
            ("erase_execution", "Can erase the personal data of executions"),
            ("send_internal_events", "Can see and send the events a chart only sends itself"),
        ]
        # No index may cover a column a running step writes (position, configuration,
        # active_states, steps, updated): the step's UPDATE is then HOT, with no index entry
        # (tests/stepper/test_state_index.py). The state index is ExecutionState, below.
        indexes = [
            # Partial: most executions are about no object, and an index entry for them would
            # be one more write whenever an UPDATE is not HOT (benchmarks/JOURNAL.md). Every
            # lookup by subject names its content type, which implies the condition.
            models.Index(
                fields=["subject_content_type", "subject_object_id"],
                condition=models.Q(subject_content_type__isnull=False),
                name="statecharts_execution_subject",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["chart", "business_key"],
                condition=models.Q(business_key__isnull=False),
                name="statecharts_execution_unique_business_key",
            ),
            models.UniqueConstraint(
                fields=["parent", "invoke_ordinal"],
                condition=models.Q(parent__isnull=False),
                name="statecharts_execution_one_child_per_invocation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def in_state(self, state_id: str) -> bool:
        """Whether ``state_id`` (atomic, compound or parallel) was active after its last step,
        as this row was read: the instance's answer to ``Execution.objects.in_state``."""
        active = self.active_states
        return isinstance(active, list) and state_id in active

    def available_events(
        self, *, user: Any = None, include_reserved: bool = False, include_internal: bool = True
    ) -> Any:
        """The events that would enable a transition now (``statecharts.policies.availability``);
        with ``user``, only those ``statecharts.policies.authorization`` lets them send. The
        whole truth by default: ``include_internal=False`` leaves out what the chart only
        sends itself, as the doors do."""
        if _available_events is None:
            _the_stepper()  # (says the app is not ready)
        assert _available_events is not None
        return _available_events(
            self, user=user, include_reserved=include_reserved, include_internal=include_internal
        )

    def send(self, name: str, data: Any = None, **fields: Any) -> StepResult:
        """Feed one external event (``statecharts.stepper.send``), then reload this row.
        ``user=``: check that this user may send it (``statecharts.policies.authorization``);
        ``caller_context=`` and ``idempotency_key=`` are taken too."""
        result = _the_stepper().send(self.pk, name, data, **fields)
        self.refresh_from_db()
        return result

    step = send

    def cancel(self, **options: Any) -> StepResult:
        """Cancel it (``statecharts.stepper.cancel``: ``caller_context``, ``reason``,
        ``idempotency_key``, ``user``: checked by ``statecharts.policies.authorization``), then
        reload
        this row."""
        result = _the_stepper().cancel(self.pk, **options)
        self.refresh_from_db()
        return result


# Keys chart code can look executions up by (a <send> target's session id), computed from
# data that may hold a NUL: such a key finds no execution (statecharts.models.fields).
nul_matches_nothing(
    Execution._meta.get_field("session_id"),
    Execution._meta.get_field("business_key"),
    Execution._meta.get_field("invokeid"),
)


class ExecutionState(models.Model):
    """One active state of one execution: the state index ``Execution.objects.in_state``
    reads (issue 31, ``benchmarks/STATE_INDEX.md``).

    Written only by the database: row triggers on the execution table (migration 0015; on
    PostgreSQL their function is migration 0016's) insert an execution's states when it is
    inserted, move exactly the states a change of ``active_states`` (or of its chart) exits
    and enters, and delete them with the execution, inside the statement that changes the
    execution, so in its transaction and under its lock: a query sees both or neither,
    whoever wrote the row (the stepper, a chart migration, an import, ``queryset.update``,
    raw SQL). Never write it from Python. A step that changes no configuration calls no
    trigger; one that does costs the server one PL/pgSQL call that runs no query but the
    row writes (``tests/stepper/test_state_index.py``).

    Its composite primary key (state, chart, execution) is its only index: a lookup by state
    (and chart) is an index-only scan, and the execution row keeps no index on a column a step
    writes, so the step's UPDATE is HOT.
    """

    pk = models.CompositePrimaryKey("state", "chart_id", "execution_id")
    # (text: a state id is an XML ID of any length)
    state = models.TextField()
    chart = models.ForeignKey(
        "statecharts.Chart",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    # (no index on execution_id: one more entry per changed state per step; the delete
    # trigger finds an execution's rows by the primary key, from its active_states)
    execution = models.ForeignKey(
        Execution,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return f"{self.execution_id} in {self.state}"
