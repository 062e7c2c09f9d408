"""Who is calling: the allow-listed calling AE titles (integrations.dicom.models) and the addresses they may
connect from."""

from __future__ import annotations

import ipaddress
import uuid
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from integrations.dicom.models import DicomCallingAE

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Caller:
    """An allowed calling AE: the branch whose items it sees, and that branch's time zone (its local days)."""

    ae_title: str
    branch_id: uuid.UUID
    zone: ZoneInfo


def peer_address(address: str) -> IPAddress | None:
    """The peer's address as the allow-list compares it: an IPv4-mapped IPv6 address (`::ffff:10.0.0.12`, what a
    dual-stack listener reports for an IPv4 peer) is the IPv4 address, and a zone (`%eth0`) is dropped. None
    when not an IP address."""
    try:
        parsed = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def address_in_networks(address: str, networks: list[str]) -> bool:
    """Whether `address` is one of `networks` (addresses or CIDR networks; host bits ignored)."""
    peer = peer_address(address)
    if peer is None:
        return False
    for network in networks:
        try:
            parsed = ipaddress.ip_network(network.strip(), strict=False)
        except ValueError:
            continue  # validated on save; a hand-edited row cannot widen the list
        if isinstance(parsed, ipaddress.IPv6Network) and parsed.prefixlen >= 96:
            mapped = parsed.network_address.ipv4_mapped
            if mapped is not None:  # ::ffff:10.0.0.0/104 is 10.0.0.0/8
                parsed = ipaddress.ip_network(f"{mapped}/{parsed.prefixlen - 96}", strict=False)
        if peer.version == parsed.version and peer in parsed:
            return True
    return False


def calling_ae_allowed(*, ae_title: str, address: str) -> Caller | None:
    """The active allow-list entry for `ae_title` (trailing padding ignored) connecting from `address`, or
    None: unknown, inactive, its branch closed, or an address outside its networks (unless the entry was
    registered for any address)."""
    entry = (
        DicomCallingAE.objects.filter(ae_title=ae_title.strip(), active=True, branch__is_active=True)
        .select_related("branch")
        .first()
    )
    if entry is None or not (entry.any_address or address_in_networks(address, entry.networks)):
        return None
    return Caller(ae_title=entry.ae_title, branch_id=entry.branch_id, zone=entry.branch.zone)


def registered_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Every network an active calling AE title is registered from (the worklist's lobby keeps their sockets
    before others'); an IPv4-mapped IPv6 network as its IPv4 network."""
    found: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    rows = DicomCallingAE.objects.filter(active=True, branch__is_active=True).values_list("networks", flat=True)
    for networks in rows:
        for network in networks:
            try:
                parsed = ipaddress.ip_network(network.strip(), strict=False)
            except ValueError:
                continue
            if isinstance(parsed, ipaddress.IPv6Network) and parsed.prefixlen >= 96:
                mapped = parsed.network_address.ipv4_mapped
                if mapped is not None:
                    parsed = ipaddress.ip_network(f"{mapped}/{parsed.prefixlen - 96}", strict=False)
            found.append(parsed)
    return found
