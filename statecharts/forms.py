"""Forms for the admin's actions. They validate input; the stepper does the work."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from statecharts.core import ChartError
from statecharts.models import Chart


class JSONText(forms.CharField):
    """A textarea holding JSON; empty means None."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": '{"amount": 10}'})

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


class SendEventForm(forms.Form):
    name = forms.CharField(max_length=200, label="Event name")
    data = JSONText(label="Event data (JSON, optional)")

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        if not name or any(c.isspace() for c in name):
            raise forms.ValidationError("an event name is one word, e.g. order.paid")
        return name
