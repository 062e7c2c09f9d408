"""python manage.py reset_token_sequence --doctor ID --date YYYY-MM-DD [--branch ID] [--start N | --renumber]
[--dry-run]: move the next token number of a doctor's day, or renumber its active appointments 1..k."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from appointments.errors import UnsafeReset
from appointments.token_sequence import token_sequence_reset
from clinic.models import Branch, Doctor


def _uuid(kind: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CommandError(f"--{kind} must be a UUID, got {value!r}.") from None


class Command(BaseCommand):
    help = (
        "Reset a doctor's token sequence for one local day: --start N makes the next token N (refused if a "
        "number from N up is already held); --renumber renumbers the day's active appointments 1..k in slot "
        "order (refused if that would reuse or change a number a patient already holds)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--doctor", required=True, help="Doctor UUID.")
        parser.add_argument("--date", required=True, help="The doctor's local day, YYYY-MM-DD.")
        parser.add_argument("--branch", help="Branch UUID: checks the doctor consults there (optional).")
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--start", type=int, help="The next token number.")
        mode.add_argument("--renumber", action="store_true", help="Renumber the active appointments 1..k.")
        parser.add_argument("--dry-run", action="store_true", help="Print what would change; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        doctor = Doctor.objects.filter(pk=_uuid("doctor", options["doctor"])).first()
        if doctor is None:
            raise CommandError(f"No doctor {options['doctor']}.")
        branch = None
        if options["branch"]:
            branch = Branch.objects.filter(pk=_uuid("branch", options["branch"])).first()
            if branch is None:
                raise CommandError(f"No branch {options['branch']}.")
        try:
            day = date.fromisoformat(options["date"])
        except ValueError:
            raise CommandError(f"--date must be YYYY-MM-DD, got {options['date']!r}.") from None
        try:
            plan = token_sequence_reset(
                doctor=doctor,
                local_date=day,
                branch=branch,
                start=options["start"],
                renumber=options["renumber"],
                dry_run=options["dry_run"],
            )
        except UnsafeReset as exc:
            raise CommandError(exc.detail) from None
        prefix = "Would change" if options["dry_run"] else "Changed"
        self.stdout.write(f"{doctor.name}, {day}:")
        for appointment, old, new in plan.renumbered:
            start = appointment.slot_start.astimezone(appointment.branch.zone)
            self.stdout.write(
                f"  {prefix}: token {old} -> {new} ({appointment.patient.patient_id}, {start:%H:%M}, "
                f"{appointment.status})"
            )
        if plan.next_after == plan.next_before and not plan.renumbered:
            self.stdout.write(f"  Nothing to change: the next token is already {plan.next_after}.")
        else:
            self.stdout.write(f"  {prefix}: next token {plan.next_before} -> {plan.next_after}")
        if options["dry_run"]:
            self.stdout.write("  Dry run: nothing was written.")
