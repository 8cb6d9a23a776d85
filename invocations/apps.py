from django.apps import AppConfig


class InvocationsConfig(AppConfig):
    name = "invocations"
    verbose_name = "Invocations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import invocations.conf  # noqa: F401  (registers the INVOKE_* settings)
        from invocations import children, performers, receivers
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
        # What this app can start: SCXML children. (Registered with the performers: the core
        # is told so each step, and an <invoke> of any other type is error.execution.)
        register_invoke_types(SCXML_INVOKE_TYPES)
        register_message_kind(children.START, children.deliver_start)
        register_message_kind(children.CANCEL, children.deliver_cancel)
        step_finished.connect(receivers.note_answers, dispatch_uid="invocations.answers")
        register_input_guard(receivers.ignore_after_cancellation)
