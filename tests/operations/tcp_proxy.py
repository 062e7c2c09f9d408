"""A TCP proxy the tests start in front of PostgreSQL (or Redis) and cut: the network failing under a
running request, which pointing a connection at a closed port cannot show."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    """Forwards 127.0.0.1:<port> to `upstream` (host, port), or to PostgreSQL's Unix socket in the directory
    `host` when it is a path (the embedded server of `make test` listens on a socket only). `cut()` closes every open connection and refuses new ones;
    `cut_when(marker)` does so the moment a client sends bytes containing `marker` (before forwarding
    them), so a test can break the connection under one chosen SQL statement."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self.is_cut = threading.Event()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _connect_upstream(self) -> socket.socket:
        host, port = self.upstream
        if not host.startswith("/"):
            return socket.create_connection(self.upstream)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.connect(f"{host}/.s.PGSQL.{port}")
        return unix

    def cut_when(self, marker: bytes) -> None:
        self._marker = marker

    def cut(self) -> None:
        with self._lock:
            self.is_cut.set()
            self.cuts += 1
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def close(self) -> None:
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            if self.is_cut.is_set():  # refused: the server is "down"
                downstream.close()
                continue
            upstream = self._connect_upstream()
            with self._lock:
                self._sockets += [downstream, upstream]
            threading.Thread(target=self._pump, args=(downstream, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, downstream, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    target.shutdown(socket.SHUT_WR)
                return
            if from_client and self._marker is not None and self._marker in data:
                self._marker = None
                self.cut()
                return
            try:
                target.sendall(data)
            except OSError:
                return
