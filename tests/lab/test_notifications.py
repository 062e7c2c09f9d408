"""Patient notification "your results are ready": a post that makes a lab order final sends an SMS (through
the configured HTTP gateway, here a real local HTTP server) and an e-mail after commit, through the real
Celery task run in-process, with the order number and the branch but no result value; every attempt is
logged, and nothing is sent twice, for a post that leaves the order open, or for one that rolls back."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone

from integrations.models import NotificationAttempt, NotificationSettings
from lab import services
from lab.models import LabOrder, Priority
from lab.results import ResultInput, lab_results_record
from lab.tasks import lab_results_ready_notify
from tests.appointments.test_notifications import attempts, eager_tasks, enabled, gateway
from tests.billing.factories import body, post_json
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import AnalyteFactory, LabTestFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
__all__ = ["eager_tasks", "enabled", "gateway"]  # fixtures shared with the appointment notification tests

D = Decimal
ORDERS = "/api/v1/lab/orders"
# Values that must never appear in a notification.
HGB, PLT = "13.7", "251"


@pytest.fixture
def world(token_for: Any) -> dict[str, Any]:
    blr = BranchFactory(code="BLR", name="Bengaluru Central Clinic")
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    AnalyteFactory(test=cbc, code="HGB", unit="g/dL", position=0)
    AnalyteFactory(test=cbc, code="PLT", unit="10*3/uL", position=1)
    patient = PatientFactory(
        first_name="Priya",
        phone="+919876543210",
        email="priya.sharma@example.com",
        registration_branch=blr,
        gender="female",
        date_of_birth=timezone.localdate() - timedelta(days=30 * 365),
    )
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(blr)
    order = services.lab_order_create(
        branch=blr, patient=patient, doctor=doctor, tests=[cbc], priority=Priority.ROUTINE, ordered_by="test"
    )
    services.lab_order_collect(order=order)
    return {
        "order": LabOrder.objects.get(pk=order.pk),
        "writer": token_for(["lab:write", "lab:read"], branches=[blr]),
        "patient": patient,
        "blr": blr,
    }


def post_committed(
    client: Any, world: dict[str, Any], capture: Any, results: list[dict[str, Any]], status: str = "final", **extra: Any
) -> dict[str, Any]:
    payload = {
        "results": results,
        "performed_at": timezone.now().isoformat(),
        "performer": "K. Menon",
        "status": status,
    }
    with capture(execute=True):
        response = post_json(client, world["writer"], f"{ORDERS}/{world['order'].id}/results", {**payload, **extra})
    assert response.status_code == 201, response.content
    return body(response)


CBC_FINAL = [
    {"test": "CBC", "analyte": "HGB", "value": HGB, "unit": "g/dL"},
    {"test": "CBC", "analyte": "PLT", "value": PLT},
]


def ready_text(world: dict[str, Any]) -> str:
    number = world["order"].order_number
    return f"Dear Priya, your lab results for order {number} at Bengaluru Central Clinic are ready."


def test_the_post_that_makes_the_order_final_sends_an_sms_and_an_email_without_values(
    client, world, enabled, gateway, django_capture_on_commit_callbacks
):
    data = post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert data["status"] == "final"
    number = world["order"].order_number
    assert number.startswith("BLR-LAB-")
    text = ready_text(world)
    assert gateway.received == [
        {"auth": "Bearer gw-token", "body": {"to": "+919876543210", "sender": "CLINIC", "message": text}}
    ]
    assert [(m.to, m.subject, m.body) for m in mail.outbox] == [
        (["priya.sharma@example.com"], f"Lab results ready: {number}", text)
    ]
    for sent in (text, mail.outbox[0].subject):
        assert not [word for word in (HGB, PLT, "HGB", "PLT", "CBC") if word in sent]
    assert attempts() == [
        ("lab_result.finalized", "sms", "+91******3210", "sent", 1),
        ("lab_result.finalized", "email", "p***@example.com", "sent", 1),
    ]
    sms = NotificationAttempt.objects.get(channel="sms")
    assert (sms.subject_id, sms.patient_ref, sms.detail) == (world["order"].pk, world["patient"].pk, "msg-1")
    assert sms.dedupe_key == f"{world['order'].pk}:1:sms"


def test_nothing_is_sent_or_logged_when_notifications_are_disabled(
    client, world, gateway, django_capture_on_commit_callbacks
):
    NotificationSettings.load()  # the default row: both channels off
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])


def test_nothing_is_sent_when_the_results_ready_switch_is_off(
    client, world, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.event_kinds = ["appointment.booked"]
    enabled.save()
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])


def test_a_branch_filter_limits_the_notification_to_those_branches(
    client, world, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.branches.set([BranchFactory(code="MUM")])
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])


def test_posts_that_leave_the_order_open_notify_nobody(
    client, world, enabled, gateway, django_capture_on_commit_callbacks
):
    data = post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL, status="preliminary")
    assert data["status"] == "resulted"
    data = post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL[:1])  # PLT still open
    assert data["status"] == "resulted"

    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])

    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL[1:])
    assert [request["body"]["message"] for request in gateway.received] == [ready_text(world)]


def test_an_amendment_of_a_final_order_does_not_notify_again(
    client, world, enabled, gateway, django_capture_on_commit_callbacks
):
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)
    amended = [{"test": "CBC", "analyte": "HGB", "value": "12.9", "unit": "g/dL"}]
    data = post_committed(
        client, world, django_capture_on_commit_callbacks, amended, status="amended", reason="Haemolysed sample"
    )

    assert data["status"] == "final"
    assert len(gateway.received) == 1
    assert len(mail.outbox) == 1
    assert NotificationAttempt.objects.count() == 2


class PostFailed(Exception):
    """Something after the post failed, so the request's transaction rolls back."""


