"""One MLLP connection to a destination: send a message, read its acknowledgement, with short timeouts.

The connection is kept across the messages of one drain (integrations.hl7.outbox) and dropped at the
first error, so the next attempt starts on a fresh one.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from integrations.hl7 import er7, mllp

ACK_MAX_BYTES = 64 * 1024


class TransportError(Exception):
    """No acknowledgement: refused, unreachable, timed out, closed, or not an ACK of this message."""


@dataclass(frozen=True)
class Ack:
    code: str  # MSA-1
    text: str  # MSA-3 and the ERR segments, shortened

    @property
    def accepted(self) -> bool:
        return self.code in ("AA", "CA")


def _ack_text(payload: bytes) -> str:
    """The ACK decoded as its MSH-18 declares (UTF-8 when it declares nothing we read). An ACK whose bytes
    are not what it declares is read as Latin-1, which takes any byte: the attempt log keeps what was sent,
    never a replacement character."""
    codec = er7.CHARSET_CODECS.get(er7.declared_charset(payload).upper(), "utf-8")
    try:
        return payload.decode(codec)
    except UnicodeDecodeError:
        return payload.decode("latin-1")


def ack_parse(payload: bytes, control_id: str) -> Ack:
    try:
        segments = er7.parse(_ack_text(payload))
    except er7.Er7Error as exc:
        raise TransportError(f"The answer is not an HL7 message: {exc}") from None
    msa = next((s for s in segments if s.name == "MSA"), None)
    if msa is None:
        raise TransportError("The answer has no MSA segment.")
    if msa.get(2) != control_id:
        raise TransportError(f"The ACK is for control id {msa.get(2)!r}, not {control_id!r}.")
    errors = [" ".join(filter(None, (s.get(3, 1), s.get(3, 2), s.get(8)))) for s in segments if s.name == "ERR"]
    text = "; ".join(filter(None, [msa.get(3), *errors]))
    return Ack(code=msa.get(1).upper(), text=text[:500])


class Connection:
    def __init__(self, host: str, port: int, *, connect_timeout: float, ack_timeout: float) -> None:
        self.host, self.port = host, port
        self.connect_timeout, self.ack_timeout = connect_timeout, ack_timeout
        self._sock: socket.socket | None = None

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                self._sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
            except OSError as exc:
                raise TransportError(f"Could not connect: {type(exc).__name__}: {exc}") from None
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self._sock

    def send(self, message: str, control_id: str) -> Ack:
        """Send one message and wait for its ACK (at most `ack_timeout` in all)."""
        sock = self._connect()
        deadline = time.monotonic() + self.ack_timeout
        reader = mllp.FrameReader(ACK_MAX_BYTES)
        try:
            sock.settimeout(self.ack_timeout)
            sock.sendall(mllp.frame(message))
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("timed out")
                sock.settimeout(remaining)
                data = sock.recv(65536)
                if not data:
                    raise TransportError("The destination closed the connection without an ACK.")
                frames = reader.feed(data)
                if frames:
                    return ack_parse(frames[0], control_id)
        except (TransportError, mllp.FrameError) as exc:
            self.close()
            raise TransportError(str(exc)) from None
        except TimeoutError:
            self.close()
            raise TransportError(f"No ACK within {self.ack_timeout:g} s.") from None
        except OSError as exc:
            self.close()
            raise TransportError(f"Connection error: {type(exc).__name__}: {exc}") from None
