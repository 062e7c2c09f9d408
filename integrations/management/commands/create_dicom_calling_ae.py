"""python manage.py create_dicom_calling_ae --ae-title CT_ROOM2 --branch BLR --network 10.0.0.12 [--network ...]
[--any-address] [--description D]

Allow a modality to associate with the DICOM worklist (integrations.dicom.models.DicomCallingAE) from the
addresses it connects from (an address or a CIDR network, repeatable; `--host` is the former name of
`--network`). An AE title is easy to forge, so a title usable from anywhere needs `--any-address` said
explicitly (and the admin flags it). An existing title is updated (branch, addresses, description) and
re-activated."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.selectors import branch_by_ref
from integrations.dicom.services import calling_ae_save


class Command(BaseCommand):
    help = "Allow a calling AE title to use the DICOM worklist for one branch, from the given addresses."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--ae-title", required=True)
        parser.add_argument("--branch", required=True, help="Branch code (e.g. BLR) or id.")
        parser.add_argument(
            "--network",
            "--host",
            dest="networks",
            action="append",
            default=[],
            help="An IP address or CIDR network the modality connects from (repeatable).",
        )
        parser.add_argument(
            "--any-address",
            action="store_true",
            help="Accept this AE title from any address (not recommended: an AE title is easy to forge).",
        )
        parser.add_argument("--description", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["networks"] and not options["any_address"]:
            raise CommandError(
                "Give the address the modality connects from (--network IP or CIDR, repeatable), "
                "or --any-address to accept this AE title from anywhere."
            )
        branch = branch_by_ref(options["branch"])
        if branch is None:
            raise CommandError(f"No branch with id or code {options['branch']!r}.")
        try:
            entry, created = calling_ae_save(
                ae_title=options["ae_title"],
                branch=branch,
                networks=options["networks"],
                any_address=options["any_address"],
                description=options["description"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        verb = "Allowed" if created else "Updated"
        where = "from any address" if entry.any_address else "from " + ", ".join(entry.networks)
        self.stdout.write(f"{verb} calling AE {entry.ae_title} for branch {branch.code} {where}.")
        if entry.any_address:
            self.stderr.write("Warning: this AE title is accepted from any address.")
