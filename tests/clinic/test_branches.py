"""GET /api/v1/branches: the first endpoint, exercising the list conventions."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from integrations.models import ApiClient
from tests.factories import BranchFactory
from tests.helpers import assert_field_errors, bearer

pytestmark = pytest.mark.django_db


def test_list_returns_bare_array_ordered_by_code_with_pagination_headers(client, token_for):
    BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")
    blr = BranchFactory(code="BLR", name="Bengaluru", gstin="29AABCC1234D1Z7", cancellation_window_minutes=120)
    response = client.get("/api/v1/branches", **bearer(token_for(["appointments:read"])))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["X-Total-Count"] == "2"
    body = response.json()
    assert [b["code"] for b in body] == ["BLR", "MUM"]
    assert body[0] == {
        "id": str(blr.id),
        "code": "BLR",
        "name": "Bengaluru",
        "state": "Karnataka",
        "gstin": "29AABCC1234D1Z7",
        "time_zone": "Asia/Kolkata",
        "cancellation_window_minutes": 120,
        "city": "",
    }


def assert_insufficient_scope(response, scope: str) -> None:
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "/api/v1/problems/insufficient_scope",
        "title": "Insufficient scope",
        "status": 403,
        "detail": f"This operation requires the scope {scope}.",
        "code": "insufficient_scope",
        "request_id": response["X-Request-ID"],
    }
    assert response["WWW-Authenticate"] == (f'Bearer realm="clinic-api", error="insufficient_scope", scope="{scope}"')


def test_a_client_restricted_to_branches_sees_only_those(client, token_for):
    blr = BranchFactory(code="BLR")
    BranchFactory(code="DEL", state="Delhi")
    mum = BranchFactory(code="MUM", state="Maharashtra")

    response = client.get("/api/v1/branches", **bearer(token_for(["appointments:read"], branches=[mum, blr])))

    assert response.status_code == 200
    assert [b["id"] for b in response.json()] == [str(blr.id), str(mum.id)]
    assert response["X-Total-Count"] == "2"


def test_a_restricted_client_pages_through_its_own_branches_only(client, token_for):
    allowed = [BranchFactory(code=code) for code in ("A1", "B1", "C1")]
    BranchFactory(code="B2")

    response = client.get(
        "/api/v1/branches?per_page=2&page=2", **bearer(token_for(["appointments:read"], branches=allowed))
    )

    assert [b["code"] for b in response.json()] == ["C1"]
    assert response["X-Total-Count"] == "3"


@pytest.mark.parametrize("state", ["Karnataka", "karnataka", "KARNATAKA", "kArNaTaKa"])
def test_state_filter_is_case_insensitive(client, token_for, state):
    BranchFactory(code="BLR", state="Karnataka")
    BranchFactory(code="MYS", state="Karnataka")
    BranchFactory(code="MUM", state="Maharashtra")

    response = client.get(f"/api/v1/branches?state={state}", **bearer(token_for(["appointments:read"])))

    assert response.status_code == 200
    assert [b["code"] for b in response.json()] == ["BLR", "MYS"]
    assert response["X-Total-Count"] == "2"


@pytest.mark.parametrize("state", ["IN-KA", "in-ka", "29", "Karnataka ", "  karnataka"])
def test_state_filter_takes_the_iso_and_gst_codes_too(client, token_for, state):
    BranchFactory(code="BLR", state="Karnataka")
    BranchFactory(code="MUM", state="Maharashtra")

    response = client.get("/api/v1/branches", {"state": state}, **bearer(token_for(["appointments:read"])))

    assert response.status_code == 200
    assert [b["code"] for b in response.json()] == ["BLR"]


def test_state_filter_of_a_state_without_branches_is_empty(client, token_for):
    BranchFactory(code="BLR", state="Karnataka")

    response = client.get("/api/v1/branches?state=Kerala", **bearer(token_for(["appointments:read"])))

    assert response.json() == []
    assert response["X-Total-Count"] == "0"


@pytest.mark.parametrize("state", ["Karna", "Karnatka", "97", "IN-XX"])
def test_state_filter_naming_no_state_is_a_400(client, token_for, state):
    BranchFactory(code="BLR", state="Karnataka")

    response = client.get(f"/api/v1/branches?state={state}", **bearer(token_for(["appointments:read"])))

    assert_field_errors(
        response,
        [
            {
                "field": "state",
                "code": "invalid_choice",
                "message": "Not an Indian state or union territory. Send its name (Karnataka), its ISO 3166-2:IN "
                "code (IN-KA) or its two-digit GST state code (29).",
            }
        ],
    )


def test_state_filter_applies_within_a_restricted_client(client, token_for):
    blr = BranchFactory(code="BLR", state="Karnataka")
    BranchFactory(code="MYS", state="Karnataka")
    mum = BranchFactory(code="MUM", state="Maharashtra")

    response = client.get(
        "/api/v1/branches?state=karnataka", **bearer(token_for(["appointments:read"], branches=[blr, mum]))
    )

    assert [b["code"] for b in response.json()] == ["BLR"]
    assert response["X-Total-Count"] == "1"


@pytest.mark.parametrize(
    "scopes", [["patients:read"], ["appointments:write"], ["billing:read", "patients:write"]], ids=" ".join
)
def test_a_token_without_appointments_read_is_403_and_shows_no_branch(client, token_for, scopes):
    BranchFactory(code="BLR", name="Bengaluru")

    response = client.get("/api/v1/branches", **bearer(token_for(scopes)))

    assert_insufficient_scope(response, "appointments:read")
    assert b"BLR" not in response.content
    assert b"Bengaluru" not in response.content
    assert not response.has_header("X-Total-Count")


def test_without_a_token_the_list_is_401(client):
    BranchFactory(code="BLR")

    response = client.get("/api/v1/branches")

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith('Bearer realm="clinic-api"')
    assert b"BLR" not in response.content


def test_inactive_branches_are_hidden(client, token_for):
    BranchFactory(code="BLR")
    closed = BranchFactory(code="OLD", is_active=False)

    everyone = client.get("/api/v1/branches", **bearer(token_for(["appointments:read"])))
    restricted = client.get("/api/v1/branches", **bearer(token_for(["appointments:read"], branches=[closed])))

    assert [b["code"] for b in everyone.json()] == ["BLR"]
    assert everyone["X-Total-Count"] == "1"
    assert restricted.json() == []
    assert restricted["X-Total-Count"] == "0"


def test_the_number_of_queries_does_not_grow_with_the_number_of_branches(client, token_for):
    token = token_for(["appointments:read"], branches=[BranchFactory(code="A0")])
    client.get("/api/v1/branches", **bearer(token))  # warm caches of the first request

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/v1/branches", **bearer(token)).status_code == 200
        return len(queries)

    few = count()
    ApiClient.objects.get().branches.add(*[BranchFactory(code=f"A{n}") for n in range(1, 8)])
    assert client.get("/api/v1/branches", **bearer(token))["X-Total-Count"] == "8"
    assert count() == few
