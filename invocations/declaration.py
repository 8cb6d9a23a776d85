"""What the ``invocations`` app declares (``InvocationsConfig.declaration``): its keys of
``STATECHARTS`` (docs/invocations.md, "Settings"), performers, checks, pending work,
telemetry events and contributions."""

from __future__ import annotations

from statecharts.conf import Declaration, Setting

SETTINGS = (
    Setting(
        "INVOKE_RUNTIME_CHARTS",
        True,
        "<invoke srcexpr> / <content expr> may define a child chart at run time",
    ),
    Setting("INVOKE_CHART_MAX_BYTES", 1_000_000, "a child chart's source"),
    Setting(
        "INVOKE_RUNTIME_CHARTS_PER_EXECUTION", 100, "distinct run-time child charts per parent"
    ),
    Setting(
        "INVOKERS",
        {"task": "invocations.handlers.TaskInvoker"},
        "<invoke type> -> dotted path of a handler class",
    ),
    Setting("TASKS", {}, "name -> dotted path: what the 'task' handler may call"),
    Setting("INVOKE_HANDLER_MAX_ATTEMPTS", 5, "a handler's start that raises, before it fails"),
    Setting("INVOKE_HANDLER_RETRY_SECONDS", 5, "retry backoff base: 5 s, 10 s, 20 s, ..."),
    Setting(
        "INVOKE_HANDLER_RETRY_COEFFICIENT", 2.0, "each retry's backoff is the last one's times this"
    ),
    Setting("INVOKE_HANDLER_RETRY_MAX_SECONDS", 3600, "the longest retry backoff"),
    Setting(
        "INVOKE_HANDLER_RETRY_JITTER",
        0.0,
        "a backoff moves by up to this fraction of itself (derived from the row's key)",
    ),
    Setting(
        "INVOKE_HANDLER_LEASE_SECONDS",
        3,
        "a running start's lease: a dead worker's start is started again this long after it",
    ),
    Setting(
        "INVOKE_HANDLER_START_TIMEOUT_SECONDS",
        120,
        "a start running longer loses its lease (a hung start is started again)",
    ),
    Setting("INVOKE_HANDLER_TIMEOUT_SECONDS", 600, "no answer by then: the invocation fails"),
    Setting(
        "INVOKE_HANDLER_QUEUE",
        "django_q",
        "where a handler's start runs: 'django_q', or 'inline' in the caller's process",
    ),
    Setting(
        "INVOKE_RETENTION_DAYS", 30, "settled invocation rows of finished parents are pruned after"
    ),
    Setting("INVOKE_MAX_DEPTH", 8, "a child chart's depth in its tree (the root is 0)"),
    Setting("INVOKE_MAX_CHILDREN", 50, "live child charts of one execution at once"),
    Setting("INVOKE_MAX_DESCENDANTS", 100, "live child charts in one tree at once"),
    Setting(
        "INVOKE_STARTS_PER_DELIVERY",
        20,
        "child charts of one tree one delivery call starts; the others wait for the sweeper",
    ),
)

DECLARATION = Declaration(
    app="invocations",
    settings=SETTINGS,
    settings_checks=("invocations.conf.check",),
    performers={
        "start_invocation": "invocations.performers.start_invocation",
        "cancel_invocation": "invocations.performers.cancel_invocation",
        "deliver_child": "invocations.performers.deliver_child",
        "autoforward": "invocations.performers.autoforward",
        "finish": "invocations.performers.finish",
    },
    work_sources=("invocations.tasks.invocation_work",),
    # Its telemetry events: invocation.* (docs/telemetry.md).
    telemetry_events=("invocations.telemetry.InvocationEvent",),
    contributions=(
        "invocations.surface.register",  # the invocations panel, API endpoints, read model
        "invocations.pruning.register",  # settled rows pruned, those of erased executions
        "invocations.payloads.register",  # the rows `statechart reencrypt` rewrites
        "invocations.health.register",  # this app's figures in `statechart health`
    ),
    step_models=True,
)
