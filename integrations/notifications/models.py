"""Patient notification settings (one row) and the log of every attempt to send one."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from clinic.models import Branch
from integrations.webhooks.registry import NAME_MAX_LENGTH, event_kinds_notifying


def notifying_event_kinds() -> list[str]:
    """The default switches: every kind that may notify (migration 0006 refers to this function)."""
    return [kind.name for kind in event_kinds_notifying()]


class NotificationSettings(models.Model):
    """Which patient notifications the service sends (one row, edited in the admin). Off by default: a
    clinic turns SMS and e-mail on once its gateway and sender address are configured."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    sms_enabled = models.BooleanField("send SMS", default=False)
    email_enabled = models.BooleanField("send e-mail", default=False)
    # Wire names of registered kinds whose `notifies` is set; the admin offers those from the registry, so
    # a domain that adds one needs no migration here.
    event_kinds = ArrayField(
        models.CharField(max_length=NAME_MAX_LENGTH),
        default=notifying_event_kinds,
        blank=True,
        verbose_name="notify on",
        help_text="The events that send the patient a notification.",
    )
    branches = models.ManyToManyField(
        Branch,
        blank=True,
        related_name="+",
        help_text="Only events at these branches (none chosen: every branch).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = verbose_name_plural = "notification settings"
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="notification_settings_singleton")]

    def __str__(self) -> str:
        return "Patient notifications"

    @classmethod
    def load(cls) -> NotificationSettings:
        settings, _ = cls.objects.get_or_create(id=1)
        return settings


class NotificationAttempt(models.Model):
    """One try at sending one patient notification on one channel. Holds no message text (it names the
    patient and the doctor) and only a masked recipient."""

    class Channel(models.TextChoices):
        SMS = "sms"
        EMAIL = "email"

    class Status(models.TextChoices):
        SENT = "sent"
        FAILED = "failed"
        SKIPPED = "skipped"

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(db_index=True)
    event_type = models.CharField(max_length=40)
    subject_id = models.UUIDField(
        db_index=True, help_text="The id of what the notification is about (the subject of its event)."
    )
    patient_ref = models.UUIDField(null=True, blank=True, db_index=True, help_text="Patient UUID.")
    dedupe_key = models.CharField(
        max_length=120, help_text="Subject, version and channel: a redelivered task never sends twice."
    )
    channel = models.CharField(max_length=10, choices=Channel.choices)
    recipient = models.CharField(max_length=120, blank=True, help_text="Masked.")
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices)
    detail = models.CharField(max_length=500, blank=True, help_text="Provider reference, error or why skipped.")
    duration_ms = models.FloatField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # At most one successful send per notification and channel, whatever races between workers.
            models.UniqueConstraint(
                fields=["dedupe_key"], condition=models.Q(status="sent"), name="notification_sent_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.channel} {self.status}"


class NotificationOutboxMessage(models.Model):
    """A patient notification to send, written in the transaction of the change it announces (the
    transactional outbox, as webhook deliveries are): a change committed while the broker (Redis) is down
    is notified when it is back, and a message lost with a killed worker is sent again once its claim
    runs out. The row names the domain app's task and its arguments (ids only); finished rows are purged.

    Claimed (claim_token, claimed_until) from the moment it is queued; the relay (Celery beat) queues
    again every unfinished message whose claim ran out or was never queued.
    """

    id = models.BigAutoField(primary_key=True)
    task = models.CharField(max_length=200, help_text="The Celery task that sends it (by name).")
    args = models.JSONField(default=list, help_text="The task's arguments: ids and versions only.")
    created_at = models.DateTimeField()
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "notification outbox message"
        indexes = [
            # The relay's question (which unfinished messages are due) and the backlog metric's (the oldest).
            models.Index(
                fields=["claimed_until"], condition=models.Q(finished_at__isnull=True), name="notification_outbox_due"
            ),
            models.Index(
                fields=["created_at"], condition=models.Q(finished_at__isnull=True), name="notification_outbox_backlog"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task} {self.args}"
