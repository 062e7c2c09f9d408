"""A Bulk Data export survives the loss of its worker (docs/fhir.md section 5): the job is leased to one run,
renewed as it writes; a worker killed mid-export (SIGKILL: no shutdown, no acknowledgement) lets the lease
run out, the relay (beat) queues the job again and a new worker runs it from scratch, deleting what the dead
run wrote, so the files served are one whole run's. A job whose runs keep dying fails after
FHIR_EXPORT_MAX_ATTEMPTS with an OperationOutcome on its status URL, and stops counting against the client's
limit."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from integrations.fhir import services
from integrations.fhir.models import ExportJob
from tests.factories import BranchFactory
from tests.integrations.fhir.helpers import assert_outcome, fhir_get
from tests.patients.factories import PatientFactory
from tests.worker import routed_to, worker_process

__all__ = ["worker_process"]
ASYNC = {"HTTP_PREFER": "respond-async", "HTTP_ACCEPT": "application/fhir+json"}
KICK_OFF = "$export?_type=Patient"
PATIENTS = 40
# The replacement worker's relay runs every second and a dead run's lease lapses after 3 s.
FAST_RECOVERY = {
    "FHIR_EXPORT_LEASE_SECONDS": "3",
    "WEBHOOK_RELAY_INTERVAL_SECONDS": "1",
    "FHIR_VALIDATE_OUTPUT": "all",
}
SLOW = "tests.integrations.fhir.slow_export:slow_export"


@pytest.fixture(autouse=True)
def export_dir(settings: Any, tmp_path: Path) -> Path:
    settings.FHIR_EXPORT_DIR = tmp_path / "exports"
    return settings.FHIR_EXPORT_DIR


def _job_id(response: Any) -> uuid.UUID:
    assert response.status_code == 202, response.content
    return uuid.UUID(response["Content-Location"].rpartition("/")[2])


def _status(job_id: uuid.UUID) -> str:
    return f"$export-status/{job_id}"


def _wait(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.1)


def _written(job: ExportJob) -> int:
    """Resources the run has reported writing (the progress it renews its lease with)."""
    name, _, count = job.progress.partition(": ")
    return int(count.split()[0]) if name == "Patient" and count else 0


@pytest.mark.django_db(transaction=True)
def test_an_export_whose_worker_is_killed_mid_file_completes_on_a_new_worker_with_one_whole_file(
    worker_process: Any, token_for: Any, export_dir: Path
) -> None:
    branch = BranchFactory()
    patients = PatientFactory.create_batch(PATIENTS, registration_branch=branch)
    token = token_for(["patients:read"])
    env = {**FAST_RECOVERY, "FHIR_EXPORT_DIR": str(export_dir)}
    doomed = worker_process(env=env, route_all=True, setup=SLOW)

    with routed_to(doomed.queue):
        job_id = _job_id(fhir_get(token, KICK_OFF, **ASYNC))
    _wait(lambda: _written(ExportJob.objects.get(pk=job_id)) >= 10, "the first run half-way through the file")
    doomed.kill()
    assert doomed.process.returncode == -9

    job = ExportJob.objects.get(pk=job_id)
    assert (job.status, job.attempt_count) == ("running", 1)
    assert 10 <= _written(job) < PATIENTS
    first_run = export_dir / f"{job_id}.attempt-1"
    assert sorted(path.name for path in export_dir.iterdir()) == [first_run.name]  # its partial files
    polled = fhir_get(token, _status(job_id))
    assert (polled.status_code, polled["X-Progress"]) == (202, job.progress)

    worker_process(env=env, route_all=True, setup=SLOW, beat=True)  # a replacement, with the relay
    _wait(lambda: fhir_get(token, _status(job_id)).status_code == 200, "the export completed")

    done = fhir_get(token, _status(job_id))
    manifest = done.json()
    file_url = f"http://testserver/fhir/R4/$export-file/{job_id}/Patient.ndjson"
    assert manifest["output"] == [{"type": "Patient", "url": file_url, "count": PATIENTS}]
    assert manifest["error"] == []
    download = fhir_get(token, file_url.removeprefix("http://testserver/fhir/R4/"))
    assert download.status_code == 200
    lines = b"".join(download.streaming_content).decode().splitlines()
    resources = [json.loads(line) for line in lines]
    assert len(lines) == PATIENTS
    assert sorted(resource["id"] for resource in resources) == sorted(str(patient.pk) for patient in patients)
    assert {resource["resourceType"] for resource in resources} == {"Patient"}
    # Exactly the job's files: the dead run's directory went when the second run claimed the job.
    assert sorted(path.name for path in export_dir.iterdir()) == [str(job_id)]
    assert sorted(path.name for path in (export_dir / str(job_id)).iterdir()) == ["Patient.ndjson", "Patient.patients"]
    patient_list = (export_dir / str(job_id) / "Patient.patients").read_text().splitlines()
    assert sorted(patient_list) == sorted(str(patient.pk) for patient in patients)
    job.refresh_from_db()
    assert (job.status, job.attempt_count, job.claim_token, job.claimed_until, job.error) == (
        "completed",
        2,
        None,
        None,
        "",
    )


# --- The lease, claim by claim (no worker: the services as the tasks call them) ------------------------------


def _kick_off(token: str) -> uuid.UUID:
    """A job as the kick-off records it (this test's transaction never commits, so nothing is queued)."""
    return _job_id(fhir_get(token, KICK_OFF, **ASYNC))


def _dies(job: ExportJob) -> ExportJob:
    """The run of `job` writes part of a file and dies: its lease runs out."""
    partial = services._attempt_dir(job)
    partial.mkdir(parents=True)
    (partial / "Patient.ndjson").write_text('{"resourceType": "Patient", "id": "half"}\n')
    ExportJob.objects.filter(pk=job.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    return job


def _worker_dies(job_id: uuid.UUID) -> ExportJob:
    """A run claims the job, writes part of a file and dies."""
    job = services._claim(job_id)
    assert job is not None
    return _dies(job)


@pytest.mark.django_db
def test_a_job_whose_worker_keeps_dying_fails_after_the_attempts_and_frees_its_place(
    token_for: Any, settings: Any, export_dir: Path
) -> None:
    settings.FHIR_EXPORT_MAX_ATTEMPTS = 2
    settings.FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT = 1
    token = token_for(["patients:read"])
    job_id = _kick_off(token)
    queued: list[uuid.UUID] = []

    _worker_dies(job_id)
    assert services.export_jobs_relay(enqueue=queued.append) == 1
    requeued = fhir_get(token, _status(job_id))
    assert_outcome(fhir_get(token, KICK_OFF, **ASYNC), 429, "throttled")  # still in flight
    _worker_dies(job_id)
    assert services.export_jobs_relay(enqueue=queued.append) == 1

    assert queued == []  # on commit, which this test's transaction never reaches
    assert (requeued.status_code, requeued["X-Progress"], requeued["Retry-After"]) == (202, "queued", "5")
    failed = fhir_get(token, _status(job_id))
    diagnostics = assert_outcome(failed, 500, "exception")
    assert diagnostics == (
        "The export was started 2 times and its worker stopped each time before it finished; start a new one."
    )
    job = ExportJob.objects.get(pk=job_id)
    assert (job.status, job.attempt_count, job.claim_token, job.claimed_until, job.progress) == (
        "failed",
        2,
        None,
        None,
        "",
    )
    assert job.completed_at is not None
    assert services.export_jobs_relay(enqueue=queued.append) == 0  # nothing more to do for it
    assert services.export_job_run(job_id=job_id) is None  # a late redelivery runs nothing
    assert _job_id(fhir_get(token, KICK_OFF, **ASYNC)) != job_id  # its place is free again
    # The dead runs' partial files go with the hourly expiry (the relay's worker does not mount them).
    assert sorted(path.name for path in export_dir.iterdir()) == [f"{job_id}.attempt-2"]
    assert services.export_jobs_expire() == 0
    assert list(export_dir.iterdir()) == []


@pytest.mark.django_db
def test_a_redelivered_message_takes_over_only_once_the_lease_ran_out_and_starts_from_scratch(
    token_for: Any, export_dir: Path
) -> None:
    patients = PatientFactory.create_batch(3, registration_branch=BranchFactory())
    token = token_for(["patients:read"])
    job_id = _kick_off(token)
    first = services._claim(job_id)
    assert first is not None

    assert services.export_job_run(job_id=job_id) is None  # the broker's redelivery while the run is alive
    _dies(first)
    ran = services.export_job_run(job_id=job_id)  # the redelivery once the lease ran out

    assert ran is not None
    assert (ran.status, ran.attempt_count, ran.output[0]["count"]) == ("completed", 2, 3)
    assert sorted(path.name for path in export_dir.iterdir()) == [str(job_id)]
    written = [
        json.loads(line)["id"] for line in (export_dir / str(job_id) / "Patient.ndjson").read_text().splitlines()
    ]
    assert sorted(written) == sorted(str(patient.pk) for patient in patients)  # no "half" line of the dead run


@pytest.mark.django_db
def test_a_run_that_lost_its_lease_neither_completes_nor_fails_the_job(token_for: Any) -> None:
    token = token_for(["patients:read"])
    job_id = _kick_off(token)
    stale = _worker_dies(job_id)  # alive after all, only slow: its lease ran out and another run took over
    current = services._claim(job_id)
    assert current is not None

    assert services._renew(stale, "Patient: 5 resources") is False  # the stale run stops at its next chunk
    assert services._complete(stale, services._attempt_dir(stale), []) is False
    assert services._renew(current, "Patient: 5 resources") is True

    job = ExportJob.objects.get(pk=job_id)
    assert (job.status, job.attempt_count, job.claim_token, job.progress) == (
        "running",
        2,
        current.claim_token,
        "Patient: 5 resources",
    )


@pytest.mark.django_db
def test_a_kick_off_whose_message_never_reached_a_worker_is_queued_again_once_its_lease_ran_out(
    token_for: Any, export_dir: Path
) -> None:
    patients = PatientFactory.create_batch(2, registration_branch=BranchFactory())
    token = token_for(["patients:read"])
    job_id = _kick_off(token)  # its message is sent on commit, which this test never reaches: it is lost
    queued: list[uuid.UUID] = []

    assert services.export_jobs_relay(enqueue=queued.append) == 0  # within its first lease a worker may be busy
    ExportJob.objects.filter(pk=job_id).update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert services.export_jobs_relay(enqueue=queued.append) == 1
    job = ExportJob.objects.get(pk=job_id)
    assert (job.status, job.attempt_count, job.claim_token) == ("queued", 0, None)
    assert job.claimed_until is not None
    assert job.claimed_until > timezone.now()
    ran = services.export_job_run(job_id=job_id)  # the relay's message, as a worker receives it

    assert ran is not None
    assert (ran.status, ran.attempt_count, ran.output[0]["count"]) == ("completed", 1, len(patients))
    assert services.export_jobs_relay(enqueue=queued.append) == 0
