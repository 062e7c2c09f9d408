"""Real Celery workers for tests, on the real broker (Redis), each consuming a queue of its own.

Two kinds, both usable from any test module (import the fixture names, as with other shared fixtures):

- `celery_worker`: a worker thread inside the test process (celery.contrib.testing). Tasks the test process
  sends go to a fresh queue that only this worker consumes, so another test run or a developer's worker
  on the same Redis never takes them. Use it with `@pytest.mark.django_db(transaction=True)`: the worker
  thread has its own database connection and sees only committed data, like a real worker.

      pytestmark = pytest.mark.django_db(transaction=True)

      def test_the_task_runs(celery_worker):
          appointment_notify.delay(...)   # consumed by the worker thread

- `worker_process`: a factory of separate `celery worker` processes (WorkerProcess) on the test database,
  for what a thread cannot show: a worker killed with SIGKILL mid-task, a restart, Celery beat (`beat=True`).

      def test_kill(worker_process):
          worker = worker_process(env={"SOME_SETTING": "1"})
          ...
          worker.kill()

Both restore the app's default queue afterwards and delete what is left of their queue in Redis. Tasks with
a route of their own (CELERY_TASK_ROUTES: the FHIR export queue) still go there; `routed_to(queue)` in the
test process and `worker_process(route_all=True)` send those to the test's queue too.
`worker_process(setup="module:function")` calls that function in the worker before it starts (a test's hook:
a slower export, say).

Running `python -m tests.worker --queue Q [--pool solo] [--concurrency 1] [--beat] [--route-all]
[--setup M:F]` starts such a worker by hand: the same as `celery -A clinic worker -Q Q`, except that tasks it
sends go to Q as well.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun

from clinic.celery import app

ROOT = Path(__file__).resolve().parent.parent


def queue_name() -> str:
    return f"test.{os.getpid()}.{uuid.uuid4().hex[:10]}"


def purge_queue(queue: str) -> None:
    """Delete a test queue from Redis, messages left unacknowledged by a killed worker included."""
    import redis
    from django.conf import settings

    if not settings.REDIS_URL:
        return
    connection = redis.Redis.from_url(settings.REDIS_URL)
    connection.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    for tag, raw in connection.hscan_iter("unacked"):
        try:
            routing_key = json.loads(raw)[2]
        except (ValueError, IndexError, TypeError):
            continue
        if routing_key == queue:
            connection.hdel("unacked", tag)
            connection.zrem("unacked_index", tag)


@contextmanager
def dedicated_queue() -> Iterator[str]:
    """Route every task this process sends to a fresh queue (and not in-process) until the block ends."""
    queue = queue_name()
    previous = (app.conf.task_default_queue, app.conf.task_always_eager)
    app.conf.task_default_queue, app.conf.task_always_eager = queue, False
    try:
        yield queue
    finally:
        app.conf.task_default_queue, app.conf.task_always_eager = previous
        purge_queue(queue)


def _route_all(queue: str | None) -> None:
    """Send every task to `queue` (None: back to CELERY_TASK_ROUTES); the router caches its routes."""
    from django.conf import settings

    app.conf.task_routes = {"*": {"queue": queue}} if queue else settings.CELERY_TASK_ROUTES
    app.amqp.flush_routes()
    app.amqp.__dict__.pop("router", None)


@contextmanager
def routed_to(queue: str) -> Iterator[str]:
    """Every task this process sends goes to `queue`, routed ones included, until the block ends."""
    _route_all(queue)
    try:
        yield queue
    finally:
        _route_all(None)


@contextmanager
def running_worker(*, concurrency: int = 1, pool: str = "solo") -> Iterator[Any]:
    """A worker thread in this process consuming a dedicated queue (see the module docstring)."""
    from django.db import connections

    test_thread = threading.current_thread()

    def close_connections(**kwargs: Any) -> None:
        # The worker's own database connections, closed after every task so none outlives the test.
        if threading.current_thread() is not test_thread:
            connections.close_all()

    task_postrun.connect(close_connections, weak=False)
    try:
        with (
            dedicated_queue() as queue,
            start_worker(
                app,
                concurrency=concurrency,
                pool=pool,
                perform_ping_check=False,
                queues=[queue],
                loglevel="WARNING",
                shutdown_timeout=30,
            ) as worker,
        ):
            yield worker
    finally:
        task_postrun.disconnect(close_connections)


@pytest.fixture
def celery_worker(transactional_db: None) -> Iterator[Any]:
    """A real worker thread on the real broker, consuming the queue every task of this test goes to."""
    with running_worker() as worker:
        yield worker


def _test_database_url() -> str:
    from tests.helpers import own_database_url

    return own_database_url()


class WorkerProcess:
    """A `celery worker` subprocess on the test database and broker, consuming `queue` only."""

    def __init__(
        self,
        queue: str,
        *,
        env: dict[str, str] | None = None,
        concurrency: int = 1,
        pool: str = "solo",
        beat: bool = False,
        route_all: bool = False,
        setup: str | None = None,
    ) -> None:
        self.queue = queue
        self.output: list[str] = []
        self._ready = threading.Event()
        self._schedule = tempfile.NamedTemporaryFile(prefix="celerybeat-", suffix=".db", delete=False)  # noqa: SIM115
        self._schedule.close()
        command = [sys.executable, "-m", "tests.worker", "--queue", queue, "--pool", pool]
        command += ["--concurrency", str(concurrency)]
        if beat:
            command += ["--beat", "--schedule", self._schedule.name]
        if route_all:
            command += ["--route-all"]
        if setup:
            command += ["--setup", setup]
        environment = {**os.environ, "DATABASE_URL": _test_database_url(), "PYTHONUNBUFFERED": "1", **(env or {})}
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            command,
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: kill() reaches pool children too
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            if " ready." in line:
                self._ready.set()

    def wait_ready(self, timeout: float = 30) -> WorkerProcess:
        if not self._ready.wait(timeout):
            self.stop()
            raise AssertionError("worker did not start:\n" + "".join(self.output[-50:]))
        return self

    def kill(self) -> None:
        """SIGKILL the worker and its children: no shutdown, no acknowledgement, like a lost machine."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        for path in Path(self._schedule.name).parent.glob(Path(self._schedule.name).name + "*"):
            path.unlink(missing_ok=True)


