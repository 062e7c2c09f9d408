"""A test-only URLconf: the real project URLs plus views that exercise the shared POST/PATCH plumbing
(idempotency, strict bodies, error handling) before any domain write endpoint exists.

Use with `@pytest.mark.urls("tests.plumbing_urls")`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.urls import path
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.serializers import StrictSerializer
from clinic.api.views import ClinicAPIView
from clinic.models import Department
from clinic.urls import urlpatterns as project_urlpatterns

# Tests set this to hold a request inside its handler (in-flight idempotency).
handler_gate: dict[str, threading.Event | None] = {"entered": None, "release": None}


@contextmanager
def held_in_handler() -> Iterator[tuple[threading.Event, threading.Event]]:
    """Hold POST /api/v1/test/departments inside its handler: `entered` is set once a request is there, and
    it goes on when `release` is set (always set on the way out)."""
    entered, release = threading.Event(), threading.Event()
    handler_gate.update(entered=entered, release=release)
    try:
        yield entered, release
    finally:
        release.set()
        handler_gate.update(entered=None, release=None)


class AddressSerializer(StrictSerializer):
    line1 = serializers.CharField(max_length=100)
    pincode = serializers.RegexField(r"^\d{6}$")


class DepartmentCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True)
    address = AddressSerializer(required=False)
    fee = serializers.DecimalField(max_digits=10, decimal_places=2, required=False)


class DepartmentCreateView(ClinicAPIView):
    """POST creates a Department (a real write), so replays can be checked against the database."""

    required_scopes = {"POST": "appointments:write", "PATCH": "appointments:write"}

    def post(self, request: Request) -> Response:
        body = DepartmentCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if handler_gate["entered"] is not None:
            handler_gate["entered"].set()
            assert handler_gate["release"] is not None
            handler_gate["release"].wait(10)
        department = Department.objects.create(
            name=body.validated_data["name"], description=body.validated_data.get("description", "")
        )
        fee = body.validated_data.get("fee")
        return Response(
            {"id": str(department.id), "name": department.name, "fee": fee},
            status=201,
            headers={"Location": f"/d/{department.id}"},
        )


class BoomView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}

    def get(self, request: Request) -> Any:
        raise RuntimeError("patient Jane Doe, national id 123412341234")  # must never reach the client


urlpatterns = [
    path("api/v1/test/departments", DepartmentCreateView.as_view()),
    path("api/v1/test/boom", BoomView.as_view()),
    *project_urlpatterns,
]
