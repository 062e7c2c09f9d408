"""Configuration from the environment: typed helpers that fail loudly, and production's refusal to start
without real secrets."""

from __future__ import annotations

import base64
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from clinic.env import env_bool, env_int, env_list, env_networks, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR = "CLINIC_TEST_SETTING"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        *[("true", True), ("TRUE", True), (" yes ", True), ("1", True), ("on", True)],
        *[("false", False), ("0", False), ("No", False), ("off", False), ("", False)],
    ],
)
def test_env_bool_reads_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv(VAR, raw)

    assert env_bool(VAR, default=not expected) is expected


def test_env_bool_falls_back_to_the_default_when_unset(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)

    assert env_bool(VAR, default=True) is True
    assert env_bool(VAR, default=False) is False


@pytest.mark.parametrize("raw", ["maybe", "ture", "2", "enabled"])
def test_env_bool_refuses_anything_else_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(VAR, raw)

    with pytest.raises(ImproperlyConfigured, match=rf"^{VAR} must be a boolean .*{raw!r}"):
        env_bool(VAR, default=False)


def test_env_int_reads_integers_and_defaults_when_unset_or_blank(monkeypatch):
    monkeypatch.setenv(VAR, " 42 ")
    assert env_int(VAR, 7) == 42
    monkeypatch.setenv(VAR, "")
    assert env_int(VAR, 7) == 7
    monkeypatch.delenv(VAR)
    assert env_int(VAR, 7) == 7


@pytest.mark.parametrize("raw", ["12a", "1.5", "ten", "0x10"])
def test_env_int_refuses_a_non_integer_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(VAR, raw)

    with pytest.raises(ImproperlyConfigured, match=rf"^{VAR} must be an integer"):
        env_int(VAR, 1)


@pytest.mark.parametrize("raw", ["4", "101"])
def test_env_int_refuses_a_value_out_of_range_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(VAR, raw)

    with pytest.raises(ImproperlyConfigured, match=rf"^{VAR} must be between 5 and 100, got {raw}"):
        env_int(VAR, 10, minimum=5, maximum=100)


def test_env_int_accepts_the_bounds(monkeypatch):
    monkeypatch.setenv(VAR, "5")
    assert env_int(VAR, 10, minimum=5, maximum=100) == 5
    monkeypatch.setenv(VAR, "100")
    assert env_int(VAR, 10, minimum=5, maximum=100) == 100


def test_env_str_requires_a_variable_without_default(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)

    with pytest.raises(ImproperlyConfigured, match=rf"{VAR} is required"):
        env_str(VAR)
    assert env_str(VAR, default="fallback") == "fallback"


def test_env_list_splits_on_commas_and_drops_blanks(monkeypatch):
    monkeypatch.setenv(VAR, " a.example, b.example ,,")

    assert env_list(VAR) == ["a.example", "b.example"]


def test_env_networks_reads_addresses_and_cidrs(monkeypatch):
    monkeypatch.setenv(VAR, "10.0.0.0/8, 192.168.1.7, 2001:db8::/32")

    assert env_networks(VAR) == [
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("192.168.1.7/32"),
        ipaddress.ip_network("2001:db8::/32"),
    ]


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "not-an-ip", "300.1.1.1", "10.0.0.1/abc"])
def test_env_networks_refuses_a_bad_entry_naming_the_variable(monkeypatch, bad):
    monkeypatch.setenv(VAR, f"10.0.0.0/8,{bad}")

    with pytest.raises(ImproperlyConfigured, match=rf"^{VAR} holds {bad!r}"):
        env_networks(VAR)


# --- Starting the settings module in a fresh process ----------------------------------------------

SETUP = "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='clinic.settings'; django.setup()"
SECRET = "s" * 50
FERNET_KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()


