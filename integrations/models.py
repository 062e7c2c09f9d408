"""The models of the integrations app, defined in its sub-packages (Django loads an app's models from its
`models` module, so each is imported here)."""

from integrations.clients.models import ApiClient, AuditLogEntry, IdempotencyRecord, validate_network, validate_scope
from integrations.dicom.models import DicomCallingAE
from integrations.fhir.models import ExportJob
from integrations.hl7.models import Hl7Attempt, Hl7Destination, Hl7Message, Hl7ReceivedMessage, Hl7Sender
from integrations.notifications.models import NotificationAttempt, NotificationOutboxMessage, NotificationSettings
from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookSubscription

__all__ = [
    "ApiClient",
    "AuditLogEntry",
    "DicomCallingAE",
    "ExportJob",
    "Hl7Attempt",
    "Hl7Destination",
    "Hl7Message",
    "Hl7ReceivedMessage",
    "Hl7Sender",
    "IdempotencyRecord",
    "NotificationAttempt",
    "NotificationOutboxMessage",
    "NotificationSettings",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEvent",
    "WebhookSubscription",
    "validate_network",
    "validate_scope",
]
