"""Writes on the HL7 listener's senders (docs/hl7-inbound.md): registering a laboratory system with the
networks it connects from, the branches it reports for and the MSH-3/MSH-4 it presents."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from clinic.models import Branch
from integrations.hl7.models import Hl7Charset, Hl7Sender


def hl7_sender_identity_check(*, application: str, facility: str, exclude: Hl7Sender | None = None) -> None:
    """ValidationError when the MSH-3/MSH-4 pair is another sender's (compared ignoring case, as the listener
    compares it), or not ASCII: the listener reads MSH before it knows the message's character set."""
    errors = {}
    for field, value in (("sending_application", application), ("sending_facility", facility)):
        if not value.isascii():
            errors[field] = "Use ASCII only: MSH is read before the message's character set is known."
    if errors:
        raise ValidationError(errors)
    if not application and not facility:
        return
    taken = Hl7Sender.objects.filter(sending_application__iexact=application, sending_facility__iexact=facility)
    if exclude is not None and exclude.pk is not None:
        taken = taken.exclude(pk=exclude.pk)
    other = taken.values_list("name", flat=True).first()
    if other is not None:
        raise ValidationError(
            {"sending_application": f"{application}/{facility} is registered to the sender {other!r} already."}
        )


@transaction.atomic
def hl7_sender_create(
    *,
    name: str,
    networks: Sequence[str],
    branches: Sequence[Branch],
    sending_application: str = "",
    sending_facility: str = "",
    default_charset: str = Hl7Charset.UTF8,
    is_active: bool = True,
) -> Hl7Sender:
    """A registered sender; ValidationError naming the bad field (no branch, a bad network, an identity
    another sender has, an unknown charset)."""
    sender = Hl7Sender(
        name=name.strip(),
        networks=[network.strip() for network in networks],
        sending_application=sending_application.strip(),
        sending_facility=sending_facility.strip(),
        default_charset=default_charset,
        is_active=is_active,
    )
    if not branches:
        raise ValidationError({"branches": "Name at least one branch whose orders the sender reports on."})
    hl7_sender_identity_check(application=sender.sending_application, facility=sender.sending_facility)
    sender.full_clean()
    try:
        with transaction.atomic():
            sender.save()
    except IntegrityError:
        # Registered at the same moment by another process: the constraint decides, the message says why.
        raise ValidationError({"sending_application": "This MSH-3/MSH-4 was registered meanwhile."}) from None
    sender.branches.set(branches)
    return sender
