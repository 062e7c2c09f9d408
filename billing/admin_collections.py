"""The admin's "Day's collections" page (Billing > Payments > Day's collections): for a branch of the staff
member's and a branch-local day (today there by default), the money received by payment mode and by
department, refunds taken off, and the totals; the same numbers as CSV. The page needs the view permissions
of payments and of refunds (an accountant's): the numbers are payments less refunds."""

from __future__ import annotations

import csv
import uuid
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from billing.models import Payment
from billing.selectors import DayCollections, collections_of_day
from clinic.admin_audit import Clock, write_admin_export_audit
from clinic.models import Branch
from clinic.staff import staff_reader

# Who may see the day's money: both views, since the page shows payments less refunds.
COLLECTIONS_PERMISSIONS = ("billing.view_payment", "billing.view_refund")


def may_see_collections(user: Any) -> bool:
    return bool(user.has_perms(COLLECTIONS_PERMISSIONS))


class CollectionsForm(forms.Form):
    branch = forms.ModelChoiceField(queryset=Branch.objects.none(), empty_label=None)
    day = forms.DateField(required=False, label="Day", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, branches: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["branch"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = branches


def _other_branch(data: Any, branches: Any) -> bool:
    """A well-formed branch id the staff member may not see: answered as an unknown page (404)."""
    try:
        key = uuid.UUID(str(data.get("branch", "")))
    except ValueError:
        return False
    return not branches.filter(id=key).exists()


def collections_view(site: AdminSite, request: HttpRequest) -> HttpResponse:
    """The page, or its CSV with ?export=csv (audited as the admin's other exports)."""
    if not may_see_collections(request.user):
        raise PermissionDenied
    reader = staff_reader(request.user)
    branches = Branch.objects.visible_to(reader).order_by("code")
    if "branch" in request.GET and _other_branch(request.GET, branches):
        raise Http404("No such branch.")
    first = branches.first()
    data: dict[str, Any] | None = {"branch": str(first.pk), **request.GET.dict()} if first is not None else None
    form = CollectionsForm(data, branches=branches)
    collections: DayCollections | None = None
    branch: Branch | None = None
    if data is not None and form.is_valid():
        branch = form.cleaned_data["branch"]
        day = form.cleaned_data["day"] or timezone.localtime(timezone.now(), branch.zone).date()
        collections = collections_of_day(client=reader, day=day, branch_ids=[branch.pk])
        form = CollectionsForm({"branch": str(branch.pk), "day": day.isoformat()}, branches=branches)
        form.is_valid()
        if request.GET.get("export") == "csv":
            clock = Clock()
            response = collections_csv(branch, collections)
            write_admin_export_audit(request, response, clock)
            return response
    context = {
        **site.each_context(request),
        "title": "Day's collections",
        "opts": Payment._meta,
        "form": form,
        "branch": branch,
        "collections": collections,
        "csv_query": urlencode({"branch": branch.pk, "day": collections.day, "export": "csv"})
        if branch and collections
        else "",
    }
    return TemplateResponse(request, "admin/billing/payment/collections.html", context)


def collections_csv(branch: Branch, collections: DayCollections) -> HttpResponse:
    """The page's numbers: a row per payment mode, per department, then the totals (received, refunded, net)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"collections-{branch.code}-{collections.day.isoformat()}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["Cache-Control"] = "no-store"
    writer = csv.writer(response)
    writer.writerow(["Branch", "Day", "Breakdown", "Name", "Received", "Refunded", "Net"])
    head = [branch.code, collections.day.isoformat()]
    for kind, rows in (("Payment mode", collections.by_mode), ("Department", collections.by_department)):
        for row in rows:
            writer.writerow([*head, kind, row.label, row.received, row.refunded, row.net])
    writer.writerow([*head, "Total", "All", collections.received, collections.refunded, collections.net])
    return response
