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

A door that names no user but holds a capability for one execution (the Basic HTTP
address) is :func:`decide_capability`: the events no rule names, none that a rule names.

The check reads the execution as it was before the step's lock is taken: a rule that depends
on the execution's state may see one step old data (rules on the chart, the event, the user
and the subject are exact).

**Starting and cancelling** have rules of their own, per chart name (``"*"``: every chart),
in the same forms, with checks registered by name in registries of their own (their
arguments differ)::

    STATECHARTS = {
        "START_PERMISSIONS": {"order": "shop.open_order", "*": "shop.add_order"},
        "CANCEL_PERMISSIONS": {"order": {"permissions": ["shop.change_order"],
                                         "check": "own_order"}},
        "START_CHECKS": {"branch_open": "shop.rules.branch_open"},   # (user, chart, data, subject)
        "CANCEL_CHECKS": {"own_order": "shop.rules.may_cancel"},     # (user, execution, reason)
    }

Every starter needs ``statecharts.add_execution`` and every canceller
``statecharts.change_execution`` (what the API and the admin ask); a chart no rule names
needs nothing more. ``stepper.start(..., user=)`` and ``stepper.cancel(..., user=)`` refuse
with :class:`StartNotPermitted` / :class:`CancelNotPermitted` (``PermissionDenied``s, like
:class:`EventNotPermitted` subclasses of :class:`NotPermitted`) and write nothing; the history
records the user with the start or cancel input (``input["sender"]``), as for a send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.core.checks import CheckMessage, Error
from django.core.exceptions import PermissionDenied
from django.utils.module_loading import import_string

from statecharts.conf import statecharts_settings
from statecharts.core.events import split_descriptor

logger = logging.getLogger("statecharts.authorization")


# What every sender needs, whatever the event: the permission the API and the admin ask
# of a send (a user= given from Python or the command needs it too).
SEND_PERMISSION = "statecharts.change_execution"
# What every starter needs (the API's and the admin's start ask it).
START_PERMISSION = "statecharts.add_execution"
# What every canceller needs (the API's and the admin's cancel ask it).
CANCEL_PERMISSION = "statecharts.change_execution"

EventCheck = Callable[[Any, Any, str, Any], "bool | str"]
StartCheck = Callable[[Any, Any, Any, Any], "bool | str"]
CancelCheck = Callable[[Any, Any, "str | None"], "bool | str"]


class Action(StrEnum):
    """What a door asks to do to an execution."""

    SEND = "send"
    START = "start"
    CANCEL = "cancel"


# The settings of each action: its rules, its check registry, and what every user needs.
RULES_SETTING = {
    Action.SEND: "EVENT_PERMISSIONS",
    Action.START: "START_PERMISSIONS",
    Action.CANCEL: "CANCEL_PERMISSIONS",
}
CHECKS_SETTING = {
    Action.SEND: "EVENT_CHECKS",
    Action.START: "START_CHECKS",
    Action.CANCEL: "CANCEL_CHECKS",
}
BASE_PERMISSION = {
    Action.SEND: SEND_PERMISSION,
    Action.START: START_PERMISSION,
    Action.CANCEL: CANCEL_PERMISSION,
}
_DOING = {
    Action.SEND: "sending events",
    Action.START: "starting executions",
    Action.CANCEL: "cancelling executions",
}


