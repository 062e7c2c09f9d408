"""Per-client controls applied to every API request before scopes: IP allow-list, then rate limit."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from clinic.api import ratelimit
from clinic.api.authentication import request_client, request_token
from clinic.api.context import request_context
from clinic.api.network import client_ip


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
            request_context(request).rate_limit = ratelimit.hit(
                str(client.pk), client.effective_rate_limit, record=False
            )
            raise IpNotAllowed()
        # DRF checks permissions again within one request (OPTIONS asks them for POST/PUT on a clone):
        # one request is one hit, so a decision already taken for it stands.
        decision = request_context(request).rate_limit
        if decision is None:
            decision = ratelimit.hit(str(client.pk), client.effective_rate_limit)
            request_context(request).rate_limit = decision
        if not decision.admitted:
            raise exceptions.Throttled(wait=decision.reset_seconds)
        return True
