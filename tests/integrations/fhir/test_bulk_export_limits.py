"""Bulk Data kick-offs are bounded per client: at most FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT jobs queued or
running, beyond that 429 with Retry-After and nothing recorded, also when kick-offs race on separate
connections. The kick-off and cancellation 202s have an empty body and no Content-Type; a DELETE of a
cancelled or unknown job is 404."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.test import Client

from clinic.celery import app
from integrations.fhir import services
from integrations.fhir.models import ExportJob
from integrations.models import ApiClient
from tests.helpers import bearer
from tests.integrations.fhir.helpers import assert_outcome, fhir_get
from tests.test_settings_env import start

ASYNC = {"HTTP_PREFER": "respond-async", "HTTP_ACCEPT": "application/fhir+json"}
KICK_OFF = "$export?_type=Patient"


@pytest.fixture(autouse=True)
def _export_dir(settings: Any, tmp_path: Any) -> None:
    settings.FHIR_EXPORT_DIR = tmp_path / "exports"


def _job_id(response: Any) -> uuid.UUID:
    assert response.status_code == 202, response.content
    return uuid.UUID(response["Content-Location"].rpartition("/")[2])


def _statuses() -> list[str]:
    return sorted(ExportJob.objects.values_list("status", flat=True))


# --- The limit ----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_third_kick_off_while_two_are_in_flight_is_429_with_retry_after_and_records_nothing(
    token_for: Any,
) -> None:
    token = token_for(["patients:read"])
    first, second = fhir_get(token, KICK_OFF, **ASYNC), fhir_get(token, KICK_OFF, **ASYNC)
    ExportJob.objects.filter(pk=_job_id(first)).update(status=ExportJob.Status.RUNNING)  # a worker took it

    third = fhir_get(token, KICK_OFF, **ASYNC)

    diagnostics = assert_outcome(third, 429, "throttled")
    assert diagnostics == "At most 2 bulk exports may be in progress at once; wait for one to finish."
    assert third["Retry-After"] == "60"
    assert not third.has_header("Content-Location")
    assert _statuses() == ["queued", "running"]
    assert _job_id(second) in set(ExportJob.objects.values_list("id", flat=True))


@pytest.mark.django_db
def test_a_finished_or_cancelled_job_frees_its_place_and_other_clients_have_their_own(token_for: Any) -> None:
    token, other = token_for(["patients:read"]), token_for(["patients:read"])
    first, second = fhir_get(token, KICK_OFF, **ASYNC), fhir_get(token, KICK_OFF, **ASYNC)

    other_client = fhir_get(other, KICK_OFF, **ASYNC)
    services.export_job_run(job_id=_job_id(first))
    after_completion = fhir_get(token, KICK_OFF, **ASYNC)
    Client().delete(f"/fhir/R4/$export-status/{_job_id(second)}", **bearer(token))
    after_cancel = fhir_get(token, KICK_OFF, **ASYNC)
    full_again = fhir_get(token, KICK_OFF, **ASYNC)

    assert [other_client.status_code, after_completion.status_code, after_cancel.status_code] == [202, 202, 202]
    assert_outcome(full_again, 429, "throttled")
    assert _statuses() == ["cancelled", "completed", "queued", "queued", "queued"]


@pytest.mark.django_db
def test_the_limit_is_the_setting(token_for: Any, settings: Any) -> None:
    settings.FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT = 1
    token = token_for(["patients:read"])

    statuses = [fhir_get(token, KICK_OFF, **ASYNC).status_code for _ in range(2)]

    assert statuses == [202, 429]
    assert ExportJob.objects.count() == 1


def test_the_setting_defaults_to_2_and_refuses_a_value_below_1() -> None:
    default = start(DEBUG="true", FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT="")
    zero = start(DEBUG="true", FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT="0")

    assert default.returncode == 0, default.stderr
    assert zero.returncode != 0
    assert "ImproperlyConfigured: FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT must be between 1 and 50, got 0" in zero.stderr
    assert django_settings.FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT == 2  # the test run sets nothing either


# --- Races: separate connections, real threads --------------------------------------------------------------


def _kick_off_all_at_once(token: str, threads: int) -> list[int]:
    barrier = threading.Barrier(threads)
    statuses: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def kick_off() -> None:
        try:
            http = Client()
            barrier.wait(timeout=10)
            response = http.get(f"/fhir/R4/{KICK_OFF}", **bearer(token), **ASYNC)
            with lock:
                statuses.append(response.status_code)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=kick_off) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors, errors
    return sorted(statuses)


@pytest.fixture
def jobs_stay_queued() -> Any:
    """The kick-offs' jobs go to the broker and stay there (no worker here), even where tasks would otherwise
    run in-process (no Redis): a job run at commit would be over before the next kick-off counted it."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = previous
    if django_settings.REDIS_URL:
        redis.Redis.from_url(django_settings.REDIS_URL).delete(django_settings.FHIR_EXPORT_QUEUE)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("jobs_stay_queued")
