"""python manage.py seed_demo [--json]: an idempotent demo dataset, and a manifest of what exists.

Each domain issue extends this command with its own data (patients, schedules, appointments, invoices).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from appointments.devdata.demo import seed_demo_schedule
from appointments.models import Appointment, WeeklySession
from billing.devdata.demo import seed_demo_billing
from clinic.models import Branch, Department, Doctor
from integrations.hl7.models import Hl7Destination
from lab.devdata.demo import seed_demo_lab
from lab.devdata.demo_orders import seed_demo_lab_orders
from patients.devdata.demo import seed_demo_patients
from pharmacy.devdata.demo import seed_demo_pharmacy

DEMO_PATIENTS = 20

BRANCHES: list[dict[str, Any]] = [
    {
        "code": "BLR",
        "name": "Bengaluru Central Clinic",
        "state": "Karnataka",
        "gstin": "29AABCC1234D1Z7",
        "city": "Bengaluru",
        "pincode": "560001",
        "address_line1": "12 MG Road",
        "time_zone": "Asia/Kolkata",
        "cancellation_window_minutes": 120,
    },
    {
        "code": "MUM",
        "name": "Mumbai Andheri Hospital",
        "state": "Maharashtra",
        "gstin": "27AABCC1234D1ZB",
        "city": "Mumbai",
        "pincode": "400053",
        "address_line1": "4 Link Road, Andheri West",
        "time_zone": "Asia/Kolkata",
        "cancellation_window_minutes": 30,
    },
]
DEPARTMENTS = ["General Medicine", "Cardiology", "Paediatrics", "Orthopaedics", "Dermatology", "Emergency Medicine"]
DOCTORS: list[dict[str, Any]] = [
    {"name": "Dr. Ananya Rao", "department": "General Medicine", "branches": ["BLR", "MUM"], "slot": 15},
    {"name": "Dr. Vikram Mehta", "department": "Cardiology", "branches": ["BLR"], "slot": 20},
    {"name": "Dr. Priya Nair", "department": "Paediatrics", "branches": ["MUM"], "slot": 15},
    {"name": "Dr. Arjun Iyer", "department": "Orthopaedics", "branches": ["BLR"], "slot": 30},
    # On duty round the clock, one per branch: the demo's clinic day is in session at any hour.
    {"name": "Dr. Kavya Menon", "department": "Emergency Medicine", "branches": ["BLR"], "slot": 15, "duty": True},
    {"name": "Dr. Farhan Qureshi", "department": "Emergency Medicine", "branches": ["MUM"], "slot": 15, "duty": True},
]


class Command(BaseCommand):
    help = "Create the demo dataset if missing (idempotent) and print a manifest of it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the manifest as one JSON object.")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        branches = {}
        for spec in BRANCHES:
            branch, _ = Branch.objects.get_or_create(code=spec["code"], defaults=spec)
            branches[branch.code] = branch
        if not Branch.objects.filter(is_head_office=True).exists():
            # So a demo client of both branches can register a patient with the specification's fields alone.
            Branch.objects.filter(code="BLR").update(is_head_office=True)
        departments = {name: Department.objects.get_or_create(name=name)[0] for name in DEPARTMENTS}
        doctors = []
        for spec in DOCTORS:
            doctor, created = Doctor.objects.get_or_create(
                name=spec["name"],
                defaults={"department": departments[spec["department"]], "default_slot_minutes": spec["slot"]},
            )
            if created:
                doctor.branches.set([branches[code] for code in spec["branches"]])
            doctors.append(doctor)
        # Each domain app seeds its own part; later issues add schedules, appointments and invoices.
        patients = seed_demo_patients(branches=list(branches.values()), doctors=doctors, count=DEMO_PATIENTS)
        duty = [doctor for doctor, spec in zip(doctors, DOCTORS, strict=True) if spec.get("duty")]
        seed_demo_schedule(doctors=doctors, patients=patients, duty_doctors=duty)
        billing = seed_demo_billing(branches=list(branches.values()), patients=patients)
        lab = seed_demo_lab()
        lab.update(seed_demo_lab_orders(branches=list(branches.values()), doctors=doctors, patients=patients))
        pharmacy = seed_demo_pharmacy(branches=list(branches.values()), doctors=doctors, patients=patients)
        manifest: dict[str, list[dict[str, Any]]] = {
            "branches": [
                {
                    "id": str(b.id),
                    "code": b.code,
                    "state": b.state,
                    "cancellation_window_minutes": b.cancellation_window_minutes,
                }
                for b in branches.values()
            ],
            "departments": [{"id": str(d.id), "name": d.name} for d in departments.values()],
            "doctors": [
                {
                    "id": str(d.id),
                    "name": d.name,
                    "department": d.department.name,
                    "branches": sorted(b.code for b in d.branches.all()),
                }
                for d in doctors
            ],
            "schedules": [
                {
                    "id": str(s.id),
                    "name": f"{s.doctor.name} {s.get_weekday_display()} {s.start:%H:%M}-{s.end:%H:%M} {s.branch.code}",
                }
                for s in WeeklySession.objects.filter(doctor__in=doctors).select_related("doctor", "branch")
            ],
            "appointments": [
                {
                    "id": str(a.id),
                    "name": f"#{a.token_number} {a.slot_start.astimezone(a.branch.zone):%Y-%m-%d %H:%M} {a.status}",
                    "status": a.status,
                }
                for a in Appointment.objects.filter(patient__in=patients).select_related("branch")
            ],
            "patients": [
                {"id": str(p.id), "patient_id": p.patient_id, "name": p.name, "branch": p.registration_branch.code}
                for p in patients
            ],
        }
        # docs/operations.md §3: an inactive HL7 destination (enable it in the admin to try the channel).
        hl7_destination, _ = Hl7Destination.objects.get_or_create(
            name="Demo LIS (inactive)",
            defaults={
                "host": "127.0.0.1",
                "port": 2575,
                "event_types": ["lab_order.created", "lab_order.cancelled"],
                "receiving_application": "LIS",
                "receiving_facility": "DEMOLAB",
                "is_active": False,
            },
        )
        manifest["hl7_destinations"] = [
            {"id": str(hl7_destination.id), "name": hl7_destination.name, "active": hl7_destination.is_active}
        ]
        manifest.update(billing)
        manifest.update(lab)
        manifest.update(pharmacy)
        if options["json"]:
            self.stdout.write(json.dumps(manifest))
            return
        self.stdout.write("Demo data:")
        for key, items in manifest.items():
            self.stdout.write(f"  {key}: {len(items)}")
            for item in items:
                label = item.get("code") or item.get("patient_id") or item.get("name")
                self.stdout.write(f"    {item['id']}  {label}")
