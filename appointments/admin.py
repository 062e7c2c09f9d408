"""Scheduling in the admin: weekly sessions (overlaps refused by the database constraint), leave,
holidays; appointments with their history and staff actions (check in, complete, no-show, cancel), and the
reception pages: booking from a slot picker, rescheduling, cancelling and today's queue."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from appointments import reception, selectors, services
from appointments.models import Appointment, AppointmentChange, BranchHoliday, DoctorLeave, WeeklySession
from appointments.slots import free_cells
from clinic.admin_actions import apply_to_each, reason_confirmation
from clinic.admin_audit import Clock, PatientDataAuditMixin, write_admin_audit
from clinic.admin_records import NoDeleteAdminMixin, NoDeleteInlineMixin
from clinic.errors import DomainError, FieldError
from clinic.staff import staff_reader


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

    # Fits 1366 px beside the navigation and the filters: the slot in its branch's time zone, the status
    # before the long names, the branch only for staff of several branches (get_list_display).
    list_display = ["slot_time", "token", "status", "patient_name", "doctor", "branch_code"]
    list_display_links = ["slot_time"]
    list_filter = ["status", "branch", "visit_type", "doctor__department"]
    list_select_related = ["doctor", "patient", "branch"]
    search_fields = ["=id", "patient__patient_id", "patient__last_name", "doctor__name"]
    date_hierarchy = "slot_start"
    readonly_fields = [field.name for field in Appointment._meta.fields]
    inlines = [AppointmentChangeInline]
    actions = ["check_in", "complete", "mark_no_show", "cancel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # booked from the slot picker (book_view), under the API's slot rules

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an appointment is cancelled, never deleted: its token number and history stay

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = list(super().get_list_display(request))
        branches = staff_reader(request.user).branch_ids
        return shown if branches is None or len(branches) > 1 else [name for name in shown if name != "branch_code"]

    @admin.display(description="patient", ordering="patient__last_name")
    def patient_name(self, obj: Appointment) -> str:
        return obj.patient.name

    @admin.display(description="slot", ordering="slot_start")
    def slot_time(self, obj: Appointment) -> str:
        return f"{timezone.localtime(obj.slot_start, obj.branch.zone):%d %b %Y, %H:%M %Z}"

    @admin.display(description="token", ordering="token_number")
    def token(self, obj: Appointment) -> str:
        return f"#{obj.token_number}"

    @admin.display(description="branch", ordering="branch__code")
    def branch_code(self, obj: Appointment) -> str:
        return obj.branch.code

    # --- Reception pages ----------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("book/", view(self.book_view), name="appointments_appointment_book"),
            path("queue/", view(self.queue_view), name="appointments_appointment_queue"),
            path(
                "<path:object_id>/reschedule/", view(self.reschedule_view), name="appointments_appointment_reschedule"
            ),
            path("<path:object_id>/cancel/", view(self.cancel_view), name="appointments_appointment_cancel"),
            path(
                "<path:object_id>/status/<str:change>/",
                view(require_POST(self.status_view)),
                name="appointments_appointment_status",
            ),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        tools = {"queue_url": reverse("admin:appointments_appointment_queue")}
        if request.user.has_perm("appointments.add_appointment"):
            tools["book_url"] = reverse("admin:appointments_appointment_book")
        return super().changelist_view(request, {**tools, **(extra_context or {})})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        appointment = self.get_object(request, unquote(object_id))
        tools: dict[str, Any] = {}
        if appointment is not None and self.has_change_permission(request, appointment):
            tools = _tools(appointment)
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def _appointment(self, request: HttpRequest, object_id: str) -> Appointment:
        """The appointment of the URL as the staff member may change it: another branch's is not found."""
        appointment = self.get_object(request, unquote(object_id))
        if appointment is None:
            raise Http404("No such appointment.")
        if not self.has_change_permission(request, appointment):
            raise PermissionDenied
        return appointment

    def _page(self, request: HttpRequest, template: str, title: str, **context: Any) -> TemplateResponse:
        base = {**self.admin_site.each_context(request), "title": title, "opts": self.opts}
        return TemplateResponse(request, f"admin/appointments/appointment/{template}", {**base, **context})

    def book_view(self, request: HttpRequest) -> HttpResponseBase:
        """Patient, doctor, branch and day; the free slots GET /api/v1/appointments/slots gives; the slot
        picked is booked by appointment_book, as POST /api/v1/appointments books it."""
        if not request.user.has_perm("appointments.add_appointment"):
            raise PermissionDenied
        clock = Clock()
        reader = staff_reader(request.user)
        data = request.POST if request.method == "POST" else request.GET
        if "doctor" in data:
            form = reception.BookingForm(data, reader=reader)
        else:
            initial = {"patient": data.get("patient", ""), "date": timezone.localdate()}
            form = reception.BookingForm(initial=initial, reader=reader)
        if request.method == "POST" and form.is_valid():
            booked = self._book(request, form)
            if booked is not None:
                response: HttpResponseBase = HttpResponseRedirect(
                    reverse("admin:appointments_appointment_change", args=[booked.pk])
                )
                write_admin_audit(request, response, [booked.patient_id], clock)
                return response
        slots: list[dict[str, str]] = []
        patient = None
        if form.is_bound and form.is_valid():
            patient, branch = form.cleaned_data["patient"], form.cleaned_data["branch"]
            cells = free_cells(
                doctor=form.cleaned_data["doctor"], branch=branch, day=form.cleaned_data["date"], duration=form.duration
            )
            slots = reception.slot_rows(cells, branch.zone)
        response = self._page(
            request, "book.html", "Book an appointment", form=form, slots=slots, patient=patient,
            find_url=reverse("admin:patients_patient_find"),
        )  # fmt: skip
        write_admin_audit(request, response, [patient.pk] if patient is not None else [], clock)
        return response

    def _book(self, request: HttpRequest, form: reception.BookingForm) -> Appointment | None:
        choice = reception.SlotChoice(request.POST)
        if not choice.is_valid():
            self.message_user(request, "Pick one of the free slots.", messages.ERROR)
            return None
        start = choice.cleaned_data["slot"]
        data = form.cleaned_data
        try:
            booked = services.appointment_book(
                patient=data["patient"],
                doctor=data["doctor"],
                branch=data["branch"],
                slot_start=start,
                slot_end=start + form.duration,
                visit_type=data["visit_type"],
                actor=_actor(request),
            )
        except DomainError as exc:
            self.message_user(request, f"{_refusal(exc)} Nothing was booked; pick another slot.", messages.ERROR)
            return None
        local = timezone.localtime(booked.slot_start, booked.branch.zone)
        self.message_user(
            request,
            f"Booked {booked.patient.name} with {booked.doctor} at {booked.branch.code} on {local:%d %b %Y %H:%M %Z}: "
            f"token #{booked.token_number}.",
            messages.SUCCESS,
        )
        return booked

    def reschedule_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The free slots of the same doctor and branch on a chosen day (its own time not counted as taken);
        the one picked goes to appointment_reschedule, as PATCH …/reschedule does."""
        clock = Clock()
        appointment = self._appointment(request, object_id)
        back = reverse("admin:appointments_appointment_change", args=[appointment.pk])
        data = request.POST if request.method == "POST" else request.GET
        form = reception.RescheduleForm(data if "date" in data else None, initial={"date": appointment.local_date})
        if request.method == "POST" and form.is_valid():
            choice = reception.SlotChoice(request.POST)
            if choice.is_valid():
                start = choice.cleaned_data["slot"]
                try:
                    moved = services.appointment_reschedule(
                        appointment=appointment,
                        slot_start=start,
                        slot_end=start + (appointment.slot_end - appointment.slot_start),
                        reason=form.cleaned_data["reason"],
                        actor=_actor(request),
                        enforce_window=False,  # as cancel from the admin: the window binds the API's clients
                    )
                except DomainError as exc:
                    self.message_user(request, f"{_refusal(exc)} The appointment was not moved.", messages.ERROR)
                else:
                    local = timezone.localtime(moved.slot_start, moved.branch.zone)
                    self.message_user(
                        request,
                        f"Rescheduled to {local:%d %b %Y %H:%M %Z}: token #{moved.token_number}.",
                        messages.SUCCESS,
                    )
                    response: HttpResponseBase = HttpResponseRedirect(back)
                    write_admin_audit(request, response, [appointment.patient_id], clock)
                    return response
            else:
                self.message_user(request, "Pick one of the free slots.", messages.ERROR)
        day = form.cleaned_data["date"] if form.is_bound and form.is_valid() else appointment.local_date
        cells = free_cells(
            doctor=appointment.doctor,
            branch=appointment.branch,
            day=day,
            duration=appointment.slot_end - appointment.slot_start,
            ignoring=appointment,
        )
        response = self._page(
            request, "reschedule.html", f"Reschedule {appointment}", original=appointment, form=form, day=day,
            slots=reception.slot_rows(cells, appointment.branch.zone), back_url=back,
            current=timezone.localtime(appointment.slot_start, appointment.branch.zone),
        )  # fmt: skip
        write_admin_audit(request, response, [appointment.patient_id], clock)
        return response

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """Cancel with a reason; staff cancel regardless of the branch's cancellation window, as the action does."""
        clock = Clock()
        appointment = self._appointment(request, object_id)
        back = reverse("admin:appointments_appointment_change", args=[appointment.pk])
        form = reception.CancelForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            try:
                services.appointment_cancel(
                    appointment=appointment,
                    reason=form.cleaned_data["reason"],
                    actor=_actor(request),
                    enforce_window=False,
                )
            except DomainError as exc:
                self.message_user(request, f"{_refusal(exc)} Nothing was changed.", messages.ERROR)
            else:
                self.message_user(request, f"Cancelled {appointment}.", messages.SUCCESS)
            response: HttpResponseBase = HttpResponseRedirect(back)
        else:
            response = self._page(
                request, "cancel.html", f"Cancel {appointment}?", original=appointment, form=form, back_url=back
            )
        write_admin_audit(request, response, [appointment.patient_id], clock)
        return response

    def status_view(self, request: HttpRequest, object_id: str, change: str) -> HttpResponseBase:
        """Check in, complete or mark a no-show (POST, from the appointment page or the queue)."""
        clock = Clock()
        service = _STATUS_SERVICES.get(change)
        if service is None:
            raise Http404("No such change.")
        appointment = self._appointment(request, object_id)
        try:
            changed = service(appointment=appointment, actor=_actor(request))
        except DomainError as exc:
            self.message_user(request, f"{appointment}: {_refusal(exc)}", messages.ERROR)
        else:
            self.message_user(
                request, f"{changed.patient.name} (token #{changed.token_number}): {changed.get_status_display()}.",
                messages.SUCCESS,
            )  # fmt: skip
        back = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = reverse("admin:appointments_appointment_change", args=[appointment.pk])
        response = HttpResponseRedirect(back)
        write_admin_audit(request, response, [appointment.patient_id], clock)
        return response

    def queue_view(self, request: HttpRequest) -> HttpResponseBase:
        """Today's appointments at one branch (its local day), one doctor's or all, with how long each
        patient has waited and the buttons that move them on."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        clock = Clock()
        reader = staff_reader(request.user)
        branches = list(selectors.reception_branches(client=reader))
        branch = _chosen(branches, request.GET.get("branch")) or (branches[0] if branches else None)
        doctors = list(selectors.reception_doctors(client=reader, branch=branch)) if branch else []
        doctor = _chosen(doctors, request.GET.get("doctor"))
        rows: list[dict[str, Any]] = []
        day = None
        if branch is not None:
            day = reception.local_today(branch)
            now = timezone.now()
            can_change = self.has_change_permission(request)
            rows = [
                {
                    "appointment": appointment,
                    "url": reverse("admin:appointments_appointment_change", args=[appointment.pk]),
                    "slot": timezone.localtime(appointment.slot_start, branch.zone),
                    "waiting": reception.waiting_text(appointment, now),
                    "buttons": _buttons(appointment, now) if can_change else [],
                }
                for appointment in selectors.appointment_queue(client=reader, branch=branch, day=day, doctor=doctor)
            ]
        response = self._page(
            request, "queue.html", "Today's queue", branches=branches, branch=branch, doctors=doctors,
            doctor=doctor, day=day, rows=rows, here=request.get_full_path(),
        )  # fmt: skip
        write_admin_audit(request, response, [row["appointment"].patient_id for row in rows], clock)
        return response

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


_STATUS_SERVICES: dict[str, Callable[..., Appointment]] = {
    "check-in": services.appointment_check_in,
    "complete": services.appointment_complete,
    "no-show": services.appointment_no_show,
}


def _actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


def _refusal(exc: DomainError) -> str:
    return "; ".join(exc.errors.values()) if isinstance(exc, FieldError) else str(exc.detail)


def _chosen(rows: list[Any], pk: str | None) -> Any:
    return next((row for row in rows if str(row.pk) == pk), None)


def _buttons(appointment: Appointment, now: Any) -> list[tuple[str, str]]:
    """The status changes offered for an appointment: those its status (and, for a no-show, the clock)
    allows; the services still decide."""
    offered = [
        ("Check in", "check-in", appointment.status in services.TRANSITIONS["check_in"]),
        ("Complete", "complete", appointment.status in services.TRANSITIONS["complete"]),
        ("No-show", "no-show", appointment.status in services.TRANSITIONS["no_show"] and appointment.slot_start <= now),
    ]
    return [
        (label, reverse("admin:appointments_appointment_status", args=[appointment.pk, change]))
        for label, change, allowed in offered
        if allowed
    ]


def _tools(appointment: Appointment) -> dict[str, Any]:
    """The appointment page's buttons for what its status allows."""
    tools: dict[str, Any] = {"status_buttons": _buttons(appointment, timezone.now())}
    if appointment.status in services.TRANSITIONS["reschedule"]:
        tools["reschedule_url"] = reverse("admin:appointments_appointment_reschedule", args=[appointment.pk])
    if appointment.status in services.TRANSITIONS["cancel"]:
        tools["cancel_url"] = reverse("admin:appointments_appointment_cancel", args=[appointment.pk])
    return tools
