"""API clients (the OAuth application model) and what is recorded per client request: the audit log and
idempotency records."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from oauth2_provider.models import AbstractApplication

from clinic.models import Branch
from integrations.clients.jwks import JwksRefused, jwks_validate
from integrations.clients.scopes import SCOPE_CHOICES, SCOPES
from integrations.webhooks.targets import TargetRefused, target_parse


def validate_network(value: str) -> None:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise ValidationError(f"{value!r} is not an IP address or CIDR block.", code="invalid") from None


def _normalised_network(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        return value


def validate_scope(value: str) -> None:
    if value not in SCOPES:
        raise ValidationError(f"Unknown scope {value!r}.", code="invalid")


def validate_public_jwks(value: Any) -> None:
    if value is None:
        return
    try:
        jwks_validate(value)
    except JwksRefused as exc:
        # Not code "invalid": a field replaces the message of an error whose code is one of its own.
        raise ValidationError(str(exc), code="jwks_refused") from None


def validate_jwks_url(value: str) -> None:
    """The URL's syntax by the webhooks' SSRF rules (no DNS lookup here; the fetch checks the addresses)."""
    try:
        target_parse(value, allow_private=settings.WEBHOOK_ALLOW_PRIVATE_TARGETS)
    except TargetRefused as exc:
        raise ValidationError(str(exc), code="jwks_url_refused") from None


class ApiClient(AbstractApplication):
    """An external system calling the API (the toolkit's swappable OAuth application model).

    Only the client-credentials grant is possible; each client is limited to the scopes, branches
    and source networks its administrator chose, and to a request rate per minute.
    """

    # Overridden from the toolkit: every API client is a confidential client-credentials client.
    client_type = models.CharField(
        max_length=32, choices=AbstractApplication.CLIENT_TYPES, default=AbstractApplication.CLIENT_CONFIDENTIAL
    )
    authorization_grant_type = models.CharField(
        max_length=44, choices=AbstractApplication.GRANT_TYPES, default=AbstractApplication.GRANT_CLIENT_CREDENTIALS
    )
    description = models.TextField(blank=True)
    allowed_scopes = ArrayField(
        models.CharField(max_length=40, choices=SCOPE_CHOICES, validators=[validate_scope]),
        default=list,
        blank=True,
        help_text="Scopes a token of this client may carry. A client with none cannot obtain a token.",
    )
    branches = models.ManyToManyField(
        Branch,
        blank=True,
        related_name="api_clients",
        help_text="Branches whose data this client may see. None selected: every branch.",
    )
    default_branch = models.ForeignKey(
        Branch,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        verbose_name="default registration branch",
        help_text="Where patients registered without a branch_id go, for a client of several branches. "
        "Empty: the head-office branch.",
    )
    ip_allowlist = ArrayField(
        models.CharField(max_length=50, validators=[validate_network]),
        default=list,
        blank=True,
        verbose_name="IP allow-list",
        help_text="IPv4/IPv6 addresses or CIDR blocks the client may call from. Empty: any address.",
    )
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(100_000)],
        help_text="Requests per rolling minute. Empty: the API_CLIENT_DEFAULT_RATE_LIMIT setting.",
    )
    token_lifetime_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(60), MaxValueValidator(86400)],
        help_text="Access-token lifetime. Empty: the ACCESS_TOKEN_EXPIRE_SECONDS setting.",
    )
    is_active = models.BooleanField(
        default=True,
        help_text="Inactive clients cannot obtain tokens, and their existing tokens stop working.",
    )
    # SMART Backend Services (docs/fhir.md section 7): the public keys of the client's signed assertions.
    # Database defaults on the new columns: the release before them still creates clients while this one
    # rolls out (README, "Release procedure": add columns nullable or with a database default).
    jwks_uri = models.CharField(
        max_length=2000,
        blank=True,
        default="",
        db_default="",
        validators=[validate_jwks_url],
        verbose_name="JWKS URL",
        help_text="https URL where the client publishes its public keys (JWKS). Or paste the keys below.",
    )
    jwks = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_public_jwks],
        verbose_name="JWKS",
        help_text='The client\'s public keys, a JSON Web Key Set ({"keys": [...]}): RSA of 2048 bits or more '
        "(RS384) or EC P-384 (ES384), each with a kid. Never a private key.",
    )
    assertion_only = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Refuse the client secret: tokens only for assertions signed with a key of the JWKS.",
    )

    class Meta(AbstractApplication.Meta):
        verbose_name = "API client"
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(authorization_grant_type="client-credentials"),
                name="api_client_grant_is_client_credentials",
            ),
            models.CheckConstraint(condition=models.Q(client_type="confidential"), name="api_client_is_confidential"),
            models.CheckConstraint(
                condition=models.Q(jwks_uri="") | models.Q(jwks__isnull=True),
                name="api_client_one_jwks_source",
                violation_error_message="Give either a JWKS URL or inline keys, not both.",
            ),
            models.CheckConstraint(
                condition=models.Q(assertion_only=False) | ~models.Q(jwks_uri="") | models.Q(jwks__isnull=False),
                name="api_client_assertion_only_has_keys",
                violation_error_message="An assertion-only client needs a JWKS (URL or inline keys).",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.client_id

    def clean(self) -> None:
        # The toolkit's clean() validates redirect URIs for interactive grants; none apply here.
        # Normalise the entries that parse ("10.0.0.1/8" -> "10.0.0.0/8"); invalid ones are left for
        # validate_network to report as field errors (Django calls clean() even after those failed).
        self.ip_allowlist = [_normalised_network(n) for n in self.ip_allowlist]
        self.allowed_scopes = sorted(set(self.allowed_scopes), key=list(SCOPES).index)

    def is_usable(self, request: Any) -> bool:
        # Checked by the toolkit both at token issue and on every bearer-token validation.
        return self.is_active

    def allows_grant_type(self, *grant_types: str) -> bool:
        return self.GRANT_CLIENT_CREDENTIALS in grant_types

    def allows_address(self, address: str | None) -> bool:
        if not self.ip_allowlist:
            return True
        if address is None:
            return False
        ip = ipaddress.ip_address(address)
        return any(ip in ipaddress.ip_network(network, strict=False) for network in self.ip_allowlist)

    @property
    def has_jwks(self) -> bool:
        return self.jwks is not None or bool(self.jwks_uri)

    @property
    def effective_rate_limit(self) -> int:
        return self.rate_limit_per_minute or settings.API_CLIENT_DEFAULT_RATE_LIMIT


class ClientAssertion(models.Model):
    """A client assertion (SMART Backend Services) that was accepted: its `jti` is refused again until the
    assertion has expired (docs/fhir.md section 7). The unique constraint, not a read before the insert, is
    what makes two simultaneous uses of one assertion yield one token."""

    id = models.BigAutoField(primary_key=True)
    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="+")
    jti = models.CharField(max_length=255)
    expires_at = models.DateTimeField(help_text="The assertion's exp plus the clock skew allowed.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["client", "jti"], name="client_assertion_jti_unique")]
        indexes = [models.Index(fields=["expires_at"], name="client_assertion_expiry")]

    def __str__(self) -> str:
        return f"{self.client_id}:{self.jti}"


class AuditLogEntry(models.Model):
    """One row per API request, refused ones included. Never holds secrets, tokens or national IDs."""

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(db_index=True)
    client = models.ForeignKey(ApiClient, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_entries")
    token_ref = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the bearer token (the toolkit's token checksum)."
    )
    ip = models.GenericIPAddressField(null=True, blank=True)
    method = models.CharField(max_length=10)
    route = models.CharField(max_length=200, blank=True, help_text="URL pattern, e.g. api/v1/patients/<str:ref>")
    path = models.CharField(max_length=500)
    status = models.PositiveSmallIntegerField()
    duration_ms = models.FloatField()
    request_id = models.CharField(max_length=128, db_index=True)
    patient_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    user_agent = models.CharField(max_length=200, blank=True)
    actor = models.CharField(
        max_length=200,
        blank=True,
        db_default="",  # rows written by raw SQL or COPY need no value
        help_text="Who acted when it is not an authenticated API client: staff:<username> for the admin, "
        "client-id-tried:<client_id> for a refused token exchange.",
    )

    class Meta:
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["client", "-created_at"], name="audit_client_time"),
            GinIndex(fields=["patient_ids"], name="audit_patient_ids"),
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.status}"


class IdempotencyRecord(models.Model):
    """The outcome of a POST/PATCH sent with an Idempotency-Key, kept 24 hours per client and key."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress"
        COMPLETED = "completed"

    id = models.BigAutoField(primary_key=True)
    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of method, path and canonical body.")
    state = models.CharField(max_length=20, choices=State.choices, default=State.IN_PROGRESS)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_index=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["client", "key"], name="idempotency_client_key_unique")]

    def __str__(self) -> str:
        return f"{self.client_id}:{self.key}"
