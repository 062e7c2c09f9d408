from typing import Any, cast

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db.models import Count
from django.http import HttpRequest

from clinic.models import Branch, Department, Doctor, RecordChange, StaffProfile


@admin.register(Branch)
class BranchAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "state", "city", "time_zone", "cancellation_window_minutes", "is_active"]
    list_filter = ["state", "is_active", "time_zone"]
    search_fields = ["code", "name", "city", "gstin"]
    fieldsets = [
        (None, {"fields": ["code", "name", "is_active", "is_head_office"]}),
        ("Tax and location", {"fields": ["state", "gstin", "time_zone", "address_line1", "city", "pincode", "phone"]}),
        ("Appointments", {"fields": ["cancellation_window_minutes"]}),
    ]


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin):
    list_display = ["name", "doctor_count"]
    list_filter = [("doctors__branches", admin.RelatedOnlyFieldListFilter)]  # departments with doctors there
    search_fields = ["name"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(doctor_total=Count("doctors", distinct=True))

    @admin.display(description="doctors", ordering="doctor_total")
    def doctor_count(self, obj: Department) -> int:
        return cast(Any, obj).doctor_total  # annotated by get_queryset


@admin.register(Doctor)
class DoctorAdmin(admin.ModelAdmin):
    list_display = ["name", "department", "branch_codes", "default_slot_minutes", "is_active"]
    list_filter = ["department", "branches", "is_active"]
    list_select_related = ["department"]
    search_fields = ["name", "registration_number"]
    filter_horizontal = ["branches"]
    autocomplete_fields = ["department"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("branches")

    @admin.display(description="branches")
    def branch_codes(self, obj: Doctor) -> str:
        return ", ".join(branch.code for branch in obj.branches.all())


@admin.register(RecordChange)
class RecordChangeAdmin(admin.ModelAdmin):
    """Read-only: the history of clinical and financial records as staff changed them (docs/api-rules.md
    §7). Insert-only in the database too."""

    list_display = ["at", "actor", "content_type", "object_id", "action", "patient_id", "reason"]
    list_filter = ["action", "content_type"]
    list_select_related = ["content_type"]
    search_fields = ["=object_id", "=patient_id", "actor"]
    date_hierarchy = "at"
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        # The record pages link here filtered by object_id or patient_id.
        return lookup in {"object_id", "patient_id"} or super().lookup_allowed(lookup, value, request)


class StaffProfileInline(admin.StackedInline):
    model = StaffProfile
    can_delete = False
    verbose_name = verbose_name_plural = "branches"
    filter_horizontal = ["branches"]
    fields = ["branches", "network_wide"]


admin.site.unregister(User)


@admin.register(User)
class StaffUserAdmin(UserAdmin):
    """Django's user page with where the user works: their branches, or network-wide (docs/staff.md). The role
    is a group (administrator, receptionist, lab technician, pharmacist, accountant)."""

    inlines = [StaffProfileInline]
    list_display = ["username", "first_name", "last_name", "roles", "is_active", "is_superuser"]
    list_filter = ["groups", "is_active", "is_superuser", "staff_profile__branches"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description="roles")
    def roles(self, obj: Any) -> str:
        return ", ".join(group.name for group in obj.groups.all())
