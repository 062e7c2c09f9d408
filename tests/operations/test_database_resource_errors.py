"""PostgreSQL out of a resource (docs/operations.md §5): 503 with Retry-After, never a 500.

The mapping is checked against errors PostgreSQL itself raises (a `DO` block raising each SQLSTATE, as the
server's errors reach psycopg), and end to end against a real full disk: a tablespace on a small tmpfs,
filled, holding the table a request writes to. Those need root and a local server (mount, chown) and are
skipped elsewhere; the fault suite (bench/faults.py) fills the whole data directory's disk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from clinic.api.errors import is_database_unavailable
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import assert_problem
from tests.patients.factories import post_patient

NEW_PATIENT: dict[str, Any] = {
    "first_name": "Meera",
    "last_name": "Nair",
    "date_of_birth": "1984-02-29",
    "gender": "female",
    "phone": "+919811122233",
}


def raised_by_postgresql(sqlstate: str) -> DatabaseError:
    """The exception Django raises for an error PostgreSQL reports with this SQLSTATE."""
    # In a savepoint: the test's transaction stays usable after the error.
    with pytest.raises(DatabaseError) as raised, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '{sqlstate}'; END $$")
    return raised.value


@pytest.mark.django_db
@pytest.mark.parametrize(
    "sqlstate",
    [
        "53100",  # disk_full
        "53200",  # out_of_memory
        "53300",  # too_many_connections
        "53400",  # configuration_limit_exceeded
        "08000",  # connection_exception
        "08006",  # connection_failure
        "08P01",  # protocol_violation: how PgBouncer reports its own failures
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now
        "58000",  # system_error
        "58030",  # io_error (could not write file)
    ],
)
def test_resource_and_connection_errors_of_postgresql_are_unavailability(sqlstate: str) -> None:
    exc = raised_by_postgresql(sqlstate)

    assert exc.__cause__.sqlstate == sqlstate  # type: ignore[union-attr]
    assert is_database_unavailable(exc)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "sqlstate",
    [
        "40001",  # serialization_failure: retried where it happens
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available (a lock_timeout)
        "57014",  # query_canceled (statement_timeout)
        "23505",  # unique_violation
        "P0001",  # raise_exception
        "XX000",  # internal_error: a bug, not an outage
    ],
)
def test_errors_of_one_statement_are_not_unavailability(sqlstate: str) -> None:
    assert not is_database_unavailable(raised_by_postgresql(sqlstate))


# --- A real full disk ---------------------------------------------------------------------------------------


def server_owner() -> tuple[int, int] | None:
    """uid and gid of the PostgreSQL server, when it runs on this machine (its data directory is here)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('data_directory')")
        (data_directory,) = cursor.fetchone()
    try:
        stat = os.stat(data_directory)
    except OSError:
        return None
    return stat.st_uid, stat.st_gid