def record_and_fail(order: LabOrder) -> None:
    results = [ResultInput(test="CBC", analyte="HGB", value=HGB), ResultInput(test="CBC", analyte="PLT", value=PLT)]
    with transaction.atomic():
        order = lab_results_record(
            order=order, results=results, performed_at=timezone.now(), performer="K. Menon", status="final"
        )
        assert order.status == "final"
        raise PostFailed


def test_a_rolled_back_post_notifies_nobody(world, enabled, gateway, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(PostFailed):
        record_and_fail(world["order"])

    assert LabOrder.objects.get(pk=world["order"].pk).status == "collected"
    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])


def test_a_gateway_error_is_retried_until_it_succeeds_each_attempt_logged(
    client, world, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.email_enabled = False
    enabled.save()
    gateway.statuses.extend([503, 500])
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert len(gateway.received) == 3
    assert [(a[3], a[4]) for a in attempts()] == [("failed", 1), ("failed", 2), ("sent", 3)]


def test_a_task_run_twice_sends_each_channel_once(client, world, enabled, gateway, django_capture_on_commit_callbacks):
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)
    lab_results_ready_notify.run(str(world["order"].pk))

    assert len(gateway.received) == 1
    assert len(mail.outbox) == 1
    assert NotificationAttempt.objects.count() == 2


def test_the_console_backend_prints_the_sms(
    client, world, enabled, settings, capsys, django_capture_on_commit_callbacks
):
    settings.SMS_BACKEND = "console"
    enabled.email_enabled = False
    enabled.save()
    post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert f"SMS from CLINIC to +919876543210: {ready_text(world)}" in capsys.readouterr().out
    assert NotificationAttempt.objects.get().status == "sent"


def test_a_broker_outage_at_commit_keeps_the_results_and_the_relay_sends_it_when_the_broker_is_back(
    client, world, enabled, gateway, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    # The notification is an outbox row written with the results (docs/operations.md §1), not a message that
    # the broker outage loses.
    from kombu.exceptions import OperationalError

    from integrations.models import NotificationOutboxMessage
    from integrations.tasks import notification_outbox_run, relay_notifications

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(notification_outbox_run, "apply_async", broker_down)
    data = post_committed(client, world, django_capture_on_commit_callbacks, CBC_FINAL)

    assert data["status"] == "final"
    assert "could not queue 1 notifications (first outbox id" in caplog.text
    assert attempts() == []
    message = NotificationOutboxMessage.objects.get()
    assert (message.task, message.args, message.finished_at) == (
        "lab.tasks.lab_results_ready_notify",
        [str(world["order"].pk)],
        None,
    )

    monkeypatch.undo()  # the broker is back
    with django_capture_on_commit_callbacks(execute=True):
        assert relay_notifications() == 1

    assert [row[3] for row in attempts()] == ["sent", "sent"]
    message.refresh_from_db()
    assert message.finished_at is not None
