"""python manage.py create_dicom_calling_ae --ae-title CT_ROOM2 --branch BLR [--host 10.0.0.12] [--description D]

Allow a modality to associate with the DICOM worklist (integrations.dicom.models.DicomCallingAE); an
existing title is updated (branch, host, description) and re-activated."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.selectors import branch_by_ref
from integrations.dicom.services import calling_ae_save


class Command(BaseCommand):
    help = "Allow a calling AE title to use the DICOM worklist for one branch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--ae-title", required=True)
        parser.add_argument("--branch", required=True, help="Branch code (e.g. BLR) or id.")
        parser.add_argument("--host", default=None, help="Accept this AE from this IP address only.")
        parser.add_argument("--description", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        branch = branch_by_ref(options["branch"])
        if branch is None:
            raise CommandError(f"No branch with id or code {options['branch']!r}.")
        try:
            entry, created = calling_ae_save(
                ae_title=options["ae_title"], branch=branch, host=options["host"], description=options["description"]
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        verb = "Allowed" if created else "Updated"
        self.stdout.write(f"{verb} calling AE {entry.ae_title} for branch {branch.code}.")