def start(**env: str) -> subprocess.CompletedProcess[str]:
    """django.setup() in a child with only these variables (no .env file, no inherited settings)."""
    base = {
        "PATH": os.environ["PATH"],
        "ENV_FILE": "/nonexistent",
        "DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/clinic",
    }
    return subprocess.run(  # noqa: S603 - fixed arguments
        [sys.executable, "-c", SETUP],
        env={**base, **env},
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_production_refuses_to_start_without_a_secret_key():
    result = start(DEBUG="false")

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY" in result.stderr


@pytest.mark.parametrize(
    "secret",
    ["django-insecure-development-only-secret-key-do-not-use-in-production", "short-secret"],
    ids=["the-development-default", "too-short"],
)
def test_production_refuses_a_default_or_short_secret_key(secret):
    result = start(DEBUG="false", SECRET_KEY=secret, FIELD_ENCRYPTION_KEY=FERNET_KEY)

    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_production_refuses_to_start_without_a_field_encryption_key():
    result = start(DEBUG="false", SECRET_KEY=SECRET)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "FIELD_ENCRYPTION_KEY" in result.stderr


def test_production_starts_with_both_secrets():
    result = start(DEBUG="false", SECRET_KEY=SECRET, FIELD_ENCRYPTION_KEY=FERNET_KEY)

    assert result.returncode == 0, result.stderr


def test_development_starts_without_secrets():
    result = start(DEBUG="true")

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEBUG", "maybe"),
        ("TRUSTED_PROXIES", "10.0.0.0/99"),
        ("ACCESS_TOKEN_EXPIRE_SECONDS", "soon"),
        ("FHIR_VALIDATE_OUTPUT", "some"),
    ],
)
def test_a_malformed_variable_stops_the_process_naming_it(name, value):
    result = start(**{"DEBUG": "true", name: value})

    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name} " in result.stderr


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/clinic"}, "test_clinic"),
        ({"DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/clinic_pharmacy"}, "test_clinic_pharmacy"),
        ({"DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/clinic_b", "TEST_DATABASE_NAME": "mine"}, "mine"),
    ],
)
def test_the_test_database_is_named_after_the_configured_database_unless_named(env, expected):
    """Two checkouts testing against two databases of one server must never share (and drop) a test database."""
    base = {"PATH": os.environ["PATH"], "ENV_FILE": "/nonexistent", "DEBUG": "true", **env}
    result = subprocess.run(  # noqa: S603 - fixed arguments
        [
            sys.executable,
            "-c",
            SETUP + "; from django.conf import settings; print(settings.DATABASES['default']['TEST']['NAME'])",
        ],
        env=base,
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


# --- Secrets from files (NAME_FILE): Docker and Kubernetes secrets -------------------------------------


def test_env_str_reads_the_file_named_by_name_file_without_its_trailing_newline(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret value\n")
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.setenv(f"{VAR}_FILE", str(secret))

    assert env_str(VAR, default="fallback") == "s3cret value"


def test_env_str_refuses_both_the_variable_and_its_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from the file")
    monkeypatch.setenv(VAR, "from the environment")
    monkeypatch.setenv(f"{VAR}_FILE", str(secret))

    with pytest.raises(ImproperlyConfigured, match=rf"^Set {VAR} or {VAR}_FILE, not both\.$"):
        env_str(VAR)


def test_env_str_names_an_unreadable_file_but_never_its_content(monkeypatch, tmp_path):
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.setenv(f"{VAR}_FILE", str(tmp_path / "missing"))

    with pytest.raises(ImproperlyConfigured, match=rf"^{VAR}_FILE names .*missing', which cannot be read: "):
        env_str(VAR)


def test_production_settings_take_the_secret_key_and_database_url_from_files(tmp_path):
    key, url = tmp_path / "secret_key", tmp_path / "database_url"
    key.write_text("k" * 50 + "\n")
    url.write_text("postgresql://clinic@db.internal:6432/clinic_files\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_URL", "DEBUG")}
    env |= {
        "DEBUG": "false",
        "SECRET_KEY_FILE": str(key),
        "DATABASE_URL_FILE": str(url),
        "FIELD_ENCRYPTION_KEY": base64.urlsafe_b64encode(b"f" * 32).decode(),
        "ENV_FILE": str(tmp_path / "no.env"),
        "DJANGO_SETTINGS_MODULE": "clinic.settings",
    }
    probe = "from django.conf import settings; d = settings.DATABASES['default']; "
    probe += "print(settings.SECRET_KEY == 'k' * 50, d['HOST'], d['PORT'], d['NAME'])"

    result = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", probe], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "db.internal", "6432", "clinic_files"]


def test_transaction_pooling_turns_off_server_side_cursors_and_prepared_statements(tmp_path):
    # PgBouncer in transaction mode: nothing may outlive a transaction on the server connection.
    probe = "from django.conf import settings; d = settings.DATABASES['default']; "
    probe += "print(d.get('DISABLE_SERVER_SIDE_CURSORS', False), d['OPTIONS'].get('prepare_threshold', 'default'))"
    results = []
    for pooling in ("false", "true"):
        env = {**os.environ, "DATABASE_TRANSACTION_POOLING": pooling, "DJANGO_SETTINGS_MODULE": "clinic.settings"}
        result = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
            [sys.executable, "-c", probe],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        results.append(result.stdout.split())

    # Without pooling, psycopg prepares what binds on the server (the query plans) after 5 runs.
    assert results == [["False", "5"], ["True", "None"]]