@pytest.fixture
def worker_process(transactional_db: None) -> Iterator[Callable[..., WorkerProcess]]:
    """worker_process(env={...}, concurrency=1, pool="solo", beat=False, route_all=False, setup=None) -> a
    started WorkerProcess.

    Every worker of one test consumes the same dedicated queue, which the test process sends to as well.
    """
    workers: list[WorkerProcess] = []
    with dedicated_queue() as queue:

        def start(**kwargs: Any) -> WorkerProcess:
            worker = WorkerProcess(queue, **kwargs)
            workers.append(worker)
            return worker.wait_ready()

        try:
            yield start
        finally:
            for worker in workers:
                worker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="A Celery worker whose own tasks also go to --queue.")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--pool", default="solo")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--beat", action="store_true")
    parser.add_argument("--schedule", default=None)
    parser.add_argument("--route-all", action="store_true", help="Routed tasks it sends go to --queue too.")
    parser.add_argument("--setup", default=None, help="module:function to call before the worker starts.")
    args = parser.parse_args()
    app.conf.task_default_queue = args.queue
    if args.route_all or args.setup:
        import django

        django.setup()
    if args.route_all:
        _route_all(args.queue)
    if args.setup:
        module, _, function = args.setup.partition(":")
        getattr(importlib.import_module(module), function)()
    argv = ["worker", "-Q", args.queue, "-P", args.pool, "-c", str(args.concurrency), "-l", "INFO"]
    argv += ["--without-mingle", "--without-gossip", "--hostname", f"{args.queue}-{time.time_ns()}@%h"]
    if args.beat:
        argv += ["--beat", "--schedule", args.schedule or str(Path(tempfile.gettempdir()) / f"beat-{args.queue}")]
    app.worker_main(argv)


if __name__ == "__main__":
    main()
