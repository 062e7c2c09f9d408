"""The requests bench/scale.py sends, drawn from the generated data with a fixed seed.

Every scenario is a list of `Call`s; wrk cycles through them (bench/requests.lua). Write scenarios get two
disjoint pools (concurrency 1 and 16) of calls that can each succeed once: a free slot cell per booking,
another invoice per payment.
"""

from __future__ import annotations

import base64
import json
import random
import urllib.parse
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import psycopg
import requests


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    def line(self) -> str:
        return "\t".join([self.method, self.path, self.body, *(f"{k}: {v}" for k, v in self.headers)])


@dataclass
class Scenario:
    name: str
    endpoint: str
    calls: list[Call]
    # Writes: a separate pool for the concurrency-16 run, since each call succeeds once.
    calls_c16: list[Call] | None = None
    writes: bool = False
    single_object: bool = False
    expected_status: int = 200
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


BOOKING_DAYS_AHEAD = 120  # beyond the generated appointments, so the booked days hold only the benchmark's


def _get(path: str, params: dict[str, Any] | None = None) -> str:
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def _json_call(method: str, path: str, body: dict[str, Any], bearer: tuple[tuple[str, str], ...]) -> Call:
    return Call(method, path, json.dumps(body, default=str), (*bearer, ("Content-Type", "application/json")))


def typo(word: str, rng: random.Random) -> str:
    """One edit a receptionist makes: a wrong, missing, doubled or swapped letter (never the first)."""
    i = rng.randrange(1, len(word))
    kind = rng.choice(["substitute", "delete", "insert", "transpose"])
    if kind == "substitute":
        return word[:i] + rng.choice([c for c in "aeiourstnhkml" if c != word[i].lower()]) + word[i + 1 :]
    if kind == "delete" and len(word) > 3:
        return word[:i] + word[i + 1 :]
    if kind == "transpose" and i < len(word) - 1 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word[:i] + word[i] + word[i:]  # a doubled letter


