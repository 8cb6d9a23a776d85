"""A chart: an SCXML document stored once, identified by the sha256 of its source."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from django.db import IntegrityError, models, transaction

from statecharts.core.errors import Problem
from statecharts.core.model import Chart as CompiledChart
from statecharts.core.parse import decode_utf8
from statecharts.models.fields import PortableJSONField
from statecharts.runtime import check_source, compiled_chart, read_chart_file
from statecharts.versions import (
    FIRST_VERSION,
    NameTaken,
    NoNextVersion,
    VersionTaken,
    by_version,
    next_version,
)

STORED_DATAMODEL = "stored-datamodel"
"""The :attr:`Problem.code` of the warning that a chart is stored with another datamodel."""


def source_hash(source: str) -> str:
    """The chart identity: sha256 of the UTF-8 source (the core hashes the same bytes)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _as_text(source: str | bytes) -> str:
    """Bytes are decoded as UTF-8 (a BOM dropped); otherwise ChartError with the line:column
    of the first byte that is not."""
    return source if isinstance(source, str) else decode_utf8(source)


class ChartOrigin(models.TextChoices):
    LOADED = "loaded", "loaded"  # by a person or a program: takes part in names and versions
    INVOKED = "invoked", "invoked"  # stored for an <invoke>'s child: identified by hash only


class ChartManager(models.Manager["Chart"]):
    def load(
        self,
        source: str | bytes,
        *,
        name: str = "",
        version: str = "",
        resources: dict[str, str] | None = None,
        folder: str = "",
        origin: str = ChartOrigin.LOADED,
        new_version: bool = False,
    ) -> Chart:
        """Validate ``source`` and store it, or return the chart already stored with it.

        ``resources`` are the files it references, already read (``load_file`` reads them);
        ``folder`` is where it came from: without one, a relative reference (``src="lib.js"``)
        is refused, as nothing could resolve it. The row records the chart's effective
        datamodel (``DEFAULT_DATAMODEL`` for a chart that declares none); loading a stored
        source again returns the stored row, which wins. What was found worth saying (syntax
        errors in its code, a stored datamodel that differs from today's default) is in the
        returned row's ``load_warnings``; with ``EXPRESSION_SYNTAX = "error"`` a syntax error
        refuses the chart. Raises ``ChartError`` (every problem, with
        line:column) for an invalid document, and ``statecharts.exceptions.InvalidInput`` for a
        name or version its column cannot hold (checked by the stepper's gate, as a
        ``ChartLoadRequest``). A chart stored for an invocation
        (``origin=invoked``) never takes a name: its ``<scxml name>`` is not a version of
        anyone's chart.

        **Versions** (``statecharts.versions``): a chart with a name always has a version,
        unique with it (the first is ``"1"`` unless ``version`` says otherwise). A different
        source under a name already taken is a new version of that chart, which the caller
        must ask for with ``new_version=True`` (``NameTaken`` otherwise); without ``version``
        it gets the next whole number (``NoNextVersion`` when the latest's label has none),
        and a version the name already has is ``VersionTaken``. Loading a source already
        stored returns that chart whatever the name, version or flag.
        """
        text = _as_text(source)
        # The child of an <invoke> is part of a chart already stored: what only loading
        # refuses (checks added since) is not applied to it.
        compiled, warnings = check_source(
            text, resources, folder, load_checks=origin != ChartOrigin.INVOKED
        )
        if origin != ChartOrigin.INVOKED:
            # What it is stored under comes from outside: the stepper's gate checks it (the
            # models reach the stepper through its facade; they cannot import it).
            from statecharts.models.executions import _the_stepper

            _the_stepper().admit_chart(name or compiled.name or "", version)
        digest = compiled.source_hash
        existing = self.filter(content_hash=digest).first()
        if existing is None:
            invoked = origin == ChartOrigin.INVOKED
            name = "" if invoked else (name or compiled.name or "")
            version = "" if invoked else self.version_for(name, version, new_version)
            try:
                with transaction.atomic():
                    existing = self.create(
                        source=text,
                        content_hash=digest,
                        name=name,
                        version=version,
                        resources=resources or {},
                        folder=folder,
                        origin=origin,
                        datamodel=compiled.datamodel,
                    )
            except IntegrityError:
                found = self.filter(content_hash=digest).first()
                if found is None:
                    raise VersionTaken(
                        f"chart {name!r} version {version!r} was loaded by someone else just now"
                    ) from None
                existing = found  # loaded concurrently by someone else: theirs is ours
        if existing.datamodel != compiled.datamodel:
            # The stored row wins: its executions compile it as they always have.
            warnings.append(
                Problem(
                    1,
                    1,
                    f"this source is already stored as chart {existing.pk} with the "
                    f"{existing.datamodel!r} datamodel (the default when it was loaded); "
                    f"loaded today it would get {compiled.datamodel!r}. Declare "
                    f'datamodel="{compiled.datamodel}" on <scxml> to load it as that.',
                    "warning",
                    STORED_DATAMODEL,
                )
            )
        existing.load_warnings = warnings
        return existing

    def version_for(self, name: str, version: str, new_version: bool) -> str:
        """The version a new chart named ``name`` is stored with (the rules in ``load``):
        raises ``statecharts.versions.VersionError`` when it may not be stored. Forms call
        it to report the problem before saving."""
        if not name:
            return version
        taken = by_version(self.filter(origin=ChartOrigin.LOADED, name=name).only("version"))
        if not taken:
            return version or FIRST_VERSION
        latest = taken[0].version
        if not new_version:
            raise NameTaken(
                f"a chart named {name!r} exists already (latest version {latest!r}); loading "
                "a different source under its name makes a new version of it, which must be "
                "asked for explicitly (new_version=True; `statechart load --new-version`; in "
                "the admin and the API it needs the permission 'Can load a new version of an "
                "existing chart')"
            )
        if not version:
            following = next_version(latest)
            if following is None:
                raise NoNextVersion(
                    f"the latest version of {name!r} is {latest!r}, which does not start "
                    "with a number to count on from: give the new version's label"
                )
            version = following
        if any(chart.version == version for chart in taken):
            raise VersionTaken(f"chart {name!r} already has a version {version!r}")
        return version

    def latest_version(self, name: str) -> Chart | None:
        """The latest version of the charts named ``name`` (``statecharts.versions``), or
        None. (A lookup by what a person typed, id or name, is ``lookups.find_chart``; not
        named ``latest``, which is Django's ``latest(field)``.)"""
        found = by_version(self.filter(origin=ChartOrigin.LOADED, name=name))
        return found[0] if found else None

    def load_file(
        self, path: str | Path, *, name: str = "", version: str = "", new_version: bool = False
    ) -> Chart:
        """``load`` a chart file, with the files it references read now and stored with it
        (bounded: ``statecharts.runtime.MAX_RESOURCE_BYTES`` each, ``MAX_RESOURCES``), and its
        folder recorded for references computed at run time."""
        source, resources, folder = read_chart_file(path)
        return self.load(
            source,
            name=name,
            version=version,
            resources=resources,
            folder=folder,
            new_version=new_version,
        )


