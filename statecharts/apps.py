from django.apps import AppConfig


class StatechartsConfig(AppConfig):
    name = "statecharts"
    default_auto_field = "django.db.models.BigAutoField"
