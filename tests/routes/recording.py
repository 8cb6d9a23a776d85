"""A route for the tests: it records what it is given, and fails when told to.

``Recorder.deliveries`` is per process; the tests clear it (the ``recorder`` fixture)."""

from __future__ import annotations

import socket
from typing import Any, ClassVar

from routes.base import (
    ROUTE_OK,
    Cancel,
    Discard,
    GiveUp,
    NotSent,
    Route,
    RouteAnswer,
    RouteConfig,
    RouteMessage,
    RouteVerdict,
)


class Recorder(Route):
    """``<send type="record" target="...">``: a target "bad..." is invalid, none is
    unreachable; OPTIONS ``fail`` makes every delivery raise. ``label`` may be overridden."""

    overridable: ClassVar[frozenset[str]] = frozenset({"label"})
    default_options: ClassVar[dict[str, Any]] = {"label": "plain", "fail": False}
    deliveries: ClassVar[list[tuple[dict[str, Any], RouteMessage, str]]] = []

    def check(self, config: RouteConfig, send_type: str, target: str | None) -> RouteAnswer:
        if target is None:
            return RouteAnswer(RouteVerdict.UNREACHABLE, "no target")
        if target.startswith("bad"):
            return RouteAnswer(RouteVerdict.INVALID, "a bad target")
        return ROUTE_OK

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        if config.get("fail"):
            raise ConnectionError("the far side is down")
        Recorder.deliveries.append((dict(config), message, key))


class AtomicRecorder(Route):
    """A route whose action is a write to the same database: done in ``deliver_atomic``,
    inside the ledger's transaction (here: recorded); ``deliver`` must then never run."""

    done: ClassVar[list[str]] = []

    def deliver_atomic(self, config: RouteConfig, message: RouteMessage, key: str) -> bool:
        AtomicRecorder.done.append(key)
        return True

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        raise AssertionError("deliver_atomic did it")


class FileRoute(Route):
    """The outside action is a line (the key) appended to OPTIONS["path"]: visible across
    processes, for the crash tests."""

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        with open(config["path"], "a", encoding="utf-8") as out:
            out.write(f"{key}\n")


class Flaky(Route):
    """Each call takes the next outcome from ``Flaky.script`` ("ok" once it is empty) and
    records the key it was given in ``Flaky.calls``:

    - "not_sent": ``NotSent`` (nothing left), "dns": ``NotSent`` raised from a
      ``socket.gaierror``, "refused": from a ``ConnectionRefusedError``;
    - "ambiguous": a plain ``TimeoutError`` (the far side may have acted);
    - "cancel" / "discard": the give-up answers; "ok": delivered."""

    script: ClassVar[list[str]] = []
    calls: ClassVar[list[str]] = []

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> GiveUp | None:
        Flaky.calls.append(key)
        outcome = Flaky.script.pop(0) if Flaky.script else "ok"
        if outcome == "not_sent":
            raise NotSent("the gateway refused the connection")
        if outcome == "dns":
            raise NotSent("no such host") from socket.gaierror(-2, "Name or service not known")
        if outcome == "refused":
            raise NotSent("refused") from ConnectionRefusedError(111, "Connection refused")
        if outcome == "ambiguous":
            raise TimeoutError("no answer after the request was written")
        if outcome == "cancel":
            return Cancel("the customer unsubscribed")
        if outcome == "discard":
            return Discard()
        return None


class NotSentOnceFileRoute(Route):
    """``FileRoute`` whose first attempt of each key is not sent: it notes the key in
    OPTIONS["tried"] and raises ``NotSent``; a later attempt appends the key to
    OPTIONS["path"]. Visible across processes, for the crash tests of retries."""

    def deliver(self, config: RouteConfig, message: RouteMessage, key: str) -> None:
        with open(config["tried"], "a+", encoding="utf-8") as tried:
            tried.seek(0)
            if key not in tried.read().split():
                tried.write(f"{key}\n")
                tried.flush()
                raise NotSent("the first attempt never leaves")
        with open(config["path"], "a", encoding="utf-8") as out:
            out.write(f"{key}\n")


ROUTES: dict[str, Any] = {
    "record": {
        "ROUTE": "tests.routes.recording.Recorder",
        "TYPES": ["record", "urn:example:record"],
        "OPTIONS": {"label": "settings"},
    }
}


def settings_with(**extra: Any) -> dict[str, Any]:
    """The test settings' STATECHARTS with the recorder registered (and ``extra`` keys)."""
    from django.conf import settings

    return {**settings.STATECHARTS, "ROUTES": ROUTES, **extra}


def retry_file_route_settings(path: str) -> dict[str, Any]:
    """The ``file`` route whose first attempt of each key is not sent, retried once 10 s
    later (``NotSentOnceFileRoute``; the keys tried in ``path`` + ".tried")."""
    from django.conf import settings

    routes = {
        "file": {
            "ROUTE": "tests.routes.recording.NotSentOnceFileRoute",
            "TYPES": ["file"],
            "OPTIONS": {"path": path, "tried": f"{path}.tried"},
            "RETRY": {"max_attempts": 2, "initial_seconds": 10},
        }
    }
    return {**settings.STATECHARTS, "ROUTES": routes}


def file_route_settings(path: str) -> dict[str, Any]:
    """The test settings' STATECHARTS with the ``file`` route appending keys to ``path``."""
    from django.conf import settings

    routes = {
        "file": {
            "ROUTE": "tests.routes.recording.FileRoute",
            "TYPES": ["file"],
            "OPTIONS": {"path": path},
        }
    }
    return {**settings.STATECHARTS, "ROUTES": routes}
