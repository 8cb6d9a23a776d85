from django.apps import AppConfig


class InvocationsConfig(AppConfig):
    name = "invocations"
    verbose_name = "Invocations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import setting_changed
        from django.db.models.signals import post_migrate

        import invocations.conf  # noqa: F401  (registers the INVOKE_* settings)
        from invocations import children, performers, receivers, tasks
        from statecharts.core.host import SCXML_INVOKE_TYPES
        from statecharts.core.plan import InstructionKind
        from statecharts.signals import step_finished
        from statecharts.stepper import (
            register_input_guard,
            register_invoke_types,
            register_message_kind,
            register_performer,
        )

        kind = InstructionKind
        register_performer(kind.START_INVOCATION, performers.start_invocation)
        register_performer(kind.CANCEL_INVOCATION, performers.cancel_invocation)
        register_performer(kind.DELIVER_CHILD, performers.deliver_child)
        register_performer(kind.AUTOFORWARD, performers.autoforward)
        register_performer(kind.FINISH, performers.finish)
        # What this app can start: SCXML children, and the types of the handlers registered
        # in STATECHARTS["INVOKERS"]. (The core is told so each step; an <invoke> of any
        # other type is error.execution.)
        register_invoke_types(SCXML_INVOKE_TYPES, owner="invocations.scxml")
        register_handler_types()
        setting_changed.connect(on_settings, dispatch_uid="invocations.settings")
        register_message_kind(children.START, children.deliver_start)
        register_message_kind(children.CANCEL, children.deliver_cancel)
        register_message_kind(children.RUN_HANDLER, children.deliver_run)
        register_message_kind(children.CANCEL_HANDLER, children.deliver_handler_cancel)
        post_migrate.connect(
            tasks.ensure_schedule_after_migrate, sender=self, dispatch_uid="invocations.sweep"
        )
        step_finished.connect(receivers.note_answers, dispatch_uid="invocations.answers")
        register_input_guard(receivers.ignore_after_cancellation)

        from statecharts.work import register_work_source

        register_work_source(tasks.invocation_work)

        # The invocations panel, API endpoints and read-model section (statecharts.extensions).
        from invocations import surface

        surface.register()

        # Settled rows pruned, rows of erased executions erased (statecharts.operations.retention).
        from invocations import pruning

        pruning.register()

        # The rows `statechart reencrypt` rewrites (statecharts.operations.reencryption).
        from invocations import payloads

        payloads.register()

        # This app's figures in `statechart health` (statecharts.operations.health).
        from invocations import health

        health.register()


def register_handler_types() -> None:
    from invocations.handlers import handler_types
    from statecharts.stepper import register_invoke_types

    register_invoke_types(handler_types(), owner="invocations.handlers")


def on_settings(setting: str, **kwargs: object) -> None:
    if setting == "STATECHARTS":
        register_handler_types()
