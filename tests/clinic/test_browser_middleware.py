"""Django's browser middleware is passed through on the API (clinic/browser_middleware.py): every API answer
below is requested through our chain and through Django's own classes, and the two must agree on status,
headers and body; the admin still gets its sessions, CSRF checks and logged-in user."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, override_settings

from clinic import browser_middleware
from patients.models import Patient
from tests.helpers import basic_auth

SCOPES = ["appointments:read", "patients:read", "patients:write", "billing:read", "emr:read"]
# Differ by design between two requests: the date, the quota left, and a new token's value.
VOLATILE_HEADERS = {"Date", "RateLimit-Remaining", "RateLimit-Reset"}

STOCK = {
    "clinic.browser_middleware.SessionMiddleware": "django.contrib.sessions.middleware.SessionMiddleware",
    "clinic.browser_middleware.CsrfViewMiddleware": "django.middleware.csrf.CsrfViewMiddleware",
    "clinic.browser_middleware.AuthenticationMiddleware": "django.contrib.auth.middleware.AuthenticationMiddleware",
    "clinic.browser_middleware.OTPMiddleware": "django_otp.middleware.OTPMiddleware",
    "clinic.browser_middleware.MessageMiddleware": "django.contrib.messages.middleware.MessageMiddleware",
}


def _stock_middleware() -> list[str]:
    return [STOCK.get(path, path) for path in settings.MIDDLEWARE]


Answer = tuple[int, dict[str, str], Any]


def _answer(response: Any) -> Answer:
    headers = {name: value for name, value in response.headers.items() if name not in VOLATILE_HEADERS}
    body: Any = response.content
    if response.headers.get("Content-Type", "").startswith("application/json") and b"access_token" in body:
        body = {key: value for key, value in response.json().items() if key != "access_token"}
    return response.status_code, headers, body


def _both_chains(ask: Callable[[Client], Any]) -> tuple[Answer, Answer]:
    ours = _answer(ask(Client()))
    with override_settings(MIDDLEWARE=_stock_middleware()):
        stock = _answer(ask(Client()))  # a new client: its handler builds the chain from the settings now
    return ours, stock


@pytest.fixture
def demo(db: None) -> None:
    call_command("seed_demo", stdout=StringIO())


def test_the_settings_name_every_browser_middleware_by_its_pass_through_subclass() -> None:
    for ours, stock in STOCK.items():
        assert ours in settings.MIDDLEWARE
        assert stock not in settings.MIDDLEWARE
        module, _, name = stock.rpartition(".")
        library_class = getattr(__import__(module, fromlist=[name]), name)
        our_class = getattr(browser_middleware, ours.rpartition(".")[2])
        assert issubclass(our_class, library_class)
        # Django calls these hooks apart from __call__: a library class that has one needs its own override.
        for hook in ("process_view", "process_exception", "process_template_response"):
            if hasattr(library_class, hook):
                assert hook in vars(our_class), (ours, hook)


def test_api_answers_are_the_same_as_through_djangos_own_chain(
    demo: None, api_client_factory: Callable[..., Any], issue_token: Callable[..., str]
) -> None:
    api_client = api_client_factory(scopes=SCOPES)
    token = issue_token(api_client)
    bearer = {"Authorization": f"Bearer {token}", "X-Request-ID": "chains-1"}
    patient = Patient.objects.order_by("patient_id").first()
    assert patient is not None
    staff = get_user_model().objects.create_superuser("chains-admin", "chains@example.com", "pw-chains-1")
    logged_in = Client()
    logged_in.force_login(staff)
    cookies = {
        "Cookie": f"sessionid={logged_in.cookies['sessionid'].value}; csrftoken=abcdefghijklmnopqrstuvwxyz012345",
        "X-Request-ID": "chains-1",
    }
    asks: dict[str, Callable[[Client], Any]] = {
        "floor": lambda c: c.get("/api/v1/branches", headers=bearer),
        "patient": lambda c: c.get(f"/api/v1/patients/{patient.id}", headers=bearer),
        "not found": lambda c: c.get("/api/v1/nowhere", headers=bearer),
        "method": lambda c: c.delete("/api/v1/branches", headers=bearer),
        "fhir": lambda c: c.get(f"/fhir/R4/Patient/{patient.id}", headers=bearer),
        "fhir metadata": lambda c: c.get("/fhir/R4/metadata", headers={"X-Request-ID": "chains-1"}),
        # An admin's session cookie is no API credential on either chain, and no CSRF check applies.
        "session cookie": lambda c: c.get("/api/v1/branches", headers=cookies),
        "session cookie write": lambda c: c.post(
            "/api/v1/patients", {"first_name": "A"}, content_type="application/json", headers=cookies
        ),
        "invalid body": lambda c: c.post("/api/v1/patients", b"{", content_type="application/json", headers=bearer),
        "token": lambda c: c.post(
            "/api/v1/auth/token",
            {"grant_type": "client_credentials"},
            HTTP_X_REQUEST_ID="chains-1",
            **basic_auth(api_client.client_id, api_client.secret),
        ),
        "token refused": lambda c: c.post(
            "/api/v1/auth/token",
            {"grant_type": "client_credentials"},
            HTTP_X_REQUEST_ID="chains-1",
            **basic_auth(api_client.client_id, "wrong"),
        ),
    }
    for name, ask in asks.items():
        ours, stock = _both_chains(ask)
        assert ours == stock, name
    assert _both_chains(asks["floor"])[0][0] == 200
    assert _both_chains(asks["session cookie write"])[0][0] == 401
    assert _both_chains(asks["token"])[0][0] == 200


def test_the_admin_keeps_its_session_csrf_and_user(db: None) -> None:
    get_user_model().objects.create_superuser("chains-admin", "chains@example.com", "pw-chains-1")
    browser = Client(enforce_csrf_checks=True)

    page = browser.get("/admin/login/")
    assert page.status_code == 200
    assert "csrftoken" in page.cookies
    assert page.headers["Vary"] == "Cookie"

    forged = browser.post("/admin/login/", {"username": "chains-admin", "password": "pw-chains-1"})
    assert forged.status_code == 403  # no CSRF token in the form
    assert "sessionid" not in browser.cookies

    signed = browser.post(
        "/admin/login/",
        {
            "username": "chains-admin",
            "password": "pw-chains-1",
            "csrfmiddlewaretoken": page.context["csrf_token"],
        },
    )
    assert signed.status_code in (200, 302)
    assert "sessionid" in browser.cookies  # logged in: a session, through the session middleware
