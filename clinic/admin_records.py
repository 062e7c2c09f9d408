"""The admin side of "records are never deleted" (docs/api-rules.md §7), shared by every app that holds
clinical or financial records: no Delete anywhere (pages, actions, inline checkboxes), the
entered-in-error action, and the history of what staff changed (clinic.models.RecordChange), written
explicitly after each save, never by signals."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.contrib.contenttypes.models import ContentType
from django.db.models import DateTimeField, Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from clinic.admin_actions import apply_to_each, reason_confirmation
from clinic.admin_columns import yes_no
from clinic.models import EnteredInErrorModel, RecordChange
from clinic.records import clinical_record_mark_entered_in_error, record_change_write

ENTERED_IN_ERROR_FIELDS = ["entered_in_error", "entered_in_error_at", "entered_in_error_by", "entered_in_error_reason"]
HISTORY_ROWS_SHOWN = 50


def staff_actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


class ReadOnlyAdminMixin:
    """An admin or inline whose rows are written elsewhere (a service, a trigger): shown, never added, changed
    or deleted from the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """On a row's page, also when it was recorded: Django leaves out fields that are not editable, such
        as `auto_now_add` times, and a read-only record's page is where staff look for them (shown in the
        branch's time zone, clinic.admin_time). Not on inlines, which keep their columns."""
        declared = tuple(super().get_readonly_fields(request, obj))  # type: ignore[misc]
        if isinstance(self, InlineModelAdmin):
            return declared
        stamps = [
            field.name
            for field in cast(Any, self).model._meta.concrete_fields
            if isinstance(field, DateTimeField) and not field.editable and field.name not in declared
        ]
        return (*declared, *stamps)


class NoDeleteAdminMixin:
    """A ModelAdmin of records that are never deleted: the delete page is a 403 and there is no
    "delete selected" action (the database refuses the delete anyway)."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)  # type: ignore[misc]
        actions.pop("delete_selected", None)
        return actions


class NoDeleteInlineMixin:
    """An inline of records that are never deleted: no delete checkbox."""

    can_delete = False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _form_changes(form: forms.BaseForm, old_extra: dict[str, Any] | None = None) -> dict[str, tuple[Any, Any]]:
    """{field: (old, new)} of what the form changed; old values from the form's initial data (the row as
    it was loaded), or from `old_extra` for fields that are not columns (a masked national ID)."""
    changes: dict[str, tuple[Any, Any]] = {}
    for name in form.changed_data:
        field = form.fields.get(name)
        if field is None or field.disabled:
            continue
        old = (old_extra or {}).get(name, form.initial.get(name))
        new = form.cleaned_data.get(name)
        if isinstance(old, Model):
            old = old.pk
        changes[name] = (old, new)
    return changes


class RecordHistoryAdminMixin:
    """Writes a RecordChange for every record staff add or change on this page, its inlines included, and
    shows the record's history read-only (add "record_history" to readonly_fields and the fields shown)."""

    def save_form(self, request: HttpRequest, form: Any, change: bool) -> Any:
        # Values of non-column fields as they were, before save_model replaces the row (e.g. the masked
        # national ID): held on the form, not on this ModelAdmin, which every request shares.
        form.history_old_extra = {
            name: getattr(form.instance, f"{name}_masked", None)
            for name in form.changed_data
            if name not in {f.name for f in form.instance._meta.fields}
        }
        return super().save_form(request, form, change)  # type: ignore[misc]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # type: ignore[misc]
        actor = staff_actor(request)
        obj = form.instance
        if obj.pk is not None:
            changes = _form_changes(form, getattr(form, "history_old_extra", None))
            if changes or not change:
                action = RecordChange.Action.CHANGED if change else RecordChange.Action.ADDED
                record_change_write(record=obj, actor=actor, action=action, changes=changes)
        for formset in formsets:
            deleted = set(map(id, formset.deleted_forms)) if formset.can_delete else set()
            for row in formset.forms:
                if id(row) in deleted or not row.has_changed() or row.instance.pk is None:
                    continue
                if row.instance._state.adding:
                    continue  # refused by the service (reported as a message), so not saved
                added = not row.initial.get(row.instance._meta.pk.name)
                record_change_write(
                    record=row.instance,
                    actor=actor,
                    action=RecordChange.Action.ADDED if added else RecordChange.Action.CHANGED,
                    changes=_form_changes(row),
                )

    @admin.display(description="history of changes")
    def record_history(self, obj: Model | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return "-"
        content_type = ContentType.objects.get_for_model(obj, for_concrete_model=True)
        rows = RecordChange.objects.select_related("content_type").filter(
            content_type=content_type, object_id=str(obj.pk)
        )
        if obj._meta.label == "patients.Patient":  # a patient's page shows its clinical records' history too
            rows = RecordChange.objects.select_related("content_type").filter(patient_id=obj.pk)
        shown = list(rows.order_by("-at", "-id")[:HISTORY_ROWS_SHOWN])
        if not shown:
            return "No changes recorded."
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    f"{row.at:%Y-%m-%d %H:%M:%S}",
                    row.actor,
                    row.content_type.model,
                    row.get_action_display(),
                    "; ".join(f"{field}: {old!r} → {new!r}" for field, (old, new) in row.changes.items()),
                    row.reason,
                )
                for row in shown
            ),
        )
        link = reverse("admin:clinic_recordchange_changelist")
        return format_html(
            "<table><tr><th>at</th><th>by</th><th>record</th><th>action</th><th>old → new</th><th>reason</th></tr>"
            '{}</table><p><a href="{}?object_id={}">All changes of this record</a></p>',
            body,
            link,
            obj.pk,
        )


