"""The laboratory's daily pages in the admin (lab.admin_workplace): the work list (STAT first, oldest first,
turnaround clock, released orders with their report), result entry per order through lab.results (the API's
checks, flags, versions and events), the acknowledgement of a critical value (who and when, once) and verify
and release refused while a critical value is unacknowledged; the `?critical=unacknowledged` list. Every new
URL answers another branch's lab technician 404 (nothing changed) and a receptionist 403."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.contrib.messages import get_messages
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from clinic.roles import role_groups_sync
from clinic.staff import staff_reader
from integrations.models import AuditLogEntry, WebhookEvent
from lab import review, services
from lab.admin_display import duration_words
from lab.admin_workplace import critical_unacknowledged_url, work_list_url
from lab.models import LabOrder, LabResult, OrderStatus, Priority, RangeSex, ReferenceRange
from lab.results import ResultInput, lab_results_record
from lab.selectors import critical_unacknowledged, work_list
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory, staff_of
from tests.lab.order_factories import AnalyteFactory, LabTestFactory, imaging_test
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal
WORKLIST = "/admin/lab/laborder/worklist/"
CHANGELIST = "/admin/lab/laborder/"
NUMBER_MESSAGE = (
    "The value must be a number (a JSON number, or a string of ASCII digits with at most one '.'), e.g. 13.5."
)


def results_url(order: LabOrder) -> str:
    return f"/admin/lab/laborder/{order.pk}/results/"


def acknowledge_url(order: LabOrder, result: LabResult) -> str:
    return f"/admin/lab/laborder/{order.pk}/results/{result.pk}/acknowledge/"


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def staff_client(username: str, role: str, *branches: Any) -> tuple[Client, Any]:
    from django.contrib.auth import get_user_model

    role_groups_sync()
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    staff_of(user, *branches)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client, user


def snapshot() -> list[tuple[Any, ...]]:
    """Everything a refused request must leave as it was: results, order and item statuses, events."""
    results = list(
        LabResult.objects.order_by("id").values_list(
            "id",
            "version",
            "current",
            "status",
            "flag",
            "critical_acknowledged_by",
            "critical_acknowledged_at",
            "critical_acknowledgement_note",
        )
    )
    orders = list(LabOrder.objects.order_by("id").values_list("id", "status", "updated_at"))
    return [*results, *orders, ("events", WebhookEvent.objects.count())]


@pytest.fixture
def world() -> dict[str, Any]:
    blr = BranchFactory(code="BLR", name="Bengaluru Central", state="Karnataka", time_zone="Asia/Kolkata")
    mum = BranchFactory(code="MUM", name="Mumbai Andheri", state="Maharashtra", time_zone="Asia/Kolkata")
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    hgb = AnalyteFactory(
        test=cbc, code="HGB", name="Hemoglobin", unit="g/dL", critical_low=D("7"), critical_high=D("20"), position=0
    )
    plt = AnalyteFactory(test=cbc, code="PLT", name="Platelets", unit="10*3/uL", position=1)
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.FEMALE, age_min_days=6570, low=D("12"), high=D("15.5"))
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.MALE, age_min_days=6570, low=D("13.5"), high=D("17.5"))
    ReferenceRange.objects.create(analyte=plt, sex=RangeSex.ANY, age_min_days=0, low=D("150"), high=D("450"))
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray")
    patient = PatientFactory(
        registration_branch=blr,
        first_name="Priya",
        last_name="Sharma",
        gender="female",
        date_of_birth=timezone.localdate() - timedelta(days=30 * 365),
    )
    doctor = DoctorFactory(department=DepartmentFactory(), branches=[blr, mum])
    tech, tech_user = staff_client("asha", "lab technician", blr)
    other, _ = staff_client("manoj", "lab technician", mum)
    desk, _ = staff_client("rita", "receptionist", blr)

    def order(tests: list[Any] | None = None, branch: Any = blr, **kwargs: Any) -> LabOrder:
        return services.lab_order_create(
            branch=branch,
            patient=kwargs.pop("patient", patient),
            doctor=doctor,
            tests=tests or [cbc],
            priority=kwargs.pop("priority", Priority.ROUTINE),
            ordered_by="test",
            **kwargs,
        )

    return {
        "blr": blr,
        "mum": mum,
        "cbc": cbc,
        "xray": xray,
        "patient": patient,
        "order": order,
        "tech": tech,
        "tech_user": tech_user,
        "other": other,
        "desk": desk,
    }


def collected(world: dict[str, Any], **kwargs: Any) -> LabOrder:
    order = world["order"](**kwargs)
    return services.lab_order_collect(order=order)


def record(order: LabOrder, hgb: str = "5.1", plt: str = "100", status: str = "preliminary") -> LabOrder:
    return lab_results_record(
        order=order,
        results=[ResultInput(test="CBC", analyte="HGB", value=hgb), ResultInput(test="CBC", analyte="PLT", value=plt)],
        performed_at=timezone.now(),
        performer="K. Menon",
        status=status,
        recorded_by="K. Menon",
    )


def ordered_ago(order: LabOrder, elapsed: timedelta, now: Any) -> None:
    LabOrder.objects.filter(pk=order.pk).update(created_at=now - elapsed)


# --- the work list -------------------------------------------------------------------------------------------


def test_duration_words():
    assert [
        duration_words(timedelta(minutes=m)) for m in (0, 45, 60, 135, 24 * 60, 24 * 60 + 59, 3 * 24 * 60 + 250)
    ] == ["0 min", "45 min", "1 h", "2 h 15 min", "1 d", "1 d", "3 d 4 h"]
    assert duration_words(timedelta(seconds=-30)) == "0 min"


def test_work_list_selector_is_stat_first_then_urgent_then_routine_oldest_first_at_the_readers_branches(world):
    now = timezone.now()
    routine_old = world["order"]()
    stat_new = world["order"](priority=Priority.STAT)
    urgent = world["order"](priority=Priority.URGENT)
    stat_old = collected(world, priority=Priority.STAT)
    world["order"](priority=Priority.STAT, branch=world["mum"])  # another branch
    world["order"]([world["xray"]], priority=Priority.STAT)  # imaging only: not the lab's
    released = collected(world)
    record(released, hgb="13", plt="200", status="final")
    cancelled = world["order"](priority=Priority.STAT)
    services.lab_order_cancel(order=cancelled, reason="duplicate")
    for order, minutes in [(routine_old, 600), (stat_new, 30), (urgent, 300), (stat_old, 135)]:
        ordered_ago(order, timedelta(minutes=minutes), now)
    LabOrder.objects.filter(pk=stat_old.pk).update(collected_at=now - timedelta(minutes=20))

    entries = work_list(client=staff_reader(world["tech_user"]), limit=10, now=now)  # type: ignore[arg-type]

    assert [(e.order.pk, e.since_ordered, e.since_collected, e.target, e.overdue) for e in entries] == [
        (stat_old.pk, timedelta(minutes=135), timedelta(minutes=20), timedelta(hours=1), True),
        (stat_new.pk, timedelta(minutes=30), None, timedelta(hours=1), False),
        (urgent.pk, timedelta(minutes=300), None, timedelta(hours=4), True),
        (routine_old.pk, timedelta(minutes=600), None, timedelta(hours=24), False),
    ]
    assert [item.test.code for item in entries[0].items] == ["CBC"]
    assert [e.order.pk for e in work_list(client=staff_reader(world["tech_user"]), limit=2, now=now)] == [  # type: ignore[arg-type]
        stat_old.pk,
        stat_new.pk,
    ]


def test_the_work_list_page_shows_the_clock_in_words_red_past_target_and_the_released_reports(world):
    now = timezone.now()
    stat = collected(world, priority=Priority.STAT)
    ordered_ago(stat, timedelta(minutes=135), now)
    record(stat)  # HGB 5.1: critical, not acknowledged
    released = collected(world)
    record(released, hgb="13", plt="200", status="final")

    response = world["tech"].get(WORKLIST)

    assert response.status_code == 200
    content = response.content.decode()
    row = re.search(rf'<tr data-order="{stat.order_number}">(.*?)</tr>', content, re.S)
    assert row is not None
    cells = row.group(1)
    assert '<strong class="critical">STAT</strong>' in cells
    assert '<td class="clock overdue" title="target 1 h">2 h 15 min (past the 1 h target)</td>' in cells
    assert 'CBC <span class="quiet">(Resulted)</span>' in cells
    assert '<span class="critical">unacknowledged</span>' in cells
    assert f'href="/admin/lab/laborder/{stat.pk}/results/">Enter results</a>' in cells
    assert f'<tr data-order="{released.order_number}">' in content
    assert (
        f'href="/admin/lab/laborder/{released.pk}/report/" target="_blank" rel="noopener">Report (PDF)</a>' in content
    )
    (audit,) = AuditLogEntry.objects.filter(path=WORKLIST)
    assert (audit.actor, audit.patient_ids, audit.status) == ("staff:asha", [world["patient"].pk], 200)


def test_the_work_list_of_another_branch_shows_nothing_and_a_receptionist_gets_403(world):
    order = collected(world, priority=Priority.STAT)

    other = world["other"].get(WORKLIST)
    desk = world["desk"].get(WORKLIST)

    assert other.status_code == 200
    assert order.order_number not in other.content.decode()
    assert "No open lab orders at your branches." in other.content.decode()
    assert desk.status_code == 403
    assert not AuditLogEntry.objects.filter(path=WORKLIST).exists()


# --- result entry --------------------------------------------------------------------------------------------


def test_the_entry_page_lists_each_analyte_with_its_unit_and_the_patients_reference_range(world):
    order = collected(world)

    response = world["tech"].get(results_url(order))

    assert response.status_code == 200
    content = response.content.decode()
    hgb = re.search(r'<tr data-analyte="HGB">(.*?)</tr>', content, re.S)
    plt = re.search(r'<tr data-analyte="PLT">(.*?)</tr>', content, re.S)
    assert hgb is not None
    assert plt is not None
    hgb_field = f"value-{order.items.get().test.analytes.get(code='HGB').pk}"
    assert f'name="{hgb_field}"' in hgb.group(1)
    assert "<td>g/dL</td>" in hgb.group(1)
    assert '<td class="reference">12-15.5</td>' in hgb.group(1)  # the female adult band, not the male one
    assert "<td>10*3/uL</td>" in plt.group(1)
    assert '<td class="reference">150-450</td>' in plt.group(1)
    (audit,) = AuditLogEntry.objects.filter(path=results_url(order))
    assert (audit.actor, audit.patient_ids) == ("staff:asha", [world["patient"].pk])


def fields_of(order: LabOrder) -> dict[str, str]:
    analytes = order.items.get().test.analytes.all()
    return {analyte.code: f"value-{analyte.pk}" for analyte in analytes}


def test_saving_records_preliminary_results_through_the_service_with_its_flags_and_events(world):
    order = collected(world)
    fields = fields_of(order)
    before = WebhookEvent.objects.count()

    response = world["tech"].post(results_url(order), {fields["HGB"]: "5.1", fields["PLT"]: "100"})

    assert response.status_code == 302
    assert response["Location"] == results_url(order)
    rows = list(
        LabResult.objects.order_by("analyte__position").values_list(
            "analyte__code",
            "version",
            "status",
            "value_quantity",
            "unit",
            "flag",
            "reference_low",
            "reference_high",
            "performer",
            "recorded_by",
            "critical_acknowledged_by",
            "critical_acknowledged_at",
        )
    )
    assert rows == [
        ("HGB", 1, "preliminary", D("5.1"), "g/dL", "LL", D("12"), D("15.5"), "staff:asha", "staff:asha", "", None),
        ("PLT", 1, "preliminary", D("100"), "10*3/uL", "L", D("150"), D("450"), "staff:asha", "staff:asha", "", None),
    ]
    order.refresh_from_db()
    assert (order.status, order.items.get().status) == ("resulted", "resulted")
    assert list(WebhookEvent.objects.order_by("created_at").values_list("type", flat=True))[before:] == [
        "lab_result.critical"
    ]

    page = world["tech"].get(results_url(order))
    content = page.content.decode()
    assert messages_of(page) == ["2 preliminary result(s) recorded on " + order.order_number + "."]
    hgb = re.search(r'<tr data-analyte="HGB">(.*?)</tr>', content, re.S)
    plt = re.search(r'<tr data-analyte="PLT">(.*?)</tr>', content, re.S)
    assert hgb is not None
    assert plt is not None
    assert '<td class="value">5.1</td>' in hgb.group(1)
    assert '<td class="flag"><strong class="critical" style="color:#ba2121">LL (critical)</strong></td>' in hgb.group(1)
    assert '<span class="critical">not yet</span>' in hgb.group(1)
    assert "Acknowledge critical value" in hgb.group(1)
    assert '<td class="flag"><strong>L</strong></td>' in plt.group(1)
    assert "Acknowledge" not in plt.group(1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("high", NUMBER_MESSAGE),
        ("12,5", NUMBER_MESSAGE),
        ("1\x002", "Null characters are not allowed."),
        ("9" * 41, "Ensure this value has at most 40 characters (it has 41)."),
    ],
)
def test_a_bad_value_is_a_form_error_naming_the_analyte_and_nothing_is_saved(world, value, message):
    order = collected(world)
    fields = fields_of(order)
    before = snapshot()

    response = world["tech"].post(results_url(order), {fields["HGB"]: value, fields["PLT"]: "200"})

    assert response.status_code == 200
    assert response.context["problems"] == [f"HGB · Hemoglobin: {message}"]
    assert response.context["form"].errors == {fields["HGB"]: [message]}
    assert "Nothing was saved." in response.content.decode()
    assert snapshot() == before
    assert LabResult.objects.count() == 0


def test_nothing_entered_and_an_uncollected_order_are_refused_with_nothing_saved(world):
    order = collected(world)
    waiting = world["order"]()
    before = snapshot()

    empty = world["tech"].post(results_url(order), {fields_of(order)["HGB"]: "  "})
    uncollected = world["tech"].post(results_url(waiting), {fields_of(waiting)["HGB"]: "13"})

    assert empty.context["problems"] == ["Enter at least one value."]
    assert uncollected.context["problems"] == ["Enter at least one value."]
    assert uncollected.context["entering"] is False
    assert "The specimen has not been collected yet" in uncollected.content.decode()
    assert snapshot() == before


def test_final_results_are_not_entered_again(world):
    order = collected(world)
    record(order, hgb="13", plt="200", status="final")
    before = snapshot()

    response = world["tech"].post(results_url(order), {fields_of(order)["HGB"]: "14"})

    assert response.context["entering"] is False
    assert response.context["problems"] == ["Enter at least one value."]
    assert snapshot() == before


def test_the_entry_page_is_404_to_another_branch_and_403_to_a_receptionist_and_changes_nothing(world):
    order = collected(world)
    fields = fields_of(order)
    before = snapshot()

    assert world["other"].get(results_url(order)).status_code == 404
    assert world["other"].post(results_url(order), {fields["HGB"]: "5"}).status_code == 404
    assert world["desk"].get(results_url(order)).status_code == 403
    assert world["desk"].post(results_url(order), {fields["HGB"]: "5"}).status_code == 403
    assert world["tech"].get("/admin/lab/laborder/00000000-0000-0000-0000-000000000000/results/").status_code == 404
    assert world["tech"].get("/admin/lab/laborder/not-a-uuid/results/").status_code == 404
    assert snapshot() == before
    assert not AuditLogEntry.objects.filter(path=results_url(order)).exists()


# --- critical acknowledgement --------------------------------------------------------------------------------


def test_acknowledging_records_who_and_when_once_and_shows_it(world):
    order = collected(world)
    record(order)
    hgb = LabResult.objects.get(analyte__code="HGB")
    start = timezone.now()

    response = world["tech"].post(acknowledge_url(order, hgb))

    assert response.status_code == 302
    assert response["Location"] == results_url(order)
    hgb.refresh_from_db()
    assert hgb.critical_acknowledged_by == "staff:asha"
    assert hgb.critical_acknowledged_at is not None
    assert start <= hgb.critical_acknowledged_at <= timezone.now()
    assert (hgb.version, hgb.current, hgb.status, hgb.flag) == (1, True, "preliminary", "LL")
    local = timezone.localtime(hgb.critical_acknowledged_at, world["blr"].zone)
    shown = f"by staff:asha on {local:%d %b %Y %H:%M}"
    page = world["tech"].get(results_url(order))
    assert messages_of(page) == ["Critical result acknowledged by staff:asha."]
    assert f'<td class="acknowledgement">{shown}</td>' in page.content.decode()
    order_page = world["tech"].get(f"/admin/lab/laborder/{order.pk}/change/").content.decode()
    assert f"<td>{shown}</td>" in order_page
    assert f'href="/admin/lab/laborder/{order.pk}/results/">Enter results</a>' in order_page

    before = snapshot()
    again = world["tech"].post(acknowledge_url(order, hgb), follow=True)

    assert messages_of(again) == [
        f"HGB 5.1 g/dL LL was already acknowledged by staff:asha on {local:%d %b %Y at %H:%M}; nothing was changed."
    ]
    assert snapshot() == before


def test_an_acknowledgement_records_who_was_told_and_how_and_a_bad_note_changes_nothing(world):
    order = collected(world)
    record(order)
    hgb = LabResult.objects.get(analyte__code="HGB")
    before = snapshot()

    nul = world["tech"].post(acknowledge_url(order, hgb), {"note": "Dr Rao\x00"}, follow=True)
    long = world["tech"].post(acknowledge_url(order, hgb), {"note": "x" * 501}, follow=True)

    assert messages_of(nul) == ["Note: Null characters are not allowed. Nothing was acknowledged."]
    assert messages_of(long) == [
        "Note: Ensure this value has at most 500 characters (it has 501). Nothing was acknowledged."
    ]
    assert snapshot() == before

    world["tech"].post(acknowledge_url(order, hgb), {"note": "  Dr Rao by phone, read back  "})

    hgb.refresh_from_db()
    assert (hgb.critical_acknowledged_by, hgb.critical_acknowledgement_note) == (
        "staff:asha", "Dr Rao by phone, read back",
    )  # fmt: skip
    local = timezone.localtime(hgb.critical_acknowledged_at, world["blr"].zone)
    page = world["tech"].get(results_url(order)).content.decode()
    assert (
        f'<td class="acknowledgement">by staff:asha on {local:%d %b %Y %H:%M}: Dr Rao by phone, read back</td>' in page
    )
    # Written with the acknowledgement and never after: the versions trigger refuses a later change.
    with pytest.raises(IntegrityError, match="lab result versions are kept"), transaction.atomic():
        LabResult.objects.filter(pk=hgb.pk).update(critical_acknowledgement_note="Dr Iyer")


def test_a_result_that_is_not_critical_or_not_current_is_not_acknowledged(world):
    order = collected(world)
    record(order)
    record(order, hgb="13")  # HGB v2 replaces the critical v1
    plt = LabResult.objects.get(analyte__code="PLT", current=True)
    old_hgb = LabResult.objects.get(analyte__code="HGB", version=1)
    before = snapshot()

    not_critical = world["tech"].post(acknowledge_url(order, plt), follow=True)
    superseded = world["tech"].post(acknowledge_url(order, old_hgb), follow=True)

    assert messages_of(not_critical) == ["PLT 100 10*3/uL L is not a critical value: there is nothing to acknowledge."]
    assert messages_of(superseded) == ["This result has been replaced by a newer version; acknowledge the current one."]
    assert snapshot() == before


def test_acknowledging_is_404_to_another_branch_403_to_a_receptionist_and_post_only(world):
    order = collected(world)
    record(order)
    hgb = LabResult.objects.get(analyte__code="HGB")
    elsewhere = collected(world)
    before = snapshot()

    assert world["other"].post(acknowledge_url(order, hgb)).status_code == 404
    assert world["desk"].post(acknowledge_url(order, hgb)).status_code == 403
    assert world["tech"].get(acknowledge_url(order, hgb)).status_code == 405
    assert world["tech"].post(acknowledge_url(elsewhere, hgb)).status_code == 404  # not that order's result
    assert snapshot() == before


def test_the_database_keeps_every_other_column_of_a_version(world):
    """The versions trigger allows setting the acknowledgement once, nothing else (lab 0007)."""
    from django.db import DatabaseError, transaction

    order = collected(world)
    record(order)
    hgb = LabResult.objects.get(analyte__code="HGB")
    review.lab_result_acknowledge_critical(result=hgb, actor="staff:asha")
    for change in ({"critical_acknowledged_by": "staff:someone"}, {"value_quantity": D("6")}):
        with pytest.raises(DatabaseError), transaction.atomic():
            LabResult.objects.filter(pk=hgb.pk).update(**change)


# --- verify and release --------------------------------------------------------------------------------------


def verify(client: Client, order: LabOrder) -> Any:
    return client.post(
        CHANGELIST, {"action": "verify_preliminary", "_selected_action": [order.pk], "confirm": "yes"}, follow=True
    )


def test_verify_and_release_is_refused_while_a_critical_value_is_unacknowledged(world):
    order = collected(world)
    record(order)
    before = snapshot()

    response = verify(world["tech"], order)

    assert messages_of(response) == [
        f"{order.order_number}: Acknowledge the critical results first (tell the doctor): HGB 5.1 g/dL LL. "
        "Nothing was released."
    ]
    assert snapshot() == before


def test_after_acknowledgement_verify_releases_and_the_final_version_keeps_the_acknowledgement(world):
    order = collected(world)
    record(order)
    hgb = review.lab_result_acknowledge_critical(
        result=LabResult.objects.get(analyte__code="HGB"), actor="staff:asha", note="Dr Rao by phone, read back"
    )

    confirmation = world["tech"].post(CHANGELIST, {"action": "verify_preliminary", "_selected_action": [order.pk]})
    response = verify(world["tech"], order)

    assert "verified by staff:asha" in confirmation.content.decode()
    assert messages_of(response) == ["1 lab order(s) updated."]
    order.refresh_from_db()
    assert order.status == OrderStatus.FINAL
    final = LabResult.objects.get(analyte__code="HGB", current=True)
    assert (final.version, final.status, final.flag, final.recorded_by) == (2, "final", "LL", "staff:asha")
    assert (final.critical_acknowledged_by, final.critical_acknowledged_at, final.critical_acknowledgement_note) == (
        "staff:asha",
        hgb.critical_acknowledged_at,
        "Dr Rao by phone, read back",
    )
    assert list(critical_unacknowledged(client=staff_reader(world["tech_user"]))) == []  # type: ignore[arg-type]


def test_a_different_critical_value_needs_its_own_acknowledgement(world):
    order = collected(world)
    record(order)
    review.lab_result_acknowledge_critical(result=LabResult.objects.get(analyte__code="HGB"), actor="staff:asha")

    record(order, hgb="4.2")

    current = LabResult.objects.get(analyte__code="HGB", current=True)
    assert (current.version, current.flag, current.critical_acknowledged_at) == (2, "LL", None)


# --- the unacknowledged critical results ---------------------------------------------------------------------


def test_the_unacknowledged_critical_list_and_its_selector(world):
    critical = collected(world)
    record(critical)
    normal = collected(world)
    record(normal, hgb="13", plt="200")
    elsewhere = collected(world, branch=world["mum"])
    record(elsewhere)

    listed = world["tech"].get(CHANGELIST, {"critical": "unacknowledged"})
    other = world["other"].get(CHANGELIST, {"critical": "unacknowledged"})
    found = critical_unacknowledged(client=staff_reader(world["tech_user"]))  # type: ignore[arg-type]

    assert critical_unacknowledged_url() == "/admin/lab/laborder/?critical=unacknowledged"
    assert work_list_url() == WORKLIST
    assert [order.pk for order in listed.context["cl"].result_list] == [critical.pk]
    assert [order.pk for order in other.context["cl"].result_list] == [elsewhere.pk]
    assert [(r.item.order_id, r.analyte.code, r.flag) for r in found] == [(critical.pk, "HGB", "LL")]

    review.lab_result_acknowledge_critical(result=found[0], actor="staff:asha")

    assert list(world["tech"].get(CHANGELIST, {"critical": "unacknowledged"}).context["cl"].result_list) == []
    assert list(critical_unacknowledged(client=staff_reader(world["tech_user"]))) == []  # type: ignore[arg-type]
