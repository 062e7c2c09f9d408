"""Gunicorn settings of the web role (docker/entrypoint.sh runs gunicorn with --config python:clinic.gunicorn_config).

The access log names the client address, time, method, path, status, size, duration, user agent and request
id, and never the query string, the Referer or the HTTP Basic user name (docs/api-rules.md §7: no log line holds
a bearer token or patient data). Gunicorn's default line logs the raw request line with its query string: a
client that put its token in `?access_token=` (refused with 401) left a live credential in the log, and every
patient search left the name, phone digits or ABHA number searched for. The request id joins a line to its
audit row, which holds the rest.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger

from clinic.drain import DRAIN_FILE_VARIABLE
from clinic.json_logging import JsonFormatter

# Gunicorn 23+ opens a control socket for `gunicornc` in $XDG_RUNTIME_DIR or ~/.gunicorn/, and logged
# `[ERROR] Control server error` at every start where $HOME is read-only (every pod). Nothing here uses it:
# the kubelet and compose speak signals (SIGTERM drains, below). Off, so a clean start logs no error line,
# and two web roles on one host (the fault suite) do not fight over one socket path.
control_socket_disable = True


@functools.cache
def log_format() -> str:
    """LOG_FORMAT as clinic/settings.py reads it (json unless DEBUG), in the master, which never loads the
    Django settings: the checkout's .env (ENV_FILE) first, the real environment winning. Read once."""
    from dotenv import load_dotenv

    from clinic.env import env_bool, env_str

    load_dotenv(os.environ.get("ENV_FILE", Path(__file__).resolve().parent.parent / ".env"), override=False)
    return env_str("LOG_FORMAT", default="text" if env_bool("DEBUG", default=False) else "json")


access_log_format = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s" %({x-request-id}o)s'

# Atoms that carry the query string, a referring URL, credentials or cookies, in whatever format an operator
# writes: a format that names one of them logs "-".
_WITHHELD = (
    "{query_string}e",
    "{raw_uri}e",
    "{http_referer}e",
    "{http_authorization}e",
    "{http_cookie}e",
    "{referer}i",
    "{authorization}i",
    "{cookie}i",
    "{x-forwarded-for}i",
)


class AccessLogger(Logger):
    def setup(self, cfg: Any) -> None:
        """Gunicorn's own lines (starting, booting a worker, a signal, a worker timeout) as JSON objects like
        every other log line of the service (clinic/json_logging.py) when LOG_FORMAT is json, its default
        with DEBUG off. The access log keeps its own formatter: access() writes whole lines itself."""
        super().setup(cfg)
        if log_format() == "json":
            for handler in self.error_log.handlers:
                handler.setFormatter(JsonFormatter())

    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> dict[str, Any]:
        atoms = super().atoms(resp, req, environ, request_time)
        # The path as sent (still percent-encoded, so a %0a in it cannot start a forged log line).
        path = str(environ.get("RAW_URI") or "-").partition("?")[0].partition("#")[0]
        atoms["r"] = f"{environ.get('REQUEST_METHOD', '-')} {path} {environ.get('SERVER_PROTOCOL', '-')}"
        atoms["U"] = path
        atoms["q"] = "-"
        atoms["f"] = "-"
        atoms["u"] = "-"
        for key in _WITHHELD:
            atoms.pop(key, None)
        return atoms

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        """One JSON object per request (ACCESS_LOG_FORMAT=json, the default when LOG_FORMAT is json, that is
        with DEBUG off: a production stream of one format) with the route's name (never the path, which may
        carry a patient id), status, duration, request id and API client, read from the context variables the
        application set while serving the request in this same thread. ACCESS_LOG_FORMAT=text: the redacted
        text line (the development default)."""
        if (os.environ.get("ACCESS_LOG_FORMAT") or log_format()) != "json" or not self.cfg.accesslog:
            super().access(resp, req, environ, request_time)
            return
        from clinic.api.request_id import current_client_id, current_route

        headers = {name.lower(): value for name, value in resp.headers}
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": "INFO",
            "logger": "gunicorn.access",
            "message": "request",
            "method": environ.get("REQUEST_METHOD", "-"),
            "route": current_route.get(),
            "status": int(str(resp.status).split(" ", 1)[0]),
            "duration_ms": round(request_time.total_seconds() * 1000, 1),
            "bytes": getattr(resp, "sent", 0),
            "request_id": headers.get("x-request-id", "-"),
            "client_id": current_client_id.get(),
            "remote_addr": environ.get("REMOTE_ADDR", "-"),
        }
        self.access_log.info(json.dumps(line))


logger_class = AccessLogger


def post_worker_init(worker: Any) -> None:
    """Load every view, serializer and schema module now, then move all that survives into the permanent
    generation (gc.freeze). Without it the collector's full passes walk the ~200,000 objects of the loaded
    application again and again, and stopped a worker in the middle of a request now and then: the tail
    latency of the large lists (bench/results/scale.md) came from those passes."""
    import gc

    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the URLconf and through it every view module
    # And every app's Celery task module, before any request thread runs: a commit hook queueing a task
    # must find it registered (clinic.celery.task_get).
    from clinic.celery import app

    app.loader.import_default_modules()
    gc.collect()
    gc.freeze()


# --- Graceful drain on SIGTERM (docs/operations.md §1: a rolling restart aborts no request) ---------------
#
# Gunicorn's own SIGTERM stops accepting at once and finishes in-flight requests within graceful_timeout.
# Behind a balancer (a Kubernetes Service, haproxy) that is not enough: the balancer keeps sending new
# requests for a few seconds until it notices, and those were refused (7 aborted in a rolling restart).
# So the master first drains: /readyz answers 503 "draining" for GUNICORN_DRAIN_SECONDS while every worker
# keeps serving, then gunicorn's graceful stop lets in-flight requests finish. The pod's
# terminationGracePeriodSeconds must exceed the drain plus graceful_timeout (deploy/kubernetes).
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
DRAIN_SECONDS = float(os.environ.get("GUNICORN_DRAIN_SECONDS", "5"))


def on_starting(server: Any) -> None:
    """In the master, before the workers fork: name the drain file (inherited by the workers through the
    environment) and put the drain in front of gunicorn's SIGTERM handling."""
    drain_file = Path(tempfile.gettempdir()) / f"clinic-drain-{os.getpid()}"
    drain_file.unlink(missing_ok=True)
    os.environ[DRAIN_FILE_VARIABLE] = str(drain_file)
    stop = server.handle_term  # gunicorn's: StopIteration from the main loop, then a graceful stop

    def handle_term() -> None:
        if not drain_file.exists():
            drain_file.touch()
            server.log.info("SIGTERM: /readyz is 503 now; serving %.0f s more, then stopping gracefully", DRAIN_SECONDS)
            # The master's loop only reaps and spawns workers; the workers go on serving meanwhile.
            time.sleep(DRAIN_SECONDS)
        stop()

    server.handle_term = handle_term
    multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if multiproc_dir:  # metrics of workers of a previous run of this container are stale
        for stale in Path(multiproc_dir).glob("*.db"):
            stale.unlink()


def on_exit(server: Any) -> None:
    with contextlib.suppress(KeyError, OSError):
        Path(os.environ[DRAIN_FILE_VARIABLE]).unlink()


def child_exit(server: Any, worker: Any) -> None:
    """A worker exited: its live gauges leave /metrics (its counters stay, summed into the pod's)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
