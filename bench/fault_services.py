"""The services bench/faults.py starts for itself and breaks on purpose: a PostgreSQL cluster (initdb and
pg_ctl from PG_BIN into a temporary folder), a Redis, haproxy, the service's roles through
docker/entrypoint.sh, and an HTTP receiver standing in for the webhook subscriber and the SMS gateway.
Never the shared PostgreSQL or Redis: every port is chosen free at run time."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import redis
from standardwebhooks import Webhook

ROOT = Path(__file__).resolve().parent.parent
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


def free_port(low: int, high: int) -> int:
    """A port in [low, high] nobody listens on (the ranges keep clear of other helpers' fixed ports)."""
    for port in range(low, high + 1):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high}")


def wait_until(what: str, check: Any, timeout: float, interval: float = 0.2) -> float:
    """Seconds until check() is true; RuntimeError after `timeout`."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(Exception):
            if check():
                return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)


class Postgres:
    """A throw-away cluster: trust authentication on 127.0.0.1 only, no fsync (a fast restart is clean)."""

    def __init__(self, folder: Path, port: int, name: str = "postgres") -> None:
        self.folder = folder / name
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.port = port
        self.url = f"postgresql://postgres@127.0.0.1:{port}/clinic"
        # No patient data in PostgreSQL's log (clinic/launch.py POSTGRES_LOG_SETTINGS, docs/operations.md §9).
        self.options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off"
            " -c log_min_error_statement=panic -c log_error_verbosity=terse"
        )
        # PostgreSQL refuses to run as root (CI runs as root): then the server runs as the postgres user.
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *command: str) -> None:
        # Output to a file, never a pipe: the postmaster that pg_ctl starts inherits it and keeps it open.
        output = self.folder / "pg_ctl.out"
        with output.open("ab") as handle:
            result = subprocess.run([*self.as_user, *command], check=False, stdout=handle, stderr=handle)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {output.read_text()[-1000:]}")

    def _ctl(self, *args: str) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args)

    def _folder(self) -> None:
        self.folder.mkdir()
        if self.as_user:
            self.folder.parent.chmod(0o755)  # mkdtemp's 0700 would keep the postgres user out
            shutil.chown(self.folder, "postgres", "postgres")

    def init(self, tablespace: Path | None = None) -> None:
        """The cluster and its `clinic` database; with `tablespace` (an empty folder the server may own: a
        small tmpfs for the full-disk fault) the database's tables and indexes live there, while the WAL
        stays in the data folder (a full pg_wal is a crash, not the error a full data disk gives)."""
        self._folder()
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        createdb = [str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        if tablespace is not None:
            self.tablespace = tablespace
            psql = [str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres"]
            self._run(*psql, "-c", f"CREATE TABLESPACE clinic_data LOCATION '{tablespace}'")
            createdb += ["--tablespace", "clinic_data"]
        self._run(*createdb, "clinic")

    tablespace: Path | None = None

    def init_standby(self, primary: Postgres) -> None:
        """A hot standby streaming from `primary` (pg_basebackup -R: standby.signal and primary_conninfo;
        initdb's pg_hba.conf already trusts replication connections from 127.0.0.1). The primary's
        tablespace is copied to a folder of the standby's own (the same host: -T old=new)."""
        self._folder()
        mapping = []
        if primary.tablespace is not None:
            copy = self.folder / "tablespace"
            mapping = ["-T", f"{primary.tablespace}={copy}"]
        self._run(
            *(str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"),
            *("-D", str(self.data), "-R", "-X", "stream", "-c", "fast", *mapping),
        )
        self.start()

    def start(self) -> None:
        self._ctl("-l", str(self.log), "-o", self.options, "-w", "start")

    def restart(self) -> None:
        """What a minor-version upgrade or a failover does to the clients: every connection is cut."""
        self._ctl("-l", str(self.log), "-o", self.options, "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._ctl("-m", "immediate", "-w", "stop")


# The PgBouncer settings of deploy/kubernetes/base/pgbouncer.yaml that are not about where it runs: the suite
# and tests/operations/test_migrate_lock.py run the manifests' own tuning, read from the manifest itself.
_NOT_INI = {"DATABASE_URL", "LISTEN_PORT", "AUTH_TYPE"}


def manifest_pgbouncer_settings() -> dict[str, str]:
    """pgbouncer.ini keys and values from the env of the manifest's PgBouncer container (the image writes
    each NAME as `name = value`)."""
    import yaml

    manifest = ROOT / "deploy" / "kubernetes" / "base" / "pgbouncer.yaml"
    deployment = next(doc for doc in yaml.safe_load_all(manifest.read_text()) if doc and doc["kind"] == "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    settings = {e["name"].lower(): str(e["value"]) for e in env if e["name"] not in _NOT_INI and "value" in e}
    # Debian 12's PgBouncer is 1.18: max_prepared_statements came in 1.21 (the image's is 1.24), and its
    # value in the manifest, 0, is what an older PgBouncer does anyway (no prepared statement tracking).
    if _pgbouncer_version() < (1, 21) and settings.get("max_prepared_statements") == "0":
        del settings["max_prepared_statements"]
    return settings


def _pgbouncer_version() -> tuple[int, ...]:
    first = subprocess.run(["pgbouncer", "--version"], capture_output=True, text=True, check=True).stdout.split()
    return tuple(int(part) for part in first[1].split("."))


class PgBouncer:
    """PgBouncer (the machine's, Debian's package) between the roles and `upstream`, with the manifests'
    settings; trust authentication on 127.0.0.1 (the upstream cluster trusts 127.0.0.1 too). As root it
    drops to the postgres user (PgBouncer refuses to run as root)."""

    def __init__(self, folder: Path, port: int, upstream_port: int, overrides: dict[str, str] | None = None) -> None:
        self.folder = folder / f"pgbouncer-{port}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.log = self.folder / "pgbouncer.log"
        settings = (
            manifest_pgbouncer_settings()
            | {
                "listen_addr": "127.0.0.1",
                "listen_port": str(port),
                "unix_socket_dir": "",
                "auth_type": "trust",
                "auth_file": str(self.folder / "userlist.txt"),
                "admin_users": "postgres",
                "ignore_startup_parameters": "extra_float_digits",
                "pidfile": str(self.folder / "pgbouncer.pid"),
            }
            | (overrides or {})
        )
        (self.folder / "userlist.txt").write_text('"postgres" ""\n')
        lines = ["[databases]", f"* = host=127.0.0.1 port={upstream_port}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        self.config = self.folder / "pgbouncer.ini"
        self.config.write_text("\n".join(lines) + "\n")
        self.as_root = os.geteuid() == 0
        if self.as_root:
            os.chmod(folder, 0o755)  # noqa: S103 - the postgres user must reach its files (as Postgres does)
            for path in (self.folder, *self.folder.iterdir()):
                shutil.chown(path, "postgres", "postgres")
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        command = ["pgbouncer", *(["-u", "postgres"] if self.as_root else []), str(self.config)]
        self.process = subprocess.Popen(command, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        wait_until(f"pgbouncer on {self.port}", lambda: _accepts(self.port), 10, interval=0.05)

    def stop(self) -> None:
        """SIGTERM: PgBouncer closes every client and server connection at once (a pod's end)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class SmallDisk:
    """A tmpfs of `megabytes` mounted in `folder` (root only: `mount -t tmpfs`), with a folder `data` in it
    that the server may own: PostgreSQL's tablespace for the full-disk fault. fill() writes a file until the
    disk is full (what a runaway log or a bulk load does), free() deletes it."""

    def __init__(self, folder: Path, megabytes: int) -> None:
        self.mount = folder / "small-disk"
        self.data = self.mount / "data"
        self.filler = self.mount / "filler"
        self.megabytes = megabytes
        self.mounted = False

    @staticmethod
    def available() -> bool:
        return os.geteuid() == 0 and shutil.which("mount") is not None

    def create(self) -> None:
        self.mount.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.megabytes}m,mode=0755", "tmpfs", str(self.mount)],
            check=True,
            capture_output=True,
        )
        self.mounted = True
        self.data.mkdir(mode=0o700)
        shutil.chown(self.data, "postgres", "postgres")

    def fill(self) -> int:
        """Bytes written until ENOSPC."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with self.filler.open("wb", buffering=0) as handle:
            while True:
                try:
                    written += handle.write(chunk)
                except OSError:
                    break
        return written

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def remove(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mount)], check=False, capture_output=True)
            self.mounted = False


class Redis:
    def __init__(self, folder: Path, port: int) -> None:
        self.folder = folder
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""),
                *("--appendonly", "no", "--dir", str(self.folder)),
            ],
            stdout=(self.folder / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_until("redis-server", lambda: redis.Redis(port=self.port, socket_timeout=0.5).ping(), 10)

    def stop(self) -> None:
        """Like a crashed or restarted Redis without persistence: its data (queued tasks, locks) is gone."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


class Role:
    """One role (web, worker, beat) exactly as the image runs it: docker/entrypoint.sh ROLE, in a session
    of its own so that a kill reaches gunicorn's or Celery's children as a pod's end would."""

    def __init__(self, name: str, role: str, env: dict[str, str], folder: Path) -> None:
        self.name, self.role, self.env, self.folder = name, role, env, folder
        self.process: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()  # a deliberate stop, against the supervisor's restart of an exited role

    def start(self) -> None:
        self.process = subprocess.Popen(
            [str(ROOT / "docker" / "entrypoint.sh"), self.role],
            cwd=ROOT,
            env=self.env,
            stdout=(self.folder / f"{self.name}.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole process group: the OOM killer or a lost node, no chance to clean up."""
        with self.lock:
            if self.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
                self.process = None

    def terminate(self, timeout: float = 60) -> float:
        """SIGTERM to the main process only (what Kubernetes sends); seconds until it exited."""
        with self.lock:
            assert self.process is not None
            started = time.monotonic()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            finally:
                with contextlib.suppress(ProcessLookupError):  # stragglers of a failed stop
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process = None
            return time.monotonic() - started

    def restart_if_exited(self) -> bool:
        """Start the role again if it exited on its own (not stopped by the suite): a restart policy."""
        with self.lock:
            if self.process is None or self.process.poll() is None:
                return False
            self.start()
            return True


def http_status(url: str, timeout: float = 2) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - our own http URL
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


HAPROXY_CONFIG = """\
global
    maxconn 500
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    retries 2
    option redispatch
    retry-on conn-failure
    # When every pod is out of rotation (PostgreSQL down: /readyz 503 everywhere) the balancer answers,
    # like the service does, 503 problem+json with Retry-After instead of a bare page.
    http-error status 503 content-type "application/problem+json" hdr Retry-After 5 \
string '{{"type":"about:blank","title":"Service unavailable","status":503}}'
frontend api
    bind 127.0.0.1:{port}
    default_backend pods
backend pods
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    default-server check inter 1s fall 2 rise 2
{servers}
"""


class Haproxy:
    def __init__(self, folder: Path, port: int, backends: dict[str, int]) -> None:
        self.folder, self.port = folder, port
        servers = "\n".join(f"    server {name} 127.0.0.1:{p}" for name, p in backends.items())
        self.config = folder / "haproxy.cfg"
        self.config.write_text(HAPROXY_CONFIG.format(port=port, servers=servers))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["haproxy", "-db", "-f", str(self.config)],
            stdout=(self.folder / "haproxy.log").open("ab"),
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


class Receiver:
    """The webhook subscriber (checks the Standard Webhooks signature) and the SMS gateway, on one port it
    keeps across an outage (stop closes the listening socket: connections are refused)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.secret = ""
        self.lock = threading.Lock()
        self.webhooks: list[dict[str, Any]] = []
        self.sms: list[dict[str, Any]] = []
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                if self.path.startswith("/sms"):
                    with receiver.lock:
                        receiver.sms.append(json.loads(body) | {"at": time.monotonic()})
                    answer = json.dumps({"id": f"sms-{len(receiver.sms)}"}).encode()
                    self._answer(200, answer)
                    return
                try:
                    Webhook(receiver.secret).verify(body, headers)
                    valid = True
                except Exception:  # noqa: BLE001 - any failure is an invalid delivery
                    valid = False
                envelope = json.loads(body) if valid else {}
                with receiver.lock:
                    receiver.webhooks.append(
                        {
                            "webhook_id": headers.get("webhook-id"),
                            "valid": valid,
                            "type": envelope.get("type"),
                            "appointment_id": envelope.get("data", {}).get("appointment", {}).get("appointment_id"),
                            "at": time.monotonic(),
                        }
                    )
                self._answer(204 if valid else 400, b"")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
