"""Lab orders in the admin: a read-only list and order page (each audited with the patient shown, actor
staff:<user>), the items with their current results, and the staff actions, each a service call: collect,
cancel with a reason, verify the preliminary results as final (versions kept); a refusal is a message."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from integrations.models import AuditLogEntry
from lab import services
from lab.models import LabOrder, LabResult, Priority, RangeSex, ReferenceRange
from lab.results import ResultInput, lab_results_record
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import AnalyteFactory, LabTestFactory, imaging_test
from tests.patients.factories import PatientFactory
from tests.pdf_tools import pdf_text

pytestmark = pytest.mark.django_db

D = Decimal
CHANGELIST = "/admin/lab/laborder/"


def change_url(order: LabOrder) -> str:
    return f"/admin/lab/laborder/{order.pk}/change/"


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def audit_rows(path: str) -> list[AuditLogEntry]:
    return list(AuditLogEntry.objects.filter(path=path).order_by("id"))


@pytest.fixture
def world() -> dict[str, Any]:
    blr = BranchFactory(code="BLR", state="Karnataka", time_zone="Asia/Kolkata")
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    hgb = AnalyteFactory(test=cbc, code="HGB", unit="g/dL", critical_low=D("7"), critical_high=D("20"), position=0)
    plt = AnalyteFactory(test=cbc, code="PLT", unit="10*3/uL", position=1)
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.ANY, age_min_days=0, low=D("12"), high=D("15.5"))
    ReferenceRange.objects.create(analyte=plt, sex=RangeSex.ANY, age_min_days=0, low=D("150"), high=D("450"))
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray")
    patient = PatientFactory(
        registration_branch=blr,
        first_name="Priya",
        last_name="Sharma",
        gender="female",
        date_of_birth=timezone.localdate() - timedelta(days=30 * 365),
    )
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(blr)

    def order(tests: list[Any] | None = None, **kwargs: Any) -> LabOrder:
        return services.lab_order_create(
            branch=blr,
            patient=kwargs.pop("patient", patient),
            doctor=doctor,
            tests=tests or [cbc],
            priority=kwargs.pop("priority", Priority.ROUTINE),
            ordered_by="test",
            **kwargs,
        )

    return {"blr": blr, "cbc": cbc, "xray": xray, "patient": patient, "doctor": doctor, "order": order}


def record(order: LabOrder, results: list[ResultInput], status: str = "preliminary") -> LabOrder:
    return lab_results_record(
        order=order, results=results, performed_at=timezone.now(), performer="K. Menon", status=status
    )


CBC_PRELIMINARY = [
    ResultInput(test="CBC", analyte="HGB", value="11.2", note="haemolysed?"),
    ResultInput(test="CBC", analyte="PLT", value="250"),
]


def test_the_list_shows_orders_filters_and_searches_and_is_audited(admin_client, admin_user, world):
    first = world["order"](priority=Priority.STAT)
    other = PatientFactory(registration_branch=world["blr"], first_name="Ravi", last_name="Kumar")
    second = world["order"](patient=other)

    response = admin_client.get(CHANGELIST)

    assert response.status_code == 200
    assert [order.pk for order in response.context["cl"].result_list] == [second.pk, first.pk]
    assert first.order_number.encode() in response.content
    (row,) = audit_rows(CHANGELIST)
    assert (row.actor, row.client_id, row.patient_ids, row.status) == (
        f"staff:{admin_user.username}",
        None,
        [other.pk, world["patient"].pk],
        200,
    )
    accession = first.items.get().accession_number
    for query, expected in [
        ({"q": accession}, [first.pk]),
        ({"q": "Ravi"}, [second.pk]),
        ({"q": other.patient_id}, [second.pk]),
        ({"q": second.order_number}, [second.pk]),
        ({"priority__exact": "stat"}, [first.pk]),
        ({"status__exact": "ordered", "branch__id__exact": world["blr"].pk}, [second.pk, first.pk]),
    ]:
        found = admin_client.get(CHANGELIST, query)
        assert [order.pk for order in found.context["cl"].result_list] == expected, query


def test_the_order_page_is_read_only_shows_current_results_and_is_audited(admin_client, admin_user, world):
    order = world["order"]([world["cbc"], world["xray"]])
    services.lab_order_collect(order=order)
    record(order, CBC_PRELIMINARY)
    record(order, [ResultInput(test="CBC", analyte="HGB", value="11.4")])  # a second preliminary version
    url = change_url(order)

    response = admin_client.get(url)

    assert response.status_code == 200
    content = response.content.decode()
    assert order.order_number in content
    assert 'name="_save"' not in content, "the page is read-only"
    assert "<td>11.4</td>" in content, "the current version, as reported (not the column's 11.4000)"
    assert "<td>11.2</td>" not in content, "the current version only"
    assert "v2 of 2" in content
    assert "v1 of 1" in content
    assert "<td>250</td>" in content
    assert "<td>12-15.5</td>" in content  # the reference band, as reported too
    (inline,) = response.context["inline_admin_formsets"]
    assert [form.original.accession_number for form in inline] == [
        item.accession_number for item in order.items.order_by("position")
    ]
    (row,) = audit_rows(url)
    assert (row.actor, row.client_id, row.patient_ids, row.status) == (
        f"staff:{admin_user.username}",
        None,
        [world["patient"].pk],
        200,
    )
    # A post to the page changes nothing: orders change through the actions only.
    before = LabOrder.objects.values().get(pk=order.pk)
    assert admin_client.post(url, {"priority": "stat"}).status_code == 403
    assert LabOrder.objects.values().get(pk=order.pk) == before


def test_a_critical_flag_reads_as_critical_in_red_and_l_h_in_bold(admin_client, world):
    order = world["order"]()
    services.lab_order_collect(order=order)
    record(
        order,
        [ResultInput(test="CBC", analyte="HGB", value="6.5"), ResultInput(test="CBC", analyte="PLT", value="100")],
    )

    content = admin_client.get(change_url(order)).content.decode()

    assert '<td><strong class="critical" style="color:#ba2121">LL (critical)</strong></td>' in content
    assert "<td><strong>L</strong></td>" in content  # PLT 100 under its band of 150-450


def test_no_add_and_no_delete(admin_client, world):
    order = world["order"]()

    assert admin_client.get("/admin/lab/laborder/add/").status_code == 403
    assert admin_client.get(f"/admin/lab/laborder/{order.pk}/delete/").status_code == 403
    page = admin_client.get(CHANGELIST)
    actions = [value for value, _ in page.context["action_form"].fields["action"].choices]
    assert actions == ["", "collect", "cancel", "verify_preliminary"]


def test_collect_moves_the_order_and_collecting_twice_is_a_message(admin_client, admin_user, world):
    order = world["order"]()
    selected = {"action": "collect", "_selected_action": [order.pk]}

    response = admin_client.post(CHANGELIST, selected, follow=True)

    assert response.status_code == 200
    assert messages_of(response) == ["1 lab order(s) updated."]
    order.refresh_from_db()
    assert order.status == "collected"
    assert order.collected_at is not None
    assert list(order.items.values_list("status", flat=True)) == ["collected"]
    posted = [row for row in audit_rows(CHANGELIST) if row.method == "POST"]
    assert [(row.actor, row.patient_ids) for row in posted] == [(f"staff:{admin_user.username}", [order.patient_id])]

    before = LabOrder.objects.values().get(pk=order.pk)
    again = admin_client.post(CHANGELIST, selected, follow=True)

    assert again.status_code == 200
    assert messages_of(again) == [
        f"{order.order_number}: Cannot collect an order that is collected; it must be ordered."
    ]
    assert LabOrder.objects.values().get(pk=order.pk) == before


def test_cancel_asks_for_a_reason_then_cancels_through_the_service(admin_client, world):
    order = world["order"]()
    collected = world["order"]([world["xray"], world["cbc"]])
    services.lab_order_collect(order=collected)
    selected = {"action": "cancel", "_selected_action": [order.pk, collected.pk]}

    confirm = admin_client.post(CHANGELIST, selected)
    assert confirm.status_code == 200
    assert b'name="reason"' in confirm.content
    missing = admin_client.post(CHANGELIST, {**selected, "confirm": "yes", "reason": " "})
    assert missing.status_code == 200
    assert missing.context["form"].errors == {"reason": ["This field is required."]}
    assert LabOrder.objects.get(pk=order.pk).status == "ordered"

    response = admin_client.post(CHANGELIST, {**selected, "confirm": "yes", "reason": "Ordered twice"}, follow=True)

    assert response.status_code == 200
    assert messages_of(response) == [
        f"{collected.order_number}: Cannot cancel an order that is collected; it must be ordered.",
        "1 lab order(s) updated.",
    ]
    order.refresh_from_db()
    assert (order.status, order.cancellation_reason) == ("cancelled", "Ordered twice")
    assert order.cancelled_at is not None
    assert list(order.items.values_list("status", flat=True)) == ["cancelled"]
    assert LabOrder.objects.get(pk=collected.pk).status == "collected"


def test_verify_turns_preliminary_results_final_and_keeps_the_history(admin_client, admin_user, world):
    order = world["order"]([world["cbc"], world["xray"]])
    services.lab_order_collect(order=order)
    record(order, CBC_PRELIMINARY)
    record(order, [ResultInput(test="XR-CHEST", value="No acute findings.")])
    assert LabOrder.objects.get(pk=order.pk).status == "resulted"
    selected = {"action": "verify_preliminary", "_selected_action": [order.pk]}

    asked = admin_client.post(CHANGELIST, selected)
    assert asked.status_code == 200
    assert asked.templates[0].name == "admin/reason_action.html"
    assert f"verified by staff:{admin_user.username}" in asked.content.decode()
    assert LabOrder.objects.get(pk=order.pk).status == "resulted"  # nothing until confirmed
    response = admin_client.post(CHANGELIST, {**selected, "confirm": "yes"}, follow=True)

    assert response.status_code == 200
    assert messages_of(response) == ["1 lab order(s) updated."]
    order.refresh_from_db()
    assert order.status == "final"
    assert sorted(order.items.values_list("status", flat=True)) == ["completed", "final"]
    versions = list(
        LabResult.objects.filter(item__order=order)
        .order_by("item__position", "analyte__position", "version")
        .values_list("analyte__code", "version", "current", "status", "value_quantity", "value_text", "flag", "note")
    )
    staff = f"staff:{admin_user.username}"
    assert versions == [
        ("HGB", 1, False, "preliminary", D("11.2000"), "", "L", "haemolysed?"),
        ("HGB", 2, True, "final", D("11.2000"), "", "L", "haemolysed?"),
        ("PLT", 1, False, "preliminary", D("250.0000"), "", "N", ""),
        ("PLT", 2, True, "final", D("250.0000"), "", "N", ""),
        (None, 1, False, "preliminary", None, "No acute findings.", "", ""),
        (None, 2, True, "final", None, "No acute findings.", "", ""),
    ]
    finals = LabResult.objects.filter(item__order=order, status="final")
    assert set(finals.values_list("performer", "recorded_by")) == {(staff, staff)}
    page = admin_client.get(change_url(order)).content.decode()
    assert "<th>recorded by</th>" in page
    assert f"<td>final</td><td>{staff}</td>" in page  # who verified and released, on the order page


def test_verify_with_nothing_preliminary_is_a_message_and_changes_nothing(admin_client, world):
    order = world["order"]()
    services.lab_order_collect(order=order)
    record(order, CBC_PRELIMINARY, status="final")
    ordered = world["order"]()
    before = list(LabResult.objects.order_by("id").values())

    response = admin_client.post(
        CHANGELIST,
        {"action": "verify_preliminary", "_selected_action": [order.pk, ordered.pk], "confirm": "yes"},
        follow=True,
    )

    assert response.status_code == 200
    assert sorted(messages_of(response)) == sorted(
        [
            f"{order.order_number}: There is no preliminary result to verify.",
            f"{ordered.order_number}: There is no preliminary result to verify.",
        ]
    )
    assert list(LabResult.objects.order_by("id").values()) == before
    assert LabOrder.objects.get(pk=order.pk).status == "final"


def test_the_report_prints_from_the_admin_session_and_is_audited(admin_client, admin_user, world):
    # The API's PDF URL wants a token (401 to the admin session); the order page has its own print link.
    order = world["order"]()
    services.lab_order_collect(order=order)
    record(order, CBC_PRELIMINARY)
    report_url = f"/admin/lab/laborder/{order.pk}/report/"

    page = admin_client.get(change_url(order)).content.decode()
    response = admin_client.get(report_url)

    assert report_url in page
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF-")
    assert order.order_number in pdf_text(response.content)
    (row,) = audit_rows(report_url)
    assert (row.actor, row.patient_ids, row.status) == (f"staff:{admin_user.username}", [world["patient"].pk], 200)
    assert admin_client.get(f"/admin/lab/laborder/{uuid.uuid4()}/report/").status_code == 404
