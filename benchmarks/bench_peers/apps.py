from django.apps import AppConfig


class BenchPeersConfig(AppConfig):
    name = "bench_peers"
    label = "bench_peers"
    default_auto_field = "django.db.models.BigAutoField"
