"""The admin home page (clinic.dashboard) and the day's collections page over the data already in DATABASE_URL
(e.g. what generate_scale_data loaded), concurrency 1, in-process through Django's test client.

    .venv/bin/python bench/dashboard.py [--runs 20] [--out bench/results/dashboard.md]

For each role, a staff member of the role's group at the first branch (created on first use, named
bench.<role>), and a network-wide administrator: GET /admin/ --runs times after a warm-up, p50/p95/max in ms
and the statements per request. Writes the table to --out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from clinic.models import Branch, StaffProfile  # noqa: E402
from clinic.roles import ACCOUNTANT, ADMINISTRATOR, LAB_TECHNICIAN, PHARMACIST, RECEPTIONIST  # noqa: E402


def staff_client(role: str, branch: Branch | None) -> Client:
    name = f"bench.{role.replace(' ', '_')}" + ("" if branch else ".network")
    user, created = get_user_model().objects.get_or_create(username=name, defaults={"is_staff": True})
    if created:
        user.groups.add(Group.objects.get(name=role))
        profile = StaffProfile.objects.create(user=user, network_wide=branch is None)
        if branch is not None:
            profile.branches.set([branch])
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    return client


def measure(client: Client, url: str, runs: int) -> tuple[list[float], int]:
    client.get(url)  # warm-up: caches, the first plan
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return times, len(queries.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", default="bench/results/dashboard.md")
    args = parser.parse_args()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    settings.ADMIN_REQUIRE_2FA = False
    branch = Branch.objects.order_by("code").first()
    if branch is None:
        raise SystemExit("No branch: load data first (python manage.py generate_scale_data ...).")
    tables = ["patients_patient", "appointments_appointment", "billing_payment", "lab_laborder", "lab_labresult"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reltuples::bigint FROM pg_class WHERE relname = ANY(%s)", [tables])
        counts = dict(cursor.fetchall())
    cases = [
        (f"receptionist at {branch.code}", RECEPTIONIST, branch, "/admin/"),
        (f"lab technician at {branch.code}", LAB_TECHNICIAN, branch, "/admin/"),
        (f"pharmacist at {branch.code}", PHARMACIST, branch, "/admin/"),
        (f"accountant at {branch.code}", ACCOUNTANT, branch, "/admin/"),
        (f"accountant at {branch.code}: day's collections", ACCOUNTANT, branch, "/admin/billing/payment/collections/"),
        ("administrator, every branch (all four sections)", ADMINISTRATOR, None, "/admin/"),
    ]
    lines = [
        "# Admin home page and day's collections",
        "",
        f"`bench/dashboard.py`, concurrency 1, in-process (Django test client), {args.runs} runs after a warm-up.",
        "Rows (estimated): " + ", ".join(f"{table} {count:,}" for table, count in counts.items()) + ".",
        "",
        "| page | p50 ms | p95 ms | max ms | statements |",
        "|---|---|---|---|---|",
    ]
    for label, role, at, url in cases:
        times, statements = measure(staff_client(role, at), url, args.runs)
        p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
        lines.append(f"| {label} | {statistics.median(times):.1f} | {p95:.1f} | {max(times):.1f} | {statements} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
