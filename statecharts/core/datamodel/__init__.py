"""Datamodels: ``null`` and ``ecmascript`` (sandboxed QuickJS)."""

from __future__ import annotations

from statecharts.core.datamodel.base import Datamodel, Limits, check_tagged, plain, tagged
from statecharts.core.datamodel.null import NullDatamodel


def create_datamodel(name: str, limits: Limits | None = None) -> Datamodel:
    if name == "ecmascript":
        from statecharts.core.datamodel.ecmascript import EcmascriptDatamodel

        return EcmascriptDatamodel(limits)
    if name == "null":
        return NullDatamodel()
    raise ValueError(f"unknown datamodel {name!r}")


__all__ = [
    "Datamodel",
    "Limits",
    "NullDatamodel",
    "check_tagged",
    "create_datamodel",
    "plain",
    "tagged",
]
