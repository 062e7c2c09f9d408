"""The lab scenarios of bench/scale.py (issue 16), drawn from the generated lab orders with a fixed seed.

- lab_order_list: `GET /api/v1/lab/orders` with the filters an integrator uses: a patient's orders; one
  branch's final orders of a month; one branch's orders of a test in a week; one branch's stat orders of a
  month; the orders still in the lab's work list (`status=collected`).
- lab_order_detail: `GET /api/v1/lab/orders/{id}` of final orders holding 20 results.
- lab_results: `POST /api/v1/lab/orders/{id}/results` with 10 results (the 8 of a CBC and 2 of a lipid panel)
  on orders the bench places and collects through the API first, another order each time.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import requests
from scale_workload import Call, Scenario, _get, _json_call

RESULT_VALUES: dict[str, dict[str, float]] = {  # a value inside each analyte's adult range (lab.devdata.scale)
    "CBC": {"HGB": 14.1, "WBC": 6.8, "PLT": 250, "HCT": 42.5, "RBC": 4.9, "MCV": 88.2, "MCH": 29.4, "MCHC": 33.6},
    "LIPID": {"CHOL": 182, "TRIG": 131},
}


def lab_scenarios(
    conn: psycopg.Connection[Any],
    *,
    base: str,
    bearer: tuple[tuple[str, str], ...],
    seed: int,
    pool: int,
    write_pool: int,
    today: date,
) -> list[Scenario]:
    if not conn.execute("SELECT EXISTS (SELECT 1 FROM lab_laborder)").fetchone()[0]:  # type: ignore[index]
        return []
    rng = random.Random(seed + 16)
    branches = [row[0] for row in conn.execute("SELECT id FROM clinic_branch ORDER BY code").fetchall()]
    patients = [
        row[0]
        for row in conn.execute(
            "SELECT patient_id FROM lab_laborder TABLESAMPLE SYSTEM (1) REPEATABLE (%s) LIMIT %s", [seed, pool]
        ).fetchall()
    ]
    month_to = today - timedelta(days=1)
    month_from = month_to - timedelta(days=29)
    shapes: list[dict[str, Any]] = []
    for n in range(pool):
        branch = branches[n % len(branches)]
        shape = n % 5
        if shape == 0:
            shapes.append({"patient_id": patients[n % len(patients)]})
        elif shape == 1:
            shapes.append({"branch_id": branch, "status": "final", "date_from": month_from, "date_to": month_to})
        elif shape == 2:
            week_to = month_to - timedelta(days=rng.randrange(300))
            shapes.append(
                {"branch_id": branch, "test": "CBC", "date_from": week_to - timedelta(days=6), "date_to": week_to}
            )
        elif shape == 3:
            shapes.append({"branch_id": branch, "priority": "stat", "date_from": month_from, "date_to": month_to})
        else:
            shapes.append({"status": "collected", "branch_id": branch})
    scenarios = [
        Scenario(
            "lab_order_list",
            "GET /api/v1/lab/orders (patient; branch+final+month; branch+test+week; branch+stat+month; work list)",
            [Call("GET", _get("/api/v1/lab/orders", f), "", bearer) for f in shapes],
        )
    ]
    twenty = conn.execute(
        "SELECT o.id FROM lab_laborder o TABLESAMPLE SYSTEM (2) REPEATABLE (%s) WHERE o.status = 'final' AND "
        "(SELECT count(*) FROM lab_labresult r JOIN lab_laborderitem i ON i.id = r.item_id "
        " WHERE i.order_id = o.id AND r.current) = 20 LIMIT %s",
        [seed, pool],
    ).fetchall()
    scenarios.append(
        Scenario(
            "lab_order_detail",
            f"GET /api/v1/lab/orders/{{id}} (final orders with 20 results; {len(twenty)} orders)",
            [Call("GET", f"/api/v1/lab/orders/{oid}", "", bearer) for (oid,) in twenty],
            single_object=True,
        )
    )
    orders = _collected_orders(conn, base=base, bearer=bearer, rng=rng, count=max(40, write_pool // 3))
    body = {
        "results": [
            {"test": test, "analyte": analyte, "value": value}
            for test, values in RESULT_VALUES.items()
            for analyte, value in values.items()
        ],
        # After the orders were placed (the service refuses a result from before its order) and not ahead.
        "performed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "performer": "Bench analyser",
        "status": "preliminary",
    }
    posts = [_json_call("POST", f"/api/v1/lab/orders/{oid}/results", body, bearer) for oid in orders]
    scenarios.append(
        Scenario(
            "lab_results",
            "POST /api/v1/lab/orders/{id}/results (10 results: CBC and 2 lipids, another order each time)",
            posts[: len(posts) // 4],
            calls_c16=posts[len(posts) // 4 :],
            writes=True,
            expected_status=201,
            single_object=True,
        )
    )
    return scenarios


def _collected_orders(
    conn: psycopg.Connection[Any], *, base: str, bearer: tuple[tuple[str, str], ...], rng: random.Random, count: int
) -> list[str]:
    """Place and collect `count` CBC + lipid orders through the API, for doctors at their branches and patients
    drawn from the data (what a day's phlebotomy round leaves for the analyser)."""
    staff = conn.execute("SELECT doctor_id, branch_id FROM clinic_doctor_branches ORDER BY 1, 2").fetchall()
    people = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM patients_patient TABLESAMPLE SYSTEM (1) REPEATABLE (%s) WHERE is_active LIMIT %s",
            [rng.randrange(10**6), count],
        ).fetchall()
    ]
    session = requests.Session()
    headers = {**dict(bearer), "Content-Type": "application/json"}
    orders = []
    for patient in people[:count]:
        doctor, branch = rng.choice(staff)
        order = {"patient_id": str(patient), "doctor_id": str(doctor), "branch_id": str(branch),
                 "tests": ["CBC", "LIPID"], "priority": "routine"}  # fmt: skip
        response = session.post(f"{base}/api/v1/lab/orders", data=json.dumps(order), headers=headers)
        response.raise_for_status()
        order_id = response.json()["order_id"]
        session.post(f"{base}/api/v1/lab/orders/{order_id}/collect", headers=headers).raise_for_status()
        orders.append(order_id)
    return orders
