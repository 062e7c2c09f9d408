"""Per-client controls applied to every API request before scopes: IP allow-list, then rate limit."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from integrations import ratelimit
from integrations.authentication import request_client, request_token
from integrations.network import client_ip


class IpNotAllowed(exceptions.PermissionDenied):
    problem_code = "ip_not_allowed"
    default_detail = "This client may not call the API from this address."


class ClientControls(BasePermission):
    """First permission of every view. The IP check runs first so refused addresses use no quota."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request_token(request) is None:
            return False  # DRF answers 401 since authentication did not succeed
        client = request_client(request)
        if not client.allows_address(client_ip(request._request)):
            # Refused before the limit applies: uses no quota, but still reports it (every response does).
            request._request.rate_limit = ratelimit.hit(str(client.pk), client.effective_rate_limit, record=False)  # type: ignore[attr-defined]
            raise IpNotAllowed()
        # DRF checks permissions again within one request (OPTIONS asks them for POST/PUT on a clone):
        # one request is one hit, so a decision already taken for it stands.
        decision = getattr(request._request, "rate_limit", None)
        if decision is None:
            decision = ratelimit.hit(str(client.pk), client.effective_rate_limit)
            request._request.rate_limit = decision  # type: ignore[attr-defined]
        if not decision.admitted:
            raise exceptions.Throttled(wait=decision.reset_seconds)
        return True
