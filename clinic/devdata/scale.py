"""Scale data (issue 7): the organisation (branches, departments, doctors) and the COPY plumbing every
app's generator shares. Deterministic for a seed: one random.Random drives everything, UUIDs included.

Rows go in with PostgreSQL COPY in chunks, one transaction per chunk, with every constraint and trigger
enabled: a generated row that broke an invariant would make the load fail, not leave bad data behind.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

from django.db import connection, transaction

from clinic.states import GST_STATE_CODES, gstin_check_character

CHUNK_ROWS = 50_000
BASE36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# (code, city, state, pincode prefix): real cities in several states; a state's branches share its GSTIN.
BRANCH_SITES = [
    ("BLR", "Bengaluru", "Karnataka", "560"),
    ("MUM", "Mumbai", "Maharashtra", "400"),
    ("CHN", "Chennai", "Tamil Nadu", "600"),
    ("DEL", "New Delhi", "Delhi", "110"),
    ("HYD", "Hyderabad", "Telangana", "500"),
    ("KOL", "Kolkata", "West Bengal", "700"),
    ("PUN", "Pune", "Maharashtra", "411"),
    ("AMD", "Ahmedabad", "Gujarat", "380"),
    ("JAI", "Jaipur", "Rajasthan", "302"),
    ("LKO", "Lucknow", "Uttar Pradesh", "226"),
    ("KOC", "Kochi", "Kerala", "682"),
    ("MYS", "Mysuru", "Karnataka", "570"),
    ("CBE", "Coimbatore", "Tamil Nadu", "641"),
    ("CHD", "Chandigarh", "Chandigarh", "160"),
    ("BBS", "Bhubaneswar", "Odisha", "751"),
    ("IDR", "Indore", "Madhya Pradesh", "452"),
    ("VSK", "Visakhapatnam", "Andhra Pradesh", "530"),
    ("NGP", "Nagpur", "Maharashtra", "440"),
    ("TVM", "Thiruvananthapuram", "Kerala", "695"),
    ("SRT", "Surat", "Gujarat", "395"),
]
DEPARTMENTS = [
    "General Medicine",
    "Cardiology",
    "Paediatrics",
    "Orthopaedics",
    "Dermatology",
    "Gynaecology",
    "ENT",
    "Ophthalmology",
    "Radiology",
    "Pathology",
    "Physiotherapy",
    "Dentistry",
]
DOCTOR_FIRST = ["Anil", "Meena", "Ravi", "Sunita", "Farhan", "Lakshmi", "Vikram", "Asha", "Joseph", "Preeti",
                "Gopal", "Nandini", "Harish", "Kavita", "Sameer", "Revathi", "Arvind", "Zoya", "Manish", "Uma"]  # fmt: skip
DOCTOR_LAST = ["Sharma", "Iyer", "Reddy", "Menon", "Khan", "Patel", "Rao", "Banerjee", "Kulkarni", "Nair",
               "Gupta", "Joshi", "Pillai", "Das", "Singh", "Bhat", "Fernandes", "Hegde", "Saxena", "Chatterjee"]  # fmt: skip
# A doctor's working day: morning, afternoon and evening sessions (local minutes), never overlapping.
SESSION_SHAPES = [
    [(9 * 60, 13 * 60), (14 * 60, 17 * 60)],
    [(8 * 60, 12 * 60), (16 * 60, 20 * 60)],
    [(10 * 60, 13 * 60), (14 * 60, 16 * 60), (18 * 60, 20 * 60)],
    [(9 * 60 + 30, 14 * 60)],
]


def rng_uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def make_gstin(state: str, pan: str, entity: int = 1) -> str:
    body = f"{GST_STATE_CODES[state]}{pan}{BASE36[entity]}Z"
    return body + gstin_check_character(body)


@dataclass
class Timings:
    """Per-table rows and seconds (generation in Python and COPY separately), printed at the end."""

    rows: dict[str, int] = field(default_factory=dict)
    generate_s: dict[str, float] = field(default_factory=dict)
    copy_s: dict[str, float] = field(default_factory=dict)
    other: dict[str, float] = field(default_factory=dict)

    def add(self, table: str, rows: int, generate: float, copy: float) -> None:
        self.rows[table] = self.rows.get(table, 0) + rows
        self.generate_s[table] = self.generate_s.get(table, 0.0) + generate
        self.copy_s[table] = self.copy_s.get(table, 0.0) + copy

    def report(self) -> list[str]:
        lines = [f"{'table':34} {'rows':>10} {'generate s':>10} {'COPY s':>8} {'COPY rows/s':>12}"]
        for table, rows in self.rows.items():
            copy = self.copy_s[table]
            rate = f"{rows / copy:,.0f}" if copy > 0 else "-"
            lines.append(f"{table:34} {rows:>10,} {self.generate_s[table]:>10.2f} {copy:>8.2f} {rate:>12}")
        lines.extend(f"{label:34} {seconds:>30.2f} s" for label, seconds in self.other.items())
        return lines


def copy_rows(
    table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, timings: Timings, chunk: int = CHUNK_ROWS
) -> int:
    """COPY rows into table, `chunk` rows per transaction (inside an outer atomic block: a savepoint)."""
    quoted = ", ".join(f'"{column}"' for column in columns)  # "start" and "end" are reserved words
    statement = f"COPY {table} ({quoted}) FROM STDIN"
    iterator: Iterator[Sequence[Any]] = iter(rows)
    total = 0
    while True:
        started = time.perf_counter()
        batch = list(islice(iterator, chunk))
        generated = time.perf_counter() - started
        if not batch:
            break
        started = time.perf_counter()
        with transaction.atomic():
            raw = connection.connection
            assert raw is not None  # atomic() opened the connection
            with raw.cursor() as cursor, cursor.copy(statement) as copy:
                for row in batch:
                    copy.write_row(row)
        timings.add(table, len(batch), generated, time.perf_counter() - started)
        total += len(batch)
    return total


@dataclass(frozen=True)
class BranchRow:
    id: uuid.UUID
    code: str
    city: str
    state: str
    pincode_prefix: str


@dataclass(frozen=True)
class DoctorRow:
    id: uuid.UUID
    department_index: int
    branch_indexes: tuple[int, ...]
    slot_minutes: int
    # weekday -> [(branch index, start minute, end minute)], sorted, non-overlapping by construction.
    sessions: dict[int, list[tuple[int, int, int]]]


@dataclass
class Organisation:
    branches: list[BranchRow]
    departments: list[uuid.UUID]
    department_names: list[str]
    doctors: list[DoctorRow]


def generate_organisation(
    rng: random.Random, *, branches: int, doctors: int, moment: datetime, timings: Timings
) -> Organisation:
    """Branches (20 sites in 13 states, cycled with a digit suffix beyond 20), departments, doctors
    at one or two branches with weekly sessions Monday to Saturday."""
    pan = "".join(rng.choice(BASE36[10:]) for _ in range(5)) + f"{rng.randrange(10_000):04d}" + rng.choice(BASE36[10:])
    branch_rows, rows = [], []
    for index in range(branches):
        code, city, state, pin = BRANCH_SITES[index % len(BRANCH_SITES)]
        if index >= len(BRANCH_SITES):
            code = f"{code}{index // len(BRANCH_SITES) + 1}"
        branch = BranchRow(rng_uuid(rng), code, city, state, pin)
        branch_rows.append(branch)
        rows.append(
            (branch.id, code, f"{city} Clinic", state, make_gstin(state, pan), "Asia/Kolkata", 120,
             f"{rng.randint(1, 300)} MG Road", city, f"{pin}{rng.randint(1, 99):03d}",
             f"+9180{rng.randrange(10**8):08d}", True, moment, moment)
        )  # fmt: skip
    copy_rows(
        "clinic_branch",
        ["id", "code", "name", "state", "gstin", "time_zone", "cancellation_window_minutes", "address_line1",
         "city", "pincode", "phone", "is_active", "created_at", "updated_at"],
        rows,
        timings=timings,
    )  # fmt: skip
    department_ids = [rng_uuid(rng) for _ in DEPARTMENTS]
    copy_rows(
        "clinic_department",
        ["id", "name", "description", "created_at", "updated_at"],
        [(pk, name, "", moment, moment) for pk, name in zip(department_ids, DEPARTMENTS, strict=True)],
        timings=timings,
    )
    doctor_rows: list[DoctorRow] = []
    doctor_copy: list[tuple[Any, ...]] = []
    links: list[tuple[uuid.UUID, uuid.UUID]] = []
    for index in range(doctors):
        doctor_id = rng_uuid(rng)
        department = index % len(DEPARTMENTS)
        home = rng.randrange(branches)
        visiting = (home, rng.randrange(branches)) if branches > 1 and rng.random() < 0.3 else (home,)
        branch_indexes = tuple(dict.fromkeys(visiting))
        slot = rng.choice([10, 15, 15, 15, 20, 30])
        shape = rng.choice(SESSION_SHAPES)
        by_day: dict[int, list[tuple[int, int, int]]] = {}
        for weekday in range(6):
            if rng.random() < 0.15:
                continue  # a weekly day off
            by_day[weekday] = [(branch_indexes[i % len(branch_indexes)], s, e) for i, (s, e) in enumerate(shape)]
        doctor = DoctorRow(doctor_id, department, branch_indexes, slot, by_day)
        doctor_rows.append(doctor)
        name = f"Dr. {rng.choice(DOCTOR_FIRST)} {rng.choice(DOCTOR_LAST)}"
        doctor_copy.append(
            (doctor_id, name, department_ids[department], slot, f"MCI-{rng.randrange(10**6):06d}", True, moment, moment)
        )
        links.extend((doctor_id, branch_rows[b].id) for b in branch_indexes)
    copy_rows(
        "clinic_doctor",
        ["id", "name", "department_id", "default_slot_minutes", "registration_number", "is_active", "created_at",
         "updated_at"],
        doctor_copy,
        timings=timings,
    )  # fmt: skip
    copy_rows("clinic_doctor_branches", ["doctor_id", "branch_id"], links, timings=timings)
    return Organisation(branch_rows, department_ids, list(DEPARTMENTS), doctor_rows)
