"""Every admin list page opens, and the list pages of the large tables make the same number of queries
whatever the number of rows (no N+1: list_select_related and annotations do the joins)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.appointments.factories import AppointmentFactory, DoctorLeaveFactory, WeeklySessionFactory
from tests.factories import ApiClientFactory, DoctorFactory
from tests.patients.factories import PatientFactory, VisitFactory

pytestmark = pytest.mark.django_db

REGISTERED = sorted((model._meta.app_label, model._meta.model_name) for model in admin.site._registry)


@pytest.mark.parametrize(("app", "model"), REGISTERED, ids=[f"{a}.{m}" for a, m in REGISTERED])
def test_every_admin_list_page_opens(admin_client, app, model):
    response = admin_client.get(f"/admin/{app}/{model}/", follow=True)
    assert response.status_code == 200, response.content[:500]


def _audit_row() -> None:
    from django.utils import timezone

    from integrations.models import AuditLogEntry

    AuditLogEntry.objects.create(
        created_at=timezone.now(),
        client=ApiClientFactory(),
        method="GET",
        path="/api/v1/patients",
        status=200,
        duration_ms=1.0,
        request_id="r",
    )


ROWS: dict[str, Callable[[], Any]] = {
    "patients/patient": PatientFactory,
    "patients/visit": VisitFactory,
    "appointments/appointment": AppointmentFactory,
    "appointments/weeklysession": WeeklySessionFactory,
    "appointments/doctorleave": DoctorLeaveFactory,
    "clinic/doctor": DoctorFactory,
    "integrations/apiclient": ApiClientFactory,
    "integrations/auditlogentry": _audit_row,
}


def _queries(admin_client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize("page", sorted(ROWS))
def test_list_pages_make_the_same_number_of_queries_for_2_and_8_rows(admin_client, page):
    url = f"/admin/{page}/"
    make = ROWS[page]
    for _ in range(2):
        make()
    few = _queries(admin_client, url)
    for _ in range(6):
        make()
    assert _queries(admin_client, url) == few
