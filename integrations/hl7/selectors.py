"""Reads of the listener's registered senders (docs/hl7-inbound.md, "Registering a sender"): who sent a
message, from the peer's address and the MSH-3/MSH-4 it presents."""

from __future__ import annotations

import ipaddress
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.postgres.aggregates import ArrayAgg

from integrations.hl7.models import Hl7Sender

logger = logging.getLogger("integrations.hl7.listener")


@dataclass(frozen=True)
class Sender:
    id: uuid.UUID
    name: str
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    application: str  # casefolded; "" takes any not registered to another sender
    facility: str
    branch_ids: tuple[uuid.UUID, ...]
    charset: str

    @property
    def specificity(self) -> int:
        return bool(self.application) + bool(self.facility)

    def presents(self, application: str, facility: str) -> bool:
        return (not self.application or self.application == application) and (
            not self.facility or self.facility == facility
        )


def _networks(values: Sequence[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            continue  # validated on save; a row written around the validator reaches nobody
    return tuple(networks)


def senders_active() -> list[Sender]:
    """Every active sender with its branches, in one query (a handful of rows, read per message so that a
    sender switched off or narrowed in the admin is so for the next message)."""
    rows = (
        Hl7Sender.objects.filter(is_active=True)
        .annotate(branch_ids=ArrayAgg("branches__id", distinct=True))
        .values("id", "name", "networks", "sending_application", "sending_facility", "default_charset", "branch_ids")
    )
    return [
        Sender(
            id=row["id"],
            name=row["name"],
            networks=_networks(row["networks"]),
            application=row["sending_application"].strip().casefold(),
            facility=row["sending_facility"].strip().casefold(),
            branch_ids=tuple(branch for branch in row["branch_ids"] if branch is not None),
            charset=row["default_charset"],
        )
        for row in rows
    ]


def sender_resolve(senders: Sequence[Sender], *, peer: str | None, application: str, facility: str) -> Sender | None:
    """The registered sender of a message from `peer` presenting MSH-3 `application` and MSH-4 `facility`,
    or None (docs/hl7-inbound.md: an identity belongs to its most specific registration)."""
    try:
        ip = ipaddress.ip_address(peer or "")
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    application, facility = application.strip().casefold(), facility.strip().casefold()
    owners = [s for s in senders if s.specificity and s.presents(application, facility)]
    if owners:
        top = max(s.specificity for s in owners)
        candidates = [s for s in owners if s.specificity == top]
    else:
        candidates = [s for s in senders if not s.specificity]
    reachable = [s for s in candidates if any(ip in network for network in s.networks)]
    if len(reachable) > 1:
        logger.warning("HL7 senders %s all match one message: narrow their networks", [s.name for s in reachable])
        return None
    return reachable[0] if reachable else None
