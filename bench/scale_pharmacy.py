"""The pharmacy scenarios of bench/scale.py (issue 17), drawn from the generated stock with a fixed seed.

- pharmacy_stock: `GET /api/v1/pharmacy/stock` for one branch (about 1,600 drugs stocked, 2,000 in the
  catalogue) as a pharmacist or an ERP reads it: the first page; a page further on; the drugs below their
  reorder level; the drugs with a batch expiring within 90 days; one drug.
- pharmacy_dispense: `POST /api/v1/pharmacy/dispenses` of 3 OTC drugs (one unit each, first expiry first out
  across the branch's batches), over the counter, at every branch in turn: concurrency 16 spreads over the
  20 branches as a network's counters do.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

import psycopg
from scale_workload import Call, Scenario, _get, _json_call

STOCK = "/api/v1/pharmacy/stock"
DISPENSES = "/api/v1/pharmacy/dispenses"
ITEMS = 3
MIN_ON_HAND = 50  # a drug is drawn when its branch holds at least this much of it, so no call runs short


def pharmacy_scenarios(
    conn: psycopg.Connection[Any],
    *,
    bearer: tuple[tuple[str, str], ...],
    seed: int,
    pool: int,
    write_pool: int,
    today: date,
) -> list[Scenario]:
    if not conn.execute("SELECT EXISTS (SELECT 1 FROM pharmacy_dispense)").fetchone()[0]:  # type: ignore[index]
        return []
    rng = random.Random(seed + 17)
    branches = [row[0] for row in conn.execute("SELECT id FROM clinic_branch ORDER BY code").fetchall()]
    codes = [row[0] for row in conn.execute("SELECT code FROM pharmacy_drug ORDER BY code").fetchall()]
    shapes: list[dict[str, Any]] = []
    for n in range(pool):
        branch = branches[n % len(branches)]
        shape = n % 5
        if shape == 0:
            shapes.append({"branch_id": branch})
        elif shape == 1:
            shapes.append({"branch_id": branch, "page": rng.randint(2, 80)})
        elif shape == 2:
            shapes.append({"branch_id": branch, "below_reorder": "true"})
        elif shape == 3:
            shapes.append({"branch_id": branch, "expiring_before": today + timedelta(days=90)})
        else:
            shapes.append({"branch_id": branch, "drug": rng.choice(codes)})
    scenarios = [
        Scenario(
            "pharmacy_stock",
            "GET /api/v1/pharmacy/stock (one branch: page 1; a later page; below reorder; expiring in 90 days; "
            "one drug)",
            [Call("GET", _get(STOCK, f), "", bearer) for f in shapes],
        )
    ]
    stocked = conn.execute(
        """SELECT b.branch_id, array_agg(g.code ORDER BY g.code) FROM (
               SELECT branch_id, drug_id FROM pharmacy_batch WHERE quantity_on_hand > 0 AND expiry_date > %s
                GROUP BY branch_id, drug_id HAVING sum(quantity_on_hand) >= %s) b
             JOIN pharmacy_drug g ON g.id = b.drug_id AND g.schedule = 'OTC'
            GROUP BY b.branch_id ORDER BY b.branch_id""",
        [today + timedelta(days=1), MIN_ON_HAND],
    ).fetchall()
    posts: list[Call] = []
    for n in range(write_pool):
        branch, drugs = stocked[n % len(stocked)]
        items = [{"drug": code, "quantity": 1} for code in rng.sample(drugs, ITEMS)]
        posts.append(_json_call("POST", DISPENSES, {"branch_id": branch, "items": items}, bearer))
    scenarios.append(
        Scenario(
            "pharmacy_dispense",
            f"POST /api/v1/pharmacy/dispenses ({ITEMS} OTC drugs, one unit each, first expiry first out; every "
            "branch in turn)",
            posts[: len(posts) // 4],
            calls_c16=posts[len(posts) // 4 :],
            writes=True,
            expected_status=201,
            single_object=True,
        )
    )
    return scenarios
