"""JSON parsing that reads numbers with a fraction as Decimal, so money never passes through float.

It also refuses what PostgreSQL or the interpreter cannot take (docs/api-rules.md §7): nesting deeper than
MAX_JSON_DEPTH (json.loads recursed until RecursionError, a 500, at about 1,000 levels) and NUL characters
in any string or key (PostgreSQL text cannot hold them), naming the field by its dotted path.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ErrorDetail, ParseError, ValidationError

MAX_JSON_DEPTH = 64
# The tokens that matter for nesting: an escape pair (skipped whole, so an escaped quote never toggles), a
# quote, a bracket. One left-to-right pass over them is linear in the body; matching whole string literals
# with a regex was not (an unterminated literal full of escaped quotes made it rescan the rest of the body
# from every quote: quadratic time in the body's length).
_DEPTH_TOKEN = re.compile(r'\\.|["\[\]{}]', re.DOTALL)


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
        except (ValueError, UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"Request body is not valid text in {encoding}: {exc}") from None
        if _nesting_depth(text) > MAX_JSON_DEPTH:
            raise ParseError(f"Request body is nested deeper than {MAX_JSON_DEPTH} levels.")
        try:
            data = json.loads(text, parse_float=Decimal, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"Request body is not valid JSON: {exc}") from None
        nul_fields = sorted(set(_paths_with_nul(data)))
        if nul_fields:
            raise ValidationError(
                {
                    name or "body": [
                        ErrorDetail("Null characters are not allowed.", code="null_characters_not_allowed")
                    ]
                    for name in nul_fields
                }
            )
        return data


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting outside string literals (or the first depth past MAX_JSON_DEPTH), found
    without recursion in one linear pass."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # cannot be too deep: the common case costs two counts
    depth = deepest = 0
    in_string = False
    for match in _DEPTH_TOKEN.finditer(text):
        lexeme = match.group()
        if lexeme == '"':
            in_string = not in_string
        elif in_string or len(lexeme) == 2:
            continue  # a bracket inside a string literal, or an escape pair
        elif lexeme in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return depth  # too deep already: no need to read on
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _paths_with_nul(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, str):
        if "\x00" in value:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                yield child.replace("\x00", "\\u0000")
            else:
                yield from _paths_with_nul(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths_with_nul(item, f"{path}.{index}" if path else str(index))
