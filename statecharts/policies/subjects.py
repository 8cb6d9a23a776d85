"""The object an execution is about: ``Execution.subject`` (a generic relation).

Set once, when the execution starts (``stepper.start(chart, subject=order)``,
``Execution.objects.start(chart, subject=order)``, the API's ``subject`` field, the command's
``--subject app_label.model:pk``); read with ``execution.subject`` and
``Execution.objects.for_subject(order)``. The admin shows it on the execution's page, and a
host adds the executions of its objects to its own admin pages with
``statecharts.admin.ExecutionsInline``.

From Python any saved model instance can be a subject. From outside (the API, the command)
only the models listed in ``STATECHARTS["SUBJECT_MODELS"]`` (``"app_label.model"``) can be
named, so a request cannot link an execution to, and show the title of, any row of any table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ValidationError
from django.db import models

from statecharts.conf import statecharts_settings
from statecharts.exceptions import InvalidInput

# Execution.subject_object_id's length: the text of the subject's primary key.
MAX_OBJECT_ID = 64


def check_subject(subject: Any) -> None:
    """A subject given from Python: a saved model instance whose key fits; ``InvalidInput``
    (a ``ValueError``) otherwise, before anything is written."""
    if not isinstance(subject, models.Model):
        raise InvalidInput.at("subject", f"must be a model instance, not {type(subject).__name__}")
    if subject.pk is None:
        raise InvalidInput.at("subject", "must be saved first (it has no primary key)")
    if len(str(subject.pk)) > MAX_OBJECT_ID:
        raise InvalidInput.at(
            "subject", f"its primary key is longer than {MAX_OBJECT_ID} characters as text"
        )


def allowed_models() -> dict[str, type[models.Model]]:
    """The models ``SUBJECT_MODELS`` lists, by their lower-case label."""
    found: dict[str, type[models.Model]] = {}
    for label in statecharts_settings.SUBJECT_MODELS or ():
        try:
            model = apps.get_model(label)
        except (LookupError, ValueError):
            continue  # (the system check reports it)
        found[model._meta.label_lower] = model
    return found


def resolve(label: Any, object_id: Any, where: str = "subject") -> models.Model:
    """The subject an outside caller names: ``label`` one of ``SUBJECT_MODELS``
    (``"shop.order"``), ``object_id`` an existing object's key; ``InvalidInput`` otherwise."""
    if not isinstance(label, str) or not isinstance(object_id, str | int) or object_id == "":
        raise InvalidInput.at(where, "give the model ('app_label.model') and the object's id")
    model = allowed_models().get(label.lower())
    if model is None:
        listed = ", ".join(sorted(allowed_models())) or "none"
        raise InvalidInput.at(
            f"{where}.type",
            f"{label!r} is not a model executions may be about "
            f"(STATECHARTS['SUBJECT_MODELS']: {listed})",
        )
    try:
        subject = model._default_manager.get(pk=object_id)
    except (model.DoesNotExist, ValueError, TypeError, ValidationError):
        # (ValueError, ValidationError: a key the column cannot hold, e.g. text for a number)
        raise InvalidInput.at(f"{where}.id", f"there is no {label} with id {object_id!r}") from None
    check_subject(subject)
    return subject


def parse_reference(text: str) -> tuple[str, str]:
    """``"shop.order:42"`` -> ``("shop.order", "42")`` (the command's ``--subject``)."""
    label, sep, object_id = text.partition(":")
    if not sep or not label or not object_id:
        raise InvalidInput.at("subject", "write it as app_label.model:id, e.g. shop.order:42")
    return label, object_id


def describe(execution: Any) -> dict[str, Any] | None:
    """The subject as the API shows it: its model, id and title; None without one."""
    if execution.subject_content_type_id is None:
        return None
    content_type = execution.subject_content_type
    label = f"{content_type.app_label}.{content_type.model}"
    subject = execution.subject  # None when the object was deleted since
    return {
        "type": label,
        "id": execution.subject_object_id,
        "title": str(subject) if subject is not None else None,
    }


def check_settings(configured: Mapping[str, Any]) -> list[CheckMessage]:
    listed = configured.get("SUBJECT_MODELS", [])
    if not isinstance(listed, list | tuple) or not all(isinstance(x, str) for x in listed):
        return [Error("STATECHARTS['SUBJECT_MODELS'] must be a list of 'app_label.model'.",
                      id="statecharts.E045")]
    problems: list[CheckMessage] = []
    for label in listed:
        try:
            apps.get_model(label)
        except (LookupError, ValueError):
            problems.append(Error(
                f"STATECHARTS['SUBJECT_MODELS'] lists {label!r}, which is not an installed "
                "model.", hint="Write it as 'app_label.model' (e.g. 'shop.order').",
                id="statecharts.E046",
            ))
    return problems
