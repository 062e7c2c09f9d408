"""python manage.py create_hl7_destination --name N --host H --port P --events "<kind> ..."|all
[--receiving-application A] [--receiving-facility F] [--sending-application A] [--sending-facility F]
[--inactive] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.hl7.kinds import MESSAGE_KINDS
from integrations.hl7.models import Hl7Destination


class Command(BaseCommand):
    help = "Create an HL7 v2 (MLLP) destination."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--host", required=True)
        parser.add_argument("--port", required=True, type=int)
        parser.add_argument(
            "--events", required=True, help=f"Space-separated event kinds, or 'all': {' '.join(MESSAGE_KINDS)}."
        )
        parser.add_argument("--receiving-application", default="RECEIVER")
        parser.add_argument("--receiving-facility", default="")
        parser.add_argument("--sending-application", default="CLINIC")
        parser.add_argument("--sending-facility", default="CLINIC")
        parser.add_argument("--connect-timeout", type=float, default=3)
        parser.add_argument("--ack-timeout", type=float, default=10)
        parser.add_argument("--inactive", action="store_true", help="Create it disabled.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        events = options["events"].split()
        if events == ["all"]:
            events = list(MESSAGE_KINDS)
        unknown = [event for event in events if event not in MESSAGE_KINDS]
        if unknown or not events:
            raise CommandError(f"Unknown or missing event kinds {unknown}; choose from: {' '.join(MESSAGE_KINDS)}")
        destination = Hl7Destination(
            name=options["name"],
            host=options["host"],
            port=options["port"],
            event_types=events,
            receiving_application=options["receiving_application"],
            receiving_facility=options["receiving_facility"],
            sending_application=options["sending_application"],
            sending_facility=options["sending_facility"],
            connect_timeout_seconds=options["connect_timeout"],
            ack_timeout_seconds=options["ack_timeout"],
            is_active=not options["inactive"],
        )
        try:
            destination.full_clean()
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from None
        destination.save()
        result = {
            "id": str(destination.pk),
            "name": destination.name,
            "host": destination.host,
            "port": destination.port,
            "events": destination.event_types,
            "messages": [MESSAGE_KINDS[event].label for event in destination.event_types],
            "active": destination.is_active,
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"Created HL7 destination {destination.name!r} ({destination.pk}).")
        self.stdout.write(f"  mllp://{destination.host}:{destination.port}")
        self.stdout.write(f"  messages: {', '.join(MESSAGE_KINDS[event].label for event in destination.event_types)}")
