"""Query filters (django-filter, DRF's documented filter backend).

An invalid value (an unknown status, a malformed date, a chart that does not exist) is a 400
listing the parameter and the reason, never an empty list that looks like an answer.
"""

from __future__ import annotations

import re

import django_filters
from django import forms
from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema_field

from statecharts.models import Chart, Execution, ExecutionStatus
from statecharts.models.executions import ExecutionQuerySet
from statecharts.policies import subjects

# Ids are 64-bit signed integers on every database: a number outside that range is refused
# (a 400 naming the parameter), not sent to the database (SQLite raises OverflowError).
LARGEST_ID = 2**63 - 1


class IdField(forms.IntegerField):
    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("min_value", -LARGEST_ID)
        kwargs.setdefault("max_value", LARGEST_ID)
        super().__init__(**kwargs)  # type: ignore[arg-type]


class IntegerFilter(django_filters.NumberFilter):
    """A whole number that fits an id column (``NumberFilter`` takes decimals, and ``1.5``
    would match id 1; a number past 64 bits cannot be an id)."""

    field_class = IdField


# A state id is an XML ID (an NCName): a letter or underscore, then letters, digits, ".", "-",
# "_". Anything else cannot be a state of any chart, and is refused rather than matched.
STATE_ID = re.compile(r"[^\W\d][\w.\-]*")
STATE_ID_LENGTH = 200
MAX_STATE_IDS = 20


class StateIdsField(forms.CharField):
    """``paying`` or ``paying,shipping``: state ids, comma-separated (a 400 names a bad one)."""

    def clean(self, value: object) -> list[str] | None:  # type: ignore[override]
        text = super().clean(value)
        if not text:
            return None
        ids = [part.strip() for part in str(text).split(",")]
        if len(ids) > MAX_STATE_IDS:
            raise ValidationError(f"at most {MAX_STATE_IDS} state ids")
        for state_id in ids:
            if len(state_id) > STATE_ID_LENGTH or not STATE_ID.fullmatch(state_id):
                shown = state_id[:40].replace("\x00", "\\0")
                raise ValidationError(
                    f"{shown!r} is not a state id (an XML name: a letter or _, then letters, "
                    "digits, '.', '-' or '_')"
                )
        return ids


IN_STATE_HELP = (
    "Executions where this state is active now: an atomic state or any compound or parallel "
    "ancestor of the active ones. Several, comma-separated: in any of them. Indexed on "
    "PostgreSQL."
)


# (a list, written as one comma-separated string)
@extend_schema_field({"type": "string", "description": IN_STATE_HELP})
class StateIdsFilter(django_filters.Filter):
    field_class = StateIdsField

    def filter(self, queryset: ExecutionQuerySet, value: list[str] | None) -> ExecutionQuerySet:
        return queryset if not value else queryset.in_states(value)


SUBJECT_HELP = (
    "Executions about this object (Execution.subject): 'app_label.model:id', e.g. "
    "'shop.order:42'. The object need not exist any more."
)


class SubjectReferenceField(forms.CharField):
    """``shop.order:42``: an installed model and an object id (a 400 says what is wrong)."""

    def clean(self, value: object) -> tuple[ContentType, str] | None:  # type: ignore[override]
        text = super().clean(value)
        if not text:
            return None
        label, sep, object_id = str(text).partition(":")
        if not sep or not label or not object_id or len(object_id) > subjects.MAX_OBJECT_ID:
            raise ValidationError("write it as app_label.model:id, e.g. shop.order:42")
        try:
            model = apps.get_model(label)
        except (LookupError, ValueError):
            raise ValidationError(f"{label[:80]!r} is not an installed model") from None
        return ContentType.objects.get_for_model(model), object_id


@extend_schema_field({"type": "string", "description": SUBJECT_HELP})
class SubjectFilter(django_filters.Filter):
    field_class = SubjectReferenceField

    def filter(
        self, queryset: ExecutionQuerySet, value: tuple[ContentType, str] | None
    ) -> ExecutionQuerySet:
        if value is None:
            return queryset
        content_type, object_id = value
        return queryset.filter(subject_content_type=content_type, subject_object_id=object_id)


class ChartFilter(django_filters.FilterSet):
    class Meta:
        model = Chart
        fields = ["name", "version", "content_hash"]


class ExecutionFilter(django_filters.FilterSet):
    chart = django_filters.ModelChoiceFilter(queryset=Chart.objects.all())
    status = django_filters.ChoiceFilter(choices=ExecutionStatus.choices)
    business_key = django_filters.CharFilter()
    # ?created_after=...&created_before=... (ISO 8601; both ends inclusive)
    created = django_filters.IsoDateTimeFromToRangeFilter()
    # ?in_state=paying (or paying,shipping: in any of them): Execution.objects.in_states.
    in_state = StateIdsFilter(help_text=IN_STATE_HELP)
    # ?subject=shop.order:42: Execution.objects.for_subject.
    subject = SubjectFilter(help_text=SUBJECT_HELP)

    class Meta:
        model = Execution
        fields = ["chart", "status", "business_key", "created", "in_state", "subject"]
