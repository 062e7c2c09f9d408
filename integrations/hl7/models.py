"""HL7 v2 models: destinations and their outbox of messages with the attempt log (outbound), senders allowed
to reach the listener and the control ids it has applied (inbound).

As for webhooks, delivery state lives in rows, never in the broker. Each destination is its own queue: a
worker takes a destination's lease (`claimed_until`) and sends its messages one at a time in id order, so a
message is never sent before the one before it was acknowledged or given up, and a destination that is
down holds only its own lease, never another destination's messages nor a webhook.
"""

from __future__ import annotations

import ipaddress
import uuid

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from integrations.hl7.kinds import EVENT_TYPE_CHOICES, MESSAGE_KINDS
from integrations.webhooks.models import WebhookEvent

__all__ = ["Hl7Attempt", "Hl7Destination", "Hl7Message", "Hl7ReceivedMessage", "Hl7Sender"]

_HD = "An HL7 HD namespace id: letters, digits, spaces, '.', '_' or '-'."


def validate_hd(value: str) -> None:
    """Application and facility names go into MSH as they are: no HL7 delimiter may appear in them."""
    if any(c in value for c in "|^~\\&\r\n"):
        raise ValidationError(_HD)


def validate_networks(value: list[str]) -> None:
    for network in value:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ValidationError(f"{network!r} is not an IP address or network (CIDR).") from None