def build(
    conn: psycopg.Connection[Any],
    *,
    base: str,
    bearer_token: str,
    client: dict[str, Any],
    seed: int,
    run_id: str,
    pool: int,
    write_pool: int,
) -> list[Scenario]:
    rng = random.Random(seed)
    bearer = (("Authorization", f"Bearer {bearer_token}"),)
    total = conn.execute("SELECT count(*) FROM patients_patient").fetchone()[0]  # type: ignore[index]
    wanted = pool + write_pool * 2
    percent = min(100.0, 300.0 * wanted / max(total, 1))
    sample = conn.execute(
        "SELECT id, first_name, last_name, phone FROM patients_patient TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) "
        "ORDER BY id LIMIT %s",
        [percent, seed, wanted],
    ).fetchall()
    rng.shuffle(sample)
    patients, booking_patients = sample[:pool], [row[0] for row in sample[pool:]]
    scenarios: list[Scenario] = []

    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    scenarios.append(
        Scenario(
            "token",
            "POST /api/v1/auth/token",
            [
                Call(
                    "POST",
                    "/api/v1/auth/token",
                    "grant_type=client_credentials",
                    (("Authorization", f"Basic {basic}"), ("Content-Type", "application/x-www-form-urlencoded")),
                )
            ],
            writes=True,
            single_object=True,
        )
    )

    # The floor every endpoint stands on: gunicorn, Django, the middleware, token authentication, scope and
    # rate-limit checks, one small query and the audit row. Not a target; it explains the ratios.
    scenarios.append(
        Scenario(
            "floor",
            "GET /api/v1/branches (framework floor: auth, 1 query, audit)",
            [Call("GET", "/api/v1/branches", "", bearer)],
        )
    )

    def search(term: str) -> Call:
        return Call("GET", _get("/api/v1/patients", {"search": term}), "", bearer)

    scenarios.append(
        Scenario(
            "search_typo",
            "GET /api/v1/patients?search= (typo in first or last name)",
            [
                search(f"{typo(f, rng)} {last}" if rng.random() < 0.5 else f"{f} {typo(last, rng)}")
                for _, f, last, _ in patients
            ],
        )
    )
    surnames = [
        row[0]
        for row in conn.execute(
            "SELECT last_name FROM patients_patient GROUP BY last_name ORDER BY count(*) DESC LIMIT 20"
        ).fetchall()
    ]
    scenarios.append(
        Scenario(
            "search_surname",
            "GET /api/v1/patients?search= (the 20 commonest surnames)",
            [search(s) for s in surnames],
        )
    )
    scenarios.append(
        Scenario(
            "search_phone_tail",
            "GET /api/v1/patients?search= (phone tail, 4-7 digits)",
            [search(phone[-(4 + n % 4) :]) for n, (_, _, _, phone) in enumerate(patients)],
        )
    )
    deep_page = max(1, min(5000, total // 20 // 2))
    scenarios.append(
        Scenario("list_page_1", "GET /api/v1/patients (page 1)", [Call("GET", "/api/v1/patients", "", bearer)])
    )
    scenarios.append(
        Scenario(
            "list_deep_page",
            f"GET /api/v1/patients?page={deep_page} (rows {(deep_page - 1) * 20 + 1}-{deep_page * 20})",
            [Call("GET", _get("/api/v1/patients", {"page": deep_page}), "", bearer)],
        )
    )
    scenarios.append(
        Scenario(
            "profile",
            "GET /api/v1/patients/{id} (ordinary patient)",
            [Call("GET", f"/api/v1/patients/{pid}", "", bearer) for pid, *_ in patients],
            single_object=True,
        )
    )
    heavy = conn.execute(
        "SELECT patient_id FROM patients_visit GROUP BY patient_id HAVING count(*) >= 500 ORDER BY patient_id LIMIT %s",
        [pool],
    ).fetchall()
    scenarios.append(
        Scenario(
            "profile_500",
            f"GET /api/v1/patients/{{id}} (500+ visits, {len(heavy)} patients)",
            [Call("GET", f"/api/v1/patients/{pid}", "", bearer) for (pid,) in heavy],
            single_object=True,
        )
    )

    today = conn.execute("SELECT (now() AT TIME ZONE 'Asia/Kolkata')::date").fetchone()[0]  # type: ignore[index]
    sessions = conn.execute(
        "SELECT DISTINCT s.doctor_id, s.branch_id, s.weekday FROM appointments_weeklysession s "
        "JOIN clinic_doctor d ON d.id = s.doctor_id WHERE d.is_active ORDER BY 1, 2, 3"
    ).fetchall()
    by_weekday: dict[int, list[tuple[Any, Any]]] = {}
    for doctor, branch, weekday in sessions:
        by_weekday.setdefault(weekday, []).append((doctor, branch))
    # Slots a week or two ahead, where the generated appointments leave cells both free and taken.
    slot_calls = []
    for offset in range(7, 21):
        day = today + timedelta(days=offset)
        for doctor, branch in by_weekday.get(day.weekday(), [])[:30]:
            params = {"doctor_id": doctor, "date": day.isoformat(), "branch_id": branch}
            slot_calls.append(Call("GET", _get("/api/v1/appointments/slots", params), "", bearer))
    rng.shuffle(slot_calls)
    scenarios.append(Scenario("slots", "GET /api/v1/appointments/slots", slot_calls[:pool], single_object=False))
    first_booking_day = today + timedelta(days=BOOKING_DAYS_AHEAD)
    # Patients an earlier run booked on those days would be refused (one appointment at a time each).
    booked = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT patient_id FROM appointments_appointment WHERE local_date >= %s", [first_booking_day]
        ).fetchall()
    }
    booking_patients = [p for p in booking_patients if p not in booked]
    if len(booking_patients) < write_pool * 2:
        # The sample is the same every run (REPEATABLE): on a database earlier runs booked, top it up with
        # patients who have nothing booked on those days yet.
        booking_patients += [
            row[0]
            for row in conn.execute(
                "SELECT p.id FROM patients_patient p TABLESAMPLE BERNOULLI (%s) WHERE NOT EXISTS "
                "(SELECT 1 FROM appointments_appointment a WHERE a.patient_id = p.id AND a.local_date >= %s) "
                "LIMIT %s",
                [percent, first_booking_day, write_pool * 2 - len(booking_patients)],
            ).fetchall()
        ]
    bookings = _booking_calls(base, bearer, by_weekday, first_booking_day, write_pool * 2, booking_patients, rng)
    scenarios.append(
        Scenario(
            "booking",
            "POST /api/v1/appointments (distinct free cells across doctors)",
            bookings[: len(bookings) // 4],
            calls_c16=bookings[len(bookings) // 4 :],
            writes=True,
            expected_status=201,
            single_object=True,
            extra={"first_day": first_booking_day},
        )
    )

    branches = [row[0] for row in conn.execute("SELECT id FROM clinic_branch ORDER BY code").fetchall()]
    month_start = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    month_end = today.replace(day=1) - timedelta(days=1)
    invoice_filters: list[dict[str, Any]] = []
    for n, (pid, *_) in enumerate(patients[:pool]):
        branch = branches[n % len(branches)]
        shape = n % 3
        if shape == 0:
            invoice_filters.append({"patient_id": pid})
        elif shape == 1:
            invoice_filters.append(
                {"branch_id": branch, "status": "paid", "date_from": month_start, "date_to": month_end}
            )
        else:
            invoice_filters.append(
                {"branch_id": branch, "status": "partially_paid", "date_from": month_start - timedelta(days=90)}
            )
    scenarios.append(
        Scenario(
            "invoice_list",
            "GET /api/v1/billing/invoices (patient; branch+status+month; branch+status+from)",
            [Call("GET", _get("/api/v1/billing/invoices", f), "", bearer) for f in invoice_filters],
        )
    )
    invoice_total = conn.execute("SELECT count(*) FROM billing_invoice").fetchone()[0]  # type: ignore[index]
    invoice_percent = min(100.0, 500.0 * (pool + write_pool * 2) / max(invoice_total, 1))
    invoices = conn.execute(
        "SELECT id FROM billing_invoice TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) WHERE status <> 'draft' LIMIT %s",
        [invoice_percent, seed, pool],
    ).fetchall()
    scenarios.append(
        Scenario(
            "invoice_detail",
            "GET /api/v1/billing/invoices/{id}",
            [Call("GET", f"/api/v1/billing/invoices/{iid}", "", bearer) for (iid,) in invoices],
            single_object=True,
        )
    )
    payable = conn.execute(
        "SELECT id FROM billing_invoice TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) "
        "WHERE status IN ('finalized', 'partially_paid') AND grand_total - credited - paid + refunded >= 1 LIMIT %s",
        [invoice_percent, seed, write_pool * 2],
    ).fetchall()
    payments = [
        _json_call(
            "POST",
            f"/api/v1/billing/invoices/{iid}/payments",
            {"amount": "1.00", "payment_mode": "upi", "reference": f"BENCH-{run_id}-{n}", "payment_date": str(today)},
            bearer,
        )
        for n, (iid,) in enumerate(payable)
    ]
    scenarios.append(
        Scenario(
            "payment",
            "POST /api/v1/billing/invoices/{id}/payments (another invoice each time)",
            payments[: len(payments) // 4],
            calls_c16=payments[len(payments) // 4 :],
            writes=True,
            expected_status=201,
            single_object=True,
        )
    )
    scenarios += _accounting_scenarios(
        conn,
        bearer=bearer,
        seed=seed,
        percent=invoice_percent,
        pool=pool,
        write_pool=write_pool,
        exclude={iid for (iid,) in payable},
    )
    year_start = today - timedelta(days=365)
    scenarios.append(
        Scenario(
            "summary_branch_month",
            "GET /api/v1/billing/summary (one branch, one month)",
            [
                Call(
                    "GET",
                    _get("/api/v1/billing/summary", {"branch_id": b, "date_from": month_start, "date_to": month_end}),
                    "",
                    bearer,
                )
                for b in branches
            ],
        )
    )
    scenarios.append(
        Scenario(
            "summary_all_year",
            "GET /api/v1/billing/summary (all branches, one year)",
            [Call("GET", _get("/api/v1/billing/summary", {"date_from": year_start, "date_to": today}), "", bearer)],
        )
    )
    return scenarios


def _accounting_scenarios(
    conn: psycopg.Connection[Any],
    *,
    bearer: tuple[tuple[str, str], ...],
    seed: int,
    percent: float,
    pool: int,
    write_pool: int,
    exclude: set[Any],
) -> list[Scenario]:
    """Credit notes (docs/api-rules.md §12): 10 rupees of taxable value off the first line worth at least that
    of a billed invoice with no credit note yet, another invoice each time (none the payments use); and the
    GST invoice PDF of billed invoices, a tenth of them credited (the notes and refunds are printed too)."""
    creditable = conn.execute(
        "SELECT DISTINCT ON (i.id) i.id, l.id FROM billing_invoice i TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) "
        "JOIN billing_lineitem l ON l.invoice_id = i.id "
        "WHERE i.status IN ('finalized', 'partially_paid', 'paid') AND i.credited = 0 AND l.taxable_amount >= 10 "
        "ORDER BY i.id, l.position",
        [percent, seed + 1],
    ).fetchall()
    creditable = [row for row in creditable if row[0] not in exclude][: write_pool * 2]
    random.Random(seed).shuffle(creditable)
    notes = [
        _json_call(
            "POST",
            f"/api/v1/billing/invoices/{iid}/credit-notes",
            {"reason": "Bench: goodwill adjustment", "lines": [{"line_id": line_id, "amount": 10}]},
            bearer,
        )
        for iid, line_id in creditable
    ]
    printed = conn.execute(
        "(SELECT id FROM billing_invoice TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) "
        " WHERE status IN ('finalized', 'partially_paid', 'paid') AND credited = 0 LIMIT %s) "
        "UNION ALL (SELECT invoice_id FROM billing_creditnote TABLESAMPLE BERNOULLI (%s) REPEATABLE (%s) LIMIT %s)",
        [percent, seed + 2, pool - pool // 10, min(100.0, percent * 50), seed + 2, pool // 10],
    ).fetchall()
    return [
        Scenario(
            "credit_note",
            "POST /api/v1/billing/invoices/{id}/credit-notes (10.00 off a line, another invoice each time)",
            notes[: len(notes) // 4],
            calls_c16=notes[len(notes) // 4 :],
            writes=True,
            expected_status=201,
            single_object=True,
        ),
        Scenario(
            "invoice_pdf",
            "GET /api/v1/billing/invoices/{id}.pdf (GST tax invoice; a tenth credited)",
            [Call("GET", f"/api/v1/billing/invoices/{iid}.pdf", "", bearer) for (iid,) in printed],
        ),
    ]


def _booking_calls(
    base: str,
    bearer: tuple[tuple[str, str], ...],
    by_weekday: dict[int, list[tuple[Any, Any]]],
    first_day: date,
    wanted: int,
    patient_ids: list[Any],
    rng: random.Random,
) -> list[Call]:
    """Free cells, read from the slots API, on days beyond the generated appointments, spread over every
    doctor; one distinct patient per booking, so no two bookings contend for anything but the database."""
    session = requests.Session()
    headers = dict(bearer)
    cells: list[tuple[Any, Any, str, str]] = []
    offset = 0
    while len(cells) < wanted and offset < 300:
        day = first_day + timedelta(days=offset)
        for doctor, branch in by_weekday.get(day.weekday(), []):
            response = session.get(
                f"{base}/api/v1/appointments/slots",
                params={"doctor_id": doctor, "date": day.isoformat(), "branch_id": branch},
                headers=headers,
            )
            response.raise_for_status()
            cells.extend((doctor, branch, s["start_time"], s["end_time"]) for s in response.json())
        offset += 1
    rng.shuffle(cells)
    patients = list(patient_ids)
    rng.shuffle(patients)
    return [
        _json_call(
            "POST",
            "/api/v1/appointments",
            {"patient_id": patient, "doctor_id": doctor, "branch_id": branch, "slot_start": start, "slot_end": end},
            bearer,
        )
        for (doctor, branch, start, end), patient in zip(cells[:wanted], patients, strict=False)
    ]