class Chart(models.Model):
    source = models.TextField(help_text="The SCXML document, as loaded.")
    content_hash = models.CharField(
        max_length=64, unique=True, editable=False, help_text="sha256 of the source."
    )
    name = models.CharField(max_length=200, blank=True)
    version = models.CharField(max_length=100, blank=True)
    resources = PortableJSONField(
        default=dict,
        blank=True,
        help_text="Files the chart references (URI -> text), read when it was loaded.",
    )
    folder = models.CharField(
        max_length=1000, blank=True, help_text="Where it was loaded from (run-time references)."
    )
    origin = models.CharField(
        max_length=10, choices=ChartOrigin.choices, default=ChartOrigin.LOADED
    )
    datamodel = models.CharField(
        max_length=20,
        default="null",
        editable=False,
        help_text="The chart's effective datamodel, fixed when it was loaded (its own "
        "datamodel attribute, or the DEFAULT_DATAMODEL setting of that day).",
    )
    created = models.DateTimeField(auto_now_add=True)

    objects = ChartManager()
    # What the last ``load`` that returned this row found worth saying (not stored).
    load_warnings: list[Problem]

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["name", "version"])]
        constraints = [
            # A loaded chart's name and version name one chart (statecharts.versions).
            models.UniqueConstraint(
                fields=["name", "version"],
                condition=models.Q(origin=ChartOrigin.LOADED) & ~models.Q(name=""),
                name="statecharts_chart_unique_version",
            )
        ]
        permissions = [
            ("add_chart_version", "Can load a new version of an existing chart"),
        ]

    def __str__(self) -> str:
        label = self.name or self.content_hash[:12]
        return f"{label} v{self.version}" if self.version else label

    def compiled(self) -> CompiledChart:
        """The compiled chart (cached per process), checked against the stored hash."""
        return compiled_chart(self)

    def identity(self) -> dict[str, Any]:
        return {"sha256": self.content_hash, "name": self.name, "version": self.version}
