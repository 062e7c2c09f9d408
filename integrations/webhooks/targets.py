"""Which webhook targets may be called: SSRF protection.

A target URL must be https and its host must resolve to public addresses only. The rules run when a
subscription is saved (`target_check`, with a DNS lookup) and again before every attempt, where the
addresses returned by that one lookup are the ones the transport connects to: no second lookup happens
between the check and the connection, so a name re-pointed at an internal address in between (DNS
rebinding) is never reached.

Refused besides non-public addresses: other schemes, credentials in the URL, raw whitespace or control
characters, backslashes, "localhost" names, single-label names, IPv6 zone ids, and every numeric host
that is not a canonical dotted quad (decimal 2130706433, hex 0x7f000001, octal 0177.0.0.1, short 127.1),
whatever address it would denote. WEBHOOK_ALLOW_PRIVATE_TARGETS (development and tests only) allows http,
private and loopback addresses, localhost and single-label names; the syntax rules still apply.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2000

# Special-purpose ranges (IANA registries), named so a refusal says why. `is_global` backs them up.
_BLOCKED: list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]] = [
    (ipaddress.ip_network(network), label)
    for network, label in (
        ("0.0.0.0/8", "unspecified ('this network')"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata)"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "broadcast"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::ffff:0:0/96", "IPv4-mapped"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("::ffff:0:0:0/96", "IPv4-translated"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/23", "IETF protocol assignments (Teredo included)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("fc00::/7", "unique local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    )
]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


class TargetRefused(ValueError):
    """The URL is not an acceptable webhook target; the message says why, for the admin."""


@dataclass(frozen=True)
class Target:
    """A parsed, syntactically acceptable target URL."""

    url: str
    scheme: str
    host: str  # lower-case ASCII (IDNA) name, or an IP address without brackets
    port: int
    path: str  # path and query, as sent in the request line
    literal: IPAddress | None  # the host when it is an IP address

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if isinstance(self.literal, ipaddress.IPv6Address) else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def address_refusal(address: IPAddress) -> str | None:
    """Why `address` is not a public address a webhook may be sent to; None when it is one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.sixtofour or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None
        )
        if embedded is not None and (reason := address_refusal(embedded)):
            return f"{address} embeds {embedded}: {reason}"
    for network, label in _BLOCKED:
        if address in network:
            return f"{address} is a {label} address ({network})"
    if not address.is_global or address.is_multicast:
        return f"{address} is not a public address"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def target_parse(url: str, *, allow_private: bool) -> Target:
    """Check the URL's syntax and, when its host is an IP address, that address. No DNS lookup."""
    if not isinstance(url, str) or not url:
        raise TargetRefused("Enter the target URL.")
    if len(url) > MAX_URL_LENGTH:
        raise TargetRefused(f"The URL is longer than {MAX_URL_LENGTH} characters.")
    if any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in url) or "\\" in url:
        raise TargetRefused("The URL contains whitespace, control, backslash or non-ASCII characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"The URL cannot be parsed: {exc}.") from None
    scheme = parts.scheme.lower()
    allowed_schemes = ("https", "http") if allow_private else ("https",)
    if scheme not in allowed_schemes:
        raise TargetRefused("The URL must use https.")
    if "@" in parts.netloc:
        raise TargetRefused("Credentials in the URL are not allowed; use an extra header for authentication.")
    host = parts.hostname or ""
    if not host:
        raise TargetRefused("The URL has no host.")
    if port == 0:
        raise TargetRefused("Port 0 is not a valid port.")
    if "%" in host:
        raise TargetRefused("IPv6 zone identifiers are not allowed.")
    literal = _literal(host) if parts.netloc.startswith("[") else None
    if parts.netloc.startswith("[") and literal is None:
        raise TargetRefused("The bracketed host is not an IPv6 address.")
    if literal is None:
        host = host.removesuffix(".")
        labels = host.split(".")
        if not all(_LABEL.match(label) for label in labels):
            raise TargetRefused(f"{host!r} is not a valid host name.")
        if _NUMERIC_LABEL.match(labels[-1]):
            # Only the canonical dotted quad is an address here; resolvers read 2130706433, 0x7f000001,
            # 0177.0.0.1 and 127.1 as 127.0.0.1, so every other numeric form is refused outright.
            literal = _literal(host)
            if not isinstance(literal, ipaddress.IPv4Address):
                raise TargetRefused(f"{host!r} is not a canonical IPv4 address (dotted decimal, no leading zeros).")
    if literal is not None:
        reason = None if allow_private else address_refusal(literal)
        if reason:
            raise TargetRefused(f"The target must be a public address: {reason}.")
        host = str(literal)
    elif not allow_private:
        if host == "localhost" or host.endswith(".localhost"):
            raise TargetRefused("localhost is not a public host.")
        if "." not in host:
            raise TargetRefused(f"{host!r} is a single-label name; use a fully qualified public host name.")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Target(
        url=url,
        scheme=scheme,
        host=host,
        port=port or (443 if scheme == "https" else 80),
        path=path,
        literal=literal,
    )


Resolver = Callable[[str, int], list[str]]


def system_resolve(host: str, port: int) -> list[str]:
    """Every address of `host` (A and AAAA), in the resolver's preference order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# Replaced in tests (a fake DNS); everything else calls resolve() through this module attribute.
resolver: Resolver = system_resolve


def target_addresses(target: Target, *, allow_private: bool) -> list[IPAddress]:
    """Resolve the target once and check every address; the transport connects only to these."""
    if target.literal is not None:
        return [target.literal]
    try:
        raw = resolver(target.host, target.port)
    except (OSError, UnicodeError) as exc:
        raise TargetRefused(f"{target.host} does not resolve: {exc}") from None
    addresses: list[IPAddress] = []
    for value in raw:
        address = _literal(value.split("%", 1)[0])
        if address is None:
            raise TargetRefused(f"{target.host} resolved to {value!r}, which is not an IP address.")
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped if allow_private else address
        reason = None if allow_private else address_refusal(address)
        if reason:
            # One non-public address refuses the whole name: a mixed answer is a rebinding attempt.
            raise TargetRefused(f"{target.host} resolves to a non-public address: {reason}.")
        addresses.append(address)
    if not addresses:
        raise TargetRefused(f"{target.host} does not resolve to any address.")
    return addresses


def target_check(url: str, *, allow_private: bool) -> Target:
    """The check on save: syntax, then the addresses the name resolves to now."""
    target = target_parse(url, allow_private=allow_private)
    target_addresses(target, allow_private=allow_private)
    return target
