"""Administrator journeys in a real browser (Chromium through Playwright) against the live server."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone

from appointments.models import DoctorLeave, WeeklySession
from integrations.models import ApiClient
from tests.appointments.factories import AppointmentFactory, future_monday
from tests.factories import ApiClientFactory, BranchFactory, DoctorFactory, network_wide
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)


def select2_choose(page: Any, field: str, text: str) -> None:
    """Pick `text` in an admin autocomplete (select2) widget."""
    page.click(f".field-{field.removeprefix('id_')} .select2-selection")
    page.fill(".select2-search__field", text)
    page.click(f".select2-results__option:has-text('{text}')")


def token(live_server: Any, client_id: str, secret: str) -> requests.Response:
    return requests.post(
        f"{live_server.url}/api/v1/auth/token",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
        timeout=10,
    )


def test_create_an_api_client_see_its_secret_once_use_it_then_deactivate_it(admin_page, live_server):
    page = admin_page
    branch = BranchFactory(code="BLR", name="Bengaluru Central")
    page.goto("/admin/integrations/apiclient/add/")
    page.fill("#id_name", "Front desk kiosk")
    page.check("input[name=allowed_scopes][value='patients:read']")
    page.check("input[name=allowed_scopes][value='appointments:write']")
    page.select_option("#id_branches_from", label=str(branch))
    page.click("#id_branches_add")
    page.fill("#id_ip_allowlist", "127.0.0.1\n10.0.0.0/8")
    page.fill("#id_rate_limit_per_minute", "120")
    page.click("input[name=_save]")

    page.wait_for_selector("#client-secret")
    client_id = page.inner_text("#client-id")
    secret = page.inner_text("#client-secret")
    assert len(secret) == 48
    stored = ApiClient.objects.get(client_id=client_id)
    assert (stored.name, sorted(stored.allowed_scopes), stored.ip_allowlist, stored.rate_limit_per_minute) == (
        "Front desk kiosk",
        ["appointments:write", "patients:read"],
        ["127.0.0.1/32", "10.0.0.0/8"],
        120,
    )
    assert list(stored.branches.all()) == [branch]
    assert secret not in stored.client_secret  # only a keyed hash is stored

    # Continuing to the client's page, or coming back later, never shows the secret again.
    page.click("text=I have stored the secret: continue")
    page.wait_for_url(f"**/admin/integrations/apiclient/{stored.pk}/change/")
    assert secret not in page.content()

    issued = token(live_server, client_id, secret)
    assert issued.status_code == 200, issued.text
    assert issued.json()["scope"] == "patients:read appointments:write"

    page.goto("/admin/integrations/apiclient/")
    page.check(f"input[name=_selected_action][value='{stored.pk}']")
    page.select_option("select[name=action]", "deactivate")
    page.click("button[name=index]")
    page.wait_for_selector("text=Deactivated 1 client(s); their tokens no longer work.")

    bearer = {"Authorization": f"Bearer {issued.json()['access_token']}"}
    assert requests.get(f"{live_server.url}/api/v1/patients", headers=bearer, timeout=10).status_code == 401
    assert token(live_server, client_id, secret).status_code == 401


def test_configure_a_doctors_weekly_schedule_and_a_leave_day_and_see_the_slots(admin_page, live_server):
    page = admin_page
    branch = BranchFactory(code="BLR", time_zone="Asia/Kolkata")
    doctor = DoctorFactory(name="Dr. Ananya Rao", default_slot_minutes=30, branches=[branch])
    monday = future_monday()

    page.goto("/admin/appointments/weeklysession/add/")
    select2_choose(page, "id_doctor", "Dr. Ananya Rao")
    page.select_option("#id_branch", label=str(branch))
    page.select_option("#id_weekday", label="Monday")
    page.fill("#id_start", "09:00")
    page.fill("#id_end", "10:30")
    page.click("input[name=_save]")
    page.wait_for_selector("text=was added successfully")
    assert list(WeeklySession.objects.values_list("doctor__name", "weekday")) == [("Dr. Ananya Rao", 0)]

    # An overlapping second session is refused with the constraint's message.
    page.goto("/admin/appointments/weeklysession/add/")
    select2_choose(page, "id_doctor", "Dr. Ananya Rao")
    page.select_option("#id_branch", label=str(branch))
    page.select_option("#id_weekday", label="Monday")
    page.fill("#id_start", "10:00")
    page.fill("#id_end", "11:00")
    page.click("input[name=_save]")
    page.wait_for_selector("text=This doctor already has a session overlapping these hours on that day.")
    assert WeeklySession.objects.count() == 1

    client = ApiClientFactory(allowed_scopes=["appointments:read"])
    access = token(live_server, client.client_id, client.secret).json()["access_token"]

    def slots() -> list[dict[str, str]]:
        response = requests.get(
            f"{live_server.url}/api/v1/appointments/slots",
            params={"doctor_id": str(doctor.id), "date": monday.isoformat()},
            headers={"Authorization": f"Bearer {access}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return response.json()

    assert [s["start_time"][11:16] for s in slots()] == ["09:00", "09:30", "10:00"]

    page.goto("/admin/appointments/doctorleave/add/")
    select2_choose(page, "id_doctor", "Dr. Ananya Rao")
    page.fill("#id_start_date", monday.isoformat())
    page.fill("#id_end_date", monday.isoformat())
    page.fill("#id_reason", "Conference")
    page.click("input[name=_save]")
    page.wait_for_selector("text=was added successfully")
    assert DoctorLeave.objects.filter(doctor=doctor, start_date=monday).exists()
    assert slots() == []


def test_staff_cancel_an_appointment_inside_the_cancellation_window(admin_page):
    page = admin_page
    branch = BranchFactory(cancellation_window_minutes=120)
    start = timezone.now() + timedelta(minutes=45)
    appointment = AppointmentFactory(branch=branch, slot_start=start, slot_end=start + timedelta(minutes=15))

    page.goto("/admin/appointments/appointment/")
    page.check(f"input[name=_selected_action][value='{appointment.pk}']")
    page.select_option("select[name=action]", "cancel")
    page.click("button[name=index]")
    page.wait_for_selector("text=Staff cancellations ignore the branch's cancellation window.")
    page.fill("#id_reason", "Doctor called in sick")
    page.click("input[type=submit][value='Cancel appointments']")
    page.wait_for_selector("text=1 appointment(s) updated.")

    appointment.refresh_from_db()
    assert (appointment.status, appointment.cancellation_reason) == ("cancelled", "Doctor called in sick")
    page.goto(f"/admin/appointments/appointment/{appointment.pk}/change/")
    history = page.inner_text("#changes-group")
    assert "cancelled" in history
    assert "staff:staff" in history
    assert "Doctor called in sick" in history


def test_read_the_audit_trail_of_one_patient(admin_page, live_server):
    page = admin_page
    branch = BranchFactory()
    patient = PatientFactory(registration_branch=branch)
    other = PatientFactory(registration_branch=branch)
    client = ApiClientFactory(name="Portal", allowed_scopes=["patients:read"])
    access = token(live_server, client.client_id, client.secret).json()["access_token"]
    headers = {"Authorization": f"Bearer {access}"}
    for ref in (patient.patient_id, str(patient.id), other.patient_id):
        assert requests.get(f"{live_server.url}/api/v1/patients/{ref}", headers=headers, timeout=10).status_code == 200

    page.goto("/admin/integrations/auditlogentry/")
    page.fill("#searchbar", str(patient.id))
    page.press("#searchbar", "Enter")
    page.wait_for_selector("#result_list")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    text = page.inner_text("#result_list")
    assert f"/api/v1/patients/{patient.patient_id}" in text
    assert f"/api/v1/patients/{patient.id}" in text
    assert other.patient_id not in text
    assert "Portal" in text


def test_the_api_docs_load_offline_and_show_every_operation(page, live_server):
    schema = requests.get(f"{live_server.url}/api/v1/schema", params={"format": "json"}, timeout=10).json()
    operations = {
        operation["operationId"]
        for item in schema["paths"].values()
        for method, operation in item.items()
        if method in {"get", "post", "patch", "put", "delete"}
    }
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))

    page.goto("/api/v1/docs")
    page.wait_for_selector(".swagger-ui .opblock")

    webhooks = [
        operation
        for item in schema.get("webhooks", {}).values()
        for method, operation in item.items()
        if method in {"get", "post", "patch", "put", "delete"}
    ]
    shown = page.locator(".swagger-ui .opblock").count()
    assert len(webhooks) >= 6  # every event kind is documented; Swagger UI lists them after the operations
    assert shown == len(operations) + len(webhooks)
    for operation_id in sorted(operations):
        assert page.locator(f"[id^='operations-'][id$='-{operation_id}']").count() == 1, operation_id
    assert failed == []
    assert page.inner_text(".swagger-ui .info .title").startswith("Clinic Management Integration API")


def test_signing_in_needs_the_authenticator_code_when_two_factor_is_on(page, django_user_model, settings):
    from django_otp.plugins.otp_totp.models import TOTPDevice

    from tests.browser.conftest import ADMIN_PASSWORD, current_totp_code

    settings.ADMIN_REQUIRE_2FA = True
    user = network_wide(django_user_model.objects.create_superuser("asha", "asha@clinic.invalid", ADMIN_PASSWORD))
    device = TOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "asha")
    page.fill("#id_password", ADMIN_PASSWORD)
    page.click("input[type=submit]")

    # One message for every refusal: it does not tell that the password was right.
    page.wait_for_selector("text=Please enter the correct username, password and authentication code")
    assert page.input_value("#id_password") == ""  # the password is never echoed back into the page
    assert "/admin/login/" in page.url

    page.fill("#id_password", ADMIN_PASSWORD)
    page.fill("#id_otp_token", current_totp_code(device))
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    assert page.is_visible("text=Site administration")
