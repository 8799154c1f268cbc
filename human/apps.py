from django.apps import AppConfig


class HumanConfig(AppConfig):
    name = "human"
    verbose_name = "Mosaic bus human listener"

    def ready(self) -> None:
        # The OpenAPI schema names the human's credential, the session cookie.
        from human import schema  # noqa: F401
