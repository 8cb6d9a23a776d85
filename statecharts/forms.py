"""Forms for the admin's actions. They validate input; the stepper does the work."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django import forms
from django.utils.html import escape

from statecharts.core import ChartError
from statecharts.inspection import ChartHints, EventHint
from statecharts.models import Chart


class JSONText(forms.CharField):
    """A textarea holding JSON; empty means None. The page sets its placeholder from the
    chart (``statecharts.inspection.chart_hints``): no example that does not fit the chart."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def __init__(self, *, object_only: bool = False, **kwargs: Any) -> None:
        self.object_only = object_only
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if not text or not text.strip():
            return None
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc}") from None
        if self.object_only and not isinstance(parsed, dict):
            raise forms.ValidationError('must be a JSON object, e.g. {"key": 1}')
        return parsed


class ChartUploadForm(forms.ModelForm):
    """Adding a chart: the source is validated by the core; every problem is listed."""

    class Meta:
        model = Chart
        fields = ["source", "name", "version"]
        widgets = {"source": forms.Textarea(attrs={"rows": 24, "cols": 100})}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        source = cleaned.get("source")
        if source:
            from statecharts.runtime import compile_source

            try:
                self.compiled = compile_source(source)
            except ChartError as exc:
                raise forms.ValidationError(
                    [forms.ValidationError(str(problem)) for problem in exc.problems]
                ) from None
        return cleaned


class StartExecutionForm(forms.Form):
    data = JSONText(object_only=True, label="Initial data (JSON object, optional)")
    business_key = forms.CharField(required=False, max_length=200)

    def __init__(self, *args: Any, hints: ChartHints | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if hints is not None and hints.data_ids:
            self.fields["data"].widget.attrs["placeholder"] = hints.start_example
            names = escape(", ".join(hints.data_ids))  # Django renders help text unescaped
            self.fields["data"].help_text = f"The chart's top-level data: {names}."
        elif hints is not None:
            self.fields["data"].help_text = "This chart declares no top-level data."


class SendEventForm(forms.Form):
    name = forms.CharField(max_length=200, label="Event name")
    data = JSONText(label="Event data (JSON, optional)")

    EVENT_LIST_ID = "statecharts-events"

    def __init__(
        self,
        *args: Any,
        events: Sequence[EventHint] = (),
        accepted: Sequence[EventHint] = (),
        **kwargs: Any,
    ) -> None:
        """``events``: the events the chart's transitions accept, offered as a pick list;
        ``accepted``: those the active states accept now (listed first). The data field's
        placeholder shows the ``_event.data`` keys an accepted event's transitions read
        (the page's script switches it to the picked event's)."""
        super().__init__(*args, **kwargs)
        self.events = (*accepted, *(hint for hint in events if hint not in accepted))
        name = self.fields["name"].widget
        name.attrs.update({"list": self.EVENT_LIST_ID, "autocomplete": "off"})
        with_data = [hint for hint in accepted if hint.data_keys]
        self.fields["data"].widget.attrs["placeholder"] = (
            with_data[0].data_example if with_data else "optional"
        )

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        if not name or any(c.isspace() for c in name):
            raise forms.ValidationError("an event name is one word, e.g. order.paid")
        return name
