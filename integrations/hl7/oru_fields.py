"""ORU fields read as values (docs/hl7-inbound.md, "Values"): an HL7 DTM as an instant, and OBX-5 by OBX-2 for
the analyte it reports. A field that cannot be read raises ValueError (times) or Rejected with its ERR."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils import timezone

from integrations.hl7 import er7
from integrations.hl7.acks import Problem, Rejected, printable
from lab import ports

_DTM = re.compile(r"(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(?:\.\d{1,4})?([+-]\d{4})?")


def dtm_read(text: str, fallback: datetime) -> datetime:
    """An HL7 DTM, YYYY[MM[DD[HH[MM[SS[.S[S[S[S]]]]]]]]][+/-ZZZZ]; without an offset, the clinic's
    TIME_ZONE. ValueError naming the text when it is no such time (year 0, month 13, offset +9999...)."""
    if not text:
        return fallback
    match = _DTM.fullmatch(text)
    if match is None:
        raise ValueError(f"{printable(text)!r} is not an HL7 date and time (YYYYMMDDHHMMSS[+ZZZZ]).")
    year, month, day, hour, minute, second, offset = match.groups()
    if (month is None and day is not None) or (hour is None and minute is not None):
        raise ValueError(f"{text!r} is not an HL7 date and time.")
    try:
        moment = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0))  # noqa: DTZ001 - made aware below
        moment = moment.replace(second=int(second or 0))
        if year < "1900":
            raise ValueError
        if offset is None:
            return timezone.make_aware(moment)
        hours, minutes = int(offset[1:3]), int(offset[3:5])
        if hours > 14 or minutes > 59:
            raise ValueError
        shift = timedelta(hours=hours, minutes=minutes) * (1 if offset[0] == "+" else -1)
        return (moment - shift).replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{text!r} is not a possible date and time.") from None


_NM = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_SN_COMPARATORS = {"": "", "=": "", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True)
class ObxValue:
    value: Any
    comparator: str = ""
    high: Decimal | None = None


def _number(text: str, obx_number: int, kind: str) -> Decimal:
    text = text.strip()
    if _NM.fullmatch(text):
        try:
            return Decimal(text)
        except InvalidOperation:
            pass
    raise Rejected("AE", [Problem("102", f"OBX-5 is not a number ({kind}).", ("OBX", obx_number, 5))])


def obx_value_read(seg: er7.Segment, obx_number: int, analyte: ports.OruAnalyte | None) -> ObxValue:
    """OBX-5 read by OBX-2 for this analyte (None: an imaging report), as docs/hl7-inbound.md "Values" says:
    SN as comparator and number or a range, a ratio refused on a quantity, CE/CWE by code or text."""
    value_type = seg.get(2).strip().upper() or "ST"
    raw = seg.raw(5)
    quantity = analyte is not None and analyte.value_type == "quantity"
    if value_type == "NM":
        text = er7.unescape(raw.split("~")[0])
        return ObxValue(_number(text, obx_number, "NM")) if quantity else ObxValue(text)
    if value_type == "SN":
        parts = [er7.unescape(part).strip() for part in raw.split("~")[0].split("^")][:4]
        comparator, first, separator, second = [*parts, "", "", ""][:4]
        if not quantity:
            return ObxValue(f"{comparator}{first}{separator}{second}")
        if comparator not in _SN_COMPARATORS:
            raise Rejected(
                "AE", [Problem("102", f"SN comparator {comparator!r} cannot be stored.", ("OBX", obx_number, 5))]
            )
        if not separator and not second:
            return ObxValue(_number(first, obx_number, "SN"), comparator=_SN_COMPARATORS[comparator])
        if separator == "-" and second and not _SN_COMPARATORS[comparator]:
            return ObxValue(_number(first, obx_number, "SN"), high=_number(second, obx_number, "SN"))
        assert analyte is not None
        shown = f"{first}{separator}{second}"
        kind = "a ratio" if separator in (":", "/") else "not a number or a range"
        text = f"SN {shown} is {kind}; {analyte.code} is a quantity: send a number, a comparator and a number (>14) or a range (10-20)."
        raise Rejected("AE", [Problem("102", text, ("OBX", obx_number, 5))])
    if value_type == "ST":
        return ObxValue(er7.unescape(raw.split("~")[0]))
    if value_type in ("TX", "FT"):
        return ObxValue("\n".join(er7.unescape(rep) for rep in raw.split("~")))
    if value_type in ("CE", "CWE", "CNE"):
        code, text, alternate, alternate_text = (seg.get(5, n).strip() for n in (1, 2, 4, 5))
        if analyte is not None and analyte.value_type == "coded":
            allowed = {value.casefold(): value for value in analyte.coded_values}
            for candidate in (code, text, alternate, alternate_text):
                if candidate and candidate.casefold() in allowed:
                    return ObxValue(allowed[candidate.casefold()])
        return ObxValue(text or code)
    raise Rejected(
        "AE",
        [Problem("102", f"OBX-2 {value_type!r} is not taken: NM, SN, ST, TX, FT, CE or CWE.", ("OBX", obx_number, 2))],
    )
