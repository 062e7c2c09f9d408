"""The integrations admin, registered explicitly: API clients and the audit log, patient notifications,
webhooks. Only client credentials exist, so the toolkit's grants, ID tokens and refresh tokens are hidden."""

from django.contrib import admin
from oauth2_provider.models import get_grant_model, get_id_token_model, get_refresh_token_model

from integrations.clients.admin import ApiClientAdmin, AuditLogEntryAdmin
from integrations.dicom.admin import DicomCallingAEAdmin
from integrations.fhir.admin import ExportJobAdmin
from integrations.hl7.admin import Hl7DestinationAdmin, Hl7MessageAdmin, Hl7ReceivedMessageAdmin, Hl7SenderAdmin
from integrations.models import (
    ApiClient,
    AuditLogEntry,
    DicomCallingAE,
    ExportJob,
    Hl7Destination,
    Hl7Message,
    Hl7ReceivedMessage,
    Hl7Sender,
    NotificationAttempt,
    NotificationSettings,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
)
from integrations.notifications.admin import NotificationAttemptAdmin, NotificationSettingsAdmin
from integrations.webhooks.admin import WebhookDeliveryAdmin, WebhookEventAdmin, WebhookSubscriptionAdmin

for model in (ApiClient, get_grant_model(), get_id_token_model(), get_refresh_token_model()):
    if admin.site.is_registered(model):
        admin.site.unregister(model)

admin.site.register(ApiClient, ApiClientAdmin)
admin.site.register(AuditLogEntry, AuditLogEntryAdmin)
admin.site.register(NotificationSettings, NotificationSettingsAdmin)
admin.site.register(NotificationAttempt, NotificationAttemptAdmin)
admin.site.register(WebhookSubscription, WebhookSubscriptionAdmin)
admin.site.register(WebhookDelivery, WebhookDeliveryAdmin)
admin.site.register(WebhookEvent, WebhookEventAdmin)
admin.site.register(ExportJob, ExportJobAdmin)
admin.site.register(Hl7Destination, Hl7DestinationAdmin)
admin.site.register(Hl7Message, Hl7MessageAdmin)
admin.site.register(Hl7ReceivedMessage, Hl7ReceivedMessageAdmin)
admin.site.register(Hl7Sender, Hl7SenderAdmin)
admin.site.register(DicomCallingAE, DicomCallingAEAdmin)