class EnteredInErrorForm(forms.ModelForm):
    """A clinical row marked entered in error is shown, never edited: every field is disabled."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if getattr(self.instance, "entered_in_error", False):
            for field in self.fields.values():
                field.disabled = True


@admin.display(description="entered in error")
def entered_in_error_marker(obj: EnteredInErrorModel) -> str:
    if not getattr(obj, "entered_in_error", False):
        return ""
    at = f"{obj.entered_in_error_at:%Y-%m-%d %H:%M}" if obj.entered_in_error_at else ""
    return f"ENTERED IN ERROR ({obj.entered_in_error_by}, {at}): {obj.entered_in_error_reason}"


class ClinicalInlineMixin(NoDeleteInlineMixin):
    """An inline of clinical rows: no delete, rows entered in error read-only with their marker, and a
    link to the row's own page (where staff mark it entered in error)."""

    form: Any = EnteredInErrorForm
    show_change_link = True

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*super().get_readonly_fields(request, obj), "entered_in_error_marker"]  # type: ignore[misc]

    @admin.display(description="entered in error")
    def entered_in_error_marker(self, obj: EnteredInErrorModel) -> str:
        return entered_in_error_marker(obj)


class ClinicalRecordAdminMixin(NoDeleteAdminMixin, RecordHistoryAdminMixin):
    """A ModelAdmin of clinical rows: never deleted, history kept, marked entered in error by an action
    that asks for the reason; a marked row is read-only."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = [*super().get_readonly_fields(request, obj), *ENTERED_IN_ERROR_FIELDS, "record_history"]  # type: ignore[misc]
        if obj is not None and obj.entered_in_error:
            fields += [f.name for f in obj._meta.fields]
        return list(dict.fromkeys(fields))

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if cast(admin.ModelAdmin, self).has_change_permission(request):  # a mixin of ModelAdmins
            func = type(self).mark_entered_in_error
            actions["mark_entered_in_error"] = (func, "mark_entered_in_error", cast(Any, func).short_description)
        return actions

    @admin.display(description="entered in error", ordering="entered_in_error")
    def entered_in_error_flag(self, obj: EnteredInErrorModel) -> str:
        return yes_no(obj.entered_in_error)

    @admin.action(description="Mark the selected records entered in error")
    def mark_entered_in_error(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        reason = reason_confirmation(
            self,  # type: ignore[arg-type]
            request,
            queryset,
            action="mark_entered_in_error",
            title="Mark entered in error",
            intro="Mark these records entered in error? They leave the patient's profile and summaries, stay "
            "readable here with their history, and are never deleted.",
            submit_label="Mark entered in error",
        )
        if not isinstance(reason, str):
            return reason
        by = staff_actor(request)
        apply_to_each(
            self,  # type: ignore[arg-type]
            request,
            queryset,
            lambda record: clinical_record_mark_entered_in_error(record=record, by=by, reason=reason),
        )
        return None
