"""The project's settings: one namespaced dict, ``STATECHARTS``, read lazily.

Each app declares its keys once, in the :class:`Declaration` its ``AppConfig`` carries (the
``declaration`` attribute: ``statecharts/declaration.py``, ``timers/declaration.py``,
``invocations/declaration.py``, ``routes/declaration.py``): every key with its default and
one line saying what it is, and the functions ``manage.py check`` runs on the configured
dict. Nothing registers keys as a side effect of an import: the keys that exist are those of
the installed apps, read from their declarations the first time a setting is read (the way
Django REST framework's ``api_settings`` and django-q2's ``Conf`` read theirs), and read
again when ``INSTALLED_APPS`` changes.

Every read goes through ``django.conf.settings`` at the time of use, so ``override_settings``
works in tests. A value read is kept until ``STATECHARTS`` changes (Django's
``setting_changed`` signal, which ``override_settings`` and pytest-django's ``settings``
fixture send): a step reads about twenty keys, and each read would otherwise search the
declarations and ``settings`` again.

:class:`NamedClasses` is the one loader of "a class configured by name" (payload codecs,
timer deliveries): the instance is made once per process and name, and forgotten when
``STATECHARTS`` changes.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

SettingsCheck = Callable[[Mapping[str, Any]], list[CheckMessage]]


@dataclass(frozen=True, slots=True)
class Setting:
    """A key of ``STATECHARTS``: its default, and one line saying what it is (docs/ say
    more; tests/project/test_settings_documented.py holds the two together)."""

    name: str
    default: Any
    doc: str


@dataclass(frozen=True)
class Declaration:
    """What an app adds to the platform, in one place its ``AppConfig`` carries as
    ``declaration`` (docs/architecture.md, "How an app plugs in").

    Read lazily by this module (``settings``, ``settings_checks``) and installed by
    ``statecharts.declaration.install`` from the app's ``ready()`` (the rest). Every callable
    is named by its dotted path, so that declaring imports nothing but this module.
    """

    app: str  # the app label
    settings: tuple[Setting, ...] = ()
    # f(configured STATECHARTS dict) -> check messages, run by ``manage.py check``.
    settings_checks: tuple[str, ...] = ()
    # Instruction kind (statecharts.core.plan.InstructionKind value) -> performer.
    performers: Mapping[str, str] = field(default_factory=dict)
    # Django system checks: (dotted path, tags).
    system_checks: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # statecharts.work.WorkSource objects: its pending work, for tools that run it themselves.
    work_sources: tuple[str, ...] = ()
    # Functions of no argument that register what the app shows and keeps: admin panels and
    # API endpoints (statecharts.extensions), rows pruned (statecharts.operations.retention),
    # re-encrypted (.reencryption), exported (.transfer), health figures (.health).
    contributions: tuple[str, ...] = ()
    # Its rows are written in a step's transaction: routed to the steps' database
    # (statecharts.checks, statecharts.E010).
    step_models: bool = False
    # Its telemetry events (docs/telemetry.md): dotted paths of StrEnum classes whose
    # members are named "<family>.<outcome>" (statecharts.telemetry builds one Django signal
    # per member; the core's own TelemetryEvent is not extended).
    telemetry_events: tuple[str, ...] = ()

    def defaults(self) -> dict[str, Any]:
        return {setting.name: setting.default for setting in self.settings}


def declarations() -> list[Declaration]:
    """The declarations of the installed apps, in ``INSTALLED_APPS`` order."""
    from django.apps import apps

    found = (getattr(config, "declaration", None) for config in apps.get_app_configs())
    return [declaration for declaration in found if isinstance(declaration, Declaration)]


class _Declared:
    """The installed apps' keys, merged once (until ``INSTALLED_APPS`` changes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.defaults: dict[str, Any] | None = None

    def get(self) -> dict[str, Any]:
        defaults = self.defaults
        if defaults is None:
            defaults = {}
            owners: dict[str, str] = {}
            for declaration in declarations():
                for setting in declaration.settings:
                    owner = owners.setdefault(setting.name, declaration.app)
                    if owner != declaration.app:
                        raise ImproperlyConfigured(
                            f"STATECHARTS[{setting.name!r}] is declared by both {owner} and "
                            f"{declaration.app}"
                        )
                    defaults[setting.name] = setting.default
            with self.lock:
                self.defaults = defaults
        return defaults

    def forget(self) -> None:
        with self.lock:
            self.defaults = None


_declared = _Declared()


def all_defaults() -> dict[str, Any]:
    """Every key the installed apps declare, with its default."""
    return dict(_declared.get())


def default(name: str) -> Any:
    """The declared default of ``name`` (KeyError: no installed app declares it)."""
    return _declared.get()[name]


