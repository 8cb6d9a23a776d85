from django.apps import AppConfig


class TimersConfig(AppConfig):
    name = "timers"
    verbose_name = "Timers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import timers.conf  # noqa: F401  (registers the TIMER_* settings)
        from statecharts.core.plan import InstructionKind
        from statecharts.signals import execution_finished
        from statecharts.stepper import register_performer
        from timers.scheduling import discard_when_finished

        # The timer queue: delayed sends become rows, <cancel> cancels them. Registering
        # SCHEDULE is what tells the core this deployment keeps delayed sends.
        register_performer(InstructionKind.SCHEDULE, "timers.scheduling.schedule")
        register_performer(InstructionKind.CANCEL_TIMERS, "timers.scheduling.cancel")
        execution_finished.connect(discard_when_finished, dispatch_uid="timers.discard")

        # Route timer rows naming a route not registered here (timers.routequeue).
        from django.core.checks import Tags
        from django.core.checks import register as register_check

        from timers.routequeue_checks import check_unregistered

        register_check(check_unregistered, Tags.database)

        # Due timers, for tools that run pending work themselves (statecharts.work).
        from statecharts.work import register_work_source
        from timers.firing import timer_work

        register_work_source(timer_work)

        # The timers panel, API endpoints and read-model section (statecharts.extensions).
        from timers import surface

        surface.register()

        # Settled timers pruned, timers of erased executions erased
        # (statecharts.operations.retention).
        from timers import pruning

        pruning.register()

        # The rows `statechart reencrypt` rewrites (statecharts.operations.reencryption).
        from timers import payloads

        payloads.register()

        # Pending timers travel with an exported execution (statecharts.operations.transfer).
        from timers import transfer

        transfer.register()

        # This app's figures in `statechart health` (statecharts.operations.health).
        from timers import health

        health.register()
