"""A search request read from the query string, and its answer as rows of SQL (selectors for the views).

Result parameters: `_count` 0..100 (default 20; 0 answers the total only), `_offset` (the paging links
carry it), `_sort` (comma-separated keys the type declares, `-` for descending; the primary key always
breaks ties), `_include` (only where declared: Appointment:patient), `_format` (JSON only). Any other
parameter the type does not declare is a 400 OperationOutcome naming it, unless the client sent
`Prefer: handling=lenient`: then it is ignored, and the Bundle says so in an OperationOutcome entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from integrations.fhir.outcome import FhirError
from integrations.fhir.registry import ResourceType
from integrations.fhir.search import bad
from integrations.models import ApiClient

DEFAULT_COUNT = 20
MAX_COUNT = 100
# OFFSET beyond this is refused rather than sent to PostgreSQL (a bigint; and a deep OFFSET walks every row
# before it): ten thousand pages of 100.
MAX_OFFSET = 1_000_000
# No search value of ours is longer (a comma list of 20 ids is 740): longer is a mistake or an attack on the
# regex and trigram matching.
MAX_VALUE_LENGTH = 1000
JSON_FORMATS = frozenset({"json", "application/json", "application/fhir+json", "application/json+fhir"})
RESULT_PARAMS = frozenset({"_count", "_offset", "_sort", "_include", "_format"})


@dataclass
class SearchRequest:
    filters: list[Q]
    count: int
    offset: int
    order: list[str]
    includes: list[str]
    used: list[tuple[str, str]]  # the parameters applied, for the self link
    ignored: list[str] = field(default_factory=list)  # unknown names ignored under handling=lenient


def integer(name: str, raw: str, low: int, high: int) -> int:
    if not raw.isascii() or not raw.isdigit():
        raise bad(name, f"{raw!r} is not a whole number.")
    if len(raw) > 12 or not low <= int(raw) <= high:
        raise bad(name, f"must be between {low} and {high}.")
    return int(raw)


def check_format(params: Iterable[tuple[str, str]]) -> None:
    for name, value in params:
        if name == "_format" and value not in JSON_FORMATS:
            raise FhirError(406, f"_format {value!r}: this server answers JSON only.", expression=["_format"])


def parse(resource: ResourceType, params: list[tuple[str, str]], *, lenient: bool) -> SearchRequest:
    request = SearchRequest(filters=[], count=DEFAULT_COUNT, offset=0, order=[], includes=[], used=[])
    unknown: list[str] = []
    check_format(params)
    for name, value in params:
        if len(value) > MAX_VALUE_LENGTH:
            raise bad(name, f"longer than {MAX_VALUE_LENGTH} characters.")
        if name == "_count":
            request.count = integer(name, value, 0, MAX_COUNT)
        elif name == "_offset":
            request.offset = integer(name, value, 0, MAX_OFFSET)
        elif name == "_sort":
            request.order = _order(resource, value)
            request.used.append((name, value))
        elif name == "_include":
            if value not in resource.includes:
                supported = ", ".join(resource.includes) or "none"
                raise FhirError(
                    400,
                    f"_include={value} is not supported on {resource.name} (supported: {supported}).",
                    code="not-supported",
                    expression=["_include"],
                )
            if value not in request.includes:
                request.includes.append(value)
            request.used.append((name, value))
        elif name == "_format":
            continue
        elif name in resource.params:
            request.filters.append(_alternatives(resource, name, value))
            request.used.append((name, value))
        else:
            unknown.append(name)
    if unknown and not lenient:
        names = ", ".join(dict.fromkeys(unknown))
        raise FhirError(
            400,
            f"Unknown or unsupported search parameter(s) on {resource.name}: {names}. "
            "Send Prefer: handling=lenient to have them ignored.",
            code="not-supported",
            expression=list(dict.fromkeys(unknown)),
        )
    request.ignored = list(dict.fromkeys(unknown))
    if not request.order:
        request.order = list(resource.order)
    return request


def _alternatives(resource: ResourceType, name: str, value: str) -> Q:
    build = resource.params[name].build
    values = [part for part in value.split(",")]
    if any(part == "" for part in values) or not value:
        raise bad(name, "an empty value.")
    combined = Q(pk__in=[])
    for part in values:
        combined |= build(part, name)
    return combined


def _order(resource: ResourceType, value: str) -> list[str]:
    order: list[str] = []
    for key in value.split(","):
        descending = key.startswith("-")
        name = key[1:] if descending else key
        column = "id" if name == "_id" else resource.sorts.get(name)
        if column is None:
            allowed = ", ".join(["_id", *resource.sorts]) or "_id"
            raise bad("_sort", f"{key!r} is not a sort key of {resource.name} ({allowed}, each optionally with -).")
        order.append(f"-{column}" if descending else column)
    return [*order, "pk"]


def rows(client: ApiClient, resource: ResourceType, request: SearchRequest) -> QuerySet[Any]:
    found = resource.rows(client)
    for condition in request.filters:
        found = found.filter(condition)
    return found.order_by(*request.order)


def page(client: ApiClient, resource: ResourceType, request: SearchRequest) -> tuple[list[Any], int]:
    """The page's rows and the total: one COUNT, the page's ids, then their rows (none when the count is 0).

    The ids first, then the rows (a "deferred join"): the id query reads only what the filters and the order
    need, from indexes where they carry it, so a name matching 10,000 patients sorts 10,000 index entries
    rather than fetching 10,000 table rows for the 20 shown."""
    found = rows(client, resource, request)
    total = found.count()
    if request.count == 0 or request.offset >= total:
        return [], total
    ids = list(found.values_list("pk", flat=True)[request.offset : request.offset + request.count])
    by_id = {row.pk: row for row in resource.rows(client).filter(pk__in=ids)}
    return [by_id[key] for key in ids if key in by_id], total  # a row deleted in between is left out
