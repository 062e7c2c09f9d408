"""Patient notifications: booking, reschedule and cancellation send an SMS (through the configured HTTP
gateway, here a real local HTTP server) and an e-mail after commit, through the real Celery task run
in-process; every attempt is logged, failures are retried, and nothing is sent twice."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail

from appointments import services
from appointments.models import Appointment
from appointments.tasks import appointment_notify
from clinic.celery import app as celery_app
from integrations.models import NotificationAttempt, NotificationSettings
from tests.appointments.lifecycle_helpers import start_now
from tests.appointments.test_booking import DAY, at, book, booking, branch, doctor, post_booking, writer
from tests.factories import BranchFactory
from tests.helpers import bearer

pytestmark = pytest.mark.django_db
__all__ = ["branch", "doctor", "writer"]  # fixtures shared with the booking tests


class Gateway(BaseHTTPRequestHandler):
    """An SMS gateway: records every request and answers with the next queued status (default 202)."""

    received: list[dict[str, Any]]
    statuses: list[int]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(  # type: ignore[attr-defined]
            {"auth": self.headers.get("Authorization"), "body": json.loads(body)}
        )
        status = self.server.statuses.pop(0) if self.server.statuses else 202  # type: ignore[attr-defined]
        payload = json.dumps({"id": f"msg-{len(self.server.received)}"}).encode()  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def gateway(settings) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    server.received, server.statuses = [], []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.SMS_BACKEND = "http"
    settings.SMS_GATEWAY_URL = f"http://127.0.0.1:{server.server_port}/messages"
    settings.SMS_GATEWAY_TOKEN = "gw-token"
    settings.SMS_SENDER_ID = "CLINIC"
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def eager_tasks() -> Iterator[None]:
    """Run the real task code in-process when it is queued (the broker is not part of these tests)."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def enabled() -> NotificationSettings:
    config = NotificationSettings.load()
    config.sms_enabled = config.email_enabled = True
    config.save()
    return config


@pytest.fixture
def patient(branch):
    from tests.patients.factories import PatientFactory

    return PatientFactory(
        first_name="Priya",
        last_name="Sharma",
        phone="+919876543210",
        email="priya.sharma@example.com",
        registration_branch=branch,
    )


def attempts() -> list[tuple[str, str, str, str, int]]:
    return list(
        NotificationAttempt.objects.order_by("id").values_list(
            "event_type", "channel", "recipient", "status", "attempt"
        )
    )


def book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks, hhmm="09:00") -> dict:
    with django_capture_on_commit_callbacks(execute=True):
        return book(client, writer, booking(patient, doctor, at(DAY, hhmm), at(DAY, hhmm) + timedelta(minutes=15)))


def test_a_booking_sends_an_sms_through_the_gateway_and_an_email_after_commit(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    appointment = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    when = at(DAY, "09:00").strftime("%a %d %b %Y, %I:%M %p")
    text = (
        f"Dear Priya, your appointment with Dr. Ananya Rao at Bengaluru on {when} is confirmed. "
        f"Your token number is {appointment['token_number']}."
    )
    assert gateway.received == [
        {"auth": "Bearer gw-token", "body": {"to": "+919876543210", "sender": "CLINIC", "message": text}}
    ]
    assert [(m.to, m.subject, m.body) for m in mail.outbox] == [
        (["priya.sharma@example.com"], f"Appointment confirmed: {when}", text)
    ]
    assert attempts() == [
        ("appointment.booked", "sms", "+91******3210", "sent", 1),
        ("appointment.booked", "email", "p***@example.com", "sent", 1),
    ]
    sms = NotificationAttempt.objects.get(channel="sms")
    assert (str(sms.subject_id), str(sms.patient_ref), sms.detail) == (
        appointment["appointment_id"],
        appointment["patient"]["id"],
        "msg-1",
    )
    assert sms.dedupe_key == f"{appointment['appointment_id']}:1:sms"


def test_nothing_is_sent_or_logged_when_notifications_are_disabled(
    client, writer, patient, doctor, gateway, django_capture_on_commit_callbacks
):
    NotificationSettings.load()  # the default row: both channels off
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert gateway.received == []
    assert mail.outbox == []
    assert attempts() == []


def test_only_the_enabled_channel_and_events_are_sent(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.email_enabled = False
    enabled.event_kinds = ["appointment.booked", "appointment.rescheduled"]  # cancellations switched off
    enabled.save()
    appointment = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(
            f"/api/v1/appointments/{appointment['appointment_id']}?reason=Travelling", **bearer(writer)
        )
    assert response.status_code == 200

    assert len(gateway.received) == 1
    assert mail.outbox == []
    assert attempts() == [("appointment.booked", "sms", "+91******3210", "sent", 1)]


def test_a_branch_filter_limits_notifications_to_those_branches(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.branches.set([BranchFactory(code="MUM")])
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)
    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])

    enabled.branches.add(doctor.branches.get())
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks, hhmm="10:00")
    assert len(gateway.received) == 1


