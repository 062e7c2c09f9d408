"""The per-client rate limits: atomic in Redis; API requests spend the client's API budget, token requests
(issue and revocation) a budget of their own (TOKEN_RATE_LIMIT)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import pytest
import redis
from django.db import connection
from django.test import Client
from django.urls import path
from oauth2_provider.models import get_access_token_model
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api import ratelimit
from clinic.api.views import ClinicAPIView
from clinic.urls import urlpatterns as project_urlpatterns
from integrations.models import AuditLogEntry
from tests.helpers import TOKEN_URL, assert_token_error, basic_auth, bearer, exchange, stored_token

AccessToken = get_access_token_model()
BRANCHES = "/api/v1/branches"
REVOKE_URL = "/api/v1/auth/revoke"


class ReadWriteView(ClinicAPIView):
    """A view with GET, POST and a serializer: DRF's OPTIONS answer checks permissions again for POST."""

    required_scopes = {"GET": "appointments:read", "POST": "appointments:write"}

    def get_serializer(self, *args: Any, **kwargs: Any) -> serializers.Serializer:
        return serializers.Serializer(*args, **kwargs)

    def get(self, request: Request) -> Response:
        return Response([])

    def post(self, request: Request) -> Response:
        return Response({}, status=201)


urlpatterns = [path("api/v1/test/things", ReadWriteView.as_view()), *project_urlpatterns]


def assert_rate_limited_problem(response, limit: int) -> None:
    assert response.status_code == 429
    assert response["Content-Type"] == "application/problem+json"
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= ratelimit.WINDOW_SECONDS
    assert response.json() == {
        "type": "/api/v1/problems/rate_limited",
        "title": "Too many requests",
        "status": 429,
        "detail": f"Rate limit exceeded; retry in {retry_after} s.",
        "code": "rate_limited",
        "request_id": response["X-Request-ID"],
    }
    assert response["RateLimit-Limit"] == str(limit)
    assert response["RateLimit-Remaining"] == "0"
    assert 1 <= int(response["RateLimit-Reset"]) <= ratelimit.WINDOW_SECONDS


@pytest.mark.django_db(transaction=True)
def test_burst_of_five_times_the_limit_from_many_threads_admits_exactly_the_limit(api_client_factory):
    limit = 10
    token = stored_token(api_client_factory(rate_limit_per_minute=limit))
    start = threading.Barrier(5 * limit)
    responses = []
    responses_lock = threading.Lock()

    def send() -> None:
        try:
            http = Client()
            start.wait(timeout=30)
            response = http.get(BRANCHES, **bearer(token))
            with responses_lock:
                responses.append(response)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(5 * limit)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(responses) == 5 * limit
    assert Counter(r.status_code for r in responses) == {200: limit, 429: 4 * limit}
    for response in responses:
        assert response["RateLimit-Limit"] == "10"
        assert 0 <= int(response["RateLimit-Remaining"]) <= limit
        assert 0 <= int(response["RateLimit-Reset"]) <= ratelimit.WINDOW_SECONDS
    admitted = [r for r in responses if r.status_code == 200]
    # Each admitted request was counted atomically, so each saw a different count.
    assert sorted(int(r["RateLimit-Remaining"]) for r in admitted) == list(range(limit))
    assert all(r.json() == [] for r in admitted)
    for response in responses:
        if response.status_code == 429:
            assert_rate_limited_problem(response, limit)
    assert Counter(AuditLogEntry.objects.values_list("status", flat=True)) == {200: limit, 429: 4 * limit}


def test_remaining_counts_down_with_each_request_then_requests_are_refused(client, api_client_factory):
    token = stored_token(api_client_factory(rate_limit_per_minute=10))

    responses = [client.get(BRANCHES, **bearer(token)) for _ in range(10)]

    assert [r.status_code for r in responses] == [200] * 10
    assert [r["RateLimit-Remaining"] for r in responses] == ["9", "8", "7", "6", "5", "4", "3", "2", "1", "0"]
    assert {r["RateLimit-Limit"] for r in responses} == {"10"}
    # The window slides from the first request: nothing frees up before that one is a minute old.
    resets = [int(r["RateLimit-Reset"]) for r in responses]
    assert resets[0] == ratelimit.WINDOW_SECONDS
    assert resets == sorted(resets, reverse=True)
    assert resets[-1] >= 1
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(token)), limit=10)
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(token)), limit=10)


def test_client_without_its_own_limit_gets_the_default_limit(client, api_client_factory, settings):
    settings.API_CLIENT_DEFAULT_RATE_LIMIT = 2
    token = stored_token(api_client_factory(rate_limit_per_minute=None))

    first, second, third = (client.get(BRANCHES, **bearer(token)) for _ in range(3))

    assert (first.status_code, first["RateLimit-Limit"], first["RateLimit-Remaining"]) == (200, "2", "1")
    assert (second.status_code, second["RateLimit-Remaining"]) == (200, "0")
    assert_rate_limited_problem(third, limit=2)


