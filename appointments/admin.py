"""Scheduling in the admin: weekly sessions (overlaps refused by the database constraint), leave,
holidays; appointments with their history and staff actions (check in, complete, no-show, cancel)."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from appointments import services
from appointments.models import Appointment, AppointmentChange, BranchHoliday, DoctorLeave, WeeklySession
from clinic.admin_actions import apply_to_each, reason_confirmation
from clinic.admin_audit import PatientDataAuditMixin
from clinic.admin_records import NoDeleteAdminMixin, NoDeleteInlineMixin


@admin.register(WeeklySession)
class WeeklySessionAdmin(admin.ModelAdmin):
    list_display = ["doctor", "branch", "weekday", "start", "end"]
    list_filter = ["weekday", "branch", "doctor__department"]
    list_select_related = ["doctor", "branch"]
    search_fields = ["doctor__name"]
    autocomplete_fields = ["doctor"]


@admin.register(DoctorLeave)
class DoctorLeaveAdmin(admin.ModelAdmin):
    list_display = ["doctor", "start_date", "end_date", "reason"]
    list_filter = ["doctor__department"]
    list_select_related = ["doctor"]
    search_fields = ["doctor__name", "reason"]
    autocomplete_fields = ["doctor"]
    date_hierarchy = "start_date"


@admin.register(BranchHoliday)
class BranchHolidayAdmin(admin.ModelAdmin):
    list_display = ["branch", "date", "name"]
    list_filter = ["branch"]
    list_select_related = ["branch"]
    search_fields = ["name"]
    date_hierarchy = "date"


class AppointmentChangeInline(NoDeleteInlineMixin, admin.TabularInline):
    model = AppointmentChange
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "version",
        "kind",
        "at",
        "actor",
        "reason",
        "previous_slot_start",
        "previous_token_number",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Appointment)
class AppointmentAdmin(PatientDataAuditMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    """Appointments are booked through the API; here staff follow them and change their status. Every
    action goes through the same services as the API (history row, event, notification)."""

    list_display = ["slot_start", "token_number", "doctor", "patient", "branch", "status", "visit_type", "version"]
    list_filter = ["status", "branch", "visit_type", "doctor__department"]
    list_select_related = ["doctor", "patient", "branch"]
    search_fields = ["=id", "patient__patient_id", "patient__last_name", "doctor__name"]
    date_hierarchy = "slot_start"
    readonly_fields = [field.name for field in Appointment._meta.fields]
    inlines = [AppointmentChangeInline]
    actions = ["check_in", "complete", "mark_no_show", "cancel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an appointment is cancelled, never deleted: its token number and history stay

    def _apply(
        self, request: HttpRequest, queryset: QuerySet[Appointment], service: Callable[..., Appointment], **kwargs: Any
    ) -> None:
        actor = f"staff:{request.user.get_username()}"
        apply_to_each(
            self, request, queryset, lambda appointment: service(appointment=appointment, actor=actor, **kwargs)
        )

    @admin.action(description="Check in the selected appointments", permissions=["change"])
    def check_in(self, request: HttpRequest, queryset: QuerySet[Appointment]) -> None:
        self._apply(request, queryset, services.appointment_check_in)

    @admin.action(description="Complete the selected appointments", permissions=["change"])
    def complete(self, request: HttpRequest, queryset: QuerySet[Appointment]) -> None:
        self._apply(request, queryset, services.appointment_complete)

    @admin.action(description="Mark the selected appointments as no-show", permissions=["change"])
    def mark_no_show(self, request: HttpRequest, queryset: QuerySet[Appointment]) -> None:
        self._apply(request, queryset, services.appointment_no_show)

    @admin.action(description="Cancel the selected appointments (staff: ignores the window)", permissions=["change"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Appointment]) -> HttpResponse | None:
        reason = reason_confirmation(
            self,
            request,
            queryset.select_related("patient"),
            action="cancel",
            title="Cancel appointments",
            intro="Cancel these appointments? Staff cancellations ignore the branch's cancellation window. The "
            "patients are notified when notifications are enabled; token numbers are not reused.",
            submit_label="Cancel appointments",
            describe=lambda a: f"{a} — {a.patient} ({a.get_status_display()})",
        )
        if not isinstance(reason, str):
            return reason
        self._apply(request, queryset, services.appointment_cancel, reason=reason, enforce_window=False)
        return None
