"""PostgreSQL going away under a running request (docs/operations.md §1): 503 problem+json with Retry-After,
never a 500, nothing half-written, and the service answers normally once the database is reachable again,
without a restart. The connection runs through a TCP proxy the test cuts at a chosen SQL statement."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import close_old_connections, connection

from integrations.models import AuditLogEntry
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import bearer, own_database_address
from tests.operations.tcp_proxy import TcpProxy
from tests.patients.factories import post_patient

pytestmark = pytest.mark.django_db(transaction=True)

NEW_PATIENT: dict[str, Any] = {
    "first_name": "Meera",
    "last_name": "Nair",
    "date_of_birth": "1984-02-29",
    "gender": "female",
    "phone": "+919811122233",
}
UNAVAILABLE = {
    "type": "/api/v1/problems/service_unavailable",
    "title": "Service unavailable",
    "status": 503,
    "code": "service_unavailable",
    "detail": "The database is unavailable; retry shortly.",
}


@pytest.fixture
def proxied_database() -> Iterator[TcpProxy]:
    """The test's database connection, reconnected through a proxy; restored afterwards."""
    from clinic.api import audit_buffer

    audit_buffer._redis().delete(audit_buffer._key())  # rows other tests deferred name clients gone since
    settings_dict = connection.settings_dict
    original = (settings_dict["HOST"], settings_dict["PORT"])
    proxy = TcpProxy(own_database_address())
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    try:
        yield proxy
    finally:
        connection.close()
        settings_dict["HOST"], settings_dict["PORT"] = original
        proxy.close()


def _next_request() -> None:
    """What Django's handler does between two requests (request_started/finished), and its test client
    skips: drop a connection that broke, so the next request connects afresh."""
    close_old_connections()


def _problem(response: Any, request_id: str) -> dict[str, Any]:
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert response["Retry-After"] == "5"
    return {key: value for key, value in response.json().items() if key != "instance"} | {"request_id": request_id}


def test_a_read_whose_connection_breaks_under_its_query_is_503_and_the_next_one_is_served(
    client: Any, token_for: Any, proxied_database: TcpProxy
) -> None:
    BranchFactory(code="BLR")
    token = token_for(["appointments:read"])
    proxied_database.cut_when(b'FROM "clinic_branch"')  # after authentication has read the token

    broken = client.get("/api/v1/branches", **bearer(token), HTTP_X_REQUEST_ID="cut-1")

    assert proxied_database.cuts == 1
    assert _problem(broken, "cut-1") == UNAVAILABLE | {"request_id": "cut-1"}
    # The proxy accepts again (PostgreSQL is back): the next request reconnects by itself.
    proxied_database.is_cut.clear()
    _next_request()
    again = client.get("/api/v1/branches", **bearer(token))
    assert again.status_code == 200
    assert [b["code"] for b in again.json()] == ["BLR"]


def test_a_write_whose_connection_breaks_at_its_insert_is_503_and_leaves_nothing_behind(
    client: Any, token_for: Any, proxied_database: TcpProxy
) -> None:
    BranchFactory(code="BLR", is_head_office=True)
    token = token_for(["patients:write"])
    proxied_database.cut_when(b'INSERT INTO "patients_patient"')

    broken = post_patient(client, token, NEW_PATIENT)

    assert proxied_database.cuts == 1
    assert broken.status_code == 503
    assert broken.json()["code"] == "service_unavailable"
    assert broken["Retry-After"] == "5"
    proxied_database.is_cut.clear()
    _next_request()
    assert not Patient.objects.exists()
    retried = post_patient(client, token, NEW_PATIENT)
    assert retried.status_code == 201
    assert Patient.objects.count() == 1


def test_postgresql_refusing_connections_mid_session_is_503_for_every_request_then_audited(
    client: Any, token_for: Any, proxied_database: TcpProxy
) -> None:
    from integrations.tasks import flush_deferred_audit_rows

    token = token_for(["appointments:read"])
    assert client.get("/api/v1/branches", **bearer(token)).status_code == 200
    AuditLogEntry.objects.all().delete()
    proxied_database.cut()  # open connections dropped, new ones refused: a PostgreSQL restart

    responses = []
    for n in range(3):
        _next_request()
        responses.append(client.get("/api/v1/branches", **bearer(token), HTTP_X_REQUEST_ID=f"down-{n}"))

    assert [r.status_code for r in responses] == [503, 503, 503]
    assert {r["Retry-After"] for r in responses} == {"5"}
    proxied_database.is_cut.clear()
    _next_request()
    assert flush_deferred_audit_rows() == 3
    assert sorted(AuditLogEntry.objects.values_list("request_id", "status")) == [
        ("down-0", 503),
        ("down-1", 503),
        ("down-2", 503),
    ]


def test_a_deferred_audit_row_of_a_client_deleted_since_is_written_without_it_and_holds_nothing_back(
    api_client_factory: Any,
) -> None:
    from django.utils import timezone

    from clinic.api import audit_buffer
    from integrations.tasks import flush_deferred_audit_rows

    flush_deferred_audit_rows()
    AuditLogEntry.objects.all().delete()
    kept = api_client_factory()
    row = {
        "created_at": timezone.now(),
        "method": "GET",
        "path": "/api/v1/branches",
        "status": 503,
        "duration_ms": 1.0,
        "ip": "127.0.0.1",
        "route": "branch-list",
        "token_ref": "",
        "user_agent": "",
        "patient_ids": [],
        "actor": "",
    }
    audit_buffer.defer(row | {"request_id": "gone", "client_id": 987654})
    audit_buffer.defer(row | {"request_id": "kept", "client_id": kept.pk})

    assert flush_deferred_audit_rows() == 2

    assert sorted(AuditLogEntry.objects.values_list("request_id", "client_id")) == [("gone", None), ("kept", kept.pk)]
    assert flush_deferred_audit_rows() == 0


def test_an_admin_page_while_postgresql_is_unreachable_is_a_plain_503_not_a_500(
    client: Any, admin_user: Any, proxied_database: TcpProxy
) -> None:
    client.force_login(admin_user)
    proxied_database.cut()
    _next_request()

    response = client.get("/admin/")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.content == b"Service unavailable: the database is briefly unreachable; retry shortly.\n"
