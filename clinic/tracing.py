"""OpenTelemetry tracing, on only when the standard OTEL_* variables ask for it (docs/operations.md §1).

Set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and the web role exports a span
per request and the worker one per task, over OTLP/HTTP; OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
OTEL_TRACES_SAMPLER and the exporter's headers and timeouts are read by the SDK itself. OTEL_SDK_DISABLED=true
switches it off. Nothing is imported from OpenTelemetry unless it is on, so it costs nothing otherwise.

Spans are named by route name and task name, never by raw path or arguments: neither carries patient data.
An incoming `traceparent` header continues the caller's trace.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase

logger = logging.getLogger("clinic.tracing")
_tracer: Any = None
_provider: Any = None


def tracing_requested() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def tracing_configure() -> bool:
    """Install the tracer provider once per process when the environment asks for it; True when on."""
    global _tracer, _provider
    if _tracer is not None:
        return True
    if not tracing_requested():
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "clinic")})
    _provider = TracerProvider(resource=resource)
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(_provider)
    _tracer = trace.get_tracer("clinic")
    logger.info("OpenTelemetry tracing on")
    return True


def tracing_flush() -> None:
    if _provider is not None:
        _provider.force_flush()


class TracingMiddleware:
    """One server span per request, named after its route (set once the URL is resolved)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.on = tracing_configure()

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not self.on:
            return self.get_response(request)
        from opentelemetry import propagate, trace

        from clinic.api.request_metrics import route_label

        context = propagate.extract({name.lower(): value for name, value in request.headers.items()})
        with _tracer.start_as_current_span(
            f"HTTP {request.method}", context=context, kind=trace.SpanKind.SERVER
        ) as span:
            response = self.get_response(request)
            route = route_label(request)
            span.update_name(f"{request.method} {route}")
            span.set_attribute("http.request.method", request.method or "")
            span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                span.set_status(trace.Status(trace.StatusCode.ERROR))
            return response


def task_span_start(task_name: str) -> Any:
    """A span for one Celery task run (clinic.celery's signal handlers), or None when tracing is off."""
    if not tracing_configure():
        return None
    span = _tracer.start_span(f"task {task_name}")
    span.set_attribute("celery.task_name", task_name)
    return span
