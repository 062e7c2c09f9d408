"""`manage.py liveness worker|beat`: the liveness probe of the worker and beat containers. Exit 0 while this
host's role refreshes its heartbeat in Redis (a real `celery worker` subprocess here), 1 when none does:
never started, stopped, killed (its last heartbeat goes stale), or Redis unreachable."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest
from django.core.management import CommandError, call_command

from clinic import heartbeat
from tests.worker import ROOT, worker_process  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_heartbeats():
    """Heartbeats left by another test's killed worker must not make a role look alive here."""
    connection = heartbeat.redis_connection()
    connection.delete(*(heartbeat.heartbeat_key(role) for role in heartbeat.ROLES))
    yield
    connection.delete(*(heartbeat.heartbeat_key(role) for role in heartbeat.ROLES))


def liveness(*args: str) -> str:
    out = io.StringIO()
    call_command("liveness", *args, stdout=out)
    return out.getvalue()


def probe(role: str) -> subprocess.CompletedProcess[str]:
    """The probe as the container runs it: a process of its own, judged by its exit status."""
    return subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "liveness", role], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_a_running_worker_is_alive_and_a_stopped_one_is_not(worker_process):  # noqa: F811
    worker = worker_process()
    node = next(line for line in worker.output if " ready." in line).split()[-2]

    assert liveness("worker").startswith(f"worker {node}: alive, heartbeat ")
    assert liveness("worker", "--node", node).startswith(f"worker {node}: alive")
    assert probe("worker").returncode == 0

    worker.stop()  # a clean shutdown removes the heartbeat at once

    with pytest.raises(CommandError, match=r"^worker: no heartbeat from host .+ in the last 30 s"):
        liveness("worker")
    result = probe("worker")
    assert result.returncode == 1
    assert "worker: no heartbeat from host" in result.stderr


def test_nothing_running_fails_both_roles():
    with pytest.raises(CommandError, match=r"^worker: no heartbeat from host .+ in the last 30 s \(not running"):
        liveness("worker")
    with pytest.raises(CommandError, match=r"^beat: no heartbeat from host .+ in the last 30 s"):
        liveness("beat")
    assert probe("beat").returncode == 1


def test_a_killed_worker_goes_stale_after_three_intervals(worker_process, settings):  # noqa: F811
    settings.ROLE_HEARTBEAT_SECONDS = 1
    worker = worker_process(env={"ROLE_HEARTBEAT_SECONDS": "1"})
    liveness("worker")

    worker.kill()  # SIGKILL: no shutdown, the heartbeat stays behind
    time.sleep(3.5)

    with pytest.raises(CommandError, match=r"^worker: no heartbeat from host .+ in the last 3 s"):
        liveness("worker")


def test_beat_is_alive_while_its_scheduler_ticks(worker_process):  # noqa: F811
    worker_process(beat=True)

    deadline = time.monotonic() + 20  # beat starts a moment after the worker is ready
    while not heartbeat.heartbeats_fresh(role="beat") and time.monotonic() < deadline:
        time.sleep(0.2)

    assert liveness("beat").startswith("beat ")
    assert " alive, heartbeat " in liveness("beat")
    assert probe("beat").returncode == 0


def test_another_hosts_heartbeat_counts_only_with_any():
    heartbeat.heartbeat_record(role="worker", node="celery@some-other-host")

    with pytest.raises(CommandError, match="no heartbeat from host"):
        liveness("worker")
    assert liveness("worker", "--any").startswith("worker celery@some-other-host: alive")
    with pytest.raises(CommandError, match="no heartbeat from node celery@a-third-host"):
        liveness("worker", "--node", "celery@a-third-host")


def test_unreachable_redis_fails(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    with pytest.raises(CommandError, match=r"^worker: cannot reach Redis \(the broker\): ConnectionError$"):
        liveness("worker")


def test_without_redis_there_is_no_worker_to_check(settings):
    settings.REDIS_URL = ""

    with pytest.raises(CommandError, match="REDIS_URL is not set"):
        liveness("worker")