def test_six_kick_offs_at_once_start_exactly_two(token_for: Any) -> None:
    token = token_for(["patients:read"])

    assert _kick_off_all_at_once(token, 6) == [202, 202, 429, 429, 429, 429]
    assert _statuses() == ["queued", "queued"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("jobs_stay_queued")
def test_a_kick_off_waits_for_one_in_progress_and_then_counts_it(token_for: Any, settings: Any) -> None:
    """Deterministic: one kick-off holds its transaction open after recording its job; a second one on another
    connection must wait for it (not count the uncommitted row as absent), then sees the limit reached."""
    settings.FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT = 1
    token = token_for(["patients:read"])
    client = ApiClient.objects.get()
    recorded, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first_kick_off() -> None:
        try:
            with transaction.atomic():
                services.export_job_create(
                    client=client, level="system", types=["Patient"], since=None, request_url="x", enqueue=str
                )
                recorded.set()
                release.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    second: dict[str, Any] = {}

    def second_kick_off() -> None:
        try:
            second["response"] = Client().get(f"/fhir/R4/{KICK_OFF}", **bearer(token), **ASYNC)
        finally:
            connection.close()

    holder = threading.Thread(target=first_kick_off)
    holder.start()
    assert recorded.wait(timeout=30)
    waiter = threading.Thread(target=second_kick_off)
    waiter.start()
    waiter.join(timeout=1.5)
    still_waiting = waiter.is_alive()
    release.set()
    holder.join(timeout=30)
    waiter.join(timeout=30)

    assert not errors, errors
    assert still_waiting  # blocked on the client's lock while the first transaction was open
    assert_outcome(second["response"], 429, "throttled")
    assert _statuses() == ["queued"]


# --- The 202s and DELETE ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_kick_off_status_and_delete_202s_have_an_empty_body_and_no_content_type(token_for: Any) -> None:
    token = token_for(["patients:read"])

    kick_off = fhir_get(token, KICK_OFF, **ASYNC)
    job_id = _job_id(kick_off)
    status = fhir_get(token, f"$export-status/{job_id}")
    deleted = Client().delete(f"/fhir/R4/$export-status/{job_id}", **bearer(token))

    for response in (kick_off, status, deleted):
        assert (response.status_code, response.content) == (202, b"")
        assert not response.has_header("Content-Type")
    assert kick_off["Content-Location"] == f"http://testserver/fhir/R4/$export-status/{job_id}"
    assert (status["X-Progress"], status["Retry-After"]) == ("queued", "5")


@pytest.mark.django_db
def test_a_second_delete_of_a_cancelled_job_and_a_delete_of_an_unknown_one_are_404(token_for: Any) -> None:
    token = token_for(["patients:read"])
    job_id = _job_id(fhir_get(token, KICK_OFF, **ASYNC))
    http = Client()

    first = http.delete(f"/fhir/R4/$export-status/{job_id}", **bearer(token))
    cancelled_at = ExportJob.objects.get().completed_at
    again = http.delete(f"/fhir/R4/$export-status/{job_id}", **bearer(token))
    unknown = http.delete(f"/fhir/R4/$export-status/{uuid.uuid4()}", **bearer(token))
    malformed = http.delete("/fhir/R4/$export-status/not-a-job", **bearer(token))

    assert first.status_code == 202
    assert assert_outcome(again, 404, "not-found") == f"No bulk export {job_id}."
    assert_outcome(unknown, 404, "not-found")
    assert_outcome(malformed, 404, "not-found")
    job = ExportJob.objects.get()
    assert (job.status, job.completed_at) == (ExportJob.Status.CANCELLED, cancelled_at)


@pytest.mark.django_db
def test_cancelling_a_job_cancelled_meanwhile_is_refused_and_changes_nothing(token_for: Any) -> None:
    """Two DELETEs at once both find the job active; the second one's update finds it cancelled already."""
    token_for(["patients:read"])
    job = services.export_job_create(
        client=ApiClient.objects.get(), level="system", types=["Patient"], since=None, request_url="x", enqueue=str
    )
    services.export_job_cancel(job=job)
    cancelled_at = ExportJob.objects.get().completed_at

    with pytest.raises(services.ExportJobGone):
        services.export_job_cancel(job=job)

    assert ExportJob.objects.get().completed_at == cancelled_at
