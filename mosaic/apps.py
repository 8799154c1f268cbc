from django.apps import AppConfig


class MosaicConfig(AppConfig):
    name = "mosaic"

    def ready(self) -> None:
        from mosaic.edge import metrics  # noqa: F401  (counts sends and turns in every process, runners too)
