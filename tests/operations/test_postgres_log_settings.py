"""PostgreSQL's own log holds no patient data (docs/operations.md section 9): every bundled
PostgreSQL (compose's, the quick start's embedded one, the fault suite's) runs with log_min_error_statement =
panic and log_error_verbosity = terse, and on a real cluster so configured a unique violation leaves neither
the statement (with client-side binding it holds the values) nor the DETAIL line (`Key (phone)=(...)`) in
the log. A session that sets PostgreSQL's defaults back shows both: the log read is the right one."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
import yaml

from clinic.launch import POSTGRES_LOG_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from fault_services import PG_BIN, Postgres, free_port  # noqa: E402

EXPECTED = {"log_min_error_statement": "panic", "log_error_verbosity": "terse"}


def test_every_bundled_postgresql_configuration_carries_the_settings() -> None:
    assert POSTGRES_LOG_SETTINGS == EXPECTED  # the embedded PostgreSQL of the quick start (clinic/launch.py)
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    command = compose["services"]["postgres"]["command"]
    assert {f"{k}={v}" for k, v in EXPECTED.items()} <= {command[i + 1] for i, arg in enumerate(command) if arg == "-c"}
    with tempfile.TemporaryDirectory() as folder:
        options = Postgres(Path(folder), 1).options.split()
    assert {f"{k}={v}" for k, v in EXPECTED.items()} <= {options[i + 1] for i, arg in enumerate(options) if arg == "-c"}


@pytest.mark.skipif(not (PG_BIN / "initdb").exists(), reason=f"no PostgreSQL server binaries in {PG_BIN}")
def test_a_unique_violation_leaves_no_value_in_the_log_of_a_cluster_so_configured() -> None:
    with tempfile.TemporaryDirectory() as folder:
        server = Postgres(Path(folder), free_port(55400, 55439))
        server.init()
        try:
            with psycopg.connect(server.url, autocommit=True) as connection:
                for name, value in EXPECTED.items():
                    assert connection.execute(f"SHOW {name}").fetchone() == (value,)
                connection.execute("CREATE TABLE person (phone text CONSTRAINT person_phone_unique UNIQUE)")
                # Client-side binding, as Django does: the values are in the statement text.
                cursor = psycopg.ClientCursor(connection)
                cursor.execute("INSERT INTO person VALUES (%s)", ["+91 98450 PHI-0001"])
                with pytest.raises(psycopg.errors.UniqueViolation):
                    cursor.execute("INSERT INTO person VALUES (%s)", ["+91 98450 PHI-0001"])
                # The control: statements and DETAIL lines logged again, for this session only.
                connection.execute("SET log_min_error_statement = error")
                connection.execute("SET log_error_verbosity = verbose")
                cursor.execute("INSERT INTO person VALUES (%s)", ["CONTROL-0002"])
                with pytest.raises(psycopg.errors.UniqueViolation):
                    cursor.execute("INSERT INTO person VALUES (%s)", ["CONTROL-0002"])
            log = server.log.read_text()
        finally:
            server.stop()
    assert 'duplicate key value violates unique constraint "person_phone_unique"' in log
    assert "Key (phone)=(CONTROL-0002) already exists." in log  # DETAIL, logged in the control session
    assert "STATEMENT:  INSERT INTO person VALUES ('CONTROL-0002')" in log
    assert "PHI-0001" not in log
