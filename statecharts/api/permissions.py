"""Permissions: Django's model permissions, for reading too, with per-action overrides."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

VIEW = "%(app_label)s.view_%(model_name)s"
ADD = "%(app_label)s.add_%(model_name)s"
CHANGE = "%(app_label)s.change_%(model_name)s"


class ModelPermissions(permissions.DjangoModelPermissions):
    """``DjangoModelPermissions`` (anonymous users may do nothing), where reading needs the
    model's ``view`` permission too, and a view can name the permissions of an action::

        action_permissions = {"send": [CHANGE], "cancel": [CHANGE]}

    (sending an event is a POST, but it changes an execution: it needs ``change_execution``,
    not ``add_execution``).
    """

    perms_map = {
        **permissions.DjangoModelPermissions.perms_map,
        "GET": [VIEW],
        "OPTIONS": [VIEW],
        "HEAD": [VIEW],
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        overrides: dict[str, list[str]] = getattr(view, "action_permissions", None) or {}
        action = getattr(view, "action", None)
        if action not in overrides:
            return super().has_permission(request, view)
        user = request.user
        if not user or not user.is_authenticated:
            return False
        model = self._queryset(view).model
        names = {"app_label": model._meta.app_label, "model_name": model._meta.model_name}
        return user.has_perms([perm % names for perm in overrides[action]])
