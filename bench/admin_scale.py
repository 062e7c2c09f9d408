"""Issue 37: every admin list, search and dashboard under gunicorn at 1M patients and 1M invoices, as staff use
them: a network-wide administrator and a member of one branch in each role group (docs/staff.md).

Each page is fetched over one keep-alive connection at concurrency 1 (a warm-up, then --requests timed
requests) with the session of a user logged in by Django's own login machinery; the target is p95 under
300 ms for every row. Writes bench/results/<name>.{md,json}.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/clinic_scale .venv/bin/python bench/admin_scale.py

The database must hold the scale data (`manage.py generate_scale_data --patients 1000000 --invoices 1000000`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import requests
from harness import gunicorn, percentile, prepare, write

TARGET_MS = 300.0


def _staff(username: str, *, role: str | None, branch: Any) -> Any:
    from django.contrib.auth.models import Group, User

    from clinic.models import StaffProfile

    user, _ = User.objects.get_or_create(username=username, defaults={"is_staff": True})
    profile, _ = StaffProfile.objects.get_or_create(user=user)
    if role is None:
        user.is_superuser = True
        user.save(update_fields=["is_superuser"])
        profile.network_wide = True
        profile.save(update_fields=["network_wide"])
    else:
        user.groups.set([Group.objects.get(name=role)])
        profile.branches.set([branch])
    return user


def _session_cookie(user: Any) -> dict[str, str]:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def _pages(branch: Any) -> dict[str, list[str]]:
    """Role -> the pages its members open all day (lists, the searches they type, the filters they click)."""
    from django.contrib import admin
    from django.utils import timezone

    from billing.models import Invoice
    from patients.models import Patient

    today = timezone.localdate()
    numbered = Invoice.objects.filter(branch=branch, invoice_number__isnull=False).order_by("-date").first()
    invoice_number = numbered.invoice_number if numbered else "INV"
    patient = Patient.objects.filter(registration_branch=branch).order_by("registered_at").first()
    name = f"{patient.first_name} {patient.last_name}" if patient else "Sharma"
    every_list = sorted(f"/admin/{model._meta.app_label}/{model._meta.model_name}/" for model in admin.site._registry)
    day = f"slot_start__day={today.day}&slot_start__month={today.month}&slot_start__year={today.year}"
    return {
        "administrator": ["/admin/", *every_list],
        "receptionist": [
            "/admin/",
            "/admin/patients/patient/",
            f"/admin/patients/patient/find/?q={patient.patient_id if patient else 'P'}",
            "/admin/appointments/appointment/",
            f"/admin/appointments/appointment/?{day}",
            "/admin/appointments/appointment/?status__exact=booked",
            f"/admin/patients/patient/find/?q={name.replace(' ', '+')}",
            "/admin/patients/patient/find/?q=Manj+Varma",
            "/admin/appointments/appointment/queue/",
            "/admin/appointments/appointment/book/",
        ],
        "lab technician": [
            "/admin/",
            "/admin/lab/laborder/",
            "/admin/lab/laborder/?status__exact=collected",
            "/admin/lab/laborder/?priority__exact=stat",
            "/admin/lab/laborder/worklist/",
            "/admin/lab/laborder/?critical=unacknowledged",
        ],
        "pharmacist": [
            "/admin/",
            "/admin/pharmacy/batch/",
            "/admin/pharmacy/dispense/",
            "/admin/pharmacy/prescription/",
            "/admin/pharmacy/reorderlevel/?stock=below",
            "/admin/pharmacy/batch/?expiry=expiring&quantity_on_hand__gt=0",
            "/admin/pharmacy/controlleddrugentry/",
            "/admin/pharmacy/batch/receive/",
        ],
        "accountant": [
            "/admin/",
            "/admin/billing/invoice/",
            "/admin/billing/invoice/?status__exact=finalized",
            "/admin/billing/payment/",
            "/admin/billing/creditnote/",
            "/admin/billing/payment/collections/",
            f"/admin/billing/invoice/?q={invoice_number}",
            f"/admin/billing/invoice/?q={patient.patient_id if patient else 'P'}",
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default=None)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--name", default="admin_scale")
    parser.add_argument("--only", default="", help="comma-separated roles")
    args = parser.parse_args()
    os.environ["ADMIN_REQUIRE_2FA"] = "false"  # the session is made by force_login; the code is not measured
    prepare(args.database)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    django.setup()
    from clinic.models import Branch
    from patients.models import Patient

    branch = Branch.objects.order_by("code").first()
    if branch is None:
        raise SystemExit("No branch: generate the scale data first (manage.py generate_scale_data).")
    print(f"{Patient.objects.count():,} patients; one-branch staff at {branch.code}", flush=True)
    pages = _pages(branch)
    roles = [r for r in pages if not args.only or r in args.only.split(",")]
    rows: list[dict[str, Any]] = []
    with gunicorn(workers=2) as base:
        for role in roles:
            user = _staff(
                f"bench.{role.replace(' ', '-')}", role=None if role == "administrator" else role, branch=branch
            )
            session = requests.Session()
            session.cookies.update(_session_cookie(user))
            for path in pages[role]:
                for _ in range(2):
                    warm = session.get(base + path, timeout=60)
                if warm.status_code != 200:
                    rows.append({"endpoint": f"{role}: {path}", "requests": 0, "p50_ms": 0, "p95_ms": 0,
                                 "p99_ms": 0, "throughput_rps": 0, "status": warm.status_code})  # fmt: skip
                    continue
                samples = []
                for _ in range(args.requests):
                    started = time.perf_counter()
                    response = session.get(base + path, timeout=60)
                    samples.append((time.perf_counter() - started) * 1000)
                    assert response.status_code == 200, (path, response.status_code)
                row = {
                    "endpoint": f"{role}: {path}",
                    "requests": args.requests,
                    "p50_ms": round(statistics.median(samples), 1),
                    "p95_ms": round(percentile(samples, 0.95), 1),
                    "p99_ms": round(percentile(samples, 0.99), 1),
                    "throughput_rps": round(args.requests / (sum(samples) / 1000), 1),
                    "status": 200,
                }
                rows.append(row)
                print(f"{row['endpoint']}: p50 {row['p50_ms']} p95 {row['p95_ms']} ms", flush=True)
    write(args.name, rows)
    slow = [r for r in rows if r["p95_ms"] > TARGET_MS or r["status"] != 200]
    print(f"{len(rows) - len(slow)}/{len(rows)} pages answered with p95 under {TARGET_MS:.0f} ms")
    for row in slow:
        print(f"  OVER: {row['endpoint']} p95 {row['p95_ms']} ms status {row['status']}")
    sys.exit(1 if slow else 0)


if __name__ == "__main__":
    main()
