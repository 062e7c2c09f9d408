"""python manage.py hl7_listener [--host 0.0.0.0] [--port 2575] [--threads 4] [--processes 1]

Accepts ORU^R01 over MLLP from the senders allowed in the admin (HL7 senders) and applies the results
(integrations.hl7.inbound). Stops on SIGTERM after finishing the messages in hand. `--processes N` (N > 1)
applies the messages in N worker processes of `--threads` threads each, every message by the least busy one,
to use N cores (default HL7_LISTENER_PROCESSES, 1: this process's threads apply them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.hl7.listener import listener_run


class Command(BaseCommand):
    help = "Run the HL7 v2 MLLP listener (ORU^R01 results)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a listener serves the network
        parser.add_argument("--port", type=int, default=2575)
        parser.add_argument("--threads", type=int, default=4, help="Threads applying messages (per worker process).")
        parser.add_argument(
            "--processes",
            type=int,
            default=settings.HL7_LISTENER_PROCESSES,
            help="Worker processes applying messages (each with --threads threads); more than one uses more cores.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["processes"] <= 64:
            raise CommandError("--processes must be between 1 and 64.")
        if not 1 <= options["threads"] <= 64:
            raise CommandError("--threads must be between 1 and 64.")
        # The listener logs "HL7 listener on host:port" once it listens (a log line: JSON with DEBUG off).
        listener_run(
            host=options["host"], port=options["port"], threads=options["threads"], processes=options["processes"]
        )
