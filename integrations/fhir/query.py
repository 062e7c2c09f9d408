"""A search request read from the query string, and its answer as rows of SQL (selectors for the views).

Result parameters (docs/fhir.md §4): `_count` (default 20; above 100 capped to 100, the self link showing
100; 0 answers as `_summary=count`), `_offset` (the paging links carry it), `_sort` (comma-separated keys
the type declares, `-` for descending; the primary key always breaks ties), `_include` (only where
declared: Appointment:patient), `_summary` (true, data, count, false; text is refused: no narrative),
`_elements`, `_total` (accurate, the default, and estimate, which is accurate too; none leaves out the
COUNT and Bundle.total), `_lastUpdated` (a date on every type), `_format` (JSON only). Any other parameter
the type does not declare is a 400 OperationOutcome naming it, unless the client sent
`Prefer: handling=lenient`: then it is ignored, and the Bundle says so in an OperationOutcome entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet, Window

from integrations.fhir import elements
from integrations.fhir.outcome import FhirError
from integrations.fhir.registry import ResourceType
from integrations.fhir.search import DateRange, bad, date_filter, parse_date
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
SUMMARY_MODES = ("true", "false", "data", "count")
TOTAL_MODES = ("none", "estimate", "accurate")
RESULT_PARAMS = frozenset({"_count", "_offset", "_sort", "_include", "_format", "_summary", "_elements", "_total"})


@dataclass
class ResultParams:
    """What a search answers with, whatever it filters on: the page, the order, the cut of each resource."""

    count: int = DEFAULT_COUNT
    offset: int = 0
    order: list[str] = field(default_factory=list)
    summary: str = "false"
    elements: tuple[str, ...] = ()
    total: str = "accurate"
    used: list[tuple[str, str]] = field(default_factory=list)  # the parameters applied, for the self link

    @property
    def count_only(self) -> bool:
        return self.summary == "count"

    @property
    def subsetted(self) -> bool:
        return bool(self.elements) or self.summary in ("true", "data")

    def subset(self, resource: dict[str, Any]) -> dict[str, Any]:
        return elements.subset(resource, summary=self.summary, elements=self.elements)


@dataclass
class SearchRequest(ResultParams):
    filters: list[Q] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # unknown names ignored under handling=lenient


def integer(name: str, raw: str, low: int, high: int) -> int:
    if not raw.isascii() or not raw.isdigit():
        raise bad(name, f"{raw!r} is not a whole number.")
    if len(raw) > 12 or not low <= int(raw) <= high:
        raise bad(name, f"must be between {low} and {high}.")
    return int(raw)


def capped(name: str, raw: str, high: int) -> int:
    """A whole number of 0 or more; above `high` it is `high` (a page size asked too big is not an error)."""
    if not raw.isascii() or not raw.isdigit():
        raise bad(name, f"{raw!r} is not a whole number of 0 or more.")
    digits = raw.lstrip("0") or "0"
    return high if len(digits) > 12 else min(int(digits), high)


def result_param(
    result: ResultParams, resource_type: str, name: str, value: str, *, max_count: int = MAX_COUNT
) -> bool:
    """Apply one of the result parameters shared by every search (Slot's too); False if `name` is none."""
    if name == "_count":
        result.count = capped(name, value, max_count)
        if result.count == 0:
            result.summary = "count"
    elif name == "_offset":
        result.offset = integer(name, value, 0, MAX_OFFSET)
    elif name == "_summary":
        if value == "text":
            raise FhirError(
                400,
                "_summary=text is not supported: the server writes no narrative (true, data, count, false are).",
                code="not-supported",
                expression=["_summary"],
            )
        if value not in SUMMARY_MODES:
            raise bad(name, f"{value!r} is not one of {', '.join(SUMMARY_MODES)}.")
        if result.summary != "count":  # _count=0 stays a count
            result.summary = value
        result.used.append((name, value))
    elif name == "_elements":
        names = [part.strip() for part in value.split(",")]
        if not all(names):
            raise bad(name, "an empty element name.")
        unknown = elements.unknown_elements(resource_type, names)
        if unknown:
            raise bad(name, f"not an element of {resource_type}: {', '.join(unknown)}.")
        result.elements = tuple(dict.fromkeys([*result.elements, *names]))
        result.used.append((name, value))
    elif name == "_total":
        if value not in TOTAL_MODES:
            raise bad(name, f"{value!r} is not one of {', '.join(TOTAL_MODES)}.")
        result.total = value
        result.used.append((name, value))
    elif name == "_format":
        pass  # check_format has answered it
    else:
        return False
    return True


def check_format(params: Iterable[tuple[str, str]]) -> None:
    for name, value in params:
        if name == "_format" and value not in JSON_FORMATS:
            raise FhirError(406, f"_format {value!r}: this server answers JSON only.", expression=["_format"])


def parse(resource: ResourceType, params: list[tuple[str, str]], *, lenient: bool) -> SearchRequest:
    request = SearchRequest()
    unknown: list[str] = []
    check_format(params)
    for name, value in params:
        if len(value) > MAX_VALUE_LENGTH:
            raise bad(name, f"longer than {MAX_VALUE_LENGTH} characters.")
        if result_param(request, resource.name, name, value):
            continue
        if name == "_sort":
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
        elif name in resource.params:
            request.filters.append(_alternatives(resource.params[name].build, name, value))
            request.used.append((name, value))
        elif name == "_lastUpdated":  # where the type's own filters do not say it
            request.filters.append(_alternatives(date_filter(resource.updated_field), name, value))
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


def _alternatives(build: Any, name: str, value: str) -> Q:
    values = value.split(",")
    if any(part == "" for part in values) or not value:
        raise bad(name, "an empty value.")
    alternatives = [build(part, name) for part in values]
    if any(not condition for condition in alternatives):
        # An empty Q is "every row" (`system|`); Django's `|` drops it as if it were "no condition".
        return Q()
    combined = alternatives[0]
    for condition in alternatives[1:]:
        combined |= condition
    return combined


def _order(resource: ResourceType, value: str) -> list[str]:
    order: list[str] = []
    for key in value.split(","):
        descending = key.startswith("-")
        name = key[1:] if descending else key
        column = {"_id": "id", "_lastUpdated": resource.updated_field}.get(name) or resource.sorts.get(name)
        if column is None:
            allowed = ", ".join(dict.fromkeys(["_id", "_lastUpdated", *resource.sorts]))
            raise bad("_sort", f"{key!r} is not a sort key of {resource.name} ({allowed}, each optionally with -).")
        order.append(f"-{column}" if descending else column)
    return [*order, "pk"]


def rows(client: ApiClient, resource: ResourceType, request: SearchRequest) -> QuerySet[Any]:
    found = resource.rows(client)
    for condition in request.filters:
        found = found.filter(condition)
    return found.order_by(*request.order)


@dataclass
class Page:
    rows: list[Any]
    total: int | None  # None under _total=none
    more: bool  # rows remain after this page


def page(client: ApiClient, resource: ResourceType, request: SearchRequest) -> Page:
    """The page's rows and the total: the page's ids with the total (a window count; none under
    `_total=none`), then their rows (a COUNT alone under `_summary=count`, or for a page past the end).

    The ids first, then the rows (a "deferred join"): the id query reads only what the filters and the order
    need, from indexes where they carry it, so a name matching 10,000 patients sorts 10,000 index entries
    rather than fetching 10,000 table rows for the 20 shown. Without a total, one id more than the page
    says whether a next page exists."""
    found = rows(client, resource, request)
    if request.count_only:
        return Page([], found.count(), more=False)
    window = slice(request.offset, request.offset + request.count + 1)
    total: int | None = None
    if request.total == "none":
        ids = list(found.values_list("pk", flat=True)[window])
    else:
        # The total with the page's ids, in one pass over the matches (COUNT(*) OVER ()): a patient with
        # 3,800 lab results read them twice, once to count and once to page (issue 34, Observation?patient=).
        counted = list(found.annotate(_total=Window(Count("pk"))).values_list("pk", "_total")[window])
        ids = [key for key, _ in counted]
        total = counted[0][1] if counted else (found.count() if request.offset else 0)
    more = len(ids) > request.count
    ids = ids[: request.count]
    by_id = {row.pk: row for row in resource.rows(client).filter(pk__in=ids)}
    return Page([by_id[key] for key in ids if key in by_id], total, more)  # a row deleted in between is left out


# --- Patient/{id}/$everything ------------------------------------------------------------------------------

EVERYTHING_COUNT = 1000
EVERYTHING_MAX_COUNT = 5000
EVERYTHING_PARAMS = frozenset({"start", "end", "_since", "_type", "_count", "_offset"})


@dataclass
class EverythingRequest:
    """The operation's parameters (http://hl7.org/fhir/OperationDefinition/Patient-everything): `start` and
    `end` the window of care dates (each resource's clinical date, ResourceType.clinical_date), `_since`
    the resources updated since an instant, `_type` the types, `_count` and `_offset` the page."""

    types: set[str]
    result: ResultParams
    start: DateRange | None = None
    end: DateRange | None = None
    since: DateRange | None = None
    kept: list[tuple[str, str]] = field(default_factory=list)  # for the paging links

    def narrow(self, resource: ResourceType, found: QuerySet[Any]) -> QuerySet[Any]:
        if self.since is not None:
            found = found.filter(**{f"{resource.updated_field}__gte": self.since.lo})
        column = resource.clinical_date
        if column is None or (self.start is None and self.end is None):
            return found
        window = Q()
        if self.start is not None:
            window &= Q(**{f"{column}__gte": self.start.lo.date() if resource.clinical_date_only else self.start.lo})
        if self.end is not None:
            window &= Q(**{f"{column}__lt": self.end.hi.date() if resource.clinical_date_only else self.end.hi})
        # A row without its date (a diagnosis of unknown onset) is not known to fall outside the window.
        return found.filter(window | Q(**{f"{column}__isnull": True}))


def parse_everything(params: list[tuple[str, str]], compartment: Iterable[str]) -> EverythingRequest:
    check_format(params)
    request = EverythingRequest(types=set(), result=ResultParams(count=EVERYTHING_COUNT))
    names = set(compartment)
    for name, value in params:
        if len(value) > MAX_VALUE_LENGTH:
            raise bad(name, f"longer than {MAX_VALUE_LENGTH} characters.")
        if name in ("_count", "_offset"):
            result_param(request.result, "Bundle", name, value, max_count=EVERYTHING_MAX_COUNT)
            continue
        if name == "_type":
            asked = {part.strip() for part in value.split(",")}
            unknown = asked - names
            if unknown:
                raise bad(name, f"not in the Patient compartment here: {', '.join(sorted(unknown))}.")
            request.types |= asked
        elif name in ("start", "end"):
            bound = parse_date(name, value)
            if bound.prefix != "eq" or value[:2].isalpha():
                raise bad(name, "a date (or dateTime with its offset) without a prefix.")
            setattr(request, name, bound)
        elif name == "_since":
            since = parse_date(name, value)
            if since.is_date or value[:2].isalpha():
                raise bad(name, "an instant with its offset (2026-03-02T10:00:00+05:30).")
            request.since = since
        else:
            continue
        request.kept.append((name, value))
    request.types = request.types or names
    return request
