from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Mosaic bus chat"

    def ready(self) -> None:
        from chat import checks, signals  # noqa: F401  (L9's check; signed-out sockets close)
        from chat.api import schema  # noqa: F401  (registers the schema's session scheme)