class Hl7Destination(models.Model):
    """A system receiving HL7 v2.5.1 messages over MLLP (a LIS, a RIS/PACS, an HIS)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    host = models.CharField(max_length=253, help_text="Host name or IP address of the MLLP receiver.")
    port = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(65535)])
    event_types = ArrayField(
        models.CharField(max_length=40, choices=EVENT_TYPE_CHOICES),
        help_text="Event kinds sent to this destination, each as its HL7 message.",
    )
    sending_application = models.CharField(max_length=180, default="CLINIC", validators=[validate_hd])
    sending_facility = models.CharField(max_length=180, default="CLINIC", validators=[validate_hd])
    receiving_application = models.CharField(max_length=180, validators=[validate_hd])
    receiving_facility = models.CharField(max_length=180, blank=True, validators=[validate_hd])
    is_active = models.BooleanField("active", default=True)
    connect_timeout_seconds = models.FloatField(
        default=3, validators=[MinValueValidator(0.1), MaxValueValidator(30)], help_text="Short: a down host."
    )
    ack_timeout_seconds = models.FloatField(
        default=10,
        validators=[MinValueValidator(0.1), MaxValueValidator(60)],
        help_text="How long to wait for the acknowledgement of one message.",
    )
    # The per-destination lease: whoever holds it is the one sender of this destination's messages.
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "HL7 destination"
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(event_types=[]), name="hl7_destination_has_event_types"),
            models.CheckConstraint(condition=models.Q(port__gte=1, port__lte=65535), name="hl7_destination_port_range"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        unknown = sorted(set(self.event_types or []) - set(MESSAGE_KINDS))
        if unknown:
            raise ValidationError({"event_types": f"No HL7 message for: {', '.join(unknown)}."})
        chosen = set(self.event_types or [])
        self.event_types = [name for name in MESSAGE_KINDS if name in chosen]
        self.host = (self.host or "").strip()


class Hl7Message(models.Model):
    """One event to one destination as one HL7 message; `control_id` (MSH-10) is the same on every attempt.

    pending: waiting for its turn (after every earlier message of the destination) and `next_attempt_at`.
    acknowledged (AA) and failed (AE/AR/timeouts through the whole retry schedule, or destination disabled)
    are final; a replay from the admin makes it pending again with a fresh schedule.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        ACKNOWLEDGED = "acknowledged"
        FAILED = "failed"

    id = models.BigAutoField(primary_key=True)
    destination = models.ForeignKey(Hl7Destination, on_delete=models.CASCADE, related_name="messages")
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="hl7_messages")
    message_type = models.CharField(max_length=20, help_text="e.g. ADT^A04, ORM^O01 NW.")
    control_id = models.CharField("control id (MSH-10)", max_length=20, unique=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    attempt_started_at = models.DateTimeField(null=True, blank=True, help_text="Set while an attempt is in flight.")
    last_ack_code = models.CharField(max_length=2, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "HL7 message"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["event", "destination"], name="hl7_message_event_destination_unique"),
            models.CheckConstraint(
                condition=~models.Q(status="pending") | models.Q(next_attempt_at__isnull=False),
                name="hl7_message_pending_has_next_attempt",
            ),
        ]
        indexes = [
            # A destination's head: its first pending message.
            models.Index(fields=["destination", "id"], condition=models.Q(status="pending"), name="hl7_message_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.message_type} {self.control_id}"


class Hl7Attempt(models.Model):
    """One MLLP attempt of a message: the acknowledgement code, or the error (connect, timeout, framing)."""

    id = models.BigAutoField(primary_key=True)
    message = models.ForeignKey(Hl7Message, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.FloatField(default=0)
    ack_code = models.CharField(max_length=2, blank=True, help_text="MSA-1: AA, AE, AR (or CA, CE, CR).")
    ack_text = models.CharField(max_length=500, blank=True, help_text="MSA-3 / ERR of the acknowledgement.")
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        verbose_name = "HL7 attempt"
        ordering = ["started_at", "id"]
        indexes = [models.Index(fields=["message", "started_at"], name="hl7_attempt_message")]

    def __str__(self) -> str:
        return f"attempt {self.number} of HL7 message {self.message_id}"


class Hl7Charset(models.TextChoices):
    """MSH-18 character sets the listener reads (HL7 table 0211), and what a sender's messages without MSH-18
    are read as."""

    UTF8 = "UNICODE UTF-8", "UTF-8 (UNICODE UTF-8)"
    LATIN1 = "8859/1", "Latin-1 (8859/1)"
    ASCII = "ASCII", "ASCII"


class Hl7Sender(models.Model):
    """A laboratory system registered to send results (docs/hl7-inbound.md): the networks it connects from,
    the branches whose orders it may report on, and the MSH-3/MSH-4 it presents (blank: any that no other
    sender registered). The listener accepts a connection only from an address inside the networks of an
    active sender (none configured: nobody is accepted)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    networks = ArrayField(
        models.CharField(max_length=50),
        validators=[validate_networks],
        help_text="IP addresses or networks (CIDR) the sender connects from, e.g. 10.1.2.3 or 10.1.0.0/16.",
    )
    branches = models.ManyToManyField(
        "clinic.Branch", related_name="hl7_senders", help_text="Results are applied only to orders of these branches."
    )
    sending_application = models.CharField(
        "sending application (MSH-3)", max_length=180, blank=True, validators=[validate_hd]
    )
    sending_facility = models.CharField(
        "sending facility (MSH-4)", max_length=180, blank=True, validators=[validate_hd]
    )
    default_charset = models.CharField(
        max_length=20,
        choices=Hl7Charset.choices,
        default=Hl7Charset.UTF8,
        help_text="How messages without MSH-18 are read.",
    )
    is_active = models.BooleanField("active", default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "HL7 sender"
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(networks=[]), name="hl7_sender_has_networks"),
            # Two senders presenting the same MSH-3/MSH-4 could not be told apart by their messages.
            models.UniqueConstraint(
                fields=["sending_application", "sending_facility"],
                condition=~models.Q(sending_application="", sending_facility=""),
                name="hl7_sender_identity_unique",
            ),
            models.CheckConstraint(
                condition=models.Q(default_charset__in=Hl7Charset.values), name="hl7_sender_charset"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Hl7ReceivedMessage(models.Model):
    """An inbound message that was applied, keyed by its registered sender and control id (MSH-10), with a
    digest of its content and the ACK it got: the same message sent again is answered with this ACK and not
    applied twice; another message under the same key is refused, never acknowledged unapplied."""

    id = models.BigAutoField(primary_key=True)
    # Null only on rows received before senders were registered (keyed then by MSH-3/MSH-4).
    sender = models.ForeignKey(Hl7Sender, on_delete=models.PROTECT, null=True, related_name="received_messages")
    content_sha256 = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the message without MSH-7 (hex): what tells a repeat."
    )
    sending_application = models.CharField(max_length=180)
    sending_facility = models.CharField(max_length=180)
    control_id = models.CharField(max_length=199)
    message_type = models.CharField(max_length=20)
    ack = models.TextField(help_text="The ACK sent (ER7), without patient data.")
    order_ids = ArrayField(models.UUIDField(), default=list, help_text="Orders the results were recorded on.")
    peer = models.GenericIPAddressField(null=True, blank=True)
    received_at = models.DateTimeField()

    class Meta:
        verbose_name = "HL7 received message"
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["sender", "control_id"],
                condition=models.Q(sender__isnull=False),
                name="hl7_received_sender_control_id_unique",
            ),
            models.UniqueConstraint(
                fields=["sending_application", "sending_facility", "control_id"],
                condition=models.Q(sender__isnull=True),
                name="hl7_received_legacy_control_id_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_type} {self.control_id}"
