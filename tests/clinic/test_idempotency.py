"""Idempotency-Key on POST (docs/api-rules.md §4), through the test-only POST /api/v1/test/departments,
which creates a Department: replays and refusals are checked against the rows in the database."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import psycopg.sql
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from clinic import crypto
from clinic.api import idempotency
from clinic.models import Department
from integrations.models import IdempotencyRecord
from tests import plumbing_urls
from tests.helpers import assert_problem, bearer, own_database_address

pytestmark = pytest.mark.urls("tests.plumbing_urls")

URL = "/api/v1/test/departments"
CARDIOLOGY = {"name": "Cardiology", "description": "Heart", "fee": "1180.50"}


def post(client: Client, token: str, body: Any, key: str | None = None) -> Any:
    data = body if isinstance(body, str) else json.dumps(body)
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(URL, data, content_type="application/json", **bearer(token), **headers)


@pytest.fixture
def writer(api_client_factory: Any, issue_token: Any) -> tuple[Any, str]:
    api_client = api_client_factory(scopes=["appointments:write"])
    return api_client, issue_token(api_client)


def age(record: IdempotencyRecord, *, created: float | None = None, updated: float | None = None) -> None:
    """Move a record's clock back by this many seconds."""
    now = timezone.now()
    if created is not None:
        record.created_at = now - timedelta(seconds=created)
    if updated is not None:
        record.updated_at = now - timedelta(seconds=updated)
    record.save(update_fields=["created_at", "updated_at"])


# --- Replays --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_same_key_and_body_replays_the_stored_response_and_creates_one_row(client, writer):
    api_client, token = writer
    first = post(client, token, CARDIOLOGY, key="create-cardiology-1")
    second = post(client, token, CARDIOLOGY, key="create-cardiology-1")

    assert first.status_code == 201, first.content
    assert not first.has_header("Idempotent-Replayed")
    department = Department.objects.get()
    assert first.json() == {"id": str(department.id), "name": "Cardiology", "fee": 1180.5}
    assert (second.status_code, second.content, second["Location"]) == (
        first.status_code,
        first.content,
        first["Location"],
    )
    assert second["Content-Type"] == "application/json"
    assert second["Idempotent-Replayed"] == "true"
    assert second["X-Request-ID"] != first["X-Request-ID"]
    record = IdempotencyRecord.objects.get()
    assert (record.client_id, record.key, record.state, record.response_status) == (
        api_client.pk,
        "create-cardiology-1",
        IdempotencyRecord.State.COMPLETED,
        201,
    )


@pytest.mark.django_db
def test_key_order_and_whitespace_do_not_make_a_different_body(client, writer):
    _, token = writer
    first = post(client, token, '{"name":"Cardiology","description":"Heart"}', key="k")
    second = post(client, token, '{\n  "description" : "Heart",\n  "name" : "Cardiology"\n}\n', key="k")

    assert first.status_code == 201
    assert second["Idempotent-Replayed"] == "true"
    assert second.content == first.content
    assert Department.objects.count() == 1


@pytest.mark.django_db
def test_same_key_with_a_different_body_is_422_and_creates_nothing(client, writer):
    _, token = writer
    first = post(client, token, CARDIOLOGY, key="k")

    reused = post(client, token, {**CARDIOLOGY, "name": "Neurology"}, key="k")

    assert_problem(reused, 422, "idempotency_key_reused")
    assert list(Department.objects.values_list("name", flat=True)) == ["Cardiology"]
    # The original outcome stays replayable.
    again = post(client, token, CARDIOLOGY, key="k")
    assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (201, first.content, "true")


@pytest.mark.django_db
def test_a_number_that_differs_beyond_float_precision_is_a_different_body(client, writer):
    _, token = writer
    post(client, token, '{"name": "Cardiology", "fee": 1.00000000000000000001}', key="k")

    reused = post(client, token, '{"name": "Cardiology", "fee": 1.00000000000000000002}', key="k")

    assert_problem(reused, 422, "idempotency_key_reused")