def test_two_clients_behind_the_same_address_are_limited_separately(client, api_client_factory):
    busy = stored_token(api_client_factory(rate_limit_per_minute=3))
    quiet = stored_token(api_client_factory(rate_limit_per_minute=3))
    address = {"REMOTE_ADDR": "203.0.113.7"}

    busy_responses = [client.get(BRANCHES, **address, **bearer(busy)) for _ in range(4)]
    quiet_response = client.get(BRANCHES, **address, **bearer(quiet))

    assert [r.status_code for r in busy_responses] == [200, 200, 200, 429]
    assert quiet_response.status_code == 200
    assert (quiet_response["RateLimit-Limit"], quiet_response["RateLimit-Remaining"]) == ("3", "2")


def test_a_new_token_for_the_same_client_does_not_reset_the_count(client, api_client_factory):
    api_client = api_client_factory(rate_limit_per_minute=4)
    first_token = stored_token(api_client)
    assert [client.get(BRANCHES, **bearer(first_token))["RateLimit-Remaining"] for _ in range(3)] == ["3", "2", "1"]

    issued = exchange(client, api_client.client_id, api_client.secret)
    assert issued.status_code == 200
    second_token = issued.json()["access_token"]
    last = client.get(BRANCHES, **bearer(second_token))
    assert (last.status_code, last["RateLimit-Remaining"]) == (200, "0")

    assert_rate_limited_problem(client.get(BRANCHES, **bearer(second_token)), limit=4)
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(first_token)), limit=4)
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(stored_token(api_client))), limit=4)


def test_a_client_limited_to_40_a_minute_makes_40_calls_after_its_token_exchange(client, api_client_factory):
    """The issue's finding: a client limited to 40 a minute got 429 after 39 calls."""
    api_client = api_client_factory(rate_limit_per_minute=40)

    issued = exchange(client, api_client.client_id, api_client.secret)
    token = issued.json()["access_token"]
    calls = [client.get(BRANCHES, **bearer(token)) for _ in range(40)]

    assert issued.status_code == 200
    assert [r.status_code for r in calls] == [200] * 40
    assert [r["RateLimit-Remaining"] for r in calls] == [str(n) for n in range(39, -1, -1)]
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(token)), limit=40)


def test_a_client_makes_its_n_calls_after_any_number_of_token_requests(client, api_client_factory, settings):
    settings.TOKEN_RATE_LIMIT = 3
    api_client = api_client_factory(rate_limit_per_minute=5)

    exchanges = [exchange(client, api_client.client_id, api_client.secret) for _ in range(6)]
    revoked = client.post(
        REVOKE_URL,
        {"token": exchanges[0].json()["access_token"]},
        **basic_auth(api_client.client_id, api_client.secret),
    )
    token = exchanges[1].json()["access_token"]
    calls = [client.get(BRANCHES, **bearer(token)) for _ in range(5)]

    assert [r.status_code for r in exchanges] == [200, 200, 200, 429, 429, 429]
    assert revoked.status_code == 429  # revocation is a token request too: the token budget is spent
    assert [(r.status_code, r["RateLimit-Limit"], r["RateLimit-Remaining"]) for r in calls] == [
        (200, "5", str(n)) for n in range(4, -1, -1)
    ]
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(token)), limit=5)


def test_token_requests_beyond_the_token_budget_are_refused_with_an_oauth_error(client, api_client_factory, settings):
    settings.TOKEN_RATE_LIMIT = 2
    api_client = api_client_factory(rate_limit_per_minute=100)
    issued = [exchange(client, api_client.client_id, api_client.secret) for _ in range(2)]
    tokens_before = AccessToken.objects.count()

    refused = exchange(client, api_client.client_id, api_client.secret)

    # The exchanges report the token budget, not the API budget.
    assert [(r.status_code, r["RateLimit-Limit"], r["RateLimit-Remaining"]) for r in issued] == [
        (200, "2", "1"),
        (200, "2", "0"),
    ]
    body = assert_token_error(refused, 429, "rate_limited")
    wait = int(refused["Retry-After"])
    assert 1 <= wait <= ratelimit.WINDOW_SECONDS
    assert body == {
        "error": "rate_limited",
        "error_description": f"Too many token requests for this client; retry in {wait} s.",
    }
    assert (refused["RateLimit-Limit"], refused["RateLimit-Remaining"]) == ("2", "0")
    assert 1 <= int(refused["RateLimit-Reset"]) <= ratelimit.WINDOW_SECONDS
    assert refused["Cache-Control"] == "no-store"
    assert AccessToken.objects.count() == tokens_before
    # The API budget is untouched by all three.
    call = client.get(BRANCHES, **bearer(issued[0].json()["access_token"]))
    assert (call.status_code, call["RateLimit-Limit"], call["RateLimit-Remaining"]) == (200, "100", "99")


