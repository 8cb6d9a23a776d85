"""The invocations app's settings: ``INVOKE_*`` keys of the one ``STATECHARTS`` dict.

    "INVOKE_RUNTIME_CHARTS": True,    # <invoke srcexpr> / <content expr> may define a child
                                      # chart at run time (from event data: it runs in the
                                      # sandbox); False refuses them with error.execution
    "INVOKE_CHART_MAX_BYTES": 1_000_000,  # a child chart's source
    "INVOKE_RUNTIME_CHARTS_PER_EXECUTION": 100,  # distinct run-time child charts per parent
"""

from __future__ import annotations

from statecharts.conf import register_settings, statecharts_settings

DEFAULTS = {
    "INVOKE_RUNTIME_CHARTS": True,
    "INVOKE_CHART_MAX_BYTES": 1_000_000,
    "INVOKE_RUNTIME_CHARTS_PER_EXECUTION": 100,
}

register_settings("invocations", DEFAULTS)

invocation_settings = statecharts_settings