@pytest.mark.django_db
def test_keys_belong_to_one_client(client, api_client_factory, issue_token):
    first_client = api_client_factory(scopes=["appointments:write"])
    second_client = api_client_factory(scopes=["appointments:write"])

    first = post(client, issue_token(first_client), CARDIOLOGY, key="shared-key")
    # Another body under the same key: a key shared across clients would answer 422 (or replay).
    second = post(client, issue_token(second_client), {**CARDIOLOGY, "name": "Neurology"}, key="shared-key")

    assert (first.status_code, second.status_code) == (201, 201)
    assert not second.has_header("Idempotent-Replayed")
    assert sorted(Department.objects.values_list("name", flat=True)) == ["Cardiology", "Neurology"]
    assert sorted(IdempotencyRecord.objects.values_list("client_id", "key")) == sorted(
        [(first_client.pk, "shared-key"), (second_client.pk, "shared-key")]
    )


@pytest.mark.django_db
def test_a_400_outcome_is_stored_and_replayed(client, writer):
    _, token = writer
    first = post(client, token, {"description": "no name"}, key="k")
    second = post(client, token, {"description": "no name"}, key="k")

    body = assert_problem(first, 400, "validation_error")
    assert body["errors"] == [{"field": "name", "code": "required", "message": "This field is required."}]
    assert (second.status_code, second.content) == (400, first.content)
    assert second["Content-Type"] == "application/problem+json"
    assert second["Idempotent-Replayed"] == "true"
    # The key is spent on that outcome: a corrected body needs a new key.
    assert_problem(post(client, token, {"name": "Cardiology"}, key="k"), 422, "idempotency_key_reused")
    assert Department.objects.count() == 0


@pytest.mark.django_db
def test_without_the_header_every_request_is_processed(client, writer):
    _, token = writer
    first = post(client, token, {"name": "Cardiology"})
    second = post(client, token, {"name": "Neurology"})

    assert (first.status_code, second.status_code) == (201, 201)
    assert not second.has_header("Idempotent-Replayed")
    assert Department.objects.count() == 2
    assert IdempotencyRecord.objects.count() == 0


@pytest.mark.django_db
def test_a_key_of_255_characters_is_accepted(client, writer):
    _, token = writer
    response = post(client, token, CARDIOLOGY, key="k" * 255)

    assert response.status_code == 201
    assert IdempotencyRecord.objects.get().key == "k" * 255


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["k" * 256, "", "tab\tinside"], ids=["256-chars", "empty", "control-char"])
def test_an_invalid_key_is_400_naming_the_header_and_stores_nothing(client, writer, key):
    _, token = writer
    response = post(client, token, CARDIOLOGY, key=key)

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [
        {"field": "Idempotency-Key", "code": "invalid", "message": "Must be 1-255 printable ASCII characters."}
    ]
    assert Department.objects.count() == 0
    assert IdempotencyRecord.objects.count() == 0


@pytest.mark.django_db
def test_a_request_refused_for_scope_stores_nothing(client, token_for):
    token = token_for(["appointments:read"])
    response = post(client, token, CARDIOLOGY, key="k")

    assert_problem(response, 403, "insufficient_scope")
    assert IdempotencyRecord.objects.count() == 0
    assert Department.objects.count() == 0


@pytest.mark.django_db
def test_an_unauthenticated_request_stores_nothing(client):
    response = post(client, "no-such-token", CARDIOLOGY, key="k")

    assert_problem(response, 401, "invalid_token")
    assert IdempotencyRecord.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "content_type", "status", "code"),
    [
        ('{"name": ', "application/json", 400, "parse_error"),
        ("name=Cardiology", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
    ],
)
def test_an_unreadable_body_does_not_spend_the_key(client, writer, data, content_type, status, code):
    _, token = writer
    response = client.post(URL, data, content_type=content_type, HTTP_IDEMPOTENCY_KEY="k", **bearer(token))

    assert_problem(response, status, code)
    assert IdempotencyRecord.objects.count() == 0
    assert post(client, token, CARDIOLOGY, key="k").status_code == 201
    assert Department.objects.count() == 1