class NotPermitted(PermissionDenied):
    """This user may not do this (``decision.reasons`` say why); nothing was written."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__("; ".join(decision.reasons))


class EventNotPermitted(NotPermitted):
    """This user may not send this event to this execution (the reasons say why)."""


class StartNotPermitted(NotPermitted):
    """This user may not start an execution of this chart (the reasons say why)."""


class CancelNotPermitted(NotPermitted):
    """This user may not cancel this execution (the reasons say why)."""


_NOUN = {Action.SEND: "the event", Action.START: "the start", Action.CANCEL: "the cancel"}

_REFUSAL: dict[Action, type[NotPermitted]] = {
    Action.SEND: EventNotPermitted,
    Action.START: StartNotPermitted,
    Action.CANCEL: CancelNotPermitted,
}


@dataclass(frozen=True, slots=True)
class Rule:
    """What one settings entry asks for an event."""

    chart: str  # the settings key it came from ("*" or a chart name)
    descriptor: str | None  # the event key it came from (None: a start or cancel rule)
    permissions: tuple[str, ...] = ()
    check: str | None = None
    action: Action = Action.SEND

    @property
    def label(self) -> str:
        setting = RULES_SETTING[self.action]
        if self.descriptor is None:
            return f"{setting}[{self.chart!r}]"
        return f"{setting}[{self.chart!r}][{self.descriptor!r}]"


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether ``user`` may send ``event`` and why, and what the history records of it."""

    allowed: bool
    event: str  # the event's name ("" for a start or a cancel)
    rule: Rule | None  # None: no rule names this event (or chart)
    user_id: Any = None
    username: str = ""
    reasons: tuple[str, ...] = field(default=())
    action: Action = Action.SEND

    def record(self) -> dict[str, Any]:
        """The history's record of who sent the input, and under which rule."""
        recorded: dict[str, Any] = {"user_id": self.user_id, "username": self.username}
        if self.rule is not None:
            recorded["rule"] = self.rule.label
        return recorded


