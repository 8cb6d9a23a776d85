"""Who may send which event: per chart and event name, checked at every door.

The rules live in settings (docs/permissions-and-available-events.md)::

    STATECHARTS = {
        "EVENT_PERMISSIONS": {
            # chart name ("*": every chart) -> event descriptor -> rule
            "order": {
                "approve": "shop.approve_order",            # one Django permission
                "refund": ["shop.change_order", "shop.refund_order"],  # all of them
                "cancel": {"permissions": ["shop.change_order"], "check": "own_order"},
                "*": "shop.change_order",                    # every other event
            },
        },
        # check name -> dotted path of a callable (executable code is named here only)
        "EVENT_CHECKS": {"own_order": "shop.rules.own_order"},
    }

An event descriptor matches as the chart's own transitions do (``order`` matches ``order``
and ``order.paid``; ``*`` matches every name); the most specific descriptor of the chart's
entry wins, else that of the ``"*"`` entry. Every sender needs
``statecharts.change_execution`` (what the API and the admin ask of a send); an event no rule
names needs nothing more.

A check is called ``check(user, execution, event_name, data)`` and answers ``True`` (allowed),
or ``False`` or a reason (a non-empty string) to refuse. It runs for every user, superusers
included (it is domain logic: "only the order's owner"), after the permissions. A check that
raises refuses the event (it fails closed) and the error is logged.

**Doors.** ``stepper.send(..., user=user)`` (and ``execution.send(..., user=user)``) check
before the step and refuse with :class:`EventNotPermitted` (a ``PermissionDenied``), writing
nothing; without ``user`` the caller is trusted code and nothing is checked. The API and the
admin always pass the request's user; ``statechart send --as-user NAME`` passes that user.
What was decided is recorded with the input in the history (``input["sender"]``: the user's
id and username, and the rule), so an audit and a replay see who sent each event.

The check reads the execution as it was before the step's lock is taken: a rule that depends
on the execution's state may see one step old data (rules on the chart, the event, the user
and the subject are exact).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.checks import CheckMessage, Error
from django.core.exceptions import PermissionDenied
from django.utils.module_loading import import_string

from statecharts.conf import register_settings, statecharts_settings
from statecharts.core.events import split_descriptor

logger = logging.getLogger("statecharts.authorization")

DEFAULTS: dict[str, Any] = {
    # chart name ("*": every chart) -> {event descriptor: rule}; see the module docstring.
    "EVENT_PERMISSIONS": {},
    # check name -> dotted path of a callable (user, execution, event name, data) -> verdict.
    "EVENT_CHECKS": {},
}

# What every sender needs, whatever the event: the permission the API and the admin ask
# of a send (a user= given from Python or the command needs it too).
SEND_PERMISSION = "statecharts.change_execution"

EventCheck = Callable[[Any, Any, str, Any], "bool | str"]


class EventNotPermitted(PermissionDenied):
    """This user may not send this event to this execution (the reasons say why)."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__("; ".join(decision.reasons))


@dataclass(frozen=True, slots=True)
class Rule:
    """What one settings entry asks for an event."""

    chart: str  # the EVENT_PERMISSIONS key it came from ("*" or a chart name)
    descriptor: str  # the event key it came from
    permissions: tuple[str, ...] = ()
    check: str | None = None

    @property
    def label(self) -> str:
        return f"EVENT_PERMISSIONS[{self.chart!r}][{self.descriptor!r}]"


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether ``user`` may send ``event`` and why, and what the history records of it."""

    allowed: bool
    event: str
    rule: Rule | None  # None: no rule names this event
    user_id: Any = None
    username: str = ""
    reasons: tuple[str, ...] = field(default=())

    def record(self) -> dict[str, Any]:
        """The history's record of who sent the input, and under which rule."""
        recorded: dict[str, Any] = {"user_id": self.user_id, "username": self.username}
        if self.rule is not None:
            recorded["rule"] = self.rule.label
        return recorded


def parse_rule(chart: str, descriptor: str, value: Any) -> Rule:
    """A settings value as a rule; ``ValueError`` says what is wrong with it."""
    if isinstance(value, str):
        return Rule(chart, descriptor, permissions=(_permission(value),))
    if isinstance(value, list | tuple):
        return Rule(chart, descriptor, permissions=tuple(_permission(p) for p in value))
    if isinstance(value, Mapping):
        unknown = set(value) - {"permissions", "check"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)} (use 'permissions', 'check')")
        permissions = value.get("permissions", ())
        if isinstance(permissions, str):
            permissions = [permissions]
        if not isinstance(permissions, list | tuple):
            raise ValueError("'permissions' must be a permission name or a list of them")
        check = value.get("check")
        if check is not None and (not isinstance(check, str) or not check):
            raise ValueError("'check' must be the name of an EVENT_CHECKS entry")
        if not permissions and check is None:
            raise ValueError("a rule needs 'permissions', a 'check', or both")
        return Rule(
            chart, descriptor, permissions=tuple(_permission(p) for p in permissions),
            check=check,
        )
    raise ValueError(
        "a rule is a permission name, a list of them, or {'permissions': [...], 'check': name}"
    )


def _permission(value: Any) -> str:
    if not isinstance(value, str) or value.count(".") != 1 or not all(value.split(".")):
        raise ValueError(f"{value!r} is not a permission name ('app_label.codename')")
    return value


