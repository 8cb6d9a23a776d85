from django.apps import AppConfig

from routes.declaration import DECLARATION


class RoutesConfig(AppConfig):
    name = "routes"
    verbose_name = "Routes"
    default_auto_field = "django.db.models.BigAutoField"
    # Its settings, their check, its performer and contributions.
    declaration = DECLARATION

    def ready(self) -> None:
        from django.core.signals import setting_changed
        from django.db.models.signals import post_migrate

        from routes import delivering, performers, telemetry
        from statecharts.declaration import install
        from statecharts.stepper import (
            register_message_kind,
            register_route_checker,
            register_start_check,
        )

        install(self.declaration)
        register_message_kind(delivering.KIND, delivering.deliver_message)
        # The route's answer about a target while the <send> executes (recorded per step),
        # and the refusal of scope overrides the routes do not allow, at start.
        register_route_checker(performers.check_route)
        register_start_check(performers.check_start)
        # The registered send types and the route timer queue follow the settings.
        performers.register()
        setting_changed.connect(_on_settings, dispatch_uid="routes.settings")
        # Deliveries left in doubt are reported (route.in_doubt) by an every-minute schedule.
        post_migrate.connect(
            telemetry.ensure_schedule_after_migrate, sender=self, dispatch_uid="routes.in_doubt"
        )


def _on_settings(setting: str, **kwargs: object) -> None:
    if setting in ("STATECHARTS", "INSTALLED_APPS"):
        from routes import performers, registry

        registry.reset()
        performers.register()
