"""Management commands: create_api_client, seed_demo and ensure_demo_access."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from clinic.models import Branch, Doctor
from integrations.clients.scopes import SCOPES
from integrations.models import ApiClient
from tests.factories import BranchFactory
from tests.helpers import bearer, exchange, row_counts

pytestmark = pytest.mark.django_db


def run(*args, **options):
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO(), **options)
    return out.getvalue()


# --- create_api_client ------------------------------------------------------------------------------


def test_create_api_client_json_prints_working_credentials_and_stores_the_secret_hashed(client):
    output = run("create_api_client", "--name", "Lab system", "--scopes", "patients:read patients:write", "--json")

    result = json.loads(output)
    api_client = ApiClient.objects.get()
    assert result == {
        "id": api_client.pk,
        "name": "Lab system",
        "client_id": api_client.client_id,
        "client_secret": result["client_secret"],
        "scopes": ["patients:read", "patients:write"],
        "branches": [],
    }
    secret = result["client_secret"]
    assert len(secret) == 48
    assert api_client.allowed_scopes == ["patients:read", "patients:write"]
    assert api_client.client_secret.startswith("client_secret_hmac$")
    assert secret not in api_client.client_secret

    response = exchange(client, result["client_id"], secret)
    assert response.status_code == 200, response.content
    assert sorted(response.json()["scope"].split()) == ["patients:read", "patients:write"]


def test_create_api_client_text_mode_prints_the_secret_exactly_once(client):
    output = run("create_api_client", "--name", "Front desk", "--scopes", "appointments:read appointments:write")

    api_client = ApiClient.objects.get()
    secret = re.search(r"client_secret: (\S+)", output).group(1)
    assert output.count(secret) == 1
    assert f"client_id: {api_client.client_id}" in output
    assert "scopes: appointments:read appointments:write" in output
    assert exchange(client, api_client.client_id, secret).status_code == 200


def test_create_api_client_with_options_sets_every_control(client):
    run(
        "create_api_client",
        "--name",
        "Pharmacy",
        "--scopes",
        "pharmacy:read",
        "--description",
        "Dispensing",
        "--ip",
        "10.0.0.0/8",
        "--rate-limit",
        "30",
        "--token-lifetime",
        "120",
        "--json",
    )
    api_client = ApiClient.objects.get()
    assert api_client.description == "Dispensing"
    assert api_client.ip_allowlist == ["10.0.0.0/8"]
    assert api_client.rate_limit_per_minute == 30
    assert api_client.token_lifetime_seconds == 120


def test_create_api_client_with_an_unknown_scope_raises_and_creates_nothing():
    with pytest.raises(CommandError, match="patients:delete"):
        run("create_api_client", "--name", "X", "--scopes", "patients:read patients:delete")
    assert ApiClient.objects.count() == 0


def test_create_api_client_with_no_scope_raises_and_creates_nothing():
    with pytest.raises(CommandError):
        run("create_api_client", "--name", "X", "--scopes", "  ")
    assert ApiClient.objects.count() == 0


def test_create_api_client_branch_by_code_restricts_the_client(client):
    blr = BranchFactory(code="BLR", name="Bengaluru")
    BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")

    result = json.loads(
        run("create_api_client", "--name", "BLR only", "--scopes", "appointments:read", "--branch", "blr", "--json")
    )

    api_client = ApiClient.objects.get()
    assert result["branches"] == [str(blr.id)]
    assert list(api_client.branches.all()) == [blr]
    token = exchange(client, result["client_id"], result["client_secret"]).json()["access_token"]
    response = client.get("/api/v1/branches", **bearer(token))
    assert response.status_code == 200
    assert [b["code"] for b in response.json()] == ["BLR"]


def test_create_api_client_branch_by_id_and_repeated(client):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    BranchFactory(code="DEL", state="Delhi")
    run(
        "create_api_client",
        "--name",
        "Two",
        "--scopes",
        "appointments:read",
        "--branch",
        str(mum.id),
        "--branch",
        "BLR",
    )
    assert set(ApiClient.objects.get().branches.all()) == {blr, mum}


@pytest.mark.parametrize("ref", ["XYZ", "00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_create_api_client_with_an_unknown_branch_raises_and_creates_nothing(ref):
    BranchFactory(code="BLR")
    with pytest.raises(CommandError, match="No branch"):
        run("create_api_client", "--name", "X", "--scopes", "appointments:read", "--branch", ref)
    assert ApiClient.objects.count() == 0


@pytest.mark.parametrize("network", ["10.0.0.0/33", "not-an-ip"])
def test_create_api_client_with_an_invalid_ip_raises_and_creates_nothing(network):
    with pytest.raises(CommandError, match="ip_allowlist"):
        run("create_api_client", "--name", "X", "--scopes", "appointments:read", "--ip", network)
    assert ApiClient.objects.count() == 0


def test_create_api_client_with_an_out_of_range_token_lifetime_raises_and_creates_nothing():
    with pytest.raises(CommandError, match="token_lifetime_seconds"):
        run("create_api_client", "--name", "X", "--scopes", "appointments:read", "--token-lifetime", "10")
    assert ApiClient.objects.count() == 0


# --- seed_demo --------------------------------------------------------------------------------------


def test_seed_demo_is_idempotent():
    first = json.loads(run("seed_demo", "--json"))
    counts = row_counts()
    second = json.loads(run("seed_demo", "--json"))
    assert row_counts() == counts
    assert second == first
    assert Branch.objects.count() >= 2
    assert Doctor.objects.count() >= 3


def test_seed_demo_manifest_describes_the_demo_organisation():
    manifest = json.loads(run("seed_demo", "--json"))

    branches = manifest["branches"]
    assert len(branches) >= 2
    assert len({b["state"] for b in branches}) >= 2
    assert 120 in [b["cancellation_window_minutes"] for b in branches]
    assert {b["id"] for b in branches} == {str(pk) for pk in Branch.objects.values_list("id", flat=True)}

    doctors = manifest["doctors"]
    assert len(doctors) >= 3
    assert any(len(d["branches"]) >= 2 for d in doctors)
    for doctor in doctors:
        stored = Doctor.objects.get(pk=doctor["id"])
        assert doctor["branches"] == sorted(b.code for b in stored.branches.all())


def test_seed_demo_text_mode_prints_a_summary():
    output = run("seed_demo")
    assert output.startswith("Demo data:")
    assert f"branches: {Branch.objects.count()}" in output
    assert f"doctors: {Doctor.objects.count()}" in output


# --- ensure_demo_access -----------------------------------------------------------------------------


@pytest.fixture
def fast_password_hashing(settings):
    # The admin password's PBKDF2 is not under test; the client-secret hasher stays the real one.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "integrations.clients.hashers.ClientSecretHasher",
    ]


def test_ensure_demo_access_creates_an_admin_and_a_client_with_every_scope_once(client, fast_password_hashing):
    output = run("ensure_demo_access")

    user = get_user_model().objects.get()
    assert user.is_superuser
    assert user.username == "admin"
    password = re.search(r"Admin user created: admin / (\S+)", output).group(1)
    assert user.check_password(password)

    api_client = ApiClient.objects.get()
    assert api_client.allowed_scopes == list(SCOPES)
    secret = re.search(r"client_secret: +(\S+)", output).group(1)
    assert output.count(secret) == 2  # the credentials line and the ready-to-run curl example
    assert api_client.client_secret.startswith("client_secret_hmac$")
    response = exchange(client, api_client.client_id, secret)
    assert response.status_code == 200, response.content
    assert sorted(response.json()["scope"].split()) == sorted(SCOPES)

    counts = row_counts()
    encoded = api_client.client_secret
    again = run("ensure_demo_access")
    assert row_counts() == counts
    assert secret not in again
    assert password not in again
    assert "client_secret" not in again
    assert api_client.client_id in again
    assert ApiClient.objects.get().client_secret == encoded
    assert exchange(client, api_client.client_id, secret).status_code == 200


def test_ensure_demo_access_leaves_an_existing_superuser_alone(django_user_model):
    existing = django_user_model.objects.create_superuser("boss", "boss@example.com", None)
    output = run("ensure_demo_access")
    assert list(django_user_model.objects.all()) == [existing]
    assert "Admin user exists" in output
    assert ApiClient.objects.count() == 1


@pytest.mark.django_db
def test_seed_demo_makes_bengaluru_the_head_office_so_a_spec_only_body_registers_there(client, token_for):
    run("seed_demo")
    token = token_for(["patients:write"])  # a client of every branch
    body = {"first_name": "Asha", "last_name": "Rao", "date_of_birth": "1990-01-01", "gender": "female"}

    response = client.post(
        "/api/v1/patients",
        json.dumps({**body, "phone": "+919876500001"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )

    assert response.status_code == 201, response.content
    assert response.json()["branch_id"] == str(Branch.objects.get(code="BLR").id)
    assert list(Branch.objects.filter(is_head_office=True).values_list("code", flat=True)) == ["BLR"]


def test_ensure_demo_access_creates_one_account_per_role_at_each_demo_branch_once(fast_password_hashing):
    from django.contrib.auth.models import Group

    from clinic.staff import staff_branch_ids

    blr, mum = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    output = run("ensure_demo_access")

    staff = get_user_model().objects.filter(is_superuser=False).order_by("username")
    expected = {
        "accounts.blr": ("accountant", {blr.pk}),
        "accounts.mum": ("accountant", {mum.pk}),
        "lab.blr": ("lab technician", {blr.pk}),
        "lab.mum": ("lab technician", {mum.pk}),
        "manager": ("administrator", None),
        "pharmacy.blr": ("pharmacist", {blr.pk}),
        "pharmacy.mum": ("pharmacist", {mum.pk}),
        "reception.blr": ("receptionist", {blr.pk}),
        "reception.mum": ("receptionist", {mum.pk}),
    }
    found = {}
    for user in staff:
        branches = staff_branch_ids(user)
        found[user.username] = (user.groups.get().name, None if branches is None else set(branches))
        assert user.is_staff
        password = re.search(rf"  {re.escape(user.username)} / (\S+)", output).group(1)
        assert user.check_password(password)
    assert found == expected
    assert Group.objects.get(name="administrator").user_set.filter(username="manager").exists()

    counts = row_counts()
    again = run("ensure_demo_access")
    assert row_counts() == counts
    assert "Demo staff created" not in again
    assert "Demo staff exist (manager, reception.blr" in again


def test_ensure_demo_access_makes_no_staff_before_the_demo_branches_exist(fast_password_hashing):
    output = run("ensure_demo_access")
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["admin"]
    assert "Demo staff" not in output
