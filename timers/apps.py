from django.apps import AppConfig


class TimersConfig(AppConfig):
    name = "timers"
    default_auto_field = "django.db.models.BigAutoField"
