"""JSON rendering that writes Decimal values as exact JSON numbers (1180.5), never through float; and the
renderers that let an endpoint answer a PDF (the printed invoice, the lab report)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import renderers
from rest_framework.request import Request

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


OCTET_STREAM = "application/octet-stream"


class PdfBytesRenderer(PdfRenderer):
    """The same PDF for `Accept: application/octet-stream`. Generated clients read bytes of that type
    (openapi-python-client knows JSON, text and octet-stream bodies only), so declaring it beside
    `application/pdf` lets them download a printed document with no generator override (issue 36)."""

    media_type = OCTET_STREAM
    format = "bin"


def printed_document_renderers(request: HttpRequest) -> list[renderers.BaseRenderer]:
    """The renderers of a view answering only a printed PDF: `application/pdf` by default, the same bytes as
    `application/octet-stream` when that is what the client accepts (`as_accepted` labels them so); a
    client accepting only JSON gets 406. OPTIONS describes the path in JSON, as on every other path."""
    if request.method == "OPTIONS":
        return [JSONRenderer()]
    return [PdfRenderer(), PdfBytesRenderer()]


def as_accepted(request: Request, response: HttpResponse) -> HttpResponse:
    """The printed document labelled with the media type the negotiation chose (the bytes are the same)."""
    if getattr(request, "accepted_media_type", None) == OCTET_STREAM:
        response["Content-Type"] = OCTET_STREAM
    return response


def pdf_responses(description: str) -> dict[Any, Any]:
    """The 200 of a printed document in the schema: `application/pdf`, and the same bytes as
    `application/octet-stream` for generated clients."""
    return {
        (200, PDF): OpenApiResponse(OpenApiTypes.BINARY, description=description),
        (200, OCTET_STREAM): OpenApiResponse(
            OpenApiTypes.BINARY, description=f"{description} The same bytes, for `Accept: application/octet-stream`."
        ),
    }
