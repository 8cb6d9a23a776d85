"""Forms for the admin's actions. They validate input; the stepper does the work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.utils.html import escape

from statecharts.core import ChartError
from statecharts.core.availability import Availability
from statecharts.exceptions import InvalidInput
from statecharts.models import Chart, Execution
from statecharts.operations.inspection import ChartHints, EventHint
from statecharts.policies import idempotency, validation
from statecharts.policies.availability import AvailableEvent, accepts_free_names
from statecharts.stepper import ChartLoadRequest, admit, requests

BUSINESS_KEY_LENGTH = Execution._meta.get_field("business_key").max_length or 0


def refused(error: InvalidInput) -> forms.ValidationError:
    """A form error listing every problem of a refusal, each with its path."""
    return forms.ValidationError([str(problem) for problem in error.problems])


class JSONText(forms.CharField):
    """A textarea holding JSON; empty means None. The text is handed to the stepper as it is
    (:class:`statecharts.stepper.JSONText`): its gate reads it strictly and checks it (deep
    nesting, ``NaN`` or a code-carrying tag is refused, never a server error). The page sets
    its placeholder from the chart (``statecharts.operations.inspection.chart_hints``)."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if not text or not text.strip():
            return None
        return requests.JSONText(text)


class ChartUploadForm(forms.ModelForm):
    """Adding a chart: the source is validated by the core; every problem is listed."""

    new_version = forms.BooleanField(
        required=False,
        label="New version of an existing chart",
        help_text="Needed to load a different source under a name a chart already has "
        "(and the permission 'Can load a new version of an existing chart').",
    )
    # Set by the admin from the request's user (statecharts.add_chart_version).
    may_add_version = False

    class Meta:
        model = Chart
        fields = ["source", "name", "version"]
        widgets = {"source": forms.Textarea(attrs={"rows": 24, "cols": 100})}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        source = cleaned.get("source")
        if source:
            from statecharts.runtime import check_source

            try:
                # A pasted chart has no folder: a relative reference is refused here.
                self.compiled, self.warnings = check_source(source)
            except ChartError as exc:
                raise forms.ValidationError(
                    [forms.ValidationError(str(problem)) for problem in exc.problems]
                ) from None
            # Without a name, the chart takes its <scxml name>: that must fit the column too.
            name = cleaned.get("name") or self.compiled.name or ""
            try:
                admit(ChartLoadRequest(name=name))
            except InvalidInput as exc:
                self.add_error("name", f"the chart's name {exc.problems[0].message}")
                return cleaned
            self._check_version(name, cleaned)
        return cleaned

    def _check_version(self, name: str, cleaned: dict[str, Any]) -> None:
        """The version rules (statecharts.versions), reported on the form before saving."""
        from statecharts.versions import VersionError

        if Chart.objects.filter(content_hash=self.compiled.source_hash).exists():
            return  # the same source again: the stored chart, whatever is asked
        new_version = bool(cleaned.get("new_version"))
        if new_version and not self.may_add_version:
            self.add_error("new_version", "You may not load new versions of existing charts.")
            return
        try:
            Chart.objects.version_for(name, cleaned.get("version") or "", new_version)
        except VersionError as exc:
            self.add_error("new_version" if "new_version" in str(exc) else "version", str(exc))


class IdempotencyToken(forms.CharField):
    """A hidden field holding a key issued when the form is rendered
    (``statecharts.policies.idempotency.issue_token``): posting the same rendered form twice (a
    double click, a re-post after a lost response) applies its input once. Empty (a form
    posted without one) means no key."""

    widget = forms.HiddenInput

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("initial", idempotency.issue_token)  # called at each rendering
        super().__init__(**kwargs)

    def clean(self, value: Any) -> str | None:
        return super().clean(value) or None  # checked by the stepper's gate


class GateText(forms.CharField):
    """Text the stepper's gate checks (an event name, a business key): Django's own NUL
    validator is left out, so that every door refuses it in the gate's words."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            validator for validator in self.validators
            if not isinstance(validator, ProhibitNullCharactersValidator)
        ]  # fmt: skip


class CancelForm(forms.Form):
    """The cancel buttons' form: nothing to fill in but its token."""

    idempotency_token = IdempotencyToken()


