from django.apps import AppConfig
from django.db.models.signals import post_migrate


class StatechartsConfig(AppConfig):
    name = "statecharts"
    verbose_name = "Statecharts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from statecharts import (
            checks,  # noqa: F401  (registers the system checks)
            stepper,
        )
        from statecharts.models.executions import install_stepper
        from statecharts.policies import (
            attribution,  # noqa: F401  (registers the CALLER_CONTEXT_* settings)
        )
        from statecharts.stepper.sweeper import ensure_schedule_after_migrate

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
        from statecharts.stepper.sweeper import outbox_work
        from statecharts.work import register_work_source

        register_work_source(outbox_work)

        # Retention and erasure of this app's rows (the other apps register theirs), and
        # the hourly prune's django-q2 schedule.
        from statecharts.operations import (
            health,  # noqa: F401  (registers this app's health figures)
            retention,
        )

        post_migrate.connect(
            retention.ensure_schedule_after_migrate,
            sender=self,
            dispatch_uid="statecharts.operations.retention",
        )

        # The rows `statechart reencrypt` rewrites (the other apps register theirs).
        from statecharts.operations import reencryption

        reencryption.register_own()

        # Per-event permissions and subjects (their settings and checks), and the API's
        # available_events and subject fields of an execution.
        from statecharts.models.executions import install_available_events
        from statecharts.policies import authorization, subjects  # noqa: F401
        from statecharts.policies.availability import available_events

        install_available_events(available_events)  # execution.available_events()
        from statecharts.api.availability import register as register_availability_fields

        register_availability_fields()
