"""Shared fixtures. Tests run against the real PostgreSQL and Redis the launcher selected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.test import Client

from tests.factories import ApiClientFactory


@pytest.fixture(scope="session", autouse=True)
def _clean_redis() -> None:
    """Rate-limit keys of an earlier run could match this run's client ids: start from nothing."""
    if not django_settings.REDIS_URL:
        return
    connection = redis.Redis.from_url(django_settings.REDIS_URL)
    prefix = django_settings.CACHES["default"].get("KEY_PREFIX", "clinic")
    for key in connection.scan_iter(f"{prefix}:*", count=1000):
        connection.delete(key)


@pytest.fixture(autouse=True)
def _test_hosts(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
    # Every test's unauthenticated requests come from 127.0.0.1 within the same minute; the per-address
    # limit has tests of its own (tests/integrations/test_anonymous_rate_limit.py), which lower it again.
    settings.ANONYMOUS_RATE_LIMIT = 1_000_000


@pytest.fixture
def admin_user(db: None, django_user_model: Any, django_username_field: str) -> Any:
    """pytest-django's superuser, marked network-wide: a superuser sees every branch only when marked so."""
    from tests.factories import network_wide

    user = django_user_model._default_manager.create_superuser(
        **{django_username_field: "admin"}, email="admin@example.com", password="password"
    )
    return network_wide(user)


@pytest.fixture
def api_client_factory(db: None) -> Callable[..., Any]:
    """Create an API client: api_client_factory(scopes=[...], branches=[...], ip_allowlist=[...], ...)."""

    def make(scopes: list[str] | None = None, **kwargs: Any) -> Any:
        return ApiClientFactory(allowed_scopes=scopes or ["appointments:read"], **kwargs)

    return make


@pytest.fixture
def issue_token(client: Client) -> Callable[..., str]:
    """Obtain a real token through POST /api/v1/auth/token for a client made by the factory."""

    def issue(api_client: Any, scope: str | None = None, **extra: Any) -> str:
        data = {
            "grant_type": "client_credentials",
            "client_id": api_client.client_id,
            "client_secret": api_client.secret,
        }
        if scope is not None:
            data["scope"] = scope
        response = client.post("/api/v1/auth/token", data, **extra)
        assert response.status_code == 200, response.content
        return response.json()["access_token"]

    return issue


@pytest.fixture
def token_for(api_client_factory: Callable[..., Any], issue_token: Callable[..., str]) -> Callable[..., str]:
    """token_for(["appointments:read"], branches=[...]) -> a bearer token of a fresh client."""

    def make(scopes: list[str] | None = None, **kwargs: Any) -> str:
        return issue_token(api_client_factory(scopes=scopes, **kwargs))

    return make
