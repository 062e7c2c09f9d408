"""Times in the branch's time zone on every admin page (CONTRACT §22), without each page converting.

- A staff member whose branches all keep one time zone (most staff: one branch) works in it on every page:
  list columns, read-only fields, what they type into a date or time field, and the date filters' "today".
- A change page shows its row in the row's own branch's zone, whoever reads it.
- Otherwise (a network-wide account over branches in several zones) the server's TIME_ZONE, as before; the
  pages that list several branches' rows at once (the queue, the lab work list, the collections, the
  registers) convert each row to its branch's zone themselves.

Django renders a TemplateResponse after the view returns, outside any `timezone.override` the view entered:
`rendered_in` renders inside it.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.template.response import SimpleTemplateResponse
from django.utils import timezone

from clinic.models import Branch
from clinic.staff import branch_path_of, staff_reader

_ZONE = "_clinic_staff_zone"


def staff_zone(user: Any) -> zoneinfo.ZoneInfo | None:
    """The one time zone of all the branches `user` sees, or None when they see none or several zones."""
    if _ZONE not in user.__dict__:
        reader = staff_reader(user)
        zones = (
            [] if reader.sees_nothing() else list(reader.branches.values_list("time_zone", flat=True).distinct()[:2])
        )
        user.__dict__[_ZONE] = zoneinfo.ZoneInfo(zones[0]) if len(zones) == 1 else None
    zone: zoneinfo.ZoneInfo | None = user.__dict__[_ZONE]
    return zone


def row_zone(model: type[Any], object_id: Any) -> zoneinfo.ZoneInfo | None:
    """The time zone of the branch that owns row `object_id` of `model` (a branch's own, for a branch), or
    None when no branch owns the model or there is no such row (the admin then answers as it does)."""
    path = "time_zone" if model is Branch else branch_path_of(model)
    if path is None:
        return None
    lookup = path if model is Branch else path.removesuffix("_id") + "__time_zone"
    try:
        name = model._default_manager.filter(pk=object_id).values_list(lookup, flat=True).first()
    except (ValidationError, ValueError):
        return None  # not an id of this model: the admin's own "not found"
    return zoneinfo.ZoneInfo(name) if name else None


def rendered_in(zone: zoneinfo.ZoneInfo | None, respond: Callable[[], HttpResponse]) -> HttpResponse:
    """`respond()`'s response, rendered with `zone` active (unchanged when zone is None)."""
    if zone is None:
        return respond()
    with timezone.override(zone):
        response = respond()
        if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
            response.render()
    return response
