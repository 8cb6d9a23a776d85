from django.apps import AppConfig


class StatechartsConfig(AppConfig):
    name = "statecharts"
    verbose_name = "Statecharts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from statecharts import checks  # noqa: F401  (registers the system checks)
