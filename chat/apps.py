from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Mosaic bus chat"

    def ready(self) -> None:
        # L9's system check; ended sign-ins close their sockets; failed sign-ins count.
        from chat import checks, revocations, sign_in_throttle  # noqa: F401
