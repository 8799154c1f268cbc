"""The OpenAPI schema and its docs page, whose refusals are JSON like every other answer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response


class JsonRefusals:
    """A view's own renderer (the schema's YAML, the docs page's HTML) is for its answer; a
    refusal — a method the view does not serve, say — is `{"error", "detail"}` JSON."""

    request: Any

    def handle_exception(self, exc: Exception) -> Response:
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)  # type: ignore[misc, no-any-return]


class SchemaView(JsonRefusals, SpectacularAPIView):
    pass


class DocsView(JsonRefusals, SpectacularSwaggerSplitView):
    """Swagger UI with no inline script or style, as the pages' Content-Security-Policy asks:
    the page loads its start-up script from this same address (`?script`), its own rules from
    a static file (`api_docs.html`)."""

    template_name = "api_docs.html"
