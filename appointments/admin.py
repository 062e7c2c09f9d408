"""Scheduling in the admin: weekly sessions (overlaps refused by the database constraint), leave,
holidays; appointments are listed here (booking and lifecycle go through services)."""

from django.contrib import admin

from appointments.models import Appointment, BranchHoliday, DoctorLeave, WeeklySession


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


@admin.register(Appointment)
class AppointmentAdmin(admin.ModelAdmin):
    list_display = ["slot_start", "token_number", "doctor", "patient", "branch", "status", "visit_type"]
    list_filter = ["status", "branch", "visit_type", "doctor__department"]
    list_select_related = ["doctor", "patient", "branch"]
    search_fields = ["patient__patient_id", "patient__last_name", "doctor__name"]
    raw_id_fields = ["patient"]
    date_hierarchy = "slot_start"
    readonly_fields = ["token_number", "local_date", "version", "created_at", "updated_at"]
