"""python manage.py rotate_field_encryption [--batch-size N] [--dry-run] [--table app.Model]: re-encrypt every
value stored encrypted with FIELD_ENCRYPTION_KEY's first key and re-hash every lookup hash with it, while the
service serves (docs/backup-and-recovery.md section 6).

Run it after the new key was put first in FIELD_ENCRYPTION_KEY (the old one after it) and every pod runs
with that list; once it reports nothing left, the old key can be dropped. Pages of rows by primary key,
each its own short transaction (clinic.field_encryption.rotate_table); values already under the first key
are left alone, so an interrupted run is resumed by running it again, and a second run writes nothing.
Exits 1 when some value no configured key decrypts (it names the rows; never drop a key then).
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.field_encryption import ENCRYPTED_TABLES, TableReport, rotate_table


class Command(BaseCommand):
    help = "Re-encrypt and re-hash every encrypted value with FIELD_ENCRYPTION_KEY's first key, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=500, help="Rows per transaction (default 500).")
        parser.add_argument("--dry-run", action="store_true", help="Count what would change; write nothing.")
        parser.add_argument(
            "--table",
            action="append",
            choices=[table.model for table in ENCRYPTED_TABLES],
            help="Only this table (repeatable); default every table that holds encrypted values.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        dry_run = options["dry_run"]
        verb = "would rewrite" if dry_run else "rewrote"
        tables = [table for table in ENCRYPTED_TABLES if not options["table"] or table.model in options["table"]]
        undecryptable: dict[str, list[Any]] = {}
        for table in tables:
            started = last_shown = time.monotonic()

            def progress(report: TableReport) -> None:
                nonlocal last_shown
                # A line per batch with -v 2, else one every 5 s: a million rows are 2,000 batches.
                if options["verbosity"] >= 2 or time.monotonic() - last_shown >= 5:
                    last_shown = time.monotonic()
                    self.stdout.write(f"{report.model}: {report.scanned} rows scanned, {report.rows_written} {verb}")

            report = rotate_table(table, batch_size=options["batch_size"], dry_run=dry_run, progress=progress)
            self.stdout.write(
                f"{report.model}: {report.scanned} rows scanned, {report.rows_written} {verb} "
                f"({report.reencrypted} values re-encrypted, {report.rehashed} lookup hashes re-hashed, "
                f"{len(report.undecryptable)} undecryptable) in {time.monotonic() - started:.1f} s"
            )
            if report.undecryptable:
                undecryptable[report.model] = report.undecryptable
        if undecryptable:
            listed = "; ".join(f"{model}: {', '.join(map(str, pks[:20]))}" for model, pks in undecryptable.items())
            raise CommandError(
                f"Values that no key of FIELD_ENCRYPTION_KEY decrypts (keep every key until they are dealt with): {listed}"
            )