class StartExecutionForm(forms.Form):
    data = JSONText(label="Initial data (JSON object, optional)")
    business_key = GateText(required=False, max_length=BUSINESS_KEY_LENGTH)
    idempotency_token = IdempotencyToken()

    def __init__(self, *args: Any, hints: ChartHints | None = None, **kwargs: Any) -> None:
        """``hints``: the chart's, to show what start data it takes and to refuse ids it
        does not declare (as the API does)."""
        super().__init__(*args, **kwargs)
        self.hints = hints
        if hints is not None and hints.data_ids:
            self.fields["data"].widget.attrs["placeholder"] = hints.start_example
            names = escape(", ".join(hints.data_ids))  # Django renders help text unescaped
            self.fields["data"].help_text = f"The chart's top-level data: {names}."
        elif hints is not None:
            self.fields["data"].help_text = "This chart declares no top-level data."

    def clean_business_key(self) -> str | None:
        key: str | None = self.cleaned_data["business_key"] or None
        return key  # checked by the stepper's gate, with the data's ids (declared_only)


class SendEventForm(forms.Form):
    name = GateText(max_length=validation.EVENT_NAME_MAX_LENGTH, label="Event name")
    data = JSONText(label="Event data (JSON, optional)")
    idempotency_token = IdempotencyToken()

    EVENT_LIST_ID = "statecharts-events"

    def __init__(
        self,
        *args: Any,
        events: Sequence[EventHint] = (),
        accepted: Sequence[EventHint] = (),
        available: Sequence[AvailableEvent] | None = None,
        **kwargs: Any,
    ) -> None:
        """``events``: the events the chart's transitions accept, offered as a pick list;
        ``accepted``: those the active states accept now (listed first). The data field's
        placeholder shows the ``_event.data`` keys an accepted event's transitions read
        (the page's script switches it to the picked event's).

        ``available``: what this user can send now (``statecharts.policies.availability``): the name
        becomes a pick list of them, each marked enabled, conditional or disabled, unless the
        active states take names the list cannot show (a ``*`` or ``order.*`` descriptor):
        then it stays a free name with the list as suggestions. The name is checked again
        when it is sent (the stepper and ``statecharts.policies.authorization``)."""
        super().__init__(*args, **kwargs)
        listed = {hint.name for hint in accepted}  # (a set: a tuple made this quadratic)
        self.events = (*accepted, *(hint for hint in events if hint.name not in listed))
        name = self.fields["name"].widget
        name.attrs.update({"list": self.EVENT_LIST_ID, "autocomplete": "off"})
        with_data = [hint for hint in accepted if hint.data_keys]
        self.fields["data"].widget.attrs["placeholder"] = (
            with_data[0].data_example if with_data else "optional"
        )
        self.available = tuple(available or ())
        if available is not None and not accepts_free_names(available):
            self.fields["name"].widget = forms.Select(
                choices=[("", "(pick an event)")]
                + [(event.name, _choice_label(event)) for event in available]
            )
            self.fields["name"].help_text = (
                "The events that would enable a transition now (and that you may send)."
                if available
                else "No event would enable a transition now (or none you may send)."
            )
        elif available:
            names = escape(", ".join(event.name for event in available))
            self.fields["name"].help_text = (
                f"Available now: {names}; this execution also takes other names."
            )
        if any(event.truncated for event in self.available):
            self.fields["name"].help_text += (
                f" {TRUNCATED_NOTE}" if self.fields["name"].help_text else TRUNCATED_NOTE
            )

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        if name in ("*", ""):
            raise forms.ValidationError("give the event's name (e.g. order.paid)")
        if not name or any(c.isspace() for c in name):
            raise forms.ValidationError("an event name is one word, e.g. order.paid")
        return name  # control characters, reserved names: the stepper's gate


# Said on the send form when an event's transitions list was cut short (the answer's work
# budget, statecharts.core.availability): its availability is exact, its reasons partial.
TRUNCATED_NOTE = (
    "Events marked 'cut short' have more transitions than one page reads: their "
    "availability is exact, the reasons shown are those of the first transitions."
)


def _choice_label(event: AvailableEvent) -> str:
    cut = "cut short" if event.truncated else ""
    if event.availability is Availability.ENABLED:
        return f"{event.name} ({cut})" if cut else event.name
    reasons = sorted({option.reason for option in event.transitions if option.reason})
    why = f": {'; '.join([*reasons, cut] if cut else reasons)}" if reasons or cut else ""
    return f"{event.name} ({event.availability.value}{why})"
