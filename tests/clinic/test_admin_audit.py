"""Staff reading patient data in the admin is audited (docs/api-rules.md §7): every admin page that shows a
patient's data writes exactly one audit row, actor `staff:<user>`, no API client, and the UUIDs of the
patients the page showed; pages that show no patient write none."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from integrations.models import AuditLogEntry, NotificationAttempt
from patients.models import Patient
from tests.appointments.factories import AppointmentFactory
from tests.billing.factories import make_invoice, pay
from tests.factories import BranchFactory, DoctorFactory, network_wide
from tests.patients.factories import DiagnosisFactory, PatientFactory, VisitFactory
from tests.patients.test_admin import form

pytestmark = pytest.mark.django_db

AGENT = "Mozilla/5.0 (front desk)"


@pytest.fixture
def staff(django_user_model: Any) -> Client:
    user = network_wide(django_user_model.objects.create_superuser("asha", "asha@clinic.invalid", None))
    client = Client(HTTP_USER_AGENT=AGENT)
    client.force_login(user)
    return client


def rows() -> list[AuditLogEntry]:
    return list(AuditLogEntry.objects.order_by("id"))


def only_row() -> AuditLogEntry:
    found = rows()
    assert len(found) == 1, [(r.path, r.patient_ids) for r in found]
    return found[0]


def test_viewing_a_patient_writes_one_row_naming_the_staff_member_and_the_patient(staff):
    patient = PatientFactory()
    path = f"/admin/patients/patient/{patient.pk}/change/"

    response = staff.get(path, HTTP_X_REQUEST_ID="req-view-patient-1")

    assert response.status_code == 200
    row = only_row()
    assert (row.actor, row.client_id, row.token_ref, row.patient_ids) == ("staff:asha", None, "", [patient.pk])
    assert (row.method, row.path, row.status, row.ip, row.user_agent) == ("GET", path, 200, "127.0.0.1", AGENT)
    assert row.route == "admin/patients/patient/<path:object_id>/change/"
    assert row.request_id == "req-view-patient-1"
    assert row.duration_ms >= 0


def test_a_patients_history_page_writes_one_row(staff):
    patient = PatientFactory()

    response = staff.get(f"/admin/patients/patient/{patient.pk}/history/")

    assert response.status_code == 200
    assert only_row().patient_ids == [patient.pk]


def test_the_patient_list_row_names_the_patients_displayed_in_their_order(staff):
    shown = [PatientFactory(last_name=f"Iyer{n}") for n in range(3)]
    PatientFactory(last_name="Menon")  # not on the page: filtered out by the search

    response = staff.get("/admin/patients/patient/", {"q": "Iyer", "o": "3"})  # ordered by last name

    assert response.status_code == 200
    assert [p.pk for p in response.context["cl"].result_list] == [p.pk for p in shown]
    row = only_row()
    assert (row.actor, row.path, row.patient_ids) == ("staff:asha", "/admin/patients/patient/", [p.pk for p in shown])


def test_only_the_patients_on_the_shown_page_are_listed(staff, monkeypatch):
    from patients.admin import PatientAdmin

    monkeypatch.setattr(PatientAdmin, "list_per_page", 2)
    patients = [PatientFactory(last_name=f"Rao{n}") for n in range(5)]

    staff.get("/admin/patients/patient/", {"o": "3", "p": "2"})  # the second page: Rao2, Rao3

    assert only_row().patient_ids == [patients[2].pk, patients[3].pk]


def test_saving_a_patient_writes_one_row(staff):
    patient = PatientFactory()
    data = form(patient.registration_branch, first_name="Priyanka", phone="98765 43299")

    response = staff.post(f"/admin/patients/patient/{patient.pk}/change/", data)

    assert response.status_code == 302, response.content[:2000]
    patient.refresh_from_db()
    assert patient.first_name == "Priyanka"
    row = only_row()
    assert (row.method, row.status, row.patient_ids) == ("POST", 302, [patient.pk])


def test_registering_a_patient_writes_one_row_with_the_new_patient(staff):
    branch = BranchFactory()

    response = staff.post("/admin/patients/patient/add/", form(branch))

    assert response.status_code == 302, response.content[:2000]
    assert only_row().patient_ids == [Patient.objects.get().pk]


def test_a_refused_save_still_shows_the_patient_and_writes_one_row(staff):
    patient = PatientFactory()
    before = Patient.objects.values().get(pk=patient.pk)

    response = staff.post(f"/admin/patients/patient/{patient.pk}/change/", form(patient.registration_branch, phone="x"))

    assert response.status_code == 200
    assert Patient.objects.values().get(pk=patient.pk) == before
    row = only_row()
    assert (row.method, row.status, row.patient_ids) == ("POST", 200, [patient.pk])


def _appointment() -> tuple[str, Any]:
    appointment = AppointmentFactory()
    return f"/admin/appointments/appointment/{appointment.pk}/change/", appointment.patient_id


def _invoice() -> tuple[str, Any]:
    patient = PatientFactory()
    invoice = make_invoice(branch=patient.registration_branch, patient=patient)
    return f"/admin/billing/invoice/{invoice.pk}/change/", patient.pk


def _payment() -> tuple[str, Any]:
    patient = PatientFactory()
    payment = pay(make_invoice(branch=patient.registration_branch, patient=patient), "100.00")
    return f"/admin/billing/payment/{payment.pk}/change/", patient.pk


def _visit() -> tuple[str, Any]:
    visit = VisitFactory()
    return f"/admin/patients/visit/{visit.pk}/change/", visit.patient_id


def _diagnosis() -> tuple[str, Any]:
    diagnosis = DiagnosisFactory()
    return f"/admin/patients/diagnosis/{diagnosis.pk}/change/", diagnosis.patient_id


def _notification() -> tuple[str, Any]:
    from django.utils import timezone

    patient = PatientFactory()
    attempt = NotificationAttempt.objects.create(
        created_at=timezone.now(),
        event_type="appointment.booked",
        subject_id=patient.pk,
        patient_ref=patient.pk,
        dedupe_key="x",
        channel="sms",
        recipient="+91******3210",
        status="sent",
    )
    return f"/admin/integrations/notificationattempt/{attempt.pk}/change/", patient.pk


RECORDS = {
    "appointment": _appointment,
    "invoice": _invoice,
    "payment": _payment,
    "visit": _visit,
    "diagnosis": _diagnosis,
    "notification": _notification,
}


@pytest.mark.parametrize("kind", list(RECORDS))
def test_the_page_of_a_record_of_a_patient_writes_one_row_with_that_patient(staff, kind):
    path, patient_id = RECORDS[kind]()
    AuditLogEntry.objects.all().delete()

    change = staff.get(path)
    listing = staff.get(path.rsplit("/", 3)[0] + "/")

    assert (change.status_code, listing.status_code) == (200, 200)
    first, second = rows()
    assert (first.actor, first.path, first.patient_ids) == ("staff:asha", path, [patient_id])
    assert (second.actor, second.patient_ids) == ("staff:asha", [patient_id])


def test_an_action_confirmation_page_names_the_selected_patients(staff):
    chosen = [AppointmentFactory(), AppointmentFactory()]
    AppointmentFactory()  # not selected

    response = staff.post(
        "/admin/appointments/appointment/",
        {"action": "cancel", "_selected_action": [str(a.pk) for a in chosen]},
    )

    assert response.status_code == 200  # the page asking for the reason, listing the appointments
    assert sorted(only_row().patient_ids) == sorted(a.patient_id for a in chosen)


def test_the_patient_picker_of_an_invoice_form_is_audited(staff):
    match = PatientFactory(first_name="Zubin")
    PatientFactory(first_name="Priya")

    response = staff.get(
        "/admin/autocomplete/",
        {"app_label": "billing", "model_name": "invoice", "field_name": "patient", "term": "Zubin"},
    )

    assert response.status_code == 200
    assert [r["id"] for r in response.json()["results"]] == [str(match.pk)]
    row = only_row()
    assert (row.actor, row.path, row.patient_ids) == ("staff:asha", "/admin/autocomplete/", [match.pk])


def test_a_picker_search_with_a_nul_byte_is_refused_and_not_audited(staff):
    PatientFactory(first_name="Zubin")

    response = staff.get(
        "/admin/autocomplete/",
        {"app_label": "billing", "model_name": "invoice", "field_name": "patient", "term": "Zu\x00bin"},
    )

    assert (response.status_code, response.json()) == (400, {"error": "term: NUL characters are not allowed."})
    assert rows() == []


@pytest.mark.parametrize(
    "path",
    [
        "/admin/",
        "/admin/clinic/branch/",
        "/admin/patients/patient/add/",
        "/admin/patients/patient/",  # no patients yet: an empty list
        "/admin/patients/patient/00000000-0000-0000-0000-000000000000/change/",  # none such: redirected
        "/admin/integrations/auditlogentry/",
    ],
)
def test_pages_that_show_no_patient_write_no_row(staff, path):
    DoctorFactory()

    response = staff.get(path)

    assert response.status_code in (200, 302)
    assert rows() == []


def test_a_doctor_page_writes_no_row(staff):
    doctor = DoctorFactory()
    PatientFactory()

    assert staff.get(f"/admin/clinic/doctor/{doctor.pk}/change/").status_code == 200
    assert rows() == []


def test_a_refused_visitor_sees_no_patient_and_leaves_no_row():
    patient = PatientFactory()
    get_user_model().objects.create_user("clerk", "c@clinic.invalid", None)  # not staff
    clerk = Client()
    clerk.force_login(get_user_model().objects.get(username="clerk"))

    for client in (Client(), clerk):
        response = client.get(f"/admin/patients/patient/{patient.pk}/change/")
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")
    assert rows() == []


def test_with_two_factor_on_a_session_without_the_code_sees_no_patient_and_leaves_no_row(staff, settings):
    settings.ADMIN_REQUIRE_2FA = True
    patient = PatientFactory()

    response = staff.get(f"/admin/patients/patient/{patient.pk}/change/")

    assert response.status_code == 302
    assert rows() == []


def test_a_webhook_event_page_shows_the_patient_in_its_body_and_is_audited_but_its_list_is_not(staff):
    from django.utils import timezone

    from integrations.webhooks.models import WebhookEvent

    patient = PatientFactory()
    payload = {"appointment": {"appointment_id": "a", "patient": {"id": str(patient.pk), "name": "Priya Test"}}}
    event = WebhookEvent.objects.create(type="appointment.booked", payload=payload, created_at=timezone.now())

    listing = staff.get("/admin/integrations/webhookevent/")
    assert listing.status_code == 200
    assert rows() == []

    page = staff.get(f"/admin/integrations/webhookevent/{event.pk}/change/")
    assert page.status_code == 200
    assert "Priya Test" in page.content.decode()
    assert only_row().patient_ids == [patient.pk]
