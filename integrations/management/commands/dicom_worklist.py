"""python manage.py dicom_worklist [--host 0.0.0.0] [--port 11112] [--ae-title TITLE]

The DICOM Modality Worklist and MPPS server (integrations.dicom.server), one process (the `dicom-worklist`
role), called by its AE title (the DICOM_AE_TITLE setting unless --ae-title says otherwise: a request calling
another title is rejected). SIGTERM or SIGINT stops accepting associations and lets those in flight finish."""

from __future__ import annotations

import logging
import re
import signal
import threading
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.dicom.models import AE_TITLE_PATTERN
from integrations.dicom.server import worklist_serve

# Log lines, not command output: the role's stream is one JSON object per line with DEBUG off.
logger = logging.getLogger("integrations.dicom")


class Command(BaseCommand):
    help = "Serve the DICOM Modality Worklist (C-FIND), MPPS (N-CREATE/N-SET) and C-ECHO."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="0.0.0.0", help="Address to listen on.")  # noqa: S104
        parser.add_argument("--port", type=int, default=11112)
        parser.add_argument(
            "--ae-title", default=None, help="This server's AE title (default: the DICOM_AE_TITLE setting)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        options["ae_title"] = options["ae_title"] or settings.DICOM_AE_TITLE
        if not re.match(AE_TITLE_PATTERN, options["ae_title"]):
            raise CommandError("--ae-title: 1 to 16 printable ASCII characters, no backslash.")
        if not 0 < options["port"] < 65536:
            raise CommandError("--port: 1 to 65535.")
        server = worklist_serve(host=options["host"], port=options["port"], ae_title=options["ae_title"])
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        logger.info("DICOM worklist %s listening on %s:%d", options["ae_title"], options["host"], options["port"])
        stop.wait()
        server.shutdown()
        logger.info("DICOM worklist stopped")
