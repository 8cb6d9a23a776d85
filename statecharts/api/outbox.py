"""The outbox through the API: what executions sent each other, and the admin's "Retry
delivering the selected undeliverable messages" for one message.

- ``/api/outbox/`` and ``/api/outbox/{id}/``: outbox messages, read-only
  (``statecharts.view_outboxmessage``), filtered by ``sender`` (an execution id) and
  ``status``; the event's name, never its data;
- ``POST /api/outbox/{id}/retry/``: deliver an undeliverable message again
  (``stepper.retry_message``, as the admin's action and ``statechart deliver --retry`` do;
  ``statecharts.change_outboxmessage``), with a ``reason`` recorded in the sender's history
  with the caller context. Its sender was told ``error.communication`` when it failed and is
  not told again. A message that is not undeliverable is refused (409,
  the refusal table's ``refused``)."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers

from statecharts import stepper
from statecharts.api.exceptions import Refused
from statecharts.api.filters import IntegerFilter
from statecharts.api.operating import OperatorActions, operator_action
from statecharts.api.permissions import CHANGE
from statecharts.api.serializers import NAMESPACE
from statecharts.api.views import ERRORS, APIViewSet
from statecharts.exceptions import printable
from statecharts.models import OutboxMessage
from statecharts.models.outbox import OutboxStatus
from statecharts.policies import refusals


class OutboxMessageSerializer(serializers.ModelSerializer[OutboxMessage]):
    url = serializers.HyperlinkedIdentityField(view_name=f"{NAMESPACE}:outbox-message-detail")
    sender = serializers.IntegerField(source="sender_id", read_only=True)
    event_name = serializers.SerializerMethodField(help_text="The event's name (its data: never).")

    class Meta:
        model = OutboxMessage
        fields = [
            "id", "url", "sender", "kind", "target_session_id", "event_name", "send_id",
            "status", "reason", "attempts", "last_error", "created", "delivered",
        ]  # fmt: skip
        read_only_fields = fields

    def get_event_name(self, message: OutboxMessage) -> str:
        event = message.event
        return str(event.get("name", "")) if isinstance(event, dict) else ""


class OutboxFilter(django_filters.FilterSet):
    sender = IntegerFilter(field_name="sender_id")
    status = django_filters.ChoiceFilter(choices=OutboxStatus.choices)

    class Meta:
        model = OutboxMessage
        fields = ["sender", "status"]


class RetryRequestSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(
        max_length=stepper.OUTBOX_RETRY_REASON_MAX_LENGTH,
        trim_whitespace=False,  # the stepper's gate refuses a blank one, by name
        help_text="Why: recorded with the retry in the sender's history.",
    )


class RetryAnswerSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    outcome = serializers.CharField(
        help_text="delivered, or its status now (undeliverable: it failed again)."
    )


@extend_schema_view(
    list=extend_schema(summary="List outbox messages (what executions sent each other)"),
    retrieve=extend_schema(summary="An outbox message"),
)
class OutboxMessageViewSet(
    OperatorActions, mixins.ListModelMixin, mixins.RetrieveModelMixin, APIViewSet
):
    """Outbox messages: each event an execution sent another (docs/durable-executions.md),
    read-only, the event's name but never its data; an operator may deliver an undeliverable
    one again (retry)."""

    queryset = OutboxMessage.objects.all()
    serializer_class = OutboxMessageSerializer
    filterset_class = OutboxFilter
    action_permissions = {"retry": [CHANGE]}

    retry = operator_action(
        "retry",
        body=RetryRequestSerializer,
        answer={
            200: RetryAnswerSerializer,
            400: ERRORS[400],
            403: OpenApiResponse(description="Without statecharts.change_outboxmessage."),
            404: ERRORS[404],
            409: OpenApiResponse(
                description="The message is not undeliverable (reason 'refused'): nothing was done."
            ),
        },
        summary="Deliver an undeliverable message again (an operator's action)",
    )

    def act(self, name: str, row_id: int, values: dict[str, Any], context: dict[str, Any]) -> str:
        """Deliver this undeliverable message again (e.g. once its target is back from
        halted), recorded in its sender's history with the reason and who asked. Its sender,
        told error.communication when it first failed, is not told again if it fails again."""
        message = self.get_object()
        if message.status != OutboxStatus.UNDELIVERABLE:
            said = (
                f"message {message.pk} is {message.status}: only undeliverable messages are retried"
            )
            row = refusals.BY_REASON[refusals.Reason.REFUSED]
            raise Refused(refusals.Refusal(row, printable(said)))
        stepper.retry_message(message.pk, reason=values["reason"], caller_context=context)
        # From the row: a message its target had applied after all is delivered.
        message.refresh_from_db(fields=["status"])
        return str(message.status)
