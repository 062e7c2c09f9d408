"""Generated patients: the demo dataset of `seed_demo`, and bulk data for benchmarks.

Names follow a skewed frequency (a few common surnames repeat a lot, as in real registers); phones are
valid Indian mobile numbers, unique per generated patient; output is deterministic for a seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction

from clinic import crypto
from clinic.models import Branch, Doctor
from patients.identifiers import format_patient_id, verhoeff_check_digit
from patients.models import Allergy, Diagnosis, Medication, Patient, Visit
from patients.services import PATIENT_NUMBER_SEQUENCE

FIRST_NAMES = [
    "Aarav", "Vivaan", "Aditya", "Vihaan", "Arjun", "Sai", "Reyansh", "Ayaan", "Krishna", "Ishaan",
    "Rohan", "Rahul", "Amit", "Suresh", "Ramesh", "Vikram", "Anil", "Sanjay", "Rajesh", "Manoj",
    "Priya", "Ananya", "Aadhya", "Diya", "Saanvi", "Ishita", "Kavya", "Meera", "Pooja", "Neha",
    "Sunita", "Lakshmi", "Deepa", "Anjali", "Divya", "Shreya", "Nisha", "Rekha", "Geeta", "Swati",
    "Mohammed", "Imran", "Fatima", "Ayesha", "Joseph", "Mary", "Harpreet", "Gurpreet", "Venkat", "Karthik",
]  # fmt: skip
LAST_NAMES = [
    "Sharma", "Patel", "Singh", "Kumar", "Reddy", "Rao", "Nair", "Iyer", "Gupta", "Das",
    "Mehta", "Joshi", "Shah", "Verma", "Mishra", "Pillai", "Menon", "Chatterjee", "Banerjee", "Mukherjee",
    "Agarwal", "Bhat", "Kulkarni", "Deshpande", "Naidu", "Choudhury", "Khan", "Fernandes", "Gill", "Sandhu",
    "Krishnan", "Subramanian", "Hegde", "Shetty", "Kamath", "Pandey", "Tiwari", "Yadav", "Jain", "Saxena",
]  # fmt: skip
CITIES = [("Bengaluru", "Karnataka", "560"), ("Mumbai", "Maharashtra", "400"), ("Chennai", "Tamil Nadu", "600")]
DIAGNOSES = [("E11.9", "Type 2 diabetes mellitus"), ("I10", "Essential hypertension"), ("J45.9", "Asthma")]
ALLERGENS = [("Penicillin", "Rash"), ("Peanuts", "Anaphylaxis"), ("Dust mites", "Sneezing")]
MEDICINES = [
    ("Metformin", "500 mg", "twice daily"),
    ("Amlodipine", "5 mg", "once daily"),
    ("Salbutamol", "2 puffs", "as needed"),
]


def _zipf_choice(rng: random.Random, items: Sequence[str]) -> str:
    """Index i chosen with weight 1/(i+1): the first names of each list are the common ones."""
    weights = [1 / (i + 1) for i in range(len(items))]
    return rng.choices(items, weights=weights, k=1)[0]


def aadhaar(rng: random.Random) -> str:
    body = str(rng.randint(2, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(10))
    return body + verhoeff_check_digit(body)


def bench_patients_build(
    count: int, *, branches: Sequence[Branch], seed: int = 7, start_number: int = 1
) -> Iterator[Patient]:
    """Unsaved patients for the benchmarks to bulk_insert, numbered from start_number; phones +91 9xxxxxxxxx
    unique per number."""
    rng = random.Random(seed)
    epoch = datetime(2024, 1, 1, tzinfo=UTC)
    for offset in range(count):
        number = start_number + offset
        city, state, pin = rng.choice(CITIES)
        first, last = _zipf_choice(rng, FIRST_NAMES), _zipf_choice(rng, LAST_NAMES)
        patient = Patient(
            patient_id=format_patient_id(number),
            first_name=first,
            last_name=last,
            date_of_birth=date(1940, 1, 1) + timedelta(days=rng.randint(0, 80 * 365)),
            gender=rng.choice(["male", "female"]),
            phone=f"+919{(number * 7919 + seed) % 1_000_000_000:09d}",
            email=f"{first}.{last}{number}@example.com".lower(),
            address_line1=f"{rng.randint(1, 999)} Main Road",
            address_city=city,
            address_state=state,
            address_pincode=f"{pin}{rng.randint(1, 99):03d}",
            blood_group=rng.choice(["A+", "B+", "O+", "AB+", "O-"]),
            registration_branch=rng.choice(branches),
            national_health_id=f"91{number:012d}",
        )
        # save() derives these; bulk_create bypasses save().
        patient.search_name = f"{first} {last}".lower()
        patient.phone_digits_reversed = patient.phone[1:][::-1]
        patient.registered_at = epoch + timedelta(minutes=number)
        yield patient


def bulk_insert(patients: Iterator[Patient], batch_size: int = 5000) -> int:
    """Insert generated patients in batches and move the patient_id sequence past them."""
    total, batch, highest = 0, [], 0
    for patient in patients:
        highest = max(highest, int("".join(ch for ch in patient.patient_id if ch.isdigit())))
        batch.append(patient)
        if len(batch) >= batch_size:
            Patient.objects.bulk_create(batch)
            total += len(batch)
            batch = []
    if batch:
        Patient.objects.bulk_create(batch)
        total += len(batch)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(%s, GREATEST(%s, (SELECT last_value FROM patients_patient_number_seq)))",
            [PATIENT_NUMBER_SEQUENCE, highest],
        )
    return total


@transaction.atomic
def seed_demo_patients(*, branches: Sequence[Branch], doctors: Sequence[Doctor], count: int = 20) -> list[Patient]:
    """The demo's patients with clinical data and visits; idempotent (keyed on the demo phones)."""
    rng = random.Random(2026)
    existing = list(
        Patient.objects.filter(email__endswith="@demo.clinic.example")
        .select_related("registration_branch")
        .order_by("patient_id")
    )
    if len(existing) >= count:
        return existing[:count]
    created = []
    for index in range(len(existing), count):
        first, last = FIRST_NAMES[index % len(FIRST_NAMES)], LAST_NAMES[(index * 7) % len(LAST_NAMES)]
        city, state, pin = CITIES[index % len(CITIES)]
        nid = aadhaar(rng)
        with connection.cursor() as cursor:
            cursor.execute("SELECT nextval(%s)", [PATIENT_NUMBER_SEQUENCE])
            number = cursor.fetchone()[0]
        patient = Patient.objects.create(
            patient_id=format_patient_id(number),
            first_name=first,
            last_name=last,
            date_of_birth=date(1950 + index * 3 % 60, 1 + index % 12, 1 + index % 28),
            gender="female" if index % 2 else "male",
            phone=f"+9198450{index:05d}",
            email=f"{first}.{last}@demo.clinic.example".lower(),
            address_line1=f"{10 + index} Park Street",
            address_city=city,
            address_state=state,
            address_pincode=f"{pin}0{index % 90 + 10:02d}",
            blood_group=["A+", "B+", "O+", "AB-", "O-"][index % 5],
            registration_branch=branches[index % len(branches)],
            national_health_id=f"9100{index:010d}",
            national_id_encrypted=crypto.encrypt(nid),
            national_id_hash=crypto.lookup_hash(nid),
            national_id_last4=nid[-4:],
        )
        code, description = DIAGNOSES[index % len(DIAGNOSES)]
        Diagnosis.objects.create(
            patient=patient, code=code, description=description, onset_date=date(2020, 1 + index % 12, 5)
        )
        if index % 3 == 0:
            substance, reaction = ALLERGENS[index % len(ALLERGENS)]
            Allergy.objects.create(patient=patient, substance=substance, reaction=reaction, severity="moderate")
        name, dosage, frequency = MEDICINES[index % len(MEDICINES)]
        Medication.objects.create(
            patient=patient, name=name, dosage=dosage, frequency=frequency, start_date=date(2021, 3, 1)
        )
        for visit_index in range(index % 4):
            doctor = doctors[(index + visit_index) % len(doctors)]
            start = datetime(2026, 1 + visit_index * 3, 10, 4, 30, tzinfo=UTC)
            Visit.objects.create(
                patient=patient,
                type=Visit.Type.INPATIENT if visit_index == 2 else Visit.Type.OUTPATIENT,
                doctor=doctor,
                department=doctor.department,
                branch=doctor.branches.first() or patient.registration_branch,
                start=start,
                end=start + (timedelta(days=3) if visit_index == 2 else timedelta(minutes=20)),
                reason="Admission for observation" if visit_index == 2 else "Consultation",
            )
        created.append(patient)
    return existing + created
