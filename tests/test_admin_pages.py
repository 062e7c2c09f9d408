"""The admin's coherence: every list page opens and offers filters and search; every editable foreign key
to a large table is a raw-id or autocomplete widget (never a <select> of every row); the list pages make
the same number of queries whatever the number of rows (no N+1: list_select_related and annotations do
the joins); each app's index page names the app and its models readably."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.appointments.factories import AppointmentFactory, DoctorLeaveFactory, WeeklySessionFactory
from tests.billing.factories import BillableServiceFactory, make_invoice, pay
from tests.factories import ApiClientFactory, BranchFactory, DoctorFactory
from tests.patients.factories import PatientFactory, VisitFactory

pytestmark = pytest.mark.django_db

REGISTERED = sorted((model._meta.app_label, model._meta.model_name) for model in admin.site._registry)

# List pages allowed to go without filters or search, each with the reason.
NO_FILTERS = {
    ("auth", "group"): "Django's own admin; a handful of rows with nothing but a name to filter on.",
    ("integrations", "notificationsettings"): "A singleton: its list page opens the one row.",
}
NO_SEARCH = {
    ("integrations", "notificationsettings"): "A singleton: its list page opens the one row.",
}

# Tables that grow without bound: a form must never render them as a <select> of every row.
LARGE = {"patients.patient", "appointments.appointment", "billing.invoice", "integrations.webhookevent",
         "integrations.auditlogentry"}  # fmt: skip


@pytest.mark.parametrize(("app", "model"), REGISTERED, ids=[f"{a}.{m}" for a, m in REGISTERED])
def test_every_admin_list_page_opens(admin_client, app, model):
    response = admin_client.get(f"/admin/{app}/{model}/", follow=True)
    assert response.status_code == 200, response.content[:500]


@pytest.mark.parametrize(("app", "model"), REGISTERED, ids=[f"{a}.{m}" for a, m in REGISTERED])
def test_every_admin_list_page_has_filters_and_search(app, model):
    model_admin = next(ma for m, ma in admin.site._registry.items() if m._meta.label_lower == f"{app}.{model}")
    if (app, model) not in NO_FILTERS:
        assert model_admin.list_filter, f"{app}.{model} has no list_filter"
    if (app, model) not in NO_SEARCH:
        assert model_admin.search_fields, f"{app}.{model} has no search_fields"


def _editable_large_foreign_keys(request: Any) -> list[tuple[str, str, bool]]:
    """(where, field, uses raw-id or autocomplete) for every foreign key to a large table that a form of
    a registered ModelAdmin or of one of its inlines lets staff edit: fields shown read-only, admins and
    inlines that can neither add nor change, and an inline's own key to its parent are left out."""
    found = []
    for model, model_admin in admin.site._registry.items():
        holders: list[tuple[Any, str | None]] = [(model_admin, None)]
        holders += [(inline, model._meta.label_lower) for inline in model_admin.get_inline_instances(request)]
        for holder, parent in holders:
            if not (holder.has_add_permission(request, None) if parent else holder.has_add_permission(request)) and (
                not holder.has_change_permission(request, None)
            ):
                continue
            readonly = set(holder.get_readonly_fields(request, None))
            for field in holder.model._meta.get_fields():
                if not (field.many_to_one or field.one_to_one) or not field.concrete or not field.editable:
                    continue
                target = field.related_model._meta.label_lower
                if target not in LARGE or field.name in readonly or target == parent:
                    continue
                if holder.fields is not None and field.name not in holder.get_fields(request, None):
                    continue
                widgets = set(holder.raw_id_fields) | set(holder.get_autocomplete_fields(request))
                found.append((f"{type(holder).__name__}.{field.name}", target, field.name in widgets))
    return found


def test_editable_foreign_keys_to_large_tables_use_raw_id_or_autocomplete(rf, admin_user):
    request = rf.get("/admin/")
    request.user = admin_user
    found = _editable_large_foreign_keys(request)
    assert [where for where, _, ok in found if not ok] == []
    # The walk does see the keys staff edit (so an empty list above is not a walk that found nothing).
    assert {where for where, _, _ in found} >= {"InvoiceAdmin.patient", "VisitAdmin.patient"}


def test_each_apps_index_page_names_its_app_and_models_readably(admin_client):
    # The home page groups the models by work (tests/clinic/test_dashboard.py); each app's page keeps them.
    labels = ("clinic", "patients", "appointments", "billing", "integrations", "axes", "oauth2_provider")
    app_list = [admin_client.get(f"/admin/{label}/").context["app_list"][0] for label in labels]
    apps = {app["app_label"]: app["name"] for app in app_list}
    assert {label: apps[label] for label in labels} == {
        "clinic": "Organisation",
        "patients": "Patients",
        "appointments": "Scheduling",
        "billing": "Billing",
        "integrations": "Integrations",
        "axes": "Admin sign-in lockouts",  # not "AXES"
        "oauth2_provider": "API access tokens",  # not "DJANGO OAUTH TOOLKIT"
    }
    names = {app["app_label"]: sorted(model["name"] for model in app["models"]) for app in app_list}
    assert names["billing"] == [
        "Catalogue services",
        "Credit note number counters",
        "Credit notes",
        "Invoice number counters",
        "Invoices",
        "Payments",
        "Refunds",
    ]
    assert names["integrations"] == [
        "API clients",
        "Audit log",
        "DICOM calling AE titles",
        "Export jobs",
        "HL7 destinations",
        "HL7 messages",
        "HL7 received messages",
        "HL7 senders",
        "Notification attempts",
        "Notification settings",
        "Webhook deliveries",
        "Webhook events",
        "Webhook subscriptions",
    ]


