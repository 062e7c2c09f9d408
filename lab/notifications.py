"""Patient notification "your results are ready": due when an order becomes final (lab_result.finalized),
if the admin enabled that kind. It goes through the notification outbox in the results' transaction and is
sent by a Celery task after commit (lab.tasks), even when the broker was down at commit or the worker died;
integrations sends and logs each attempt. The text names the order and the branch, never a result value."""

from __future__ import annotations

from integrations.notifications.outbox import notification_outbox_add
from integrations.notifications.services import Message, notification_channels
from lab.events import LAB_RESULT_FINALIZED
from lab.models import LabOrder

# The task is named, not imported: lab.tasks imports this module to build the message.
NOTIFY_TASK = "lab.tasks.lab_results_ready_notify"

# An order becomes final once (a later post over a final result is an amendment, which keeps it final
# and publishes lab_result.amended), so the notification's dedupe key needs no other version.
FINALIZED_VERSION = 1


def results_ready_schedule(order: LabOrder) -> None:
    """Queue the "results ready" notification of `order` in the outbox, in the current transaction: sent
    after commit (nothing for a post that rolls back), and still sent if the broker is down at commit."""
    if not notification_channels(event_type=LAB_RESULT_FINALIZED, branch_id=order.branch_id):
        return
    notification_outbox_add(task=NOTIFY_TASK, args=[str(order.pk)])


def results_ready_message(order: LabOrder) -> Message:
    """The text of the notification: the order number and the branch, no result (privacy)."""
    patient = order.patient
    text = (
        f"Dear {patient.first_name}, your lab results for order {order.order_number} at {order.branch.name} are ready."
    )
    return Message(
        event_type=LAB_RESULT_FINALIZED,
        subject_id=order.pk,
        patient_ref=patient.pk,
        version=FINALIZED_VERSION,
        phone=patient.phone,
        email=patient.email,
        subject=f"Lab results ready: {order.order_number}",
        text=text,
    )
