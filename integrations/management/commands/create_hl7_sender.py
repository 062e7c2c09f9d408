"""python manage.py create_hl7_sender --name N --network CIDR [--network ...] --branch CODE [--branch ...]
[--sending-application A --sending-facility F] [--default-charset "UNICODE UTF-8"|8859/1|ASCII] [--inactive]
[--json]

Register a laboratory system with the HL7 listener (docs/hl7-inbound.md): the networks it connects from, the
branches whose orders it may report on, and the MSH-3/MSH-4 it presents (none: any identity no other sender
registered)."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.selectors import branch_by_ref
from integrations.hl7.models import Hl7Charset
from integrations.hl7.services import hl7_sender_create


class Command(BaseCommand):
    help = "Register an HL7 v2 sender (a laboratory system) with the listener."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--network", action="append", required=True, help="An IP address or CIDR network; repeat for more."
        )
        parser.add_argument(
            "--branch", action="append", required=True, help="A branch code (e.g. BLR) or id; repeat for more."
        )
        parser.add_argument("--sending-application", default="", help="MSH-3 the sender presents.")
        parser.add_argument("--sending-facility", default="", help="MSH-4 the sender presents.")
        parser.add_argument(
            "--default-charset",
            default=Hl7Charset.UTF8.value,
            choices=Hl7Charset.values,
            help="How its messages without MSH-18 are read.",
        )
        parser.add_argument("--inactive", action="store_true", help="Register it disabled.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        branches = []
        for ref in options["branch"]:
            branch = branch_by_ref(ref)
            if branch is None:
                raise CommandError(f"No branch with id or code {ref!r}.")
            branches.append(branch)
        try:
            sender = hl7_sender_create(
                name=options["name"],
                networks=options["network"],
                branches=branches,
                sending_application=options["sending_application"],
                sending_facility=options["sending_facility"],
                default_charset=options["default_charset"],
                is_active=not options["inactive"],
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
            ) from None
        codes = sorted(branch.code for branch in branches)
        result = {
            "id": str(sender.pk),
            "name": sender.name,
            "networks": sender.networks,
            "branches": codes,
            "sending_application": sender.sending_application,
            "sending_facility": sender.sending_facility,
            "default_charset": sender.default_charset,
            "active": sender.is_active,
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        identity = "/".join((sender.sending_application or "*", sender.sending_facility or "*"))
        self.stdout.write(f"Registered HL7 sender {sender.name!r} ({sender.pk}).")
        self.stdout.write(f"  from {', '.join(sender.networks)} as {identity}, for {', '.join(codes)}")