def parse_rule(
    chart: str, descriptor: str | None, value: Any, action: Action = Action.SEND
) -> Rule:
    """A settings value as a rule; ``ValueError`` says what is wrong with it."""
    checks = CHECKS_SETTING[action]
    if isinstance(value, str):
        return Rule(chart, descriptor, permissions=(_permission(value),), action=action)
    if isinstance(value, list | tuple):
        return Rule(
            chart, descriptor, permissions=tuple(_permission(p) for p in value), action=action
        )
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
            raise ValueError(f"'check' must be the name of an {checks} entry")
        if not permissions and check is None:
            raise ValueError("a rule needs 'permissions', a 'check', or both")
        return Rule(
            chart, descriptor, permissions=tuple(_permission(p) for p in permissions),
            check=check, action=action,
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


def check_named(name: str, action: Action = Action.SEND) -> Callable[..., Any]:
    """The callable the action's check registry (``EVENT_CHECKS``, ``START_CHECKS``,
    ``CANCEL_CHECKS``) names ``name`` (a system check vouches for it at start-up)."""
    setting = CHECKS_SETTING[action]
    checks: Mapping[str, Any] = getattr(statecharts_settings, setting) or {}
    if name not in checks:
        raise LookupError(f"{setting} has no check named {name!r}")
    target = checks[name]
    found: Callable[..., Any] = import_string(target) if isinstance(target, str) else target
    return found


def chart_rule(action: Action, chart_name: str | None) -> Rule | None:
    """The start or cancel rule the settings give for a chart named ``chart_name``: its own
    entry, else the ``"*"`` entry."""
    configured: Mapping[str, Any] = getattr(statecharts_settings, RULES_SETTING[action]) or {}
    for chart in (chart_name, "*"):
        if chart is not None and chart in configured:
            return parse_rule(chart, None, configured[chart], action)
    return None


def _judge(
    action: Action,
    user: Any,
    rule: Rule | None,
    what: str,
    call_check: Callable[[Callable[..., Any]], Any],
    event: str = "",
) -> Decision:
    """The one decision procedure: an active user, the action's base permission, the rule's
    permissions, then its check (fails closed)."""
    user_id = getattr(user, "pk", None)
    username = user.get_username() if hasattr(user, "get_username") else str(user)
    base = {"event": event, "rule": rule, "user_id": user_id, "username": username,
            "action": action}
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
        return Decision(False, reasons=(
            f"an anonymous or inactive user may {action.value} nothing",
        ), **base)
    needed = BASE_PERMISSION[action]
    if not user.has_perm(needed):
        return Decision(False, reasons=(
            f"{_DOING[action]} needs the permission {needed!r}",
        ), **base)
    if rule is None:
        return Decision(True, **base)
    reasons = [
        f"{what} needs the permission {permission!r} ({rule.label})"
        for permission in rule.permissions
        if not user.has_perm(permission)
    ]
    if not reasons and rule.check is not None:
        try:
            verdict = call_check(check_named(rule.check, action))
        except Exception as exc:  # a broken check refuses (fails closed), and is logged
            logger.exception("%s[%r] failed for %s", CHECKS_SETTING[action], rule.check, what)
            verdict = f"it failed ({type(exc).__name__}), so {_NOUN[action]} is refused"
        if verdict is not True:
            why = verdict if isinstance(verdict, str) and verdict else "refused"
            reasons.append(f"{what}: the check {rule.check!r} said: {why}")
    return Decision(not reasons, reasons=tuple(reasons), **base)


def decide(user: Any, execution: Any, event: str, data: Any = None) -> Decision:
    """Whether ``user`` may send ``event`` (with ``data``) to ``execution``; never raises
    for a refusal (see :func:`require`)."""
    chart_name = execution.chart.name if execution.chart_id is not None else None
    return _judge(
        Action.SEND,
        user,
        rule_for(chart_name, event),
        repr(event),
        lambda check: check(user, execution, event, data),
        event=event,
    )


def decide_capability(execution: Any, event: str, door: str) -> Decision:
    """Whether ``event`` may come in through ``door``, a door that names no user but holds a
    capability for this one execution (the Basic HTTP address, ``routes.inbound``).

    The capability stands for ``statecharts.change_execution`` on that execution, so an
    event no rule names is allowed. An event an ``EVENT_PERMISSIONS`` rule names is refused:
    the rule asks for a user's permissions (or a check about the user), and the door has no
    user to ask. Send such an event through a door that has one (the API, the admin).
    Never raises for a refusal."""
    chart_name = execution.chart.name if execution.chart_id is not None else None
    rule = rule_for(chart_name, event)
    base = {"event": event, "rule": rule, "username": door, "action": Action.SEND}
    if rule is None:
        return Decision(True, **base)
    return Decision(False, reasons=(
        f"{event!r} is protected by {rule.label}, and {door} names no user whose "
        f"permissions could allow it: send it through the API or the admin as a user who may",
    ), **base)


def require(user: Any, execution: Any, event: str, data: Any = None) -> Decision:
    """:func:`decide`, raising :class:`EventNotPermitted` when it refuses."""
    return _required(decide(user, execution, event, data))


def decide_start(user: Any, chart: Any, data: Any = None, subject: Any = None) -> Decision:
    """Whether ``user`` may start an execution of ``chart`` (with ``data``, about
    ``subject``): ``statecharts.add_execution``, then ``START_PERMISSIONS`` for the chart's
    name; never raises for a refusal (see :func:`require_start`)."""
    return _judge(
        Action.START,
        user,
        chart_rule(Action.START, chart.name or None),
        f"starting {chart.name or 'chart ' + str(chart.pk)!r}",
        lambda check: check(user, chart, data, subject),
    )


def require_start(user: Any, chart: Any, data: Any = None, subject: Any = None) -> Decision:
    """:func:`decide_start`, raising :class:`StartNotPermitted` when it refuses."""
    return _required(decide_start(user, chart, data, subject))


def decide_cancel(user: Any, execution: Any, reason: str | None = None) -> Decision:
    """Whether ``user`` may cancel ``execution`` (saying ``reason``):
    ``statecharts.change_execution``, then ``CANCEL_PERMISSIONS`` for its chart's name;
    never raises for a refusal (see :func:`require_cancel`)."""
    chart_name = execution.chart.name if execution.chart_id is not None else None
    return _judge(
        Action.CANCEL,
        user,
        chart_rule(Action.CANCEL, chart_name or None),
        f"cancelling execution {execution.pk}",
        lambda check: check(user, execution, reason),
    )


def require_cancel(user: Any, execution: Any, reason: str | None = None) -> Decision:
    """:func:`decide_cancel`, raising :class:`CancelNotPermitted` when it refuses."""
    return _required(decide_cancel(user, execution, reason))


def _required(decision: Decision) -> Decision:
    if not decision.allowed:
        raise _REFUSAL[decision.action](decision)
    return decision


def may_start(user: Any, chart: Any) -> bool:
    """Whether ``user`` may start ``chart`` with no data (for a page's start form: a check
    that needs the data is asked with ``None``)."""
    return decide_start(user, chart).allowed


def may_cancel(user: Any, execution: Any) -> bool:
    """Whether ``user`` may cancel ``execution`` (for a page's cancel button)."""
    return decide_cancel(user, execution).allowed


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


def _check_registry(
    configured: Mapping[str, Any], setting: str, not_a_dict: str, broken: str
) -> tuple[Mapping[str, Any], list[CheckMessage]]:
    """A check registry (name -> dotted path of a callable): itself, and its problems."""
    problems: list[CheckMessage] = []
    checks = configured.get(setting, {})
    if not isinstance(checks, Mapping):
        problems.append(Error(f"STATECHARTS[{setting!r}] must be a dict (name -> dotted "
                              "path of a callable).", id=not_a_dict))
        return {}, problems
    for name, target in checks.items():
        where = f"STATECHARTS[{setting!r}][{name!r}]"
        try:
            found = import_string(target) if isinstance(target, str) else target
        except ImportError as exc:
            problems.append(Error(f"{where} cannot be imported: {exc}", id=broken))
            continue
        if not callable(found):
            problems.append(Error(f"{where} is not callable.", id=broken))
    return checks, problems


def _unknown_check(where: str, rule: Rule, registry: str, check_id: str) -> Error:
    return Error(
        f"{where} names the check {rule.check!r}, which {registry} does not register.",
        hint=f"Register it by name: STATECHARTS[{registry!r}] = "
        f"{{{rule.check!r}: 'yourapp.rules.{rule.check}'}}.",
        id=check_id,
    )


def check_settings(configured: Mapping[str, Any]) -> list[CheckMessage]:
    checks, problems = _check_registry(
        configured, "EVENT_CHECKS", "statecharts.E040", "statecharts.E041"
    )
    problems += _check_chart_rules(configured, Action.START)
    problems += _check_chart_rules(configured, Action.CANCEL)
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
                problems.append(_unknown_check(where, rule, "EVENT_CHECKS", "statecharts.E044"))
    return problems


def _check_chart_rules(configured: Mapping[str, Any], action: Action) -> list[CheckMessage]:
    """``START_PERMISSIONS`` / ``CANCEL_PERMISSIONS`` and their check registry: E047 (the
    registry), E048 (a malformed rule), E049 (a check name the registry does not have)."""
    registry = CHECKS_SETTING[action]
    setting = RULES_SETTING[action]
    checks, problems = _check_registry(
        configured, registry, "statecharts.E047", "statecharts.E047"
    )
    rules = configured.get(setting, {})
    if not isinstance(rules, Mapping):
        problems.append(Error(
            f"STATECHARTS[{setting!r}] must be a dict: chart name (or '*') -> rule.",
            id="statecharts.E048",
        ))
        return problems
    for chart, value in rules.items():
        where = f"STATECHARTS[{setting!r}][{chart!r}]"
        if not isinstance(chart, str) or not chart.strip():
            problems.append(Error(f"{where}: a chart name must be a non-empty string.",
                                  id="statecharts.E048"))
            continue
        try:
            rule = parse_rule(chart, None, value, action)
        except ValueError as exc:
            problems.append(Error(f"{where}: {exc}", id="statecharts.E048"))
            continue
        if rule.check is not None and rule.check not in checks:
            problems.append(_unknown_check(where, rule, registry, "statecharts.E049"))
    return problems