def _audit_row() -> None:
    from django.utils import timezone

    from integrations.models import AuditLogEntry

    AuditLogEntry.objects.create(
        created_at=timezone.now(),
        client=ApiClientFactory(),
        method="GET",
        path="/api/v1/patients",
        status=200,
        duration_ms=1.0,
        request_id="r",
    )


def _invoice_row() -> None:
    branch = BranchFactory()
    make_invoice(branch=branch, patient=PatientFactory(registration_branch=branch))


def _payment_row() -> None:
    branch = BranchFactory()
    pay(make_invoice(branch=branch, patient=PatientFactory(registration_branch=branch)), "100.00")


def _credit_note_row() -> None:
    from billing import services

    branch = BranchFactory()
    invoice = make_invoice(branch=branch, patient=PatientFactory(registration_branch=branch))
    line = invoice.line_items.get()
    services.credit_note_issue(invoice=invoice, reason="Goodwill", lines=[services.CreditLineInput(line_id=line.id)])


def _refund_row() -> None:
    from decimal import Decimal

    from billing import services

    branch = BranchFactory()
    invoice = make_invoice(branch=branch, patient=PatientFactory(registration_branch=branch))
    pay(invoice, "100.00")
    services.refund_record(invoice=invoice, amount=Decimal("40.00"), payment_mode="cash")


def _subscription_row() -> None:
    from integrations.webhooks.services import subscription_create

    subscription_create(
        name="Receiver",
        target_url="http://127.0.0.1:9/hooks",  # never called: the test transaction is not committed
        event_types=["appointment.booked"],
        branch_ids=[BranchFactory().pk],
    )


def _delivery_row() -> None:
    from integrations.webhooks.models import WebhookSubscription
    from integrations.webhooks.services import test_event_send

    _subscription_row()
    test_event_send(subscription=WebhookSubscription.objects.order_by("-created_at").first())


def _notification_row() -> None:
    import uuid

    from django.utils import timezone

    from integrations.models import NotificationAttempt

    NotificationAttempt.objects.create(
        created_at=timezone.now(),
        event_type="appointment.booked",
        subject_id=uuid.uuid4(),
        patient_ref=uuid.uuid4(),
        dedupe_key=uuid.uuid4().hex,
        channel="sms",
        recipient="******3210",
        status="sent",
    )


def _lab_order_row() -> None:
    from lab.models import Priority
    from lab.services import lab_order_create
    from tests.lab.order_factories import LabTestFactory

    branch = BranchFactory()
    doctor = DoctorFactory(branches=[branch])
    lab_order_create(
        branch=branch,
        patient=PatientFactory(registration_branch=branch),
        doctor=doctor,
        tests=[LabTestFactory(code="CBC")],
        priority=Priority.ROUTINE,
        ordered_by="test",
    )


def _hl7_message_row() -> None:
    from integrations.hl7.models import Hl7Destination
    from integrations.webhooks.events import event_publish

    Hl7Destination.objects.get_or_create(
        name="LIS",
        defaults={
            "host": "127.0.0.1",
            "port": 9,
            "event_types": ["appointment.no_show"],
            "receiving_application": "LIS",
        },
    )
    event_publish(event_type="appointment.no_show", payload={"appointment": {}})


ROWS: dict[str, Callable[[], Any]] = {
    "patients/patient": PatientFactory,
    "patients/visit": VisitFactory,
    "appointments/appointment": AppointmentFactory,
    "appointments/weeklysession": WeeklySessionFactory,
    "appointments/doctorleave": DoctorLeaveFactory,
    "clinic/doctor": DoctorFactory,
    "integrations/apiclient": ApiClientFactory,
    "integrations/auditlogentry": _audit_row,
    "billing/invoice": _invoice_row,
    "billing/payment": _payment_row,
    "billing/creditnote": _credit_note_row,
    "billing/refund": _refund_row,
    "billing/billableservice": BillableServiceFactory,
    "integrations/webhooksubscription": _subscription_row,
    "integrations/webhookdelivery": _delivery_row,
    "integrations/webhookevent": _delivery_row,
    "integrations/notificationattempt": _notification_row,
    "lab/laborder": _lab_order_row,
    "integrations/hl7message": _hl7_message_row,
}


def _queries(admin_client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize("page", sorted(ROWS))
def test_list_pages_make_the_same_number_of_queries_for_2_and_8_rows(admin_client, settings, page):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # the subscriptions' local target
    url = f"/admin/{page}/"
    make = ROWS[page]
    for _ in range(2):
        make()
    few = _queries(admin_client, url)
    for _ in range(6):
        make()
    assert _queries(admin_client, url) == few


def test_the_department_branch_filter_neither_repeats_rows_nor_inflates_the_doctor_count(admin_client):
    blr, mum = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    first = DoctorFactory(branches=[blr, mum])
    DoctorFactory(department=first.department, branches=[blr, mum])
    DoctorFactory(branches=[mum])  # another department, not at BLR
    response = admin_client.get(f"/admin/clinic/department/?doctors__branches__id__exact={blr.pk}")
    assert [(row.name, row.doctor_total) for row in response.context["cl"].result_list] == [(first.department.name, 2)]


def test_no_related_lookup_offers_to_delete_the_related_row(admin_client):
    # The red cross beside an invoice line's department deleted the department (issue 37).
    patient = PatientFactory()
    branch = BranchFactory()
    invoice = make_invoice(branch=branch, patient=patient, finalize=False)
    pages = [
        "/admin/clinic/doctor/add/",
        f"/admin/billing/invoice/{invoice.pk}/change/",
        "/admin/appointments/weeklysession/add/",
    ]

    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert "related-widget-wrapper" in html, page
        assert "delete-related" not in html, page
