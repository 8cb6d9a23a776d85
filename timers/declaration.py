"""What the ``timers`` app declares (``TimersConfig.declaration``): its ``TIMER_*`` keys of
``STATECHARTS`` (docs/timers.md, "Settings"), performers, checks, pending work and
contributions."""

from __future__ import annotations

from statecharts.conf import Declaration, Setting

DEFAULT_DELIVERY = "default"

SETTINGS = (
    Setting("TIMER_BATCH", 100, "timers one firer claims at a time"),
    Setting("TIMER_FIRE_CHUNK", 20, "timers fired in one transaction (fewer commits per fire)"),
    Setting(
        "TIMER_ROUTE_FIRE_CHUNK",
        20,
        "route timers fired in one transaction (keys in doubt after a crash: at most this)",
    ),
    Setting(
        "TIMER_LEASE_SECONDS",
        3,
        "a claim's lease: a dead firer's timers are taken over this long after its last renewal",
    ),
    Setting(
        "TIMER_FIRE_TIMEOUT_SECONDS", 120, "per-fire timeout, written on the row when scheduled"
    ),
    Setting("TIMER_MAX_ATTEMPTS", 5, "attempts (raised or timed out) before a timer is failed"),
    Setting("TIMER_RETRY_SECONDS", 5, "retry backoff base: 5 s, 10 s, 20 s, ..."),
    Setting("TIMER_RETRY_COEFFICIENT", 2.0, "each retry's backoff is the last one's times this"),
    Setting("TIMER_RETRY_MAX_SECONDS", 3600, "the longest retry backoff"),
    Setting(
        "TIMER_RETRY_JITTER",
        0.0,
        "a backoff moves by up to this fraction of itself (derived from the row's key)",
    ),
    Setting(
        "TIMER_SNOOZE_SECONDS", 300, "an execution that cannot take a timer now: tried again then"
    ),
    Setting(
        "TIMER_UNDEPLOYED_MAX_SECONDS",
        86_400,
        "a timer whose delivery, codec or key is not deployed snoozes this long, then fails",
    ),
    Setting("TIMER_SNOOZE_MAX_SECONDS", 86_400, "the longest snooze a delivery may ask for"),
    Setting(
        "TIMER_OVERDUE_SECONDS",
        60,
        "a timer due longer ago than this is overdue: a catch-up, paced (timers.pacing)",
    ),
    Setting(
        "TIMER_CATCHUP_PER_SECOND",
        250.0,
        "overdue timers one firer process claims per second at most, live ones first (0: off)",
    ),
    Setting("TIMER_POLL_MS", 200, "how often a sweeper looks for due timers"),
    Setting("TIMER_SWEEP_SECONDS", 90, "how long one sweeper task lives (a schedule restarts it)"),
    Setting(
        "TIMER_SWEEP_AT_START",
        True,
        "a starting django-q2 cluster starts a sweeper (not 30 s later, by the schedule)",
    ),
    Setting(
        "TIMER_SWEEPER_FIRES",
        True,
        "a sweeper fires due timers itself, not only by enqueueing drains",
    ),
    Setting("TIMER_RETENTION_DAYS", 30, "statechart prune keeps settled rows this long"),
    Setting(
        "TIMER_DELIVERIES",
        {DEFAULT_DELIVERY: "timers.delivery.StepperDelivery"},
        "delivery name -> dotted path of a class (timers.delivery.Delivery), one per process",
    ),
    Setting("TIMER_DELIVERY", DEFAULT_DELIVERY, "the delivery new timer rows name"),
)

DECLARATION = Declaration(
    app="timers",
    settings=SETTINGS,
    settings_checks=("timers.conf.check",),
    # The timer queue: delayed sends become rows, <cancel> cancels them. Declaring SCHEDULE is
    # what tells the core this deployment keeps delayed sends.
    performers={
        "schedule": "timers.scheduling.schedule",
        "cancel_timers": "timers.scheduling.cancel",
    },
    # Route timer rows naming a route not registered here (timers.routequeue).
    system_checks=(("timers.routequeue_checks.check_unregistered", ("database",)),),
    work_sources=("timers.work.timer_work",),
    contributions=(
        "timers.surface.register",  # the timers panel, API endpoints, read-model section
        "timers.pruning.register",  # settled timers pruned, those of erased executions erased
        "timers.payloads.register",  # the rows `statechart reencrypt` rewrites
        "timers.transfer.register",  # pending timers travel with an exported execution
        "timers.health.register",  # this app's figures in `statechart health`
        "timers.dispatch.register",  # a starting django-q2 cluster starts a sweeper at once
    ),
    step_models=True,
)