def test_reschedule_and_cancel_notify_with_the_new_time_and_the_cancellation(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    appointment = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)
    url = f"/api/v1/appointments/{appointment['appointment_id']}"
    with django_capture_on_commit_callbacks(execute=True):
        moved = client.patch(
            f"{url}/reschedule",
            json.dumps({"new_slot_start": at(DAY, "11:00").isoformat(), "new_slot_end": at(DAY, "11:15").isoformat()}),
            content_type="application/json",
            **bearer(writer),
        )
    assert moved.status_code == 200, moved.content
    with django_capture_on_commit_callbacks(execute=True):
        cancelled = client.delete(f"{url}?reason=Travelling", **bearer(writer))
    assert cancelled.status_code == 200, cancelled.content

    new_time = at(DAY, "11:00").strftime("%a %d %b %Y, %I:%M %p")
    messages = [request["body"]["message"] for request in gateway.received]
    assert messages[1:] == [
        f"Dear Priya, your appointment has been moved: it is now with Dr. Ananya Rao at Bengaluru on {new_time}, "
        f"token {appointment['token_number']}.",
        f"Dear Priya, your appointment with Dr. Ananya Rao at Bengaluru on {new_time} "
        f"(token {appointment['token_number']}) has been cancelled.",
    ]
    assert [m.subject for m in mail.outbox] == [
        f"Appointment confirmed: {at(DAY, '09:00').strftime('%a %d %b %Y, %I:%M %p')}",
        f"Appointment rescheduled: {new_time}",
        f"Appointment cancelled: {new_time}",
    ]
    assert [key for key in NotificationAttempt.objects.order_by("id").values_list("dedupe_key", flat=True)] == [
        f"{appointment['appointment_id']}:{version}:{channel}" for version in (1, 2, 3) for channel in ("sms", "email")
    ]


def test_check_in_complete_and_no_show_notify_nobody(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    appointment = Appointment.objects.get(
        pk=book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)["appointment_id"]
    )
    start_now(appointment.pk)  # check-in only on the appointment's day
    with django_capture_on_commit_callbacks(execute=True):
        services.appointment_complete(appointment=services.appointment_check_in(appointment=appointment))
    assert len(gateway.received) == 1
    assert len(mail.outbox) == 1


