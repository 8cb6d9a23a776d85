from django.apps import AppConfig


class HostAppConfig(AppConfig):
    name = "tests.fields.hostapp"
    label = "fields_hostapp"
    default_auto_field = "django.db.models.BigAutoField"
