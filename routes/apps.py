from django.apps import AppConfig


class RoutesConfig(AppConfig):
    name = "routes"
    verbose_name = "Routes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        import routes.checks  # noqa: F401  (registers the ROUTE* settings and their check)
        from routes import delivering, performers
        from statecharts.core.plan import InstructionKind
        from statecharts.stepper import (
            register_message_kind,
            register_performer,
            register_route_checker,
            register_start_check,
        )

        # Immediate route sends: an outbox message, delivered after the commit (and by the
        # outbox sweeper after a crash); delayed ones: the route timer queue.
        register_performer(InstructionKind.DELIVER_ROUTE, performers.deliver_route)
        register_message_kind(delivering.KIND, delivering.deliver_message)
        # The route's answer about a target while the <send> executes (recorded per step),
        # and the refusal of scope overrides the routes do not allow, at start.
        register_route_checker(performers.check_route)
        register_start_check(performers.check_start)
        # The registered send types and the route timer queue follow the settings.
        performers.register()
        setting_changed.connect(_on_settings, dispatch_uid="routes.settings")

        from routes import surface

        surface.register()

        # Settled ledger rows pruned, rows of erased executions erased
        # (statecharts.operations.retention).
        from routes import pruning

        pruning.register()

        # The Basic HTTP address does not travel with an export: an import mints a new one.
        from routes import addresses

        addresses.register()


def _on_settings(setting: str, **kwargs: object) -> None:
    if setting in ("STATECHARTS", "INSTALLED_APPS"):
        from routes import performers, registry

        registry.reset()
        performers.register()
