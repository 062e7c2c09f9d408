"""Page-number pagination with a bare JSON array body and the totals and links in headers.

`X-Total-Count` holds the number of matching rows; `Link` (RFC 8288) has first, prev, next and last.
`page` >= 1 and `per_page` 1..100 are validated (400 naming the parameter); a page past the end is `[]`.

Paging is stable (docs/api-rules.md §5.6): a list of records is read as it stood at `as_of`, the instant of its first
page, which every `Link` URL carries; a record added after it (a patient registered between page 1 and page 2,
which goes first in a newest-first list) is left out of the later pages instead of pushing a row of page 1
onto page 2. Lists that are not of records (stock levels, an aggregate per drug) take no boundary.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model, QuerySet
from django.http import QueryDict
from django.utils import timezone
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.serializers import NAMES_NOTHING, OffsetDateTimeField

# Pages past this are refused (400) rather than sent to PostgreSQL: OFFSET is a bigint, and a page such as
# 10**18 overflowed it (a 500). A billion pages of 100 is far beyond any list this service holds.
MAX_PAGE = 1_000_000_000


class PageParams(serializers.Serializer):
    page = serializers.IntegerField(
        min_value=1, max_value=MAX_PAGE, default=1, help_text="Page number; a page past the end is `[]`."
    )
    per_page = serializers.IntegerField(
        min_value=1,
        max_value=settings.API_PAGE_SIZE_MAX,
        default=settings.API_PAGE_SIZE_DEFAULT,
        help_text="Items per page.",
    )
    as_of = OffsetDateTimeField(
        required=False,
        help_text=(
            "The list as it stood at this instant: records added later are left out, so a record added while "
            "a client pages never shifts the later pages. Leave it out on the first page; the `Link` URLs "
            "carry the first page's instant."
        ),
    )


# The field that says when a row was added, per model: `created_at`, or the model's `paging_added_field`
# (a patient's `registered_at`); None for a model with neither (its lists take no boundary).
_ADDED_FIELD: dict[type[Model], str | None] = {}


def added_field(model: type[Model]) -> str | None:
    if model not in _ADDED_FIELD:
        name = getattr(model, "paging_added_field", "created_at")
        try:
            model._meta.get_field(name)
        except FieldDoesNotExist:
            name = None
        _ADDED_FIELD[model] = name
    return _ADDED_FIELD[model]


# Per params class: its validated data for an empty query string, or None when that must be validated anew.
_EMPTY_QUERY: dict[type[serializers.Serializer], dict[str, Any] | None] = {}


def _static(serializer_class: type[serializers.Serializer]) -> bool:
    """Whether what the class validates an empty query string to is always the same: no validation code of
    its own (validate, validate_<field>, to_internal_value) and no default computed per call."""
    base = serializers.Serializer
    if any(getattr(serializer_class, name) is not getattr(base, name) for name in _VALIDATION_HOOKS):
        return False
    if any(name.startswith("validate_") and not hasattr(base, name) for name in dir(serializer_class)):
        return False
    fields: dict[str, Any] = getattr(serializer_class, "_declared_fields", {})
    return not any(field.default is not empty and callable(field.default) for field in fields.values())


_VALIDATION_HOOKS = ("validate", "to_internal_value", "run_validation", "is_valid")


def _validated_empty(serializer: serializers.Serializer) -> dict[str, Any] | None:
    """The serializer's validated data for an empty query string, validated once per class and kept (the
    DRF validation of the defaults, deep copies of every field included, was about a tenth of the framework
    floor's CPU); None when it must be validated each time (not static, or not valid empty)."""
    data = getattr(serializer, "initial_data", None)
    if not isinstance(data, QueryDict | dict) or data:
        return None
    cls = type(serializer)
    if cls not in _EMPTY_QUERY:
        fresh = cls(data={})
        # The same value from any thread: a race only validates twice.
        _EMPTY_QUERY[cls] = dict(fresh.validated_data) if _static(cls) and fresh.is_valid() else None
    known = _EMPTY_QUERY[cls]
    return None if known is None else copy.deepcopy(known)


