"""The optional read replica (docs/operations.md §1, clinic/replica.py). A second database alias `replica` is
added the way DATABASE_REPLICA_URL adds it (its own connection, a separate PostgreSQL session, on the test
database: TEST MIRROR), and every statement each alias runs is recorded, so the tests see which database
answered each read of a real request through the whole stack."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import override_settings

from clinic import replica
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import bearer
from tests.patients.factories import PatientFactory, post_patient

pytestmark = pytest.mark.django_db(transaction=True)  # both sessions see committed rows
REPLICA_URL = "postgresql://postgres@replica.example:5432/clinic"


class Statements:
    def __init__(self) -> None:
        self.by_alias: dict[str, list[str]] = {"default": [], "replica": []}

    def recorder(self, alias: str) -> Any:
        def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            self.by_alias[alias].append(sql)
            return execute(sql, params, many, context)

        return record

    def touching(self, alias: str, table: str) -> list[str]:
        return [sql for sql in self.by_alias[alias] if f'"{table}"' in sql]

    def clear(self) -> None:
        for statements in self.by_alias.values():
            statements.clear()


@pytest.fixture
def statements_without_replica() -> Iterator[Statements]:
    statements = Statements()
    with connections["default"].execute_wrapper(statements.recorder("default")):
        yield statements


@pytest.fixture
def statements() -> Iterator[Statements]:
    """A `replica` alias and the router, as settings.py configures them when DATABASE_REPLICA_URL is set."""
    connections.settings["replica"] = {**connections["default"].settings_dict, "TEST": {"MIRROR": "default"}}
    # Connected here: the alias is added after the test case's setup, whose guard refuses a connection to an
    # alias it did not list the first time one is opened (the router opens it lazily otherwise).
    connections["replica"].connect()
    recorded = Statements()
    try:
        with (
            override_settings(DATABASE_ROUTERS=["clinic.replica.ReplicaRouter"]),
            connections["default"].execute_wrapper(recorded.recorder("default")),
            connections["replica"].execute_wrapper(recorded.recorder("replica")),
        ):
            yield recorded
    finally:
        connections["replica"].close()
        del connections["replica"]
        del connections.settings["replica"]


def test_without_a_replica_every_query_goes_to_the_primary(
    client: Any, token_for: Any, statements_without_replica: Statements
) -> None:
    assert not replica.configured()
    PatientFactory(first_name="Anand", last_name="Rao")
    token = token_for(["patients:read"])

    response = client.get("/api/v1/patients", {"search": "Anand"}, **bearer(token))

    assert response.status_code == 200
    assert [row["name"] for row in response.json()] == ["Anand Rao"]
    assert statements_without_replica.touching("default", "patients_patient")
    assert "replica" not in connections.settings


def test_a_list_and_a_search_read_the_replica_but_authentication_reads_the_primary(
    client: Any, token_for: Any, statements: Statements
) -> None:
    PatientFactory(first_name="Anand", last_name="Rao")
    token = token_for(["patients:read"])
    statements.clear()

    response = client.get("/api/v1/patients", {"search": "Anand"}, **bearer(token))

    assert response.status_code == 200
    assert [row["name"] for row in response.json()] == ["Anand Rao"]
    assert statements.touching("replica", "patients_patient")  # the search
    assert not statements.touching("default", "patients_patient")
    assert not [sql for sql in statements.by_alias["replica"] if '"integrations_' in sql]
    assert statements.touching("default", "integrations_apiclient")  # the token's client: primary
    assert statements.touching("default", "integrations_auditlogentry")  # the audit row: primary


def test_a_detail_and_a_write_never_touch_the_replica(client: Any, token_for: Any, statements: Statements) -> None:
    branch = BranchFactory()
    patient = PatientFactory(registration_branch=branch)
    token = token_for(["patients:read", "patients:write"], branches=[branch])
    statements.clear()

    detail = client.get(f"/api/v1/patients/{patient.patient_id}", **bearer(token))
    created = post_patient(
        client,
        token,
        {
            "first_name": "Meera",
            "last_name": "Nair",
            "date_of_birth": "1984-02-29",
            "gender": "female",
            "phone": "+919811122233",
        },
    )

    assert detail.status_code == 200
    assert created.status_code == 201, created.content
    assert statements.by_alias["replica"] == []


def test_a_request_that_wrote_reads_the_primary_for_the_rest_of_it(statements: Statements) -> None:
    """The request lifecycle of a lag-tolerant route (the same calls Django's handler makes): the first read
    goes to the replica; after a write, a read of the same object goes to the primary, so it never sees
    the copy from before the write."""
    patient = PatientFactory(first_name="Anand")
    replica.begin_request("GET", "/api/v1/patients")
    try:
        statements.clear()
        assert Patient.objects.get(pk=patient.pk).first_name == "Anand"
        assert len(statements.touching("replica", "patients_patient")) == 1

        Patient.objects.filter(pk=patient.pk).update(first_name="Anandh")
        statements.clear()
        assert Patient.objects.get(pk=patient.pk).first_name == "Anandh"
        assert statements.touching("default", "patients_patient")
        assert statements.by_alias["replica"] == []
    finally:
        replica.end_request()


def test_reads_inside_a_transaction_read_the_primary_and_pin_the_request(statements: Statements) -> None:
    patient = PatientFactory()
    replica.begin_request("GET", "/fhir/R4/Patient")
    try:
        statements.clear()
        with transaction.atomic():
            Patient.objects.get(pk=patient.pk)
        Patient.objects.get(pk=patient.pk)  # after the transaction, still the primary
        assert len(statements.touching("default", "patients_patient")) == 2
        assert statements.by_alias["replica"] == []
    finally:
        replica.end_request()


def test_the_replica_alias_is_its_own_session(statements: Statements) -> None:
    replica.begin_request("GET", "/api/v1/patients")
    try:
        with connections["default"].cursor() as primary, connections["replica"].cursor() as copy:
            primary.execute("SELECT pg_backend_pid()")
            copy.execute("SELECT pg_backend_pid()")
            assert primary.fetchone() != copy.fetchone()
    finally:
        replica.end_request()


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/patients", True),
        ("GET", "/api/v1/appointments", True),
        ("GET", "/api/v1/billing/summary", True),
        ("GET", "/fhir/R4/Observation", True),
        ("GET", "/fhir/R4/Slot", False),  # availability must not lag
        ("GET", "/api/v1/appointments/slots", False),
        ("GET", "/api/v1/patients/PAT-000001", False),
        ("POST", "/api/v1/patients", False),
        ("GET", "/api/v1/nowhere", False),
    ],
)
def test_which_requests_may_read_the_replica(statements: Statements, method: str, path: str, expected: bool) -> None:
    replica.begin_request(method, path)
    try:
        assert replica._replica_allowed.get() is expected
    finally:
        replica.end_request()


@pytest.mark.parametrize(
    ("replica_url", "expected"), [("", "[] []"), (REPLICA_URL, "['replica'] ['clinic.replica.ReplicaRouter']")]
)
def test_database_replica_url_adds_the_alias_and_the_router(replica_url: str, expected: str) -> None:
    """What settings.py makes of DATABASE_REPLICA_URL, in a fresh interpreter (settings load once)."""
    env = {**os.environ, "DATABASE_REPLICA_URL": replica_url}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings as s; "
            "print(sorted(set(s.DATABASES) - {'default'}), s.DATABASE_ROUTERS, s.DATABASES.get('replica', {}).get('TEST', {}).get('MIRROR'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    mirror = "default" if replica_url else "None"
    assert result.stdout.strip() == f"{expected} {mirror}"
