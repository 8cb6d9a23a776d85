"""What the ``statecharts`` app declares (``StatechartsConfig.declaration``): its keys of
``STATECHARTS``, each with its default and one line (docs/durable-executions.md "Settings" and
the pages it links say more), and the checks of the configured dict; and :func:`install`, which
every app's ``ready()`` calls with its own declaration.

The keys of the shared policies (``statecharts.policies``: validation, attribution, payload
codecs, authorization, subjects) are this app's keys: they are declared here, and each
policy module keeps its own check.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from statecharts.conf import Declaration, Setting

# (statecharts.policies.codecs.JSON, .JSONCodec: the codec rows are written with by default)
JSON_CODEC = "json"

SETTINGS = (
    Setting("CLOCK", "django.utils.timezone.now", "the injected clock: () -> aware datetime"),
    Setting(
        "RESOLVER",
        "statecharts.core.resolve.refuse_all",
        "resolves src=... of stored charts; by default nothing is fetched",
    ),
    Setting(
        "DEFAULT_DATAMODEL",
        "ecmascript",
        "the datamodel of a chart that declares none, recorded on its row when loaded",
    ),
    Setting(
        "EXPRESSION_SYNTAX",
        "warning",
        "a syntax error in chart code at load: reported ('warning') or refused ('error')",
    ),
    # Step budgets (statecharts.core.budget): a step over one is rolled back and the execution
    # is halted (docs/durable-executions.md).
    Setting("ROUND_BUDGET", 10_000, "microstep rounds per macrostep"),
    Setting("SEND_BUDGET", 1_000, "events sent to itself within one step"),
    Setting("STEP_TIME_BUDGET_MS", 5_000, "wall clock for the whole step"),
    Setting("FOREACH_BUDGET", 100_000, "<foreach> iterations in one step, nested ones included"),
    Setting("EFFECT_BUDGET", 10_000, "effects one step may emit"),
    Setting("LOG_BYTES_BUDGET", 1_000_000, "bytes of <log> in one step"),
    Setting("DELAYED_SENDS_BUDGET", 1_000, "timers one step may schedule"),
    Setting("POSITION_BUDGET_BYTES", 1_000_000, "the stored position after a step"),
    Setting(
        "OUTPUT_BYTES_BUDGET",
        2_000_000,
        "bytes of JSON one step's effects carry (event data, log values, params, donedata)",
    ),
    Setting("STEP_CLOCK", "time.monotonic", "the clock the step time budget reads"),
    Setting("TIME_LIMIT_MS", 500, "per ECMAScript evaluation"),
    Setting("MEMORY_LIMIT_BYTES", 64 * 1024 * 1024, "the ECMAScript heap cap"),
    Setting("OUTBOX_BATCH", 1_000, "cross-execution deliveries per sweeper run"),
    Setting(
        "INLINE_DELIVERIES",
        20,
        "outbox messages delivered right after a step by its process; the rest: the sweeper",
    ),
    Setting(
        "OUTBOX_SWEEP_AGE_SECONDS", 5, "the sweeper delivers messages left pending this long"
    ),
    Setting(
        "PREPARED_STATEMENTS",
        True,
        "PostgreSQL: a step's statements are server-side prepared (False behind some poolers)",
    ),
    Setting(
        "PERFORMERS",
        {},
        "instruction kind -> dotted path of a performer, over the apps'; None disables one",
    ),
    # Retention (statecharts.operations.retention, docs/operations.md).
    Setting(
        "EXECUTION_RETENTION_DAYS", None, "finished executions are pruned after; None: kept"
    ),
    Setting("HISTORY_RETENTION_DAYS", None, "the history of finished executions; None: kept"),
    Setting(
        "OUTBOX_RETENTION_DAYS", 30, "delivered and undeliverable messages of finished senders"
    ),
    Setting("PRUNE_BATCH", 500, "rows (about) per pruning transaction"),
    Setting("PRUNE_TASK_SECONDS", 300, "how long the hourly django-q2 prune may run"),
    Setting("PRUNE_SCHEDULED", True, "False: the hourly task prunes nothing"),
    Setting(
        "HEALTH_THRESHOLDS", {}, "statechart health: figure -> {'warning': n, 'critical': n}"
    ),
    Setting("OPENTELEMETRY", False, "spans and metrics through OpenTelemetry (read at start)"),
    Setting(
        "MIGRATION_TRANSFORMS",
        {},
        "name -> dotted path of f(datamodel, context), a transform a migration plan may name",
    ),
    # Data from outside (statecharts.policies.validation).
    Setting("INPUT_MAX_DEPTH", 64, "arrays and objects nested in one value from outside"),
    Setting("INPUT_MAX_BYTES", 1_000_000, "one value from outside, as UTF-8 JSON text"),
    Setting(
        "RESERVED_EVENT_PREFIXES",
        ("error", "done"),
        "event names outsiders may not send: each reserves itself and every name under it",
    ),
    # Who did it (statecharts.policies.attribution).
    Setting(
        "CALLER_CONTEXT_HEADER",
        "X-Caller-Context",
        "the header a client sends its own caller context in (JSON object text)",
    ),
    Setting(
        "REQUEST_ID_HEADERS",
        ("X-Request-ID", "X-Correlation-ID"),
        "the headers a request id is read from, the first present wins",
    ),
    Setting("CALLER_CONTEXT_MAX_BYTES", 4_096, "a caller context given from outside, as JSON"),
    Setting("CALLER_CONTEXT_MAX_DEPTH", 8, "nesting of a caller context given from outside"),
    # Payload codecs (statecharts.policies.codecs, docs/payload-codecs.md).
    Setting(
        "PAYLOAD_CODECS",
        {JSON_CODEC: "statecharts.policies.codecs.JSONCodec"},
        "codec name -> dotted path of a codec class; a row names its codec",
    ),
    Setting(
        "PAYLOAD_CODEC",
        JSON_CODEC,
        "the codec new timer, outbox, history and invocation rows are written with",
    ),
    Setting(
        "PAYLOAD_KEYS", [], "EncryptingCodec: [{'id': ..., 'key': ...}], newest (writing) first"
    ),
    Setting(
        "STRICT_EVENTS",
        False,
        "an event sent through a door that no transition takes is refused (409), not consumed",
    ),
    # Permissions (statecharts.policies.authorization, docs/permissions-and-available-events.md).
    Setting("EVENT_PERMISSIONS", {}, "chart name ('*': every chart) -> {event descriptor: rule}"),
    Setting(
        "EVENT_CHECKS",
        {},
        "check name -> dotted path of (user, execution, event name, data) -> verdict",
    ),
    Setting("START_PERMISSIONS", {}, "chart name ('*': every chart) -> rule for starting one"),
    Setting("CANCEL_PERMISSIONS", {}, "chart name ('*': every chart) -> rule for cancelling"),
    Setting(
        "START_CHECKS", {}, "check name -> dotted path of (user, chart, data, subject) -> verdict"
    ),
    Setting(
        "CANCEL_CHECKS", {}, "check name -> dotted path of (user, execution, reason) -> verdict"
    ),
    # Subjects (statecharts.policies.subjects).
    Setting(
        "SUBJECT_MODELS",
        [],
        "models ('app_label.model') the API and the command may name as subjects",
    ),
)

DECLARATION = Declaration(
    app="statecharts",
    settings=SETTINGS,
    settings_checks=(
        "statecharts.checks.check_own_settings",
        "statecharts.policies.validation.check_settings",
        "statecharts.policies.codecs.check",
        "statecharts.policies.authorization.check_settings",
        "statecharts.policies.subjects.check_settings",
    ),
    system_checks=(
        ("statecharts.checks.check_settings", ()),
        ("statecharts.checks.check_one_database", ("database",)),
    ),
    work_sources=("statecharts.stepper.sweeper.outbox_work",),
    contributions=(
        # The rows `statechart reencrypt` rewrites (the other apps declare theirs).
        "statecharts.operations.reencryption.register_own",
        # The API's available_events and subject fields of an execution.
        "statecharts.api.availability.register",
    ),
    step_models=True,
)


def install(declaration: Declaration) -> None:
    """Register what ``declaration`` names (an app's ``ready()`` calls it once; calling it
    again replaces what it registered)."""
    from django.core.checks import register as register_check

    from statecharts.stepper import register_performer
    from statecharts.work import register_work_source

    for kind, performer in declaration.performers.items():
        register_performer(kind, performer)
    for path, tags in declaration.system_checks:
        register_check(import_string(path), *tags)
    for path in declaration.work_sources:
        register_work_source(import_string(path))
    for path in declaration.contributions:
        import_string(path)()