class FilterNamesNothing(Exception):
    """A list filter named an id the client may see nothing of: the answer is the empty first page."""

    def __init__(self, pagination: HeaderPagination) -> None:
        super().__init__("A filter names nothing the client may see.")
        self.pagination = pagination


class HeaderPagination:
    def __init__(self, request: Request, filters: serializers.Serializer | None = None) -> None:
        """Validate `page` and `per_page`, and the list's own `filters` serializer with them, so one 400
        names every bad parameter of either kind. The valid filters are `self.filters`."""
        self.request = request
        self.total = 0
        # The list's snapshot: the instant the client's `as_of` names (a later page), else now (the first page,
        # read as it stands: nothing to leave out). The links of a list of records carry it.
        self.as_of = timezone.now()
        self.snapshot: datetime | None = None
        self.bounded = False
        self.page: int
        self.per_page: int
        self.filters: dict[str, Any]
        if not request.query_params:
            empty = {} if filters is None else _validated_empty(filters)
            if empty is not None:  # no parameter: the defaults, as validated before
                self.page, self.per_page, self.filters = 1, settings.API_PAGE_SIZE_DEFAULT, empty
                return
        params = PageParams(data=request.query_params)
        errors: dict[str, Any] = {}
        if not params.is_valid():
            errors.update(params.errors)
        if filters is not None and not filters.is_valid():
            errors.update(filters.errors)
        if errors:
            raise serializers.ValidationError(errors)
        self.page = params.validated_data["page"]
        self.per_page = params.validated_data["per_page"]
        self.snapshot = params.validated_data.get("as_of")
        self.as_of = self.snapshot or self.as_of
        self.filters = dict(filters.validated_data) if filters is not None else {}
        if any(value is NAMES_NOTHING for value in self.filters.values()):
            raise FilterNamesNothing(self)  # before any query: the list is empty whatever else it filters

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def paginate(self, queryset: QuerySet[Any] | Sequence[Any]) -> list[Any]:
        if not isinstance(queryset, QuerySet):
            self.total = len(queryset)
            return list(queryset[self.offset : self.offset + self.per_page])
        field = added_field(queryset.model)
        self.bounded = field is not None
        if field is not None and self.snapshot is not None:
            queryset = queryset.filter(**{f"{field}__lte": self.snapshot})
        # The page first: a page that is neither full nor past the end holds the last rows, so it gives the
        # total without the COUNT (one statement instead of two on every short list, such as the branches);
        # so does an empty first page (a filter that matches nothing has a total of 0).
        page = list(queryset[self.offset : self.offset + self.per_page])
        if (page or self.offset == 0) and len(page) < self.per_page:
            self.total = self.offset + len(page)
        else:
            self.total = queryset.count()
        return page

    def use_page(self, items: list[Any], total: int, *, bounded: bool = False) -> list[Any]:
        """For a page computed elsewhere (a search that counts and slices in SQL itself); `bounded` when it
        was read as of `self.as_of`."""
        self.total = total
        self.bounded = bounded
        return items

    def response(self, data: list[Any]) -> Response:
        return Response(data, headers=self.headers())

    def headers(self) -> dict[str, str]:
        last = max(math.ceil(self.total / self.per_page), 1)
        links = [("first", 1), ("last", last)]
        if self.page > 1:
            links.insert(1, ("prev", min(self.page - 1, last)))
        if self.page < last:
            links.insert(-1, ("next", self.page + 1))
        # DRF's replace_query_param (per_page, then page for each link) parsed and re-encoded the whole URL
        # each time; parsed once here, each link only re-encodes its query (the same bytes: sorted keys).
        scheme, netloc, path, query, fragment = urlsplit(self.request.build_absolute_uri())
        params = parse_qs(query, keep_blank_values=True)
        params["per_page"] = [str(self.per_page)]
        if self.bounded:
            params["as_of"] = [self.as_of.isoformat()]

        def page_url(page: int) -> str:
            params["page"] = [str(page)]
            return urlunsplit((scheme, netloc, path, urlencode(sorted(params.items()), doseq=True), fragment))

        return {
            "X-Total-Count": str(self.total),
            "Link": ", ".join(f'<{page_url(page)}>; rel="{rel}"' for rel, page in links),
        }
