from django.apps import AppConfig


class InvocationsConfig(AppConfig):
    name = "invocations"
    default_auto_field = "django.db.models.BigAutoField"
