"""ER7 (the pipe-and-hat encoding of HL7 v2) written and read with the standard delimiters `|^~\\&`.

Small and fast on purpose: hl7apy takes tens of milliseconds per message, so it checks what we emit in the
tests (every message kind, strict validation) rather than on the hot path. Escapes follow HL7 v2.5.1
section 2.7: \\F\\ \\S\\ \\T\\ \\R\\ \\E\\; control characters are dropped on output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class Repeated(tuple[str | Sequence[str | Sequence[str]], ...]):
    """A field's repetitions (written joined by `~`), each text or its components as a `Field` is: PID-13
    carries the phone and the e-mail address as two XTN repetitions."""


# A field is text, its components (each text, or its subcomponents), or its repetitions.
Field = str | Repeated | Sequence[str | Sequence[str]] | None

# MSH-18 (HL7 table 0211) character sets read here, as Python codecs; `UNICODE` and `UTF-8` are spellings
# senders use for `UNICODE UTF-8` (docs/hl7-inbound.md "Character sets").
CHARSET_CODECS = {"ASCII": "ascii", "8859/1": "latin-1", "UNICODE UTF-8": "utf-8", "UNICODE": "utf-8", "UTF-8": "utf-8"}

_ESCAPES = {"\\": "\\E\\", "|": "\\F\\", "^": "\\S\\", "&": "\\T\\", "~": "\\R\\"}
_UNESCAPES = {"E": "\\", "F": "|", "S": "^", "T": "&", "R": "~"}


def escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch == "\r" or ch == "\n":
            out.append("\\.br\\")
        elif ord(ch) >= 0x20:
            out.append(ch)
    return "".join(out)


def _unescaped(code: str) -> str:
    """One escape's text: a delimiter, or (FT formatting, section 2.7.6) a line break for `.br`, `.sp` (as
    many as it says) and `.ce`; highlighting, indents and hexadecimal data are dropped."""
    if code in _UNESCAPES:
        return _UNESCAPES[code]
    if code in (".br", ".ce"):
        return "\n"
    if code.startswith(".sp"):
        count = code[3:].strip().lstrip("+")
        return "\n" * (min(int(count), 10) if count.isdigit() and int(count) > 0 else 1)
    return ""


def unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        end = text.find("\\", i + 1) if ch == "\\" else -1
        if end > i:
            out.append(_unescaped(text[i + 1 : end]))
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _field(value: Field) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, Repeated):
        return "~".join(_field(repetition) for repetition in value).rstrip("~")
    return "^".join(escape(c) if isinstance(c, str) else "&".join(escape(s) for s in c) for c in value).rstrip("^")


def segment(name: str, *fields: Field) -> str:
    """`segment("PID", None, None, ["P1", "", "", "CLINIC", "MR"])` -> `PID|||P1^^^CLINIC^MR`."""
    return "|".join([name, *(_field(f) for f in fields)]).rstrip("|")


def msh(*fields: Field) -> str:
    """MSH: its field 1 is the separator and field 2 the encoding characters, written as they are;
    `fields` start at MSH-3."""
    return "MSH|^~\\&|" + "|".join(_field(f) for f in fields).rstrip("|")


def message(segments: Sequence[str]) -> str:
    return "\r".join(segments) + "\r"


@dataclass(frozen=True)
class Segment:
    """One received segment: `seg[3]` is field 3 (MSH counts its separator as field 1, as the standard does)."""

    name: str
    fields: tuple[str, ...]  # raw (escaped) text of each field, fields[0] being the name

    def raw(self, number: int) -> str:
        return self.fields[number] if number < len(self.fields) else ""

    def get(self, number: int, component: int = 1, subcomponent: int = 1) -> str:
        """The unescaped text of field `number`, first repetition, component and subcomponent (1-based)."""
        value = self.raw(number).split("~", 1)[0]
        parts = value.split("^")
        value = parts[component - 1] if component - 1 < len(parts) else ""
        subparts = value.split("&")
        value = subparts[subcomponent - 1] if subcomponent - 1 < len(subparts) else ""
        return unescape(value)


class Er7Error(ValueError):
    """The bytes are not an HL7 v2 message in ER7 with the standard delimiters."""


def parse(text: str) -> list[Segment]:
    """Split a message into segments. Refuses anything not starting with `MSH|^~\\&`; an MSH written with other
    delimiters is refused too (we answer in the standard ones)."""
    lines = [line for line in text.replace("\r\n", "\r").replace("\n", "\r").split("\r") if line.strip()]
    if not lines or not lines[0].startswith("MSH"):
        raise Er7Error("The message does not start with an MSH segment.")
    if not lines[0].startswith("MSH|^~\\&"):
        raise Er7Error("MSH must use the standard delimiters |^~\\&.")
    segments = []
    for line in lines:
        name = line[:3]
        if (len(line) > 3 and line[3] != "|") or not name.isalnum() or not name[0].isalpha():
            raise Er7Error("A segment does not start with a three-character name.")
        parts = line.split("|")
        if name == "MSH":
            parts = ["MSH", "|", *parts[1:]]  # MSH-1 is the field separator itself
        segments.append(Segment(name=name.upper(), fields=tuple(parts)))
    return segments


def declared_charset(payload: bytes) -> str:
    """MSH-18's first repetition, read before the message is decoded: MSH as Latin-1 (one character per byte,
    so the delimiters fall where they are in any character set); "" when absent or not an MSH."""
    line = payload.lstrip(b"\r\n").split(b"\r", 1)[0].split(b"\n", 1)[0].decode("latin-1")
    if not line.startswith("MSH|"):
        return ""
    fields = line.split("|")
    return fields[17].split("~")[0].strip() if len(fields) > 17 else ""
