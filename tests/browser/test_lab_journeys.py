"""The laboratory's day in a real browser at 1366x768, as a lab technician of one branch (not a superuser):
the work list, result entry with a critical value shown in red, its acknowledgement (who and when), verify
and release naming the verifier, and the report PDF from the admin session."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from clinic.roles import role_groups_sync
from lab import services
from lab.models import LabOrder, LabResult, Priority, RangeSex, ReferenceRange
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory, staff_of
from tests.lab.order_factories import AnalyteFactory, LabTestFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "lab-journey-password"


def lab_technician(username: str, *branches: Any) -> Any:
    role_groups_sync()  # the live server's tests flush the tables: the role groups are made again
    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    staff_of(user, *branches)
    user.groups.add(Group.objects.get(name="lab technician"))
    return user


def log_in(page: Any, username: str, next_url: str) -> None:
    page.goto(f"/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_url}")


def stat_order_collected() -> tuple[LabOrder, Any]:
    blr = BranchFactory(code="BLR", name="Bengaluru Central", state="Karnataka", time_zone="Asia/Kolkata")
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    hgb = AnalyteFactory(test=cbc, code="HGB", name="Hemoglobin", unit="g/dL", critical_low=Decimal("7"), position=0)
    plt = AnalyteFactory(test=cbc, code="PLT", name="Platelets", unit="10*3/uL", position=1)
    ReferenceRange.objects.create(
        analyte=hgb, sex=RangeSex.ANY, age_min_days=0, low=Decimal("12"), high=Decimal("15.5")
    )
    ReferenceRange.objects.create(
        analyte=plt, sex=RangeSex.ANY, age_min_days=0, low=Decimal("150"), high=Decimal("450")
    )
    patient = PatientFactory(
        registration_branch=blr,
        first_name="Priya",
        last_name="Sharma",
        gender="female",
        date_of_birth=timezone.localdate() - timedelta(days=30 * 365),
    )
    doctor = DoctorFactory(department=DepartmentFactory(), branches=[blr])
    order = services.lab_order_create(
        branch=blr, patient=patient, doctor=doctor, tests=[cbc], priority=Priority.STAT, ordered_by="test"
    )
    return services.lab_order_collect(order=order), blr


def test_work_list_enter_a_critical_result_acknowledge_it_verify_release_and_print(page, settings):
    settings.ADMIN_REQUIRE_2FA = False
    order, blr = stat_order_collected()
    lab_technician("asha", blr)
    page.set_viewport_size({"width": 1366, "height": 768})
    log_in(page, "asha", "/admin/lab/laborder/worklist/")

    # The work list: the STAT order with its clock, and the way to its result entry.
    row = page.locator(f"#work-list tr[data-order='{order.order_number}']")
    assert row.locator("td").nth(0).inner_text() == "STAT"
    assert row.locator("td.clock").inner_text() == "0 min"
    row.get_by_role("link", name="Enter results").click()
    page.wait_for_url(f"**/admin/lab/laborder/{order.pk}/results/")

    # Result entry: units and the reference ranges shown; a critical value comes back red, with the word.
    hgb_row = page.locator("tr[data-analyte='HGB']")
    assert hgb_row.locator("td.reference").inner_text() == "12-15.5"
    hgb_row.locator("input").fill("5.1")
    page.locator("tr[data-analyte='PLT'] input").fill("200")
    page.click("input[value='Save preliminary results']")
    page.wait_for_selector("text=2 preliminary result(s) recorded")
    flag = page.locator("tr[data-analyte='HGB'] td.flag strong")
    assert flag.inner_text() == "LL (critical)"
    assert flag.evaluate("element => getComputedStyle(element).color") == "rgb(186, 33, 33)"
    assert page.locator("tr[data-analyte='PLT'] td.flag").inner_text() == "N"
    assert page.locator("tr[data-analyte='HGB'] td.acknowledgement").inner_text().startswith("not yet")
    assert LabResult.objects.filter(current=True, status="preliminary").count() == 2

    # Release is refused until the critical value is acknowledged.
    page.click("input[value='Verify and release…']")
    page.click("input[type=submit][value='Verify and release']")
    page.wait_for_selector("text=Acknowledge the critical results first")
    assert LabResult.objects.filter(current=True, status="preliminary").count() == 2

    # Acknowledge: who and when are shown, and recorded.
    page.goto(f"/admin/lab/laborder/{order.pk}/results/")
    page.click("text=Acknowledge critical value")
    page.wait_for_selector("text=Critical result acknowledged by staff:asha.")
    hgb = LabResult.objects.get(analyte__code="HGB", current=True)
    assert hgb.critical_acknowledged_by == "staff:asha"
    assert hgb.critical_acknowledged_at is not None
    local = timezone.localtime(hgb.critical_acknowledged_at, blr.zone)
    shown = page.locator("tr[data-analyte='HGB'] td.acknowledgement").inner_text()
    assert shown == f"by staff:asha on {local:%d %b %Y %H:%M}"

    # Verify and release: the confirmation names the verifier.
    page.click("input[value='Verify and release…']")
    assert "verified by staff:asha" in page.inner_text("#content")
    page.click("input[type=submit][value='Verify and release']")
    page.wait_for_selector("text=1 lab order(s) updated.")
    order.refresh_from_db()
    assert order.status == "final"
    final = LabResult.objects.get(analyte__code="HGB", current=True)
    assert (final.status, final.recorded_by, final.critical_acknowledged_by) == ("final", "staff:asha", "staff:asha")

    # The work list now shows it released, with its report: a PDF from the admin session.
    page.goto("/admin/lab/laborder/worklist/")
    assert page.locator(f"#work-list tr[data-order='{order.order_number}']").count() == 0
    page.goto(f"/admin/lab/laborder/{order.pk}/change/")  # the order page, acknowledgement shown, fits 1366 px
    assert "by staff:asha on" in page.inner_text(".field-current_results")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366
    page.goto("/admin/lab/laborder/worklist/")
    link = page.locator(f"#released tr[data-order='{order.order_number}'] a", has_text="Report (PDF)")
    report = page.request.get(link.get_attribute("href"))
    assert report.status == 200
    assert report.headers["content-type"] == "application/pdf"
    assert report.body().startswith(b"%PDF")


def test_another_branchs_lab_technician_neither_sees_nor_reaches_the_order(page, settings):
    settings.ADMIN_REQUIRE_2FA = False
    order, _ = stat_order_collected()
    mum = BranchFactory(code="MUM", name="Mumbai Andheri", state="Maharashtra", time_zone="Asia/Kolkata")
    lab_technician("manoj", mum)
    page.set_viewport_size({"width": 1366, "height": 768})
    log_in(page, "manoj", "/admin/lab/laborder/worklist/")

    assert page.locator("#work-list tbody").inner_text().strip() == "No open lab orders at your branches."
    entry = page.goto(f"/admin/lab/laborder/{order.pk}/results/")
    assert entry is not None
    assert entry.status == 404
    report = page.request.get(f"/admin/lab/laborder/{order.pk}/report/")
    assert report.status == 404
    assert LabResult.objects.count() == 0
    order.refresh_from_db()
    assert order.status == "collected"
