from django.apps import AppConfig

from timers.declaration import DECLARATION


class TimersConfig(AppConfig):
    name = "timers"
    verbose_name = "Timers"
    default_auto_field = "django.db.models.BigAutoField"
    # Its settings, performers, checks, pending work and contributions.
    declaration = DECLARATION

    def ready(self) -> None:
        from statecharts.declaration import install
        from statecharts.signals import execution_finished
        from timers.scheduling import discard_when_finished

        install(self.declaration)
        execution_finished.connect(discard_when_finished, dispatch_uid="timers.discard")
