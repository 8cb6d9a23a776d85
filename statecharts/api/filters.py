"""Query filters (django-filter, DRF's documented filter backend).

An invalid value (an unknown status, a malformed date, a chart that does not exist) is a 400
listing the parameter and the reason, never an empty list that looks like an answer.
"""

from __future__ import annotations

import django_filters
from django import forms

from statecharts.models import Chart, Execution, ExecutionStatus


class IntegerFilter(django_filters.NumberFilter):
    """A whole number (``NumberFilter`` takes decimals, and ``1.5`` would match id 1)."""

    field_class = forms.IntegerField


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

    class Meta:
        model = Execution
        fields = ["chart", "status", "business_key", "created"]
