"""What one request learns about itself on its way in, in one typed place.

The request id middleware, authentication, the client controls, the token endpoint and the views each
record something (the calling client, the rate-limit decision, the patients touched...) that the audit
middleware and the response headers need at the end. They record it here rather than as ad-hoc attributes
on the request. Kept beside the request, not in it: a weak mapping keyed by the Django request (as Zulip's
RequestNotes), so a context lives exactly as long as its request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID
from weakref import WeakKeyDictionary

from django.http import HttpRequest
from rest_framework.request import Request

if TYPE_CHECKING:
    from clinic.api.ratelimit import RateLimitDecision
    from integrations.clients.models import ApiClient


@dataclass
class RequestContext:
    request_id: str = ""
    client: ApiClient | None = None
    # SHA-256 of the token a token exchange issued (requests presenting a token are hashed from the header).
    token_ref: str = ""
    # Who acted, when it is not a client: "client-id-tried:<id>" on a failed exchange.
    actor: str = ""
    # None until a view names the patients it touched (an empty list for an empty page).
    patient_ids: list[UUID] | None = None
    rate_limit: RateLimitDecision | None = None
    # The token or revocation endpoint authenticated the client (secret or assertion): such a request is
    # never counted against, nor refused by, its address's anonymous limit.
    client_authenticated: bool = False
    # The toolkit's description of why a bearer token was refused, for WWW-Authenticate.
    oauth2_error: dict[str, Any] = field(default_factory=dict)
    # An admin save that created a secret hands it to the one response that shows it.
    secret_to_show: str = ""
    # The objects an admin save wrote, for its audit row (the response after a save shows none).
    saved_objects: list[Any] = field(default_factory=list)


_CONTEXTS: WeakKeyDictionary[HttpRequest, RequestContext] = WeakKeyDictionary()


def request_context(request: HttpRequest | Request) -> RequestContext:
    """The context of `request` (a Django or a DRF request: both share one), created on first use."""
    django_request = request._request if isinstance(request, Request) else request
    context = _CONTEXTS.get(django_request)
    if context is None:
        context = _CONTEXTS[django_request] = RequestContext()
    return context