# --- Abandoned and expired records ----------------------------------------------------------------


def simulate_crashed_attempt(client: Client, token: str, body: Any, key: str) -> IdempotencyRecord:
    """The state the previous release left when a worker died inside the handler: its domain write rolled
    back, and the key's reservation (which it committed on its own) still in progress. This release never
    commits a reservation without its outcome, but such rows may still be there after an upgrade."""
    assert post(client, token, body, key=key).status_code == 201
    Department.objects.all().delete()
    record = IdempotencyRecord.objects.get(key=key)
    record.state, record.response_status, record.response_body, record.response_headers = (
        IdempotencyRecord.State.IN_PROGRESS,
        None,
        "",
        {},
    )
    record.save()
    return record


@pytest.mark.django_db
def test_a_stale_in_progress_record_is_taken_over(client, writer, settings):
    _, token = writer
    record = simulate_crashed_attempt(client, token, CARDIOLOGY, key="k")
    age(
        record,
        created=settings.IDEMPOTENCY_STALE_AFTER_SECONDS + 5,
        updated=settings.IDEMPOTENCY_STALE_AFTER_SECONDS + 5,
    )

    retry = post(client, token, CARDIOLOGY, key="k")

    assert retry.status_code == 201, retry.content
    assert not retry.has_header("Idempotent-Replayed")
    department = Department.objects.get()
    assert retry.json()["id"] == str(department.id)
    record.refresh_from_db()
    assert (record.state, record.response_status) == (IdempotencyRecord.State.COMPLETED, 201)


@pytest.mark.django_db
def test_a_recent_in_progress_record_is_still_in_use(client, writer, settings):
    _, token = writer
    record = simulate_crashed_attempt(client, token, CARDIOLOGY, key="k")
    age(record, updated=settings.IDEMPOTENCY_STALE_AFTER_SECONDS - 5)

    response = post(client, token, CARDIOLOGY, key="k")

    assert_problem(response, 409, "idempotency_key_in_use")
    # Come back when the record is stale and may be taken over: in about 5 s.
    assert 1 <= int(response["Retry-After"]) <= 5
    assert Department.objects.count() == 0


@pytest.mark.django_db
def test_an_expired_key_may_be_used_again_with_another_body(client, writer):
    _, token = writer
    post(client, token, CARDIOLOGY, key="k")
    record = IdempotencyRecord.objects.get()
    age(record, created=24 * 3600 + 1, updated=24 * 3600 + 1)

    response = post(client, token, {"name": "Neurology"}, key="k")

    assert response.status_code == 201, response.content
    assert not response.has_header("Idempotent-Replayed")
    assert sorted(Department.objects.values_list("name", flat=True)) == ["Cardiology", "Neurology"]
    record.refresh_from_db()
    assert crypto.decrypt(record.response_body) == response.content.decode()  # stored encrypted
    assert timezone.now() - record.created_at < timedelta(minutes=1)


@pytest.mark.django_db
def test_a_key_just_inside_its_24_hours_is_still_bound_to_its_body(client, writer):
    _, token = writer
    post(client, token, CARDIOLOGY, key="k")
    age(IdempotencyRecord.objects.get(), created=24 * 3600 - 60, updated=24 * 3600 - 60)

    assert_problem(post(client, token, {"name": "Neurology"}, key="k"), 422, "idempotency_key_reused")
    assert post(client, token, CARDIOLOGY, key="k")["Idempotent-Replayed"] == "true"


@pytest.mark.django_db
def test_purge_expired_deletes_only_records_older_than_24_hours(writer):
    api_client, _ = writer
    now = timezone.now()
    for key, seconds_old in [("expired", 24 * 3600 + 60), ("almost", 24 * 3600 - 60), ("fresh", 0)]:
        IdempotencyRecord.objects.create(
            client=api_client,
            key=key,
            fingerprint="0" * 64,
            state=IdempotencyRecord.State.COMPLETED,
            response_status=201,
            created_at=now - timedelta(seconds=seconds_old),
            updated_at=now - timedelta(seconds=seconds_old),
        )

    assert idempotency.purge_expired() == 1
    assert sorted(IdempotencyRecord.objects.values_list("key", flat=True)) == ["almost", "fresh"]