def rule_for(chart_name: str | None, event: str) -> Rule | None:
    """The rule the settings give for ``event`` of a chart named ``chart_name``: the most
    specific descriptor of the chart's own entry, else of the ``"*"`` entry."""
    configured: Mapping[str, Any] = statecharts_settings.EVENT_PERMISSIONS or {}
    parts = tuple(event.split("."))
    for chart in (chart_name, "*"):
        if chart is None or chart not in configured:
            continue
        best: tuple[int, str, Any] | None = None
        for descriptor, value in configured[chart].items():
            wanted = split_descriptor(descriptor)
            matches = len(wanted) <= len(parts) and parts[: len(wanted)] == wanted
            if matches and (best is None or len(wanted) > best[0]):
                best = (len(wanted), descriptor, value)
        if best is not None:
            return parse_rule(chart, best[1], best[2])
    return None


def check_named(name: str) -> EventCheck:
    """The callable ``EVENT_CHECKS[name]`` names (a system check vouches for it at start-up)."""
    checks: Mapping[str, Any] = statecharts_settings.EVENT_CHECKS or {}
    if name not in checks:
        raise LookupError(f"EVENT_CHECKS has no check named {name!r}")
    target = checks[name]
    found: EventCheck = import_string(target) if isinstance(target, str) else target
    return found


def decide(user: Any, execution: Any, event: str, data: Any = None) -> Decision:
    """Whether ``user`` may send ``event`` (with ``data``) to ``execution``; never raises
    for a refusal (see :func:`require`)."""
    chart_name = execution.chart.name if execution.chart_id is not None else None
    rule = rule_for(chart_name, event)
    user_id = getattr(user, "pk", None)
    username = user.get_username() if hasattr(user, "get_username") else str(user)
    base = {"event": event, "rule": rule, "user_id": user_id, "username": username}
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
        return Decision(False, reasons=("an anonymous or inactive user may send nothing",),
                        **base)
    if not user.has_perm(SEND_PERMISSION):
        return Decision(False, reasons=(
            f"sending events needs the permission {SEND_PERMISSION!r}",
        ), **base)
    if rule is None:
        return Decision(True, **base)
    reasons = [
        f"{event!r} needs the permission {permission!r} ({rule.label})"
        for permission in rule.permissions
        if not user.has_perm(permission)
    ]
    if not reasons and rule.check is not None:
        try:
            verdict = check_named(rule.check)(user, execution, event, data)
        except Exception as exc:  # a broken check refuses (fails closed), and is logged
            logger.exception("EVENT_CHECKS[%r] failed for event %r", rule.check, event)
            verdict = f"it failed ({type(exc).__name__}), so the event is refused"
        if verdict is not True:
            why = verdict if isinstance(verdict, str) and verdict else "refused"
            reasons.append(f"{event!r}: the check {rule.check!r} said: {why}")
    return Decision(not reasons, reasons=tuple(reasons), **base)


def require(user: Any, execution: Any, event: str, data: Any = None) -> Decision:
    """:func:`decide`, raising :class:`EventNotPermitted` when it refuses."""
    decision = decide(user, execution, event, data)
    if not decision.allowed:
        raise EventNotPermitted(decision)
    return decision


def may_send_events(user: Any) -> bool:
    """Whether ``user`` may send events at all (:data:`SEND_PERMISSION`, an active user)."""
    return bool(
        getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", True)
        and user.has_perm(SEND_PERMISSION)
    )


def may_send(user: Any, execution: Any, event: str) -> bool:
    """Whether ``user`` may send ``event`` with no data (for pick lists: a check that needs
    the data is asked with ``None``)."""
    return decide(user, execution, event).allowed


# ---- settings and their system check ----------------------------------------------------------


def check_settings(configured: Mapping[str, Any]) -> list[CheckMessage]:
    problems: list[CheckMessage] = []
    checks = configured.get("EVENT_CHECKS", {})
    if not isinstance(checks, Mapping):
        problems.append(Error("STATECHARTS['EVENT_CHECKS'] must be a dict (name -> dotted "
                              "path of a callable).", id="statecharts.E040"))
        checks = {}
    for name, target in checks.items():
        where = f"STATECHARTS['EVENT_CHECKS'][{name!r}]"
        try:
            found = import_string(target) if isinstance(target, str) else target
        except ImportError as exc:
            problems.append(Error(f"{where} cannot be imported: {exc}", id="statecharts.E041"))
            continue
        if not callable(found):
            problems.append(Error(f"{where} is not callable.", id="statecharts.E041"))
    rules = configured.get("EVENT_PERMISSIONS", {})
    if not isinstance(rules, Mapping) or not all(isinstance(v, Mapping) for v in rules.values()):
        problems.append(Error(
            "STATECHARTS['EVENT_PERMISSIONS'] must be a dict: chart name (or '*') -> "
            "{event descriptor: rule}.", id="statecharts.E042",
        ))
        return problems
    for chart, events in rules.items():
        for descriptor, value in events.items():
            where = f"STATECHARTS['EVENT_PERMISSIONS'][{chart!r}][{descriptor!r}]"
            if not isinstance(descriptor, str) or not descriptor.strip():
                problems.append(Error(f"{where}: an event descriptor must be a non-empty "
                                      "string.", id="statecharts.E043"))
                continue
            try:
                rule = parse_rule(str(chart), descriptor, value)
            except ValueError as exc:
                problems.append(Error(f"{where}: {exc}", id="statecharts.E043"))
                continue
            if rule.check is not None and rule.check not in checks:
                problems.append(Error(
                    f"{where} names the check {rule.check!r}, which EVENT_CHECKS does not "
                    "register.",
                    hint="Register it by name: STATECHARTS['EVENT_CHECKS'] = "
                    f"{{{rule.check!r}: 'yourapp.rules.{rule.check}'}}.",
                    id="statecharts.E044",
                ))
    return problems


register_settings("statecharts.authorization", DEFAULTS, check_settings)
