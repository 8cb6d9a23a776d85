from django.apps import AppConfig

from invocations.declaration import DECLARATION


class InvocationsConfig(AppConfig):
    name = "invocations"
    verbose_name = "Invocations"
    default_auto_field = "django.db.models.BigAutoField"
    # Its settings, performers, checks, pending work and contributions.
    declaration = DECLARATION

    def ready(self) -> None:
        from django.core.signals import setting_changed
        from django.db.models.signals import post_migrate

        from invocations import children, receivers, tasks
        from statecharts.core.host import SCXML_INVOKE_TYPES
        from statecharts.declaration import install
        from statecharts.signals import step_finished
        from statecharts.stepper import (
            register_input_guard,
            register_invoke_types,
            register_message_kind,
        )

        install(self.declaration)
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


def register_handler_types() -> None:
    from invocations.handlers import handler_types
    from statecharts.stepper import register_invoke_types

    register_invoke_types(handler_types(), owner="invocations.handlers")


def on_settings(setting: str, **kwargs: object) -> None:
    if setting == "STATECHARTS":
        register_handler_types()