# --- Concurrency ----------------------------------------------------------------------------------


@pytest.fixture
def gate():
    """Hold POST /api/v1/test/departments inside its handler until `release` is set."""
    with plumbing_urls.held_in_handler() as held:
        yield held


def run_in_thread(target: Any, results: dict[str, Any], name: str) -> threading.Thread:
    def run() -> None:
        try:
            results[name] = target(Client())
        except BaseException as exc:  # reported by the main thread
            results[name] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_key_whose_first_request_is_still_running_is_409_then_replays(writer, gate):
    _, token = writer
    entered, release = gate
    results: dict[str, Any] = {}

    first = run_in_thread(lambda c: post(c, token, CARDIOLOGY, key="k"), results, "first")
    assert entered.wait(10), "the first request never reached its handler"
    second = run_in_thread(lambda c: post(c, token, CARDIOLOGY, key="k"), results, "second")
    second.join(10)
    release.set()
    first.join(10)

    assert not first.is_alive()
    assert not second.is_alive()
    assert_problem(results["second"], 409, "idempotency_key_in_use")
    assert results["second"]["Retry-After"] == "1"
    assert results["first"].status_code == 201, results["first"]
    assert Department.objects.count() == 1
    retry = post(Client(), token, CARDIOLOGY, key="k")
    assert (retry.status_code, retry.content, retry["Idempotent-Replayed"]) == (201, results["first"].content, "true")


@pytest.mark.django_db(transaction=True)
def test_a_different_body_under_a_running_key_is_409_then_422_once_the_first_committed(writer, gate):
    # The first request's reservation is not committed while it runs, so its body cannot be compared yet.
    _, token = writer
    entered, release = gate
    results: dict[str, Any] = {}

    first = run_in_thread(lambda c: post(c, token, CARDIOLOGY, key="k"), results, "first")
    assert entered.wait(10)
    other = post(Client(), token, {"name": "Neurology"}, key="k")
    release.set()
    first.join(10)
    again = post(Client(), token, {"name": "Neurology"}, key="k")

    assert_problem(other, 409, "idempotency_key_in_use")
    assert other["Retry-After"] == "1"
    assert results["first"].status_code == 201
    assert_problem(again, 422, "idempotency_key_reused")
    assert list(Department.objects.values_list("name", flat=True)) == ["Cardiology"]


def backends_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_that_arrives_while_the_first_runs_waits_for_it_and_gets_the_replay(writer, gate, monkeypatch):
    monkeypatch.setattr(idempotency, "LOCK_WAIT", timedelta(seconds=20))
    _, token = writer
    entered, release = gate
    results: dict[str, Any] = {}

    first = run_in_thread(lambda c: post(c, token, CARDIOLOGY, key="k"), results, "first")
    assert entered.wait(10)
    second = run_in_thread(lambda c: post(c, token, CARDIOLOGY, key="k"), results, "second")
    deadline = time.monotonic() + 10
    while backends_waiting_on_a_lock() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backends_waiting_on_a_lock() == 1, "the duplicate is not waiting on the first one's reservation"
    release.set()
    first.join(10)
    second.join(10)

    assert results["first"].status_code == 201, results["first"]
    assert results["second"].status_code == 201, results["second"]
    assert results["second"]["Idempotent-Replayed"] == "true"
    assert results["second"].content == results["first"].content
    assert Department.objects.count() == 1


