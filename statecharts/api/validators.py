"""What the API takes as a value given to a chart (start data, event data): JSON in the
datamodel's *tagged encoding* (docs/embedding.md, "Values coming from Python"): plain JSON,
plus objects with a ``"$sc"`` key for what JSON cannot hold. The tags that describe data are
accepted, each checked so that a malformed one is a 400 instead of an error inside the chart:

- ``{"$sc": "undefined"}``
- ``{"$sc": "number", "v": "NaN" | "Infinity" | "-Infinity"}``
- ``{"$sc": "bigint", "v": "<decimal integer>"}``
- ``{"$sc": "date", "v": <milliseconds since the epoch> | null}``
- ``{"$sc": "object", "v": {...}}`` (an object that really has a ``"$sc"`` key)

Tags that carry code or references (``function``, ``regexp``, ``xml``, ``ref``, ``map``,
``set``) are refused: over HTTP they would let a caller put code into an execution. Depth,
size, keys, numbers, surrogates and reserved event names: see ``statecharts.policies.validation``.

The API does not check these itself: its views build the stepper's requests
(``statecharts.stepper.requests``), the stepper's gate checks them, and the refusal table
(``statecharts.policies.refusals``, the API's column in ``statecharts.api.exceptions.refused``)
makes
a refusal a 400 by field.
"""

from __future__ import annotations

from statecharts.policies.validation import ACCEPTED_TAGS, TAG

__all__ = ["ACCEPTED_TAGS", "TAG"]
