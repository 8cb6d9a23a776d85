"""How other apps add to what ``statecharts`` shows, without ``statecharts`` importing them.

``statecharts`` never imports ``timers``, ``invocations`` or a project's own apps. An app that
has something to show about an execution registers it here from its ``AppConfig.ready()``,
the way ``django.contrib`` apps register their models with the admin::

    from statecharts import extensions

    class TimersConfig(AppConfig):
        def ready(self) -> None:
            extensions.register(
                extensions.Section(app=self.name, name="timers", read=read_timers, ...),
                extensions.Panel(app=self.name, section="timers", title="Timers", ...),
                extensions.ExecutionField(app=self.name, name="pending_timers", field=...),
                extensions.Endpoint(app=self.name, prefix="timers", viewset=..., ...),
            )

Four kinds of contribution, each read by one part of ``statecharts``:

- :class:`Section`: a part of an execution's read model (``statecharts.operations.inspection``),
read
  once per display and shown by every door: the admin's panels, the API, ``statechart show``.
- :class:`Panel`: a panel of the admin's execution page, drawing one section with a template.
- :class:`ExecutionField`: a field of the API's execution detail.
- :class:`Endpoint`: a viewset the API mounts under its own URL prefix (and its schema lists).

Guarantees: contributions are kept in registration order (panels by ``order``, then that);
a name is owned by the app that registered it first, and another app registering the same
name is an ``ImproperlyConfigured`` error (the same app registering it again replaces it, so
``ready()`` may run twice); a contribution of an app that is not in ``INSTALLED_APPS`` is
never used, so the same process can serve settings with and without that app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from statecharts.models import Execution


def _no_lines(value: Any) -> list[str]:
    return []


def _as_is(value: Any) -> Any:
    return value


def _no_marks(value: Any) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class Section:
    """A part of an execution's read model, contributed by ``app``.

    ``read(execution, now)`` returns the section's value (any object: the panel template and
    the two functions below are the app's own). It must only read. ``now`` is the injected
    clock's time for the whole display, so that "due in 8 s" agrees across sections. If it
    raises, the read model records the section as ``Unreadable`` with the reason instead of
    failing the page. ``document(value)`` is the section as JSON (``statechart show --json``,
    under the key ``name``); ``lines(value)`` its lines in ``statechart show``;
    ``invoking(value)`` the state ids the diagram marks as invoking (states with running
    invocations).
    """

    app: str
    name: str
    read: Callable[[Execution, datetime], Any]
    document: Callable[[Any], Any] = _as_is
    lines: Callable[[Any], list[str]] = _no_lines
    invoking: Callable[[Any], tuple[str, ...]] = _no_marks


@dataclass(frozen=True, slots=True)
class Panel:
    """A panel of the admin's execution page: ``template`` drawn with the value of the read
    model's section ``section`` (as ``value``; an ``Unreadable`` when it could not be read,
    which the page shows itself), the whole read model (``view``) and ``panel``.
    Panels appear by ``order``, then registration order, after the actions."""

    app: str
    section: str
    title: str
    template: str
    order: int = 100

    @property
    def name(self) -> str:
        return self.section


@dataclass(frozen=True, slots=True)
class ExecutionField:
    """A field of the API's execution detail (``GET /api/executions/{id}/``).

    ``field()`` makes a fresh DRF serializer field (read-only) each time the serializer is
    built. Its ``to_representation`` is given the execution; the read model of it is
    ``statecharts.api.serializers.execution_view(field, execution)``, computed once per
    execution for every field. Decorate the field's class with drf-spectacular's
    ``extend_schema_field`` to describe it in the OpenAPI document.
    """

    app: str
    name: str
    field: Callable[[], Any]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A DRF viewset the API mounts at ``<api prefix>/<prefix>/`` with DRF's router, its URL
    names ``statecharts_api:<basename>-list`` / ``-detail`` (and its actions').

    ``viewset()`` returns the class (called when the API's URLs are first loaded, so
    registering imports nothing from DRF). ``enum_names`` are drf-spectacular
    ``ENUM_NAME_OVERRIDES`` the endpoint needs (component name -> dotted path of choices).
    """

    app: str
    prefix: str
    basename: str
    viewset: Callable[[], Any]
    enum_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.prefix


Contribution = Section | Panel | ExecutionField | Endpoint


class Named(Protocol):
    """What a registry keeps: something an app registers under a name."""

    @property
    def app(self) -> str: ...

    @property
    def name(self) -> str: ...


C = TypeVar("C", bound=Named)


# The read model's own keys in ``statechart show --json``: a section may not take one.
RESERVED_SECTION_NAMES = frozenset(
    {
        "id", "session_id", "title", "status", "where", "chart", "business_key", "metadata",
        "configuration", "active_states", "datamodel", "donedata", "outcome",
        "failure_reason", "steps", "created", "updated", "ended", "erased", "unreadable",
        "history", "subject", "available_events",
    }
)  # fmt: skip


class Registry(Generic[C]):
    """Contributions of one kind, by name, in registration order (the module docstring's
    guarantees: a name is owned by the first app registering it; only installed apps' count).
    Other apps' registries of named things use it too (``statecharts.operations.reencryption``)."""

    def __init__(self, kind: str, reserved: frozenset[str] = frozenset()) -> None:
        self.kind = kind
        self.reserved = reserved
        self._items: dict[str, C] = {}

    def add(self, item: C) -> None:
        if item.name in self.reserved:
            raise ImproperlyConfigured(
                f"{item.app!r} registers the {self.kind} {item.name!r}: that name is the "
                "read model's own"
            )
        taken = self._items.get(item.name)
        if taken is not None and taken.app != item.app:
            raise ImproperlyConfigured(
                f"{item.app!r} registers the {self.kind} {item.name!r}, which {taken.app!r} "
                "registered already"
            )
        self._items[item.name] = item

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def __iter__(self) -> Iterator[C]:
        """The contributions of installed apps, in registration order."""
        return (item for item in list(self._items.values()) if apps.is_installed(item.app))

    def get(self, name: str) -> C | None:
        item = self._items.get(name)
        return item if item is not None and apps.is_installed(item.app) else None


sections: Registry[Section] = Registry("read-model section", RESERVED_SECTION_NAMES)
panels: Registry[Panel] = Registry("admin panel")
execution_fields: Registry[ExecutionField] = Registry("API execution field")
endpoints: Registry[Endpoint] = Registry("API endpoint")

_REGISTRIES: dict[type, Registry[Any]] = {
    Section: sections,
    Panel: panels,
    ExecutionField: execution_fields,
    Endpoint: endpoints,
}


def register(*items: Contribution) -> None:
    """Register contributions (from an ``AppConfig.ready()``)."""
    for item in items:
        registry = _REGISTRIES.get(type(item))
        if registry is None:
            raise TypeError(f"not a contribution: {item!r}")
        registry.add(item)


def ordered_panels() -> list[Panel]:
    """The admin panels of installed apps, by ``order`` then registration."""
    listed = list(panels)
    return sorted(listed, key=lambda panel: (panel.order, listed.index(panel)))
