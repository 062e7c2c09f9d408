"""Which address a request really came from.

The socket peer is the client, unless the peer is a configured trusted proxy: then X-Forwarded-For is
read from the right, skipping trusted proxies, and the first untrusted hop is the client. A client
cannot forge its address by sending the header itself, because its own peer address is not trusted.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

CLIENT_IP_META_KEY = "CLINIC_CLIENT_IP"  # also reaches the OAuth validator through oauthlib's headers


def _parse(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # "[2001:db8::1]:443"
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # "203.0.113.7:5123"
        value = value.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return any(address in network for network in settings.TRUSTED_PROXIES)


def client_ip(request: HttpRequest) -> str | None:
    """The client address of a request, resolved once and cached in request.META."""
    cached = request.META.get(CLIENT_IP_META_KEY)
    if cached is not None:
        return cached or None
    peer = _parse(request.META.get("REMOTE_ADDR", ""))
    address = peer
    if peer is not None and _trusted(peer):
        hops = [h for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        for hop in reversed(hops):
            parsed = _parse(hop)
            if parsed is None:
                break  # a malformed hop: stop at the last address we could trust
            address = parsed
            if not _trusted(parsed):
                break
    resolved = str(address) if address is not None else ""
    request.META[CLIENT_IP_META_KEY] = resolved
    return resolved or None
