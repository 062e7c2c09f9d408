"""MLLP framing (HL7 v2 Minimal Lower Layer Protocol, release 2): <VT> message <FS><CR>."""

from __future__ import annotations

START = b"\x0b"
END = b"\x1c\x0d"


def frame(message: str) -> bytes:
    return START + message.encode("utf-8") + END


class FrameError(ValueError):
    """Bytes outside a frame, or a frame over the size limit."""


class FrameReader:
    """Accumulates received bytes and yields complete frames' payloads; whitespace between frames is allowed,
    anything else outside a frame is an error, as is a frame larger than `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._in_frame = False

    @property
    def partial(self) -> bool:
        return self._in_frame or bool(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames: list[bytes] = []
        while self._buffer:
            if not self._in_frame:
                stripped = self._buffer.lstrip(b" \t\r\n")
                if not stripped:
                    self._buffer.clear()
                    break
                if stripped[:1] != START:
                    raise FrameError("Bytes outside an MLLP frame.")
                self._buffer = bytearray(stripped[1:])
                self._in_frame = True
            end = self._buffer.find(END)
            if end < 0:
                if len(self._buffer) > self.max_bytes:
                    raise FrameError(f"The message is larger than {self.max_bytes} bytes.")
                break
            if end > self.max_bytes:
                raise FrameError(f"The message is larger than {self.max_bytes} bytes.")
            frames.append(bytes(self._buffer[:end]))
            del self._buffer[: end + len(END)]
            self._in_frame = False
        return frames
