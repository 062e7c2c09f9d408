"""GET /api/v1/schema, the OpenAPI document, and GET /api/v1/redoc, its reference page (docs/api-rules.md §17).

The document takes seconds to build and is megabytes long, so each process builds it once and keeps every
representation it has served (YAML or JSON, plain and gzip-compressed) with its ETag: a request is a
dictionary lookup, a conditional one a 304. Compression is done here, once, rather than by a middleware on
every request; the document holds no secret, so BREACH (a secret guessed through compressed sizes) does not
apply, and the bytes are the same for every client.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView
from rest_framework.request import Request


@dataclass(frozen=True)
class _Representation:
    body: bytes
    gzipped: bytes
    etag: str  # of the plain body; the compressed one is `etag` with a -gzip suffix inside the quotes

    def gzip_etag(self) -> str:
        return self.etag[:-1] + '-gzip"'


@functools.cache
def _document(urlconf: str) -> dict[str, Any]:
    """The document without a request: what `manage.py spectacular` writes. The served one adds only the
    absolute link to the FHIR CapabilityStatement (clinic.api.openapi), which needs the request's origin."""
    generator = spectacular_settings.DEFAULT_GENERATOR_CLASS(urlconf=urlconf)
    return generator.get_schema(request=None, public=True)


# A few origins per deployment (ALLOWED_HOSTS bounds them); the bound keeps a stream of Host headers from
# filling memory where ALLOWED_HOSTS is "*".
@functools.lru_cache(maxsize=8)
def _representation(media_type: str, origin: str, urlconf: str) -> _Representation:
    renderer = next(cls() for cls in SchemaView.renderer_classes if cls.media_type == media_type)
    document = {**_document(urlconf)}
    document["externalDocs"] = {"description": "FHIR R4 CapabilityStatement", "url": origin + "fhir/R4/metadata"}
    rendered = renderer.render(document, media_type, {})
    body = rendered.encode() if isinstance(rendered, str) else rendered
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    # mtime=0: the same bytes in every process, so the ETag of the compressed body is stable too.
    return _Representation(body=body, gzipped=gzip.compress(body, compresslevel=9, mtime=0), etag=etag)


# Building takes seconds of CPU: the threads of a worker wait for the one building rather than build too.
_BUILDING = threading.Lock()


def _cached(media_type: str, origin: str, urlconf: str) -> _Representation:
    with _BUILDING:
        return _representation(media_type, origin, urlconf)


def _accepts_gzip(request: Request) -> bool:
    """Accept-Encoding names gzip (or *) with a quality above 0 (RFC 9110 12.5.3)."""
    for item in request.headers.get("Accept-Encoding", "").split(","):
        coding, *parameters = [part.strip().lower() for part in item.split(";")]
        if coding in ("gzip", "x-gzip", "*"):
            quality = next((p[2:] for p in parameters if p.startswith("q=")), "1")
            try:
                return float(quality) > 0
            except ValueError:
                return False
    return False


def _matches(request: Request, etag: str) -> bool:
    """If-None-Match names this representation (weak comparison, RFC 9110 13.1.2)."""
    header = request.headers.get("If-None-Match", "")
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag in tags


class SchemaView(SpectacularAPIView):
    """YAML by default, JSON on `Accept: application/json` (or application/vnd.oai.openapi+json, or
    ?format=json); gzip on `Accept-Encoding: gzip`; 304 on a matching If-None-Match."""

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        renderer = request.accepted_renderer
        cached = _cached(renderer.media_type, request.build_absolute_uri("/"), settings.ROOT_URLCONF)
        compressed = _accepts_gzip(request)
        etag = cached.gzip_etag() if compressed else cached.etag
        if _matches(request, etag):
            response = HttpResponse(status=304)
        else:
            content_type = renderer.media_type + (f"; charset={renderer.charset}" if renderer.charset else "")
            response = HttpResponse(cached.gzipped if compressed else cached.body, content_type=content_type)
            response["Content-Length"] = str(len(response.content))
            response["Content-Disposition"] = f'inline; filename="{spectacular_settings.TITLE}.{renderer.format}"'
            if compressed:
                response["Content-Encoding"] = "gzip"
        response["ETag"] = etag
        # Caches may keep it, and must ask again (a cheap 304) before using it: a release changes it.
        response["Cache-Control"] = "public, no-cache"
        patch_vary_headers(response, ["Accept", "Accept-Encoding"])
        return response


class RedocView(SpectacularRedocView):
    """Redoc with its script served from this origin (drf-spectacular-sidecar) and no web fonts from elsewhere:
    the page works without internet access, like /api/v1/docs."""

    template_name = "clinic/redoc.html"
