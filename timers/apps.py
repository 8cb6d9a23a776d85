from django.apps import AppConfig


class TimersConfig(AppConfig):
    name = "timers"
    verbose_name = "Timers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from statecharts.handlers import register_default_handler

        register_default_handler("send_delayed", "timers.scheduling.schedule")
        register_default_handler("cancel", "timers.scheduling.cancel")

        from statecharts.signals import execution_finished
        from timers.scheduling import discard_when_finished

        execution_finished.connect(discard_when_finished, dispatch_uid="timers.discard")

        # The timers panel, API endpoints and read-model section (statecharts.extensions).
        from timers import surface

        surface.register()