def numbers_out_of_range(
    configured: Mapping[str, Any],
    bounds: Mapping[str, tuple[float, float | None]],
    check_id: str,
) -> list[CheckMessage]:
    """A settings check's share for numeric settings: an ``Error`` (``check_id``) for each key
    of ``bounds`` (key -> (lowest, highest or None)) whose value (its declared default when
    not configured) is not a number in that range; a bool is not a number."""
    problems: list[CheckMessage] = []
    for key, (low, high) in bounds.items():
        value = configured.get(key, default(key))
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or value < low or (high is not None and value > high):
            upper = f" and at most {high}" if high is not None else ""
            problems.append(
                Error(
                    f"STATECHARTS['{key}'] must be a number of at least {low}{upper}.", id=check_id
                )
            )
    return problems


def settings_checks() -> list[SettingsCheck]:
    """The installed apps' checks of the configured dict (``manage.py check``)."""
    return [import_string(path) for d in declarations() for path in d.settings_checks]


class StatechartsSettings:
    """``statecharts_settings.KEY``: the configured value, else the declared default.

    A value read is kept as an instance attribute (so the next read of it is a plain
    attribute lookup, and ``__getattr__`` runs only on the first) until :meth:`forget`, which
    the ``setting_changed`` signal for ``STATECHARTS`` and ``INSTALLED_APPS`` calls.
    """

    def __getattr__(self, name: str) -> Any:
        defaults = _declared.get()
        if name not in defaults:
            raise AttributeError(f"unknown STATECHARTS setting {name!r}")
        configured: dict[str, Any] = getattr(settings, "STATECHARTS", {}) or {}
        value = configured.get(name, defaults[name])
        self.__dict__[name] = value
        return value

    def forget(self) -> None:
        """Drop every value kept: the next reads go to ``settings`` again."""
        self.__dict__.clear()

    def imported(self, name: str) -> Any:
        """The setting ``name``, imported if it is a dotted path (kept like the values)."""
        key = " imported " + name  # (not a key: no setting name has a space)
        found = self.__dict__.get(key)
        if found is None:
            value = getattr(self, name)
            found = self.__dict__[key] = import_string(value) if isinstance(value, str) else value
        return found

    def clock(self) -> Callable[[], datetime]:
        return self.imported("CLOCK")  # type: ignore[no-any-return]

    def now(self) -> datetime:
        return self.clock()()


statecharts_settings = StatechartsSettings()

Loaded = TypeVar("Loaded")


class NamedClasses(Generic[Loaded]):
    """Instances of the classes a ``STATECHARTS`` dict setting names (name -> dotted path),
    one per process and (name, path), forgotten when ``STATECHARTS`` changes.

    ``resolve(name)`` raises ``unavailable`` (a ``LookupError``) when this deployment has no
    such name, cannot import it, it is not a class with the ``method`` every such class has,
    or its constructor raises: a deployment fact, not a bug of the caller.
    """

    def __init__(
        self, setting: str, *, what: str, method: str, unavailable: type[LookupError]
    ) -> None:
        self.setting = setting
        self.what = what  # "payload codec", "delivery": the messages name it
        self.method = method
        self.unavailable = unavailable
        self._lock = threading.Lock()
        self._loaded: dict[tuple[str, str], Loaded] = {}
        setting_changed.connect(self._on_setting_changed, weak=False)

    def resolve(self, name: str) -> Loaded:
        named = getattr(statecharts_settings, self.setting)
        path = named.get(name) if isinstance(named, Mapping) else None
        if not isinstance(path, str):
            raise self.unavailable(f"{self.what} {name!r} is not in {self.setting} here")
        key = (name, path)
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        where = f"{self.what} {name!r} ({path})"
        try:
            cls = import_string(path)
        except ImportError as exc:
            raise self.unavailable(f"{where} cannot be loaded: {exc}") from exc
        if not inspect.isclass(cls) or not callable(getattr(cls, self.method, None)):
            raise self.unavailable(f"{where} is not a {self.what.split()[-1]} class")
        try:
            instance = cls()
        except self.unavailable:
            raise
        except Exception as exc:  # a bug in the class's code: fixable by a deploy
            raise self.unavailable(f"{where} failed to start: {exc}") from exc
        with self._lock:
            return self._loaded.setdefault(key, instance)

    def forget(self) -> None:
        with self._lock:
            self._loaded.clear()

    def _on_setting_changed(self, *, setting: str, **_signal: Any) -> None:
        if setting == "STATECHARTS":
            self.forget()


def _on_setting_changed(*, setting: str, **_signal: Any) -> None:
    if setting == "INSTALLED_APPS":
        _declared.forget()
    if setting in ("STATECHARTS", "INSTALLED_APPS"):
        statecharts_settings.forget()


setting_changed.connect(_on_setting_changed, dispatch_uid="statecharts.conf")
