"""JSON rendering that writes Decimal values as exact JSON numbers (1180.5), never through float; and the
renderer that lets an endpoint answer a PDF (the printed invoice, the lab report)."""

from __future__ import annotations

from typing import Any

from rest_framework import renderers

from clinic.lib.jsonbody import dumps
from clinic.lib.pdf import PDF


class JSONRenderer(renderers.JSONRenderer):
    media_type = "application/json"
    format = "json"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        return dumps(data)


class PdfRenderer(renderers.BaseRenderer):
    """Lets content negotiation accept `Accept: application/pdf`. The handlers answer with the rendered
    bytes themselves (an HttpResponse) and problems are always JSON (clinic.api.errors.ProblemResponse), so
    anything else reaching this renderer is a bug: it fails loudly rather than send an empty PDF."""

    media_type = PDF
    format = "pdf"
    charset = None
    render_style = "binary"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, bytes):
            return data
        raise TypeError(f"PdfRenderer renders bytes, not {type(data).__name__}.")
