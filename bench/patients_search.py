"""Patient search latency over N generated patients (default 100,000) under gunicorn, concurrency 1.

    .venv/bin/python bench/patients_search.py [--patients 100000] [--requests 500]

Uses its own database (clinic_bench) so the demo data stays small. Queries: misspelled names, swapped
first/last names, partial names, common surnames, phone tails, full phones, patient_ids.
"""

from __future__ import annotations

import argparse
import random
import sys

import requests
from harness import bench_client, gunicorn, measure, prepare, token, write


def load(count: int) -> list[tuple[str, str, str, str]]:
    import django

    django.setup()
    from clinic.models import Branch
    from patients.devdata.demo import bench_patients_build, bulk_insert
    from patients.models import Patient

    if not Branch.objects.exists():
        Branch.objects.create(code="BLR", name="Bengaluru", state="Karnataka")
    missing = count - Patient.objects.count()
    if missing > 0:
        bulk_insert(
            bench_patients_build(missing, branches=list(Branch.objects.all()), start_number=count - missing + 1)
        )
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE patients_patient")
    sample = Patient.objects.order_by("?").values_list("first_name", "last_name", "phone", "patient_id")[:200]
    return [(row[0], row[1], row[2], row[3]) for row in sample]


def typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word))
    return word[:i] + rng.choice("aeiourstn") + word[i + 1 :]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patients", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    server = prepare(database="clinic_bench")
    sample = load(args.patients)
    rng = random.Random(5)
    client = bench_client("patients:read")
    with gunicorn() as base:
        session = requests.Session()
        headers = {"Authorization": f"Bearer {token(session, base, client)}"}

        def search(term: str):
            return lambda: session.get(
                f"{base}/api/v1/patients", params={"search": term}, headers=headers
            ).raise_for_status()

        queries = {
            "misspelled name": [search(f"{typo(f, rng)} {last}") for f, last, _, _ in sample],
            "swapped first/last": [search(f"{last} {f}") for f, last, _, _ in sample],
            "partial name": [search(f"{f[:4]} {last[:4]}") for f, last, _, _ in sample],
            "common surname": [search(s) for s in ("Sharma", "Patel", "Singh", "Kumar")],
            "phone tail (6 digits)": [search(p[-6:]) for _, _, p, _ in sample],
            "phone without +91": [search(p[3:]) for _, _, p, _ in sample],
            "patient_id": [search(pid.lower().replace("-", "")) for _, _, _, pid in sample],
        }
        rows = [
            measure(f"GET /api/v1/patients?search= ({label})", calls, args.requests) for label, calls in queries.items()
        ]
        rows.append(
            measure(
                "GET /api/v1/patients (page 1)",
                lambda: session.get(f"{base}/api/v1/patients", headers=headers).raise_for_status(),
                args.requests,
            )
        )
    del server
    write(f"patients_search_{args.patients}", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