def test_token_exchange_with_basic_auth_is_refused_once_the_token_budget_is_spent(client, api_client_factory, settings):
    settings.TOKEN_RATE_LIMIT = 1
    api_client = api_client_factory(rate_limit_per_minute=1)
    basic = basic_auth(api_client.client_id, api_client.secret)

    first = client.post(TOKEN_URL, {"grant_type": "client_credentials"}, **basic)
    refused = client.post(TOKEN_URL, {"grant_type": "client_credentials"}, **basic)

    assert first.status_code == 200
    assert assert_token_error(refused, 429, "rate_limited")["error_description"].startswith(
        "Too many token requests for this client; retry in "
    )
    assert AccessToken.objects.filter(application=api_client).count() == 1
    # Its one API call a minute is still there.
    assert client.get(BRANCHES, **bearer(first.json()["access_token"])).status_code == 200


def test_two_clients_have_separate_token_budgets(client, api_client_factory, settings):
    settings.TOKEN_RATE_LIMIT = 1
    busy, quiet = api_client_factory(), api_client_factory()

    statuses = [exchange(client, busy.client_id, busy.secret).status_code for _ in range(2)]

    assert statuses == [200, 429]
    assert exchange(client, quiet.client_id, quiet.secret).status_code == 200


def test_requests_refused_by_the_ip_allow_list_use_no_quota(client, api_client_factory, settings):
    settings.TOKEN_RATE_LIMIT = 4
    api_client = api_client_factory(rate_limit_per_minute=3, ip_allowlist=["10.1.0.0/16"])
    token = stored_token(api_client)
    outside, inside = {"REMOTE_ADDR": "198.51.100.9"}, {"REMOTE_ADDR": "10.1.2.3"}

    refused_api = [client.get(BRANCHES, **outside, **bearer(token)) for _ in range(5)]
    refused_exchanges = [exchange(client, api_client.client_id, api_client.secret, **outside) for _ in range(3)]
    admitted = client.get(BRANCHES, **inside, **bearer(token))

    assert [r.status_code for r in refused_api] == [403] * 5
    # Refused before the limit applies: the headers report the quota, untouched.
    assert [(r["RateLimit-Limit"], r["RateLimit-Remaining"]) for r in refused_api] == [("3", "3")] * 5
    assert [r.status_code for r in refused_exchanges] == [403] * 3
    # The token budget, untouched too.
    assert [(r["RateLimit-Limit"], r["RateLimit-Remaining"]) for r in refused_exchanges] == [("4", "4")] * 3
    assert admitted.status_code == 200
    assert (admitted["RateLimit-Limit"], admitted["RateLimit-Remaining"]) == ("3", "2")


@pytest.mark.urls("tests.integrations.test_rate_limit")
def test_an_options_request_counts_once(client, api_client_factory):
    api_client = api_client_factory(["appointments:read", "appointments:write"], rate_limit_per_minute=5)
    token = stored_token(api_client, scope="appointments:read appointments:write")

    options = client.options("/api/v1/test/things", **bearer(token))
    following = client.get("/api/v1/test/things", **bearer(token))

    assert options.status_code == 200
    assert "POST" in options.json()["actions"]  # permissions were checked a second time, for POST
    assert options["RateLimit-Remaining"] == "4"
    assert following["RateLimit-Remaining"] == "3"


@pytest.mark.parametrize("redis_url", ["", "redis"], ids=["in-process", "redis"])
def test_concurrent_hits_on_one_key_admit_exactly_the_limit(settings, redis_url):
    if not redis_url:
        settings.REDIS_URL = ""  # the in-process fallback, one process and a lock
    assert bool(settings.REDIS_URL) == bool(redis_url)
    key, limit = f"test-{uuid.uuid4()}", 5
    start = threading.Barrier(20)
    decisions = []
    decisions_lock = threading.Lock()

    def hit() -> None:
        start.wait(timeout=30)
        decision = ratelimit.hit(key, limit)
        with decisions_lock:
            decisions.append(decision)

    threads = [threading.Thread(target=hit) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(decisions) == 20
    admitted = [d for d in decisions if d.admitted]
    refused = [d for d in decisions if not d.admitted]
    assert len(admitted) == limit
    assert sorted(d.remaining for d in admitted) == [0, 1, 2, 3, 4]
    assert {(d.limit, d.remaining) for d in refused} == {(limit, 0)}
    assert all(1 <= d.reset_seconds <= ratelimit.WINDOW_SECONDS for d in refused)
    assert decisions[0].headers().keys() == {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}


def test_in_process_fallback_limits_api_requests(client, api_client_factory, settings):
    settings.REDIS_URL = ""
    token = stored_token(api_client_factory(rate_limit_per_minute=2))

    responses = [client.get(BRANCHES, **bearer(token)) for _ in range(2)]

    assert [(r.status_code, r["RateLimit-Remaining"]) for r in responses] == [(200, "1"), (200, "0")]
    assert_rate_limited_problem(client.get(BRANCHES, **bearer(token)), limit=2)


def test_the_redis_log_of_a_client_expires_with_the_window(settings):
    client_key = f"test-{uuid.uuid4()}"
    ratelimit.hit(client_key, 3)

    connection = redis.Redis.from_url(settings.REDIS_URL)
    key = f"{settings.CACHES['default']['KEY_PREFIX']}:ratelimit:{client_key}"
    assert connection.zcard(key) == 1
    assert 0 < connection.pttl(key) <= ratelimit.WINDOW_SECONDS * 1000
