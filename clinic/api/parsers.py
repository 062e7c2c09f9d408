"""JSON parsing that reads numbers with a fraction as Decimal, so money never passes through float."""

from __future__ import annotations

import codecs
import json
from decimal import Decimal
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            return json.loads(text, parse_float=Decimal, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"Request body is not valid JSON: {exc}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")
