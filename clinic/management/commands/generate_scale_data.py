"""python manage.py generate_scale_data --patients N --invoices M [--seed S] [--doctors 300] [--branches 20]
[--appointments A] [--drugs 2000] [--today YYYY-MM-DD]: a large, valid dataset for performance work (issue 7), with
credit notes and refunds on about 2 % of the invoices (docs/api-rules.md §12), and lab orders with their results
(about 1.2 per completed appointment; issue 16), and a pharmacy (--drugs drugs stocked at every branch,
prescriptions and about one dispense per completed appointment through the stock ledger; issue 17).

Into an empty database only: numbering (patient ids, invoice numbers, tokens) starts at 1, which is what
makes the output identical for a seed. Every constraint and trigger stays enabled during the load.
"""

from __future__ import annotations

import random
import time
import zoneinfo
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils import timezone

from appointments.devdata.scale import generate_appointments, generate_sessions
from billing.devdata.scale import generate_catalogue, generate_invoices
from clinic.devdata.scale import Timings, generate_organisation
from clinic.models import Branch
from lab.devdata.scale import generate_lab_catalogue, generate_lab_orders
from patients.devdata.scale import scale_patients_generate
from patients.models import Patient
from pharmacy.devdata.scale import generate_drugs, generate_pharmacy

HISTORY_DAYS = 700
FUTURE_DAYS = 30
ANALYZED = [
    "patients_patient", "patients_patientname", "patients_visit", "appointments_appointment",
    "appointments_appointmentchange", "appointments_tokencounter", "billing_invoice", "billing_lineitem",
    "billing_payment", "billing_creditnote", "billing_creditnoteline", "billing_refund", "lab_laborder",
    "lab_laborderitem", "lab_labresult", "patients_medication", "pharmacy_drug", "pharmacy_reorderlevel",
    "pharmacy_batch", "pharmacy_prescription", "pharmacy_prescriptionitem", "pharmacy_dispense",
    "pharmacy_dispenseline", "pharmacy_stockmovement", "pharmacy_controlleddrugentry",
]  # fmt: skip


class Command(BaseCommand):
    help = "Generate a large valid dataset (branches, doctors, patients, appointments, invoices) with COPY."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--patients", type=int, required=True)
        parser.add_argument("--invoices", type=int, required=True)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--doctors", type=int, default=300)
        parser.add_argument("--branches", type=int, default=20)
        parser.add_argument(
            "--appointments", type=int, default=None, help="Besides the long histories; default: one per patient."
        )
        parser.add_argument("--drugs", type=int, default=2000, help="Drugs in the pharmacy catalogue.")
        parser.add_argument(
            "--today", type=date.fromisoformat, default=None, help="Anchor date (default: today in Asia/Kolkata)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        patients, invoices = options["patients"], options["invoices"]
        if patients < 1 or options["doctors"] < 1 or options["branches"] < 1 or invoices < 0 or options["drugs"] < 1:
            raise CommandError(
                "--patients, --doctors, --branches and --drugs must be at least 1, --invoices at least 0."
            )
        if Branch.objects.exists() or Patient.objects.exists():
            raise CommandError(
                "generate_scale_data loads an empty database; this one already has branches or patients."
            )
        today = options["today"] or timezone.now().astimezone(zoneinfo.ZoneInfo("Asia/Kolkata")).date()
        first_day, last_day = today - timedelta(days=HISTORY_DAYS), today + timedelta(days=FUTURE_DAYS)
        moment = datetime.combine(first_day - timedelta(days=400), datetime.min.time(), tzinfo=UTC)
        rng = random.Random(options["seed"])  # noqa: S311 - reproducible test data, not secrets
        timings = Timings()
        started = time.perf_counter()

        organisation = generate_organisation(
            rng, branches=options["branches"], doctors=options["doctors"], moment=moment, timings=timings
        )
        generate_sessions(rng, organisation=organisation, moment=moment, timings=timings)
        phase = time.perf_counter()
        people = scale_patients_generate(
            rng, count=patients, organisation=organisation, first_day=first_day, today=today, timings=timings
        )
        timings.other["patients, all phases"] = time.perf_counter() - phase
        phase = time.perf_counter()
        scheduled = generate_appointments(
            rng,
            organisation=organisation,
            patients=people,
            count=patients if options["appointments"] is None else options["appointments"],
            first_day=first_day,
            today=today,
            last_day=last_day,
            timings=timings,
        )
        timings.other["appointments and visits, all phases"] = time.perf_counter() - phase
        phase = time.perf_counter()
        services = generate_catalogue(rng, organisation=organisation, moment=moment, timings=timings)
        billing = generate_invoices(
            rng,
            organisation=organisation,
            patients=people,
            services=services,
            count=invoices,
            first_day=first_day,
            today=today,
            timings=timings,
        )
        timings.other["catalogue and invoices, all phases"] = time.perf_counter() - phase
        phase = time.perf_counter()
        # A generator of its own, so the other apps' rows are the same for a seed with or without lab rows.
        lab_rng = random.Random(f"lab-{options['seed']}")  # noqa: S311 - reproducible test data
        catalogue = generate_lab_catalogue(lab_rng, moment=moment, timings=timings)
        lab = generate_lab_orders(
            lab_rng,
            organisation=organisation,
            patients=people,
            completed=scheduled.completed,
            catalogue=catalogue,
            today=today,
            timings=timings,
        )
        timings.other["lab orders, all phases"] = time.perf_counter() - phase
        phase = time.perf_counter()
        pharmacy_rng = random.Random(f"pharmacy-{options['seed']}")  # noqa: S311 - reproducible test data
        drugs = generate_drugs(
            pharmacy_rng, organisation=organisation, count=options["drugs"], moment=moment, timings=timings
        )
        pharmacy = generate_pharmacy(
            pharmacy_rng,
            organisation=organisation,
            patients=people,
            completed=scheduled.completed,
            catalogue=drugs,
            first_day=first_day,
            today=today,
            timings=timings,
        )
        timings.other["pharmacy, all phases"] = time.perf_counter() - phase
        analyze_started = time.perf_counter()
        with connection.cursor() as cursor:
            for table in ANALYZED:
                # VACUUM sets the visibility map a running database's autovacuum keeps (COPY leaves none, and
                # every index-only scan then reads the table: the Observation search's p95 was 85 ms instead of
                # 30), and drops the dead versions the ledger's trigger left in pharmacy_batch. Outside a
                # transaction only, so not in a test's.
                vacuum = not connection.in_atomic_block
                cursor.execute(f"{'VACUUM ' if vacuum else ''}ANALYZE {table}")
        timings.other["ANALYZE"] = time.perf_counter() - analyze_started
        timings.other["total"] = time.perf_counter() - started
        for line in timings.report():
            self.stdout.write(line)
        self.stdout.write(
            f"{patients} patients ({scheduled.heavy_patients} with {scheduled.visits and '500+'} visits), "
            f"{scheduled.appointments} appointments, {invoices} invoices ({billing['credit_notes']} credit notes, "
            f"{billing['refunds']} refunds), {lab['orders']} lab orders ({lab['results']} results, {lab['cancelled']} "
            f"cancelled, {lab['amended']} amended), {options['drugs']} drugs in {pharmacy['batches']} batches, "
            f"{pharmacy['prescriptions']} prescriptions, {pharmacy['dispenses']} dispenses ({pharmacy['lines']} lines, "
            f"{pharmacy['register']} register entries, {pharmacy['write_offs']} write-offs), from {first_day} to "
            f"{last_day}."
        )
