"""The FHIR scenarios of bench/scale.py (issue 18), drawn from the generated patients with a fixed seed.

- fhir_patient_identifier: `GET /fhir/R4/Patient?identifier=<our system>|PAT-...` (and without a system).
- fhir_patient_name: `GET /fhir/R4/Patient?name=<a surname or a given name>` (FHIR's starts-with match).
- fhir_observation_patient: `GET /fhir/R4/Observation?patient=Patient/<id>` for patients with lab results.
- fhir_everything_500: `GET /fhir/R4/Patient/<id>/$everything` for the patients with 500+ visits.

Bulk export throughput and memory are measured by tests/integrations/fhir (a Celery task, not a request).
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
from scale_workload import Call, Scenario, _get


def fhir_scenarios(
    conn: psycopg.Connection[Any], *, bearer: tuple[tuple[str, str], ...], seed: int, pool: int, system: str
) -> list[Scenario]:
    rng = random.Random(seed + 18)
    headers = (*bearer, ("Accept", "application/fhir+json"))
    sample = conn.execute(
        "SELECT id, patient_id, search_name FROM patients_patient TABLESAMPLE SYSTEM (1) REPEATABLE (%s) "
        "WHERE is_active LIMIT %s",
        [seed, pool],
    ).fetchall()
    identifiers = [
        _get("/fhir/R4/Patient", {"identifier": f"{system}|{pid}" if n % 2 else pid})
        for n, (_, pid, _) in enumerate(sample)
    ]
    names = [
        _get("/fhir/R4/Patient", {"name": rng.choice(name.split())}) for _, _, name in sample if name and name.strip()
    ]
    observed = conn.execute(
        "SELECT patient_id FROM lab_laborder TABLESAMPLE SYSTEM (1) REPEATABLE (%s) WHERE status = 'final' LIMIT %s",
        [seed, pool],
    ).fetchall()
    heavy = conn.execute(
        "SELECT patient_id FROM patients_visit GROUP BY patient_id HAVING count(*) >= 500 ORDER BY patient_id LIMIT %s",
        [max(10, pool // 10)],
    ).fetchall()
    return [
        Scenario(
            "fhir_patient_identifier",
            "GET /fhir/R4/Patient?identifier= (our patient_id, with and without its system)",
            [Call("GET", path, "", headers) for path in identifiers],
            single_object=True,
        ),
        Scenario(
            "fhir_patient_name",
            "GET /fhir/R4/Patient?name= (a surname or a given name, starts-with)",
            [Call("GET", path, "", headers) for path in names],
        ),
        Scenario(
            "fhir_observation_patient",
            "GET /fhir/R4/Observation?patient= (a patient with final lab results)",
            [Call("GET", _get("/fhir/R4/Observation", {"patient": f"Patient/{p}"}), "", headers) for (p,) in observed],
        ),
        Scenario(
            "fhir_everything_500",
            f"GET /fhir/R4/Patient/{{id}}/$everything (patients with 500+ visits; {len(heavy)} patients)",
            [Call("GET", f"/fhir/R4/Patient/{p}/$everything", "", headers) for (p,) in heavy],
            single_object=True,
        ),
    ]