def test_a_refused_booking_notifies_nobody(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post_booking(client, writer, booking(patient, doctor, at(DAY, "09:05"), at(DAY, "09:20")))
    assert response.status_code == 409
    assert callbacks == []
    assert (gateway.received, mail.outbox, attempts()) == ([], [], [])


def test_a_patient_without_email_gets_the_sms_and_the_email_is_logged_as_skipped(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    patient.email = ""
    patient.save()
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert len(gateway.received) == 1
    assert attempts() == [
        ("appointment.booked", "sms", "+91******3210", "sent", 1),
        ("appointment.booked", "email", "", "skipped", 1),
    ]
    assert NotificationAttempt.objects.get(channel="email").detail == "The patient has no e-mail."


def test_a_gateway_error_is_retried_until_it_succeeds_each_attempt_logged(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.email_enabled = False
    enabled.save()
    gateway.statuses.extend([503, 500])
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert len(gateway.received) == 3
    assert [(a[3], a[4]) for a in attempts()] == [("failed", 1), ("failed", 2), ("sent", 3)]
    assert (
        NotificationAttempt.objects.filter(status="failed")
        .order_by("id")
        .first()
        .detail.startswith("gateway answered 503")
    )


def test_retries_stop_after_the_configured_number_of_attempts(
    client, writer, patient, doctor, enabled, gateway, settings, django_capture_on_commit_callbacks
):
    enabled.email_enabled = False
    enabled.save()
    settings.NOTIFICATION_MAX_ATTEMPTS = 2
    gateway.statuses.extend([500, 500, 500])
    response_body = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert response_body["status"] == "booked"
    assert [(a[3], a[4]) for a in attempts()] == [("failed", 1), ("failed", 2)]


def test_a_refusal_by_the_gateway_is_not_retried(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    enabled.email_enabled = False
    enabled.save()
    gateway.statuses.append(400)
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert len(gateway.received) == 1
    assert [(a[3], a[4]) for a in attempts()] == [("failed", 1)]


def test_an_unreachable_gateway_is_logged_as_failed(
    client, writer, patient, doctor, enabled, settings, django_capture_on_commit_callbacks
):
    enabled.email_enabled = False
    enabled.save()
    settings.SMS_BACKEND = "http"
    settings.SMS_GATEWAY_URL = "http://127.0.0.1:9/messages"  # the discard port: nothing listens
    settings.NOTIFICATION_MAX_ATTEMPTS = 1
    book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    row = NotificationAttempt.objects.get()
    assert (row.status, row.detail) == ("failed", "gateway unreachable: ConnectionError")


def test_a_task_run_twice_sends_each_channel_once(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    appointment = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)
    appointment_notify.run(appointment["appointment_id"], "appointment.booked", 1)

    assert len(gateway.received) == 1
    assert len(mail.outbox) == 1
    assert NotificationAttempt.objects.count() == 2


def test_the_console_backend_prints_the_sms(
    client, writer, patient, doctor, enabled, settings, capsys, django_capture_on_commit_callbacks
):
    settings.SMS_BACKEND = "console"
    enabled.email_enabled = False
    enabled.save()
    appointment = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert "SMS from CLINIC to +919876543210: Dear Priya, your appointment" in capsys.readouterr().out
    assert NotificationAttempt.objects.get().status == "sent"
    assert appointment["status"] == "booked"


def test_a_broker_outage_at_commit_keeps_the_booking_and_the_relay_sends_it_when_the_broker_is_back(
    client, writer, patient, doctor, enabled, gateway, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    # It was logged and lost ("could not queue ..."): now the outbox row is the record (docs/operations.md §1).
    from kombu.exceptions import OperationalError

    from integrations.models import NotificationOutboxMessage
    from integrations.tasks import notification_outbox_run, relay_notifications

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(notification_outbox_run, "apply_async", broker_down)
    appointment = book_committed(client, writer, patient, doctor, django_capture_on_commit_callbacks)

    assert Appointment.objects.filter(pk=appointment["appointment_id"], status="booked").exists()
    assert "could not queue 1 notifications (first outbox id" in caplog.text
    assert attempts() == []
    message = NotificationOutboxMessage.objects.get()
    assert (message.args, message.claimed_until, message.finished_at) == (
        [appointment["appointment_id"], "appointment.booked", 1],
        None,  # released: due at the relay's next run
        None,
    )

    monkeypatch.undo()  # the broker is back
    with django_capture_on_commit_callbacks(execute=True):
        assert relay_notifications() == 1

    assert attempts() == [
        ("appointment.booked", "sms", "+91******3210", "sent", 1),
        ("appointment.booked", "email", "p***@example.com", "sent", 1),
    ]
    assert len(gateway.received) == 1
    message.refresh_from_db()
    assert message.finished_at is not None
    with django_capture_on_commit_callbacks(execute=True):
        assert relay_notifications() == 0


def test_a_message_lost_with_its_worker_is_sent_once_its_claim_runs_out_and_only_once(
    client, writer, patient, doctor, enabled, gateway, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from integrations.models import NotificationOutboxMessage
    from integrations.notifications.outbox import notification_outbox_run
    from integrations.tasks import relay_notifications

    celery_app.conf.task_always_eager = False  # published to nowhere: the worker that took it "died"
    try:
        with django_capture_on_commit_callbacks(execute=False):
            book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))
    finally:
        celery_app.conf.task_always_eager = True
    message = NotificationOutboxMessage.objects.get()
    lost_token = message.claim_token
    with django_capture_on_commit_callbacks(execute=True):
        assert relay_notifications() == 0  # claimed: it may still be running somewhere
    NotificationOutboxMessage.objects.update(claimed_until=timezone.now() - timedelta(seconds=1))

    with django_capture_on_commit_callbacks(execute=True):
        assert relay_notifications() == 1

    assert [a[1:4] for a in attempts()] == [("sms", "+91******3210", "sent"), ("email", "p***@example.com", "sent")]
    # The lost message turns up after all (the broker redelivers it): it is not this token's any more.
    assert notification_outbox_run(message_id=message.pk, token=lost_token) == "skipped"
    assert len(gateway.received) == 1
