from django.apps import AppConfig


class BrokerConfig(AppConfig):
    name = "broker"
    verbose_name = "Mosaic bus broker"

    def ready(self) -> None:
        from broker import checks  # noqa: F401  (registers the system checks)
