"""GET /api/v1/branches: the first endpoint, exercising the list conventions."""

from __future__ import annotations

import pytest

from tests.conftest import bearer
from tests.factories import BranchFactory

pytestmark = pytest.mark.django_db


def test_list_returns_bare_array_ordered_by_code_with_pagination_headers(client, token_for):
    BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")
    blr = BranchFactory(code="BLR", name="Bengaluru", gstin="29AABCC1234D1Z5", cancellation_window_minutes=120)
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
        "gstin": "29AABCC1234D1Z5",
        "time_zone": "Asia/Kolkata",
        "cancellation_window_minutes": 120,
        "city": "",
    }
