"""Writes on API clients. Secrets are returned once to the caller and stored only hashed."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from oauth2_provider.generators import generate_client_secret
from oauth2_provider.models import get_access_token_model

from clinic.db import violated_constraint
from integrations.clients.models import ClientAssertion
from integrations.models import ApiClient, validate_network


@transaction.atomic
def api_client_create(
    *,
    name: str,
    scopes: Iterable[str],
    description: str = "",
    branch_ids: Iterable[UUID] = (),
    ip_allowlist: Iterable[str] = (),
    rate_limit_per_minute: int | None = None,
    token_lifetime_seconds: int | None = None,
    jwks: dict[str, Any] | None = None,
    jwks_uri: str = "",
    assertion_only: bool = False,
) -> tuple[ApiClient, str]:
    """Create a client; returns it with its plaintext secret, which is not recoverable afterwards (an
    assertion-only client has one too, which the token endpoint refuses)."""
    secret = generate_client_secret()
    client = ApiClient(
        name=name,
        description=description,
        allowed_scopes=list(scopes),
        ip_allowlist=list(ip_allowlist),
        rate_limit_per_minute=rate_limit_per_minute,
        token_lifetime_seconds=token_lifetime_seconds,
        client_secret=secret,
        jwks=jwks,
        jwks_uri=jwks_uri,
        assertion_only=assertion_only,
    )
    # ApiClient.clean() parses every allow-list entry and would crash on a bad one: report it as a field error.
    bad_networks = []
    for network in client.ip_allowlist:
        try:
            validate_network(network)
        except ValidationError as exc:
            bad_networks.extend(exc.messages)
    if bad_networks:
        raise ValidationError({"ip_allowlist": bad_networks})
    client.full_clean(exclude=["client_secret"])
    client.save()
    client.branches.set(list(branch_ids))
    return client, secret


@transaction.atomic
def api_client_rotate_secret(*, client: ApiClient) -> str:
    """Issue a new secret; the old one stops working at once. Tokens already issued stay valid."""
    secret = generate_client_secret()
    client.client_secret = secret
    client.save(update_fields=["client_secret", "updated"])
    return secret


@transaction.atomic
def api_client_revoke_tokens(*, client: ApiClient) -> int:
    deleted, _ = get_access_token_model().objects.filter(application=client).delete()
    return deleted


@transaction.atomic
def api_client_set_active(*, client: ApiClient, active: bool) -> None:
    """Deactivation takes effect on the next request (the toolkit checks it); tokens are also revoked."""
    client.is_active = active
    client.save(update_fields=["is_active", "updated"])
    if not active:
        api_client_revoke_tokens(client=client)


def client_assertion_record(*, client: ApiClient, jti: str, expires_at: datetime) -> bool:
    """Record an accepted assertion's jti; False when this client used it already (a replay). Two requests
    racing with one jti meet in the unique constraint: exactly one of them records it."""
    try:
        with transaction.atomic():
            ClientAssertion.objects.create(client=client, jti=jti, expires_at=expires_at)
    except IntegrityError as exc:
        if violated_constraint(exc) == "client_assertion_jti_unique":
            return False
        raise
    return True


def client_assertions_purge() -> int:
    """Forget the jtis of expired assertions: an expired assertion is refused for its exp anyway."""
    deleted, _ = ClientAssertion.objects.filter(expires_at__lt=timezone.now()).delete()
    return deleted
