"""Search quality: a generated query set with known answers, and the recall of the right patient in the
top 10 of `GET /api/v1/patients?search=`.

Each query is made from one sampled patient's name: a typo in the first or the last name (a wrong,
missing, doubled or swapped letter), the two names swapped, a typo with the names swapped, or the first
four letters of each name. Names repeat (a network has hundreds of "Priya Sharma"s), and a name-only
query cannot tell namesakes apart, so two recalls are reported:

- name recall@10: the top 10 holds the patient or a namesake (same first and last name);
- patient recall@10: the top 10 holds that very patient, over patients whose name at most 10 patients
  bear (for a commoner name the right answer fills more than a page).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import psycopg
import requests
from scale_workload import typo

KINDS = ("typo_first", "typo_last", "swapped", "typo_swapped", "partial")


def query_text(kind: str, first: str, last: str, rng: random.Random) -> str:
    if kind == "typo_first":
        return f"{typo(first, rng)} {last}"
    if kind == "typo_last":
        return f"{first} {typo(last, rng)}"
    if kind == "swapped":
        return f"{last} {first}"
    if kind == "typo_swapped":
        return f"{last} {typo(first, rng)}"
    return f"{first[:4]} {last[:4]}"


def query_set(conn: psycopg.Connection[Any], *, seed: int, per_kind: int) -> list[dict[str, Any]]:
    rng = random.Random(seed * 7919)
    rows = conn.execute(
        "SELECT p.id, p.first_name, p.last_name, "
        "(SELECT count(*) FROM patients_patient q WHERE q.search_name = p.search_name) AS namesakes "
        "FROM patients_patient p TABLESAMPLE BERNOULLI (1) REPEATABLE (%s) "
        "WHERE length(p.first_name) >= 4 AND length(p.last_name) >= 4 ORDER BY p.id LIMIT %s",
        [seed + 1, per_kind * len(KINDS)],
    ).fetchall()
    rng.shuffle(rows)
    queries = []
    for n, (pid, first, last, namesakes) in enumerate(rows):
        kind = KINDS[n % len(KINDS)]
        text = query_text(kind, first, last, rng)
        queries.append(
            {"kind": kind, "query": text, "id": str(pid), "name": f"{first} {last}".lower(), "namesakes": namesakes}
        )
    return queries


def measure(base: str, bearer_token: str, queries: list[dict[str, Any]]) -> dict[str, Any]:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {bearer_token}"}
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # name hits, all, patient hits, eligible
    misses: list[dict[str, Any]] = []
    for q in queries:
        response = session.get(
            f"{base}/api/v1/patients", params={"search": q["query"], "per_page": 10}, headers=headers
        )
        response.raise_for_status()
        top = response.json()
        name_hit = any(p["id"] == q["id"] or p["name"].lower() == q["name"] for p in top)
        patient_hit = any(p["id"] == q["id"] for p in top)
        for kind in (q["kind"], "all", "typo" if q["kind"].startswith("typo") else None):
            if kind is None:
                continue
            counts = found[kind]
            counts[0] += name_hit
            counts[1] += 1
            if q["namesakes"] <= 10:
                counts[2] += patient_hit
                counts[3] += 1
        if not name_hit and len(misses) < 15:
            misses.append({"query": q["query"], "wanted": q["name"], "got": [p["name"] for p in top[:3]]})
    return {
        "kinds": {
            kind: {
                "queries": counts[1],
                "name_recall_at_10": round(counts[0] / counts[1], 4) if counts[1] else None,
                "patient_queries": counts[3],
                "patient_recall_at_10": round(counts[2] / counts[3], 4) if counts[3] else None,
            }
            for kind, counts in found.items()
        },
        "misses": misses,
    }
