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


# --- The probe the containers run: clinic/liveness_probe.py reads the file the role touches after each
# heartbeat recorded in Redis (no Django start: milliseconds, not the 9-12 s `manage.py liveness` took).
# Each test gives its worker and its probe a TMPDIR of their own: other test runs on this machine mark theirs.


def cheap_probe(role: str, tmpdir: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "clinic/liveness_probe.py", role],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": tmpdir, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_container_probe_follows_a_running_then_stopped_worker(worker_process, tmp_path):  # noqa: F811
    assert cheap_probe("worker", str(tmp_path)).returncode == 1  # nothing started yet
    worker = worker_process(env={"TMPDIR": str(tmp_path)})
    liveness("worker")  # its heartbeat is in Redis: the file was touched right after

    alive = cheap_probe("worker", str(tmp_path))
    assert alive.returncode == 0, alive.stderr
    assert alive.stdout.startswith("worker: alive, heartbeat ")
    assert cheap_probe("export-worker", str(tmp_path)).returncode == 1  # the default queue's worker only

    worker.stop()

    stopped = cheap_probe("worker", str(tmp_path))
    assert (stopped.returncode, stopped.stderr) == (1, "worker: no heartbeat yet (not started, or stopped)\n")


def test_the_container_probe_fails_three_intervals_after_a_kill(worker_process, settings, tmp_path):  # noqa: F811
    settings.ROLE_HEARTBEAT_SECONDS = 1
    worker = worker_process(env={"ROLE_HEARTBEAT_SECONDS": "1", "TMPDIR": str(tmp_path)})
    assert cheap_probe("worker", str(tmp_path), ROLE_HEARTBEAT_SECONDS="1").returncode == 0

    worker.kill()  # SIGKILL: the file stays behind, and ages
    time.sleep(3.5)

    result = cheap_probe("worker", str(tmp_path), ROLE_HEARTBEAT_SECONDS="1")
    assert result.returncode == 1
    assert "(over 3 s: hung or cut off from Redis)" in result.stderr


def test_the_container_probe_passes_for_a_ticking_beat(worker_process, tmp_path):  # noqa: F811
    worker_process(beat=True, env={"TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 20
    while cheap_probe("beat", str(tmp_path)).returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.2)

    assert cheap_probe("beat", str(tmp_path)).returncode == 0
