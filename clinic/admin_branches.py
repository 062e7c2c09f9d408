"""Branch-scoped staff in every admin page (docs/staff.md): the mixins ClinicAdminSite.register puts under
every ModelAdmin and inline, so no app's admin can forget them.

What a staff member of branch A cannot reach of branch B: rows in lists, counts, searches, date drill-downs
and actions (get_queryset); a change page by URL (its object is looked up in the same queryset, so it is
"not found" exactly as an unknown id); the choices of a related field (a branch, a patient, a doctor of B
cannot be picked, typed in or autocompleted); the choices of a list filter (no B in the sidebar).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.core.exceptions import FieldDoesNotExist
from django.db.models import ForeignObjectRel, QuerySet
from django.http import HttpRequest, HttpResponse

from clinic.admin_pagination import CappedCountPaginator
from clinic.admin_time import rendered_in, row_zone
from clinic.staff import branch_path_of, visible_to_staff


def _scoped_choices(formfield: Any, request: HttpRequest) -> Any:
    queryset = getattr(formfield, "queryset", None)
    if isinstance(queryset, QuerySet):
        formfield.queryset = visible_to_staff(queryset, request.user)
    return formfield


def _owned_by_a_branch(model: type[Any]) -> bool:
    return hasattr(model._default_manager.none(), "visible_to") or branch_path_of(model) is not None


class StaffRelatedFilter(admin.RelatedFieldListFilter):
    """A related filter offering only what the staff member sees (Django's offers every row of the table)."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        related = field.remote_field.model
        queryset = visible_to_staff(related._default_manager.all(), request.user)
        ordering = self.field_admin_ordering(field, request, model_admin)
        if ordering:
            queryset = queryset.order_by(*ordering)
        return [(str(row.pk), str(row)) for row in queryset]


def _relation_at(model: type[Any], path: str) -> Any:
    field = None
    for name in path.split("__"):
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        if not field.is_relation or field.related_model is None:
            return None
        model = field.related_model
    return field


class BranchScopedAdmin(admin.ModelAdmin):
    """Rows, related choices and filter choices as the staff member's branches allow; counts capped
    (clinic.admin_pagination) and never a second, unfiltered count."""

    paginator = CappedCountPaginator
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return visible_to_staff(super().get_queryset(request), request.user)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return _scoped_choices(super().formfield_for_foreignkey(db_field, request, **kwargs), request)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return _scoped_choices(super().formfield_for_manytomany(db_field, request, **kwargs), request)

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        """A row's page in its own branch's time zone, whoever reads it (clinic.admin_time)."""
        zone = row_zone(self.model, object_id) if object_id is not None else None
        return rendered_in(
            zone, lambda: super(BranchScopedAdmin, self).changeform_view(request, object_id, form_url, extra_context)
        )

    def get_list_filter(self, request: HttpRequest) -> Any:
        scoped = []
        for item in super().get_list_filter(request):
            if isinstance(item, str):
                field = _relation_at(self.model, item)
                scoped_model = field is not None and not isinstance(field, ForeignObjectRel)
                if scoped_model and _owned_by_a_branch(field.related_model):
                    item = (item, StaffRelatedFilter)
            scoped.append(item)
        return scoped


class BranchScopedInline(InlineModelAdmin):
    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return visible_to_staff(super().get_queryset(request), request.user)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return _scoped_choices(super().formfield_for_foreignkey(db_field, request, **kwargs), request)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return _scoped_choices(super().formfield_for_manytomany(db_field, request, **kwargs), request)
