"""Admin lists that never count a large table in full (docs/staff.md).

Django's changelist counts the filtered queryset for its paginator; at a million patients or invoices that
COUNT is most of the page's time. Here the count stops at COUNT_CAP + 1 rows, without ordering (so
PostgreSQL may stop the first scan that finds them), and a list past the cap says "more than 10,000"
instead of a number: staff narrow it with a search or a filter, as they would anyway.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

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
