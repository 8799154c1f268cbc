from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Mosaic bus chat"

    def ready(self) -> None:
        from chat import signals  # noqa: F401  (closes a signed-out session's sockets)
        from chat.api import schema  # noqa: F401  (registers the schema's session scheme)
