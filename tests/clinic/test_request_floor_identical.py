"""The cheaper request path (issue 21) answers byte for byte as the path it replaced: every response below is
requested twice, through the one-statement token lookup and the page-first pagination, then through the
toolkit's own bearer-token check (oauthlib, the ORM) and the COUNT-first pagination, and the two must have
the same status, the same body bytes (money as exact JSON numbers included) and the same headers."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import QuerySet
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from billing.models import Invoice
from clinic.api.authentication import ApiClientAuthentication
from clinic.api.pagination import HeaderPagination, added_field
from integrations.models import ApiClient
from patients.models import Patient

SCOPES = ["appointments:read", "patients:read", "billing:read"]
# Differ by design between two requests: the date, and the quota left.
VOLATILE = {"Date", "RateLimit-Remaining", "RateLimit-Reset"}


def _toolkit_bearer(self: ApiClientAuthentication, request: Any, token: str) -> Any:
    return self._toolkit(request)


def _count_first(self: HeaderPagination, queryset: Any) -> list[Any]:
    """The pagination before issue 21: the COUNT, then the page unless it lies past the end (a list of records
    carrying its snapshot in the links, as the paging rule has it since)."""
    if isinstance(queryset, QuerySet):
        self.bounded = added_field(queryset.model) is not None
    self.total = queryset.count() if isinstance(queryset, QuerySet) else len(queryset)
    if self.offset >= self.total:
        return []
    return list(queryset[self.offset : self.offset + self.per_page])


def _answer(client: Client, path: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    response = client.get(path, headers={"X-Request-ID": "identical-1", **headers})
    kept = {name: value for name, value in response.headers.items() if name not in VOLATILE}
    if "Link" in kept:  # the list's snapshot is the instant of its first page: it differs by design, as Date does
        kept["Link"] = re.sub(r"as_of=[^&>]+", "as_of=AS_OF", kept["Link"])
    return response.status_code, response.content, kept


@pytest.fixture
def demo(db: None) -> None:
    call_command("seed_demo", stdout=StringIO())


@pytest.fixture
def paths(demo: None) -> list[str]:
    patient = Patient.objects.order_by("patient_id").first()
    invoice = Invoice.objects.exclude(invoice_number=None).order_by("invoice_number").first()
    assert patient is not None
    assert invoice is not None
    return [
        "/api/v1/branches",
        "/api/v1/branches?per_page=1",
        "/api/v1/branches?per_page=1&page=2",
        "/api/v1/branches?page=9",
        "/api/v1/patients?search=Nobody+Byth",  # an empty first page: total 0 without the COUNT
        "/api/v1/appointments?date=2001-01-01",
        "/api/v1/doctors?per_page=3&page=2",
        "/api/v1/patients?per_page=7&page=3",
        "/api/v1/patients?page=2",
        f"/api/v1/patients/{patient.id}",
        "/api/v1/billing/invoices?per_page=5",
        f"/api/v1/billing/invoices/{invoice.id}",
        "/api/v1/billing/summary",
        "/api/v1/branches?access_token=abc",
        "/api/v1/nowhere",
    ]


def _both_ways(
    monkeypatch: pytest.MonkeyPatch, ask: Callable[[], tuple[int, bytes, dict[str, str]]]
) -> tuple[Any, Any]:
    now = ask()
    with monkeypatch.context() as before:
        before.setattr(ApiClientAuthentication, "_authenticate_bearer", _toolkit_bearer)
        before.setattr(HeaderPagination, "paginate", _count_first)
        then = ask()
    return now, then


def test_answers_with_a_valid_token_are_identical_byte_for_byte(
    client: Client, token_for: Callable[..., str], paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    token = token_for(SCOPES)
    for path in paths:
        now, then = _both_ways(
            monkeypatch, lambda path=path: _answer(client, path, {"Authorization": f"Bearer {token}"})
        )
        assert now == then, path
    for empty in paths[4:6]:
        status, body, headers = _answer(client, empty, {"Authorization": f"Bearer {token}"})
        assert (status, body, headers["X-Total-Count"]) == (200, b"[]", "0"), empty
    money = _answer(client, paths[11], {"Authorization": f"Bearer {token}"})[1]
    assert b'"grand_total":' in money
    assert b'"grand_total":"' not in money  # a JSON number, not a string


def test_refusals_of_every_kind_of_bad_token_are_identical(
    client: Client,
    api_client_factory: Callable[..., Any],
    issue_token: Callable[..., str],
    demo: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expired_client, inactive_client = api_client_factory(scopes=SCOPES), api_client_factory(scopes=SCOPES)
    expired, inactive = issue_token(expired_client), issue_token(inactive_client)
    get_access_token_model().objects.filter(application=expired_client).update(
        expires=timezone.now() - timedelta(seconds=1)
    )
    ApiClient.objects.filter(pk=inactive_client.pk).update(is_active=False)
    cases = {
        "unknown": {"Authorization": "Bearer not-a-token"},
        "expired": {"Authorization": f"Bearer {expired}"},
        "inactive": {"Authorization": f"Bearer {inactive}"},
        "padded": {"Authorization": f"Bearer  {inactive}"},
        "none": {},
        "basic": {"Authorization": "Basic eDp5"},
    }
    for name, headers in cases.items():
        now, then = _both_ways(monkeypatch, lambda headers=headers: _answer(client, "/api/v1/branches", headers))
        assert now == then, name
        assert now[0] == 401, (name, now)


def test_a_malformed_percent_escape_beside_a_valid_token_is_a_400_not_the_toolkits_500(
    client: Client, token_for: Callable[..., str], demo: None
) -> None:
    response = client.get("/api/v1/branches?x=%zz", headers={"Authorization": f"Bearer {token_for(SCOPES)}"})

    assert response.status_code == 400
    assert response.json()["code"] == "unknown_parameter"