class FullTablespace:
    """A tablespace on a tmpfs of `size`; `fill()` writes until PostgreSQL reports the disk full."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory, self.name = directory, name
        self.moved: list[str] = []

    def move(self, table: str) -> None:
        """Move an empty table here. Emptied to no pages at all first: tests rolled back earlier leave pages
        of dead rows, whose room a later INSERT would use without asking the full disk for a new page."""
        with connection.cursor() as cursor:
            cursor.execute(f'SELECT count(*) FROM "{table}"')  # noqa: S608 - a model's table
            assert cursor.fetchone()[0] == 0, f"{table} must be empty"
            cursor.execute(f'TRUNCATE "{table}" CASCADE')
            cursor.execute(f'ALTER TABLE "{table}" SET TABLESPACE {self.name}')
        self.moved.append(table)

    def fill(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE TABLE full_disk_filler (padding text) TABLESPACE {self.name}")
            cursor.execute("ALTER TABLE full_disk_filler ALTER COLUMN padding SET STORAGE PLAIN")
        for _ in range(10_000):  # 4 MB take some 8 rounds
            try:
                with connection.cursor() as cursor:
                    cursor.execute("INSERT INTO full_disk_filler SELECT repeat('x', 1000) FROM generate_series(1, 500)")
            except DatabaseError as exc:
                assert exc.__cause__.sqlstate == "53100"  # type: ignore[union-attr]  # noqa: PT017
                return
        pytest.fail("the tablespace never filled up")

    def free(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS full_disk_filler")


@pytest.fixture
def full_tablespace() -> Iterator[FullTablespace]:
    owner, mount, umount = server_owner(), shutil.which("mount"), shutil.which("umount")
    if owner is None or os.geteuid() != 0 or mount is None or umount is None:
        pytest.skip("needs root and PostgreSQL on this machine (mount a tmpfs for a tablespace)")
    directory = Path(f"/mnt/clinic-full-disk-{uuid.uuid4().hex[:8]}")
    directory.mkdir()
    mounted = subprocess.run([mount, "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(directory)], check=False)  # noqa: S603
    if mounted.returncode != 0:
        directory.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    os.chown(directory, *owner)
    name = f"full_disk_{uuid.uuid4().hex[:8]}"  # tablespaces belong to the cluster: a name of its own
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLESPACE {name} LOCATION '{directory}'")
    space = FullTablespace(directory, name)
    try:
        yield space
    finally:
        space.free()
        with connection.cursor() as cursor:
            for table in space.moved:
                cursor.execute(f'ALTER TABLE "{table}" SET TABLESPACE pg_default')
            cursor.execute(f"DROP TABLESPACE {name}")
        subprocess.run([umount, str(directory)], check=True)  # noqa: S603
        directory.rmdir()


@pytest.mark.django_db(transaction=True)
def test_a_write_on_a_full_disk_is_503_with_retry_after_and_its_retry_with_the_same_key_is_executed(
    client: Any, token_for: Any, full_tablespace: FullTablespace
) -> None:
    BranchFactory(code="BLR", is_head_office=True)
    token = token_for(["patients:write"])
    full_tablespace.move(Patient._meta.db_table)
    full_tablespace.fill()

    refused = post_patient(client, token, NEW_PATIENT, key="full-disk-1")

    assert_problem(refused, 503, "service_unavailable")
    assert refused["Retry-After"] == "5"
    assert not Patient.objects.exists()
    full_tablespace.free()  # the operator makes room
    retried = post_patient(client, token, NEW_PATIENT, key="full-disk-1")
    assert retried.status_code == 201, retried.content
    assert not retried.has_header("Idempotent-Replayed")
    assert Patient.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_admin_saving_on_a_full_disk_is_503_with_retry_after(
    admin_client: Any, full_tablespace: FullTablespace
) -> None:
    from tests.patients.test_admin import ADD, form

    branch = BranchFactory(code="BLR", is_head_office=True)
    full_tablespace.move(Patient._meta.db_table)
    full_tablespace.fill()

    refused = admin_client.post(ADD, form(branch))

    assert refused.status_code == 503
    assert refused["Content-Type"] == "text/plain; charset=utf-8"
    assert refused["Retry-After"] == "5"
    assert not Patient.objects.exists()
    full_tablespace.free()
    assert admin_client.post(ADD, form(branch)).status_code == 302
    assert Patient.objects.count() == 1


@pytest.mark.django_db
def test_a_database_error_raised_outside_any_view_is_503_too(rf: Any) -> None:
    """Django answers an exception a middleware raised (the session saved on a full disk, say) through
    handler500, while handling it: a database outage is a 503 there too, problem+json under /api/."""
    from clinic.api.errors import handler500

    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'disk' USING ERRCODE = '53100'; END $$")
    except DatabaseError:
        api, page = handler500(rf.get("/api/v1/branches")), handler500(rf.get("/admin/"))
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        bug = handler500(rf.get("/api/v1/branches"))

    assert (api.status_code, api["Content-Type"], api["Retry-After"]) == (503, "application/problem+json", "5")
    assert (page.status_code, page["Content-Type"], page["Retry-After"]) == (503, "text/plain; charset=utf-8", "5")
    assert (bug.status_code, bug.has_header("Retry-After")) == (500, False)
