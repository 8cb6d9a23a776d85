"""Finding a chart or an execution by what a person types: the one rule every door uses.

``manage.py statechart`` and the API's start (``"chart": "signup"``) look charts up here,
so a name means the same chart everywhere:

- CHART is a chart id or a chart name. A name means the latest version of the charts with
  that name (``statecharts.versions``: versions compared as dotted numbers, "1.10" is after
  "1.9"); it is refused, listing the candidates, when that is not one chart (charts loaded
  before versions were unique that the data migration could not order), and when it is the
  id of one chart and the name of another. ``NAME@VERSION`` names one version.
- EXECUTION is an execution id or a session id, refused when it is the id of one execution
  and the session id of another.

A refusal is a :class:`LookupProblem` whose message says what to type instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from statecharts.models import Chart, Execution
from statecharts.models.charts import ChartOrigin
from statecharts.versions import version_key

__all__ = ["Ambiguous", "LookupProblem", "NotFound", "find_chart", "find_execution", "version_key"]


class LookupProblem(LookupError):
    """No such chart or execution, or the reference means more than one."""


class NotFound(LookupProblem):
    """Nothing has that id or name."""


class Ambiguous(LookupProblem):
    """The reference means more than one row: the message lists the ids to choose from."""


def is_id(ref: str) -> bool:
    """Whether ``ref`` could be a primary key (ASCII digits that fit 64 bits)."""
    return ref.isascii() and ref.isdigit() and len(ref) <= 18


def _describe(charts: Iterable[Chart]) -> str:
    return ", ".join(
        f"{c.pk} ({'v' + c.version if c.version else 'no version'})"
        for c in sorted(charts, key=lambda c: c.pk)
    )


def find_chart(ref: str) -> Chart:
    """The chart whose id is ``ref``, the latest version of the charts named ``ref``, or
    with ``NAME@VERSION`` that version."""
    by_id = Chart.objects.filter(pk=int(ref)).first() if is_id(ref) else None
    loaded = Chart.objects.filter(origin=ChartOrigin.LOADED)
    name, at, version = ref.rpartition("@")
    if at and name and by_id is None and not loaded.filter(name=ref).exists():
        found = loaded.filter(name=name, version=version).first()
        if found is None:
            versions = ", ".join(
                sorted(loaded.filter(name=name).values_list("version", flat=True), key=version_key)
            )
            raise NotFound(
                f"chart {name!r} has no version {version!r}"
                + (f" (its versions: {versions})" if versions else "")
            )
        return found
    named = list(loaded.filter(name=ref))
    if by_id is None and not named:
        raise NotFound(f"no chart with id or name {ref!r}")
    if by_id is not None:
        if any(chart.pk != by_id.pk for chart in named):
            raise Ambiguous(
                f"{ref!r} is the id of chart {by_id.pk} and the name of chart(s) "
                f"{_describe(named)}: give the id of the one you mean"
            )
        return by_id
    if len(named) == 1:
        return named[0]
    if any(not chart.version for chart in named):
        raise Ambiguous(
            f"{len(named)} charts are named {ref!r} and not all of them have a version, so "
            f"none is the latest: give a chart id, one of {_describe(named)}"
        )
    named.sort(key=lambda chart: version_key(chart.version), reverse=True)
    if version_key(named[0].version) == version_key(named[1].version):
        tied = [c for c in named if version_key(c.version) == version_key(named[0].version)]
        raise Ambiguous(
            f"several charts named {ref!r} have the latest version {named[0].version!r}: "
            f"give a chart id, one of {_describe(tied)}"
        )
    return named[0]


def find_execution(ref: str) -> Execution:
    """The execution whose id or session id is ``ref``."""
    queryset = Execution.objects.select_related("chart")
    matches: dict[int, Execution] = {}
    if is_id(ref):
        matches.update((e.pk, e) for e in queryset.filter(pk=int(ref)))
    matches.update((e.pk, e) for e in queryset.filter(session_id=ref))
    if not matches:
        raise NotFound(f"no execution with id or session id {ref!r}")
    if len(matches) > 1:
        ids = ", ".join(str(pk) for pk in sorted(matches))
        raise Ambiguous(
            f"{ref!r} is the id of one execution and the session id of another "
            f"(executions {ids}): give the id of the one you mean"
        )
    return next(iter(matches.values()))
