"""Admin lists that never count, nor scan, a large table in full (docs/staff.md §10).

Django's changelist counts the filtered queryset for its paginator; at a million patients or invoices that
COUNT is most of the page's time. Here the count stops at COUNT_CAP + 1 rows, without ordering (so
PostgreSQL may stop the first scan that finds them), and a list past the cap says "more than 10,000"
instead of a number: staff narrow it with a search or a filter, as they would anyway.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator

COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    @cached_property
    def count(self) -> int:
        object_list: Any = self.object_list
        if not hasattr(object_list, "order_by"):
            return len(object_list)
        return int(object_list.order_by()[: COUNT_CAP + 1].count())

    @property
    def count_capped(self) -> bool:
        return self.count > COUNT_CAP

    @property
    def cap_label(self) -> str:
        return f"{COUNT_CAP:,}"


def dates_as_a_filter(admin_class: type[Any]) -> type[Any]:
    """The admin class with its date drill-down (`date_hierarchy`) turned into a date filter ("Today", "Past 7
    days", "This month", "This year"). The drill-down reads every distinct year, then month, of the list
    (a scan of a million rows on each page); the filter reads nothing. Its links filter as the drill-down's
    did (a `slot_start__day=`-style address still works: it is a lookup on the list's own field)."""
    field = admin_class.date_hierarchy
    if not field:
        return admin_class
    filters = list(admin_class.list_filter)
    named = {item if isinstance(item, str) else item[0] for item in filters if isinstance(item, str | tuple)}
    if field not in named:
        filters.insert(0, (field, admin.DateFieldListFilter))
    attributes = {"__module__": admin_class.__module__, "date_hierarchy": None, "list_filter": filters}
    return type(admin_class.__name__, (admin_class,), attributes)
