"""Scale data (issue 7): patients, loaded with COPY. Names come from the Indian vocabularies of
scale_names.py with their realistic skew (a few surnames carry several percent of patients, a long tail
from every state carries few); the PatientName dictionary is filled by its trigger as the rows go in.

Phones are E.164 Indian mobiles; about 5 % of patients share a family member's phone, always with another
date of birth, so the duplicate rule (active patient, same phone and birth date) never matches.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import connection

from clinic import crypto
from clinic.devdata.scale import Organisation, Timings, copy_rows, rng_uuid
from patients.devdata.demo import aadhaar
from patients.devdata.scale_names import FIRST_NAME_CUM_WEIGHTS, FIRST_NAMES, SURNAME_CUM_WEIGHTS, SURNAMES
from patients.identifiers import format_patient_id
from patients.services import PATIENT_NUMBER_SEQUENCE

PATIENT_COLUMNS = [
    "id", "patient_id", "first_name", "last_name", "search_name", "date_of_birth", "gender", "phone",
    "phone_digits_reversed", "email", "address_line1", "address_city", "address_state", "address_pincode",
    "blood_group", "registration_branch_id", "national_health_id", "national_id_encrypted", "national_id_hash",
    "national_id_last4", "is_active", "registered_at", "updated_at",
]  # fmt: skip
BLOOD_GROUPS = ["O+", "B+", "A+", "AB+", "O-", "B-", "A-", "AB-", ""]
BLOOD_WEIGHTS = list(itertools.accumulate([32, 30, 22, 7, 2, 2, 1, 0.5, 3.5]))
STREETS = ["MG Road", "Station Road", "Gandhi Nagar", "Nehru Street", "Temple Road", "Lake View", "Main Road"]
# 3**18 is coprime with 10**9: n -> n * MULTIPLIER mod 10**9 is a bijection, so phones never collide.
PHONE_MULTIPLIER = 387_420_489


@dataclass
class Patients:
    """What later generators need of each patient, by index: id, state, home branch, registration day, and
    the gender and birth date that lab results are flagged by."""

    ids: list[Any] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    branch_indexes: list[int] = field(default_factory=list)
    registered_days: list[date] = field(default_factory=list)
    genders: list[str] = field(default_factory=list)
    birth_dates: list[date] = field(default_factory=list)


def scale_patients_generate(
    rng: random.Random, *, count: int, organisation: Organisation, first_day: date, today: date, timings: Timings
) -> Patients:
    """`count` patients numbered 1..count in registration order, registered from a year before first_day
    until a week before today. Returns their key facts for the appointment and invoice generators."""
    result = Patients()
    branches = organisation.branches
    other_states = sorted({b.state for b in branches})
    registration_first = first_day - timedelta(days=365)
    registration_start = datetime.combine(registration_first, time(4, 0), tzinfo=UTC)
    span = (today - timedelta(days=7) - registration_first).total_seconds()
    phone_offset = rng.randrange(10**9)

    def rows() -> Iterator[tuple[Any, ...]]:
        last_phone, phone_births = "", set[date]()
        for number in range(1, count + 1):
            first, name_gender = rng.choices(FIRST_NAMES, cum_weights=FIRST_NAME_CUM_WEIGHTS)[0]
            last = rng.choices(SURNAMES, cum_weights=SURNAME_CUM_WEIGHTS)[0]
            gender = rng.choice(["other", "unknown"]) if rng.random() < 0.01 else name_gender
            birth = date(1936, 1, 1) + timedelta(days=rng.randrange(32_000))
            if last_phone and rng.random() < 0.05:
                while birth in phone_births:  # a family member: same phone, another birth date
                    birth += timedelta(days=1)
                phone = last_phone
            else:
                phone = f"+919{(number * PHONE_MULTIPLIER + phone_offset) % 10**9:09d}"
                phone_births = set()
            phone_births.add(birth)
            last_phone = phone
            branch_index = rng.randrange(len(branches))
            branch = branches[branch_index]
            roll = rng.random()
            if roll < 0.80:
                city, state, pincode = branch.city, branch.state, f"{branch.pincode_prefix}{rng.randint(1, 99):03d}"
            elif roll < 0.95:
                city, state, pincode = "", rng.choice(other_states), ""
            else:
                city = state = pincode = ""
            registered = registration_start + timedelta(seconds=span * number / (count + 1))
            abha = f"91{number:012d}" if rng.random() < 0.4 else None
            encrypted = lookup = last4 = ""
            if rng.random() < 0.1:
                national_id = aadhaar(rng)
                # Fernet's IV is random by design: the ciphertext is the one column a seed does not fix.
                encrypted, lookup, last4 = (
                    crypto.encrypt(national_id),
                    crypto.lookup_hash(national_id),
                    national_id[-4:],
                )
            email = f"{first}.{last}{number}@example.in".lower() if rng.random() < 0.6 else ""
            patient_id = rng_uuid(rng)
            result.ids.append(patient_id)
            result.states.append(state)
            result.branch_indexes.append(branch_index)
            result.registered_days.append(registered.date() + timedelta(days=1))
            result.genders.append(gender)
            result.birth_dates.append(birth)
            yield (
                patient_id, format_patient_id(number), first, last, f"{first} {last}".lower(), birth, gender,
                phone, phone[1:][::-1], email,
                f"{rng.randint(1, 999)} {rng.choice(STREETS)}" if city else "", city, state, pincode,
                rng.choices(BLOOD_GROUPS, cum_weights=BLOOD_WEIGHTS)[0], branch.id, abha, encrypted, lookup, last4,
                True, registered, registered,
            )  # fmt: skip

    copy_rows("patients_patient", PATIENT_COLUMNS, rows(), timings=timings)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(%s, GREATEST(%s, (SELECT last_value FROM patients_patient_number_seq)))",
            [PATIENT_NUMBER_SEQUENCE, count],
        )
    return result
