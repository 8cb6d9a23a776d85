from django.apps import AppConfig
from django.db.models.signals import post_migrate

from statecharts.declaration import DECLARATION


class StatechartsConfig(AppConfig):
    name = "statecharts"
    verbose_name = "Statecharts"
    default_auto_field = "django.db.models.BigAutoField"
    # Its settings, checks, work source and contributions (statecharts.conf.Declaration).
    declaration = DECLARATION

    def ready(self) -> None:
        from statecharts import stepper
        from statecharts.declaration import install
        from statecharts.models.executions import install_stepper
        from statecharts.stepper.sweeper import ensure_schedule_after_migrate

        install(self.declaration)
        # Execution.objects.start / execution.send / .cancel are a facade over the stepper;
        # the models never import it (it imports them).
        install_stepper(stepper)
        post_migrate.connect(
            ensure_schedule_after_migrate, sender=self, dispatch_uid="statecharts.outbox_sweep"
        )
        # Telemetry (docs/telemetry.md): Django signals and logging, and the optional
        # OpenTelemetry bridge (STATECHARTS["OPENTELEMETRY"], the `opentelemetry` extra).
        from statecharts import telemetry
        from statecharts.conf import statecharts_settings

        telemetry.install()
        if statecharts_settings.OPENTELEMETRY:
            try:
                from statecharts.telemetry import otel as telemetry_otel
            except ImportError as exc:
                from django.core.exceptions import ImproperlyConfigured

                raise ImproperlyConfigured(
                    "STATECHARTS['OPENTELEMETRY'] is True but the OpenTelemetry API is not "
                    "installed: pip install django-statecharts[opentelemetry]"
                ) from exc
            telemetry_otel.install()

        # The hourly prune's django-q2 schedule (statecharts.operations.retention).
        from statecharts.operations import (
            health,  # noqa: F401  (its module registers this app's health figures)
            retention,
        )

        post_migrate.connect(
            retention.ensure_schedule_after_migrate,
            sender=self,
            dispatch_uid="statecharts.operations.retention",
        )

        # execution.available_events() (the API's field of it: the declaration).
        from statecharts.models.executions import install_available_events
        from statecharts.policies.availability import available_events

        install_available_events(available_events)