def other_backend() -> int:
    """The pid of the one other client session of the test database: the request's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        )
        (pid,) = cursor.fetchone()
        return pid


def allow_connections(allowed: bool) -> None:
    """New sessions to the test database refused (or allowed again), set from the maintenance database (the
    current database cannot refuse connections to itself)."""
    host, port = own_database_address()
    settings_dict = connection.settings_dict
    with psycopg.connect(
        host=host,
        port=port,
        dbname="postgres",
        user=settings_dict["USER"] or None,
        password=settings_dict["PASSWORD"] or None,
        autocommit=True,
    ) as admin:
        name = psycopg.sql.Identifier(settings_dict["NAME"])
        verdict = psycopg.sql.SQL("true" if allowed else "false")
        admin.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(name, verdict))


@pytest.mark.django_db(transaction=True)
def test_a_request_whose_connection_is_killed_mid_handler_leaves_no_reservation_and_its_retry_executes(writer, gate):
    """docs/api-rules.md §4: PgBouncer or PostgreSQL restarted, the network cut: the server ends the session under the
    handler and takes a while to come back, so nothing can be cleaned up after the request. The retry with
    the same key is executed as soon as the database is back, never refused (it was 409 for
    IDEMPOTENCY_STALE_AFTER_SECONDS when the reservation was committed on its own)."""
    _, token = writer
    entered, release = gate
    results: dict[str, Any] = {}

    first = run_in_thread(lambda c: post(c, token, CARDIOLOGY, key="k"), results, "first")
    assert entered.wait(10)
    allow_connections(False)  # the database unreachable for new sessions until the request has ended
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [other_backend()])
        release.set()
        first.join(10)
    finally:
        allow_connections(True)

    assert not first.is_alive()
    assert_problem(results["first"], 503, "service_unavailable")
    assert results["first"]["Retry-After"] == "5"
    assert IdempotencyRecord.objects.count() == 0
    assert Department.objects.count() == 0
    retry = post(Client(), token, CARDIOLOGY, key="k")
    assert retry.status_code == 201, retry.content
    assert not retry.has_header("Idempotent-Replayed")
    assert Department.objects.count() == 1
    record = IdempotencyRecord.objects.get()
    assert (record.state, record.response_status) == (IdempotencyRecord.State.COMPLETED, 201)
    assert post(Client(), token, CARDIOLOGY, key="k")["Idempotent-Replayed"] == "true"
    assert Department.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_retries_with_one_key_runs_the_handler_once(writer):
    _, token = writer
    barrier = threading.Barrier(8)
    results: dict[str, Any] = {}

    def send(c: Client) -> Any:
        barrier.wait(10)
        return post(c, token, CARDIOLOGY, key="burst")

    threads = [run_in_thread(send, results, f"t{number}") for number in range(8)]
    for thread in threads:
        thread.join(20)

    responses = list(results.values())
    assert all(not isinstance(response, BaseException) for response in responses), responses
    executed = [r for r in responses if r.status_code == 201 and not r.has_header("Idempotent-Replayed")]
    replayed = [r for r in responses if r.status_code == 201 and r.has_header("Idempotent-Replayed")]
    in_use = [r for r in responses if r.status_code == 409]
    assert len(executed) == 1
    assert len(executed) + len(replayed) + len(in_use) == 8
    assert all(r.content == executed[0].content for r in replayed)
    for response in in_use:
        assert_problem(response, 409, "idempotency_key_in_use")
    assert Department.objects.count() == 1
    assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.COMPLETED


@pytest.mark.django_db
def test_a_replay_whose_stored_response_the_configured_key_cannot_read_is_a_503_and_keeps_the_record(
    client, writer, settings
):
    # A restore started with the wrong FIELD_ENCRYPTION_KEY: the replay was a 500 (issue 35 item 5).
    from cryptography.fernet import Fernet

    api_client, token = writer
    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    first = post(client, token, CARDIOLOGY, key="sealed-under-a")
    record = IdempotencyRecord.objects.get(client=api_client, key="sealed-under-a")
    before = (record.state, record.response_status, record.response_body)

    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()  # another key: the stored body is unreadable
    replay = post(client, token, CARDIOLOGY, key="sealed-under-a")

    assert first.status_code == 201
    body = assert_problem(replay, 503, "encryption_key_mismatch")
    assert body["detail"] == "The service cannot read stored data with its configured key; retry later."
    assert replay["Retry-After"] == "30"
    record.refresh_from_db()
    assert (record.state, record.response_status, record.response_body) == before
    assert Department.objects.filter(name="Cardiology").count() == 1
