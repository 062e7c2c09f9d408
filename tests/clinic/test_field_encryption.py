"""FIELD_ENCRYPTION_KEY rotation (clinic.crypto, clinic.field_encryption, manage.py rotate_field_encryption)
and the encryption canary /readyz decrypts: data written under key A stays readable and findable while the
configuration is "B,A", the command rotates it while another connection keeps writing, and afterwards "B"
alone reads everything; a key that cannot read the database keeps the pod unready."""

from __future__ import annotations

import io
import json
import random
import re
import threading
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import Client, override_settings

from clinic import crypto
from clinic.field_encryption import CANARY_ERROR, CANARY_TEXT, ENCRYPTED_TABLES
from clinic.models import EncryptionCanary
from integrations.models import IdempotencyRecord
from integrations.webhooks.models import WebhookSubscription
from integrations.webhooks.services import subscription_create
from patients.models import Patient
from patients.services import patient_update
from tests.factories import BranchFactory
from tests.helpers import bearer
from tests.patients.factories import PatientFactory, aadhaar

pytestmark = pytest.mark.urls("tests.plumbing_urls")

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
KEY_C = Fernet.generate_key().decode()


def national_id(n: int) -> str:
    return aadhaar(f"{23456789000 + n:011d}")


def rotate(*args: str) -> str:
    out = io.StringIO()
    call_command("rotate_field_encryption", *args, stdout=out)
    return out.getvalue()


def stored_values() -> dict[str, list[tuple[Any, ...]]]:
    """Every encrypted and hash column of every table, by primary key."""
    result = {}
    for table in ENCRYPTED_TABLES:
        columns = [*table.columns, *(hash_column for hash_column, _ in table.hashes)]
        result[table.model] = list(table.model_class()._base_manager.order_by("pk").values_list("pk", *columns))
    return result


def readyz(client: Client) -> Any:
    return client.get("/readyz")


def test_every_encrypted_column_is_rotated():
    """A model gaining an `*_encrypted` column must be named in ENCRYPTED_TABLES, or a rotation would leave it
    under the old key and dropping that key would lose it."""
    named = {(table.model, column) for table in ENCRYPTED_TABLES for column in table.columns}
    found = {
        (f"{model._meta.app_label}.{model.__name__}", field.name)
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if field.name.endswith("_encrypted")
    }
    assert found <= named
    assert ("integrations.IdempotencyRecord", "response_body") in named


def test_a_value_no_key_decrypts_raises_decryption_error_naming_no_key():
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        token = crypto.encrypt("234567890124")
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_B), pytest.raises(crypto.DecryptionError) as raised:
        crypto.decrypt(token)
    assert isinstance(raised.value, ImproperlyConfigured)  # what callers caught before the subclass existed
    assert str(raised.value) == "Encrypted value cannot be decrypted with FIELD_ENCRYPTION_KEY."


def test_one_key_hashes_as_before_rotation_existed():
    """A deployment that never rotates keeps its stored hashes: the first key's hash is unchanged."""
    import hashlib
    import hmac

    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        expected = hmac.new(
            hashlib.sha256(b"clinic.lookup-hash:" + KEY_A.encode()).digest(), b"234567890124", hashlib.sha256
        ).hexdigest()
        assert crypto.lookup_hash("234567890124") == expected
        assert crypto.lookup_hashes("234567890124") == (expected,)
    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}"):
        assert crypto.lookup_hashes("234567890124")[1] == expected


@pytest.mark.django_db(transaction=True)
def test_rotation_while_another_connection_writes_leaves_everything_readable_under_the_new_key_alone(
    client, api_client_factory, issue_token, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    branch = BranchFactory()
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        patients = {PatientFactory(registration_branch=branch, national_id=national_id(n)).pk: n for n in range(60)}
        without_id = PatientFactory(registration_branch=branch)
        subscription, secret = subscription_create(
            name="Lab system",
            target_url="http://127.0.0.1:9/hooks",  # never called: no event it subscribes to is published
            event_types=["appointment.booked"],
            extra_headers={"Authorization": "Bearer receiver-token"},
        )
        writer = api_client_factory(scopes=["appointments:write"])
        token = issue_token(writer)
        body = json.dumps({"name": "Cardiology", "description": "Heart", "fee": "1180.50"})
        first = client.post(
            "/api/v1/test/departments",
            body,
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="k-1",
            **bearer(token),
        )
        assert first.status_code == 201
        assert readyz(client).json()["checks"]["encryption"] == "ok"  # the canary, written under A
    a_hashes = dict(Patient.objects.filter(pk__in=patients).values_list("pk", "national_id_hash"))

    # Step 1: B in front, A behind. Everything reads, and every patient is found by national ID.
    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}"):
        assert readyz(client).status_code == 200
        for pk, n in patients.items():
            assert Patient.objects.get(pk=pk).national_id_masked.endswith(national_id(n)[-4:])
            assert list(Patient.objects.with_national_id(national_id(n)).values_list("pk", flat=True)) == [pk]
        assert WebhookSubscription.objects.get().signing_secrets(now=subscription.created_at)[0] == secret
        # Re-sending the number a patient holds is no change, even though B would hash it differently.
        some = next(iter(patients))
        patient_update(patient=Patient.objects.get(pk=some), data={"national_id": national_id(patients[some])})
        assert Patient.objects.get(pk=some).national_id_hash == a_hashes[some]

        # Step 2: rotate while another connection keeps changing national IDs (and taking row locks).
        expected = {pk: national_id(n) for pk, n in patients.items()}
        stop = threading.Event()
        errors: list[BaseException] = []

        writing = threading.Event()
        writes = 0

        def keep_writing() -> None:
            nonlocal writes
            rng = random.Random(7)
            try:
                # The main thread's "B,A" (override_settings is process-wide: a thread must not nest its own).
                while not stop.is_set():
                    pk = rng.choice(list(patients))
                    number = national_id(1000 + writes)  # each number held by one patient at most
                    patient_update(patient=Patient.objects.get(pk=pk), data={"national_id": number})
                    expected[pk] = number
                    writes += 1
                    writing.set()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
            finally:
                connection.close()

        thread = threading.Thread(target=keep_writing)
        thread.start()
        try:
            assert writing.wait(30)
            output = rotate("--batch-size", "7")
            writes_during = writes
        finally:
            stop.set()
            thread.join(30)
        assert errors == []
        assert writes_during >= 1
        assert "patients.Patient: 61 rows scanned" in output
        assert "0 undecryptable" in output

    # Step 3: B alone reads everything, and every lookup finds its patient.
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_B):
        assert readyz(client).status_code == 200
        assert crypto.decrypt(EncryptionCanary.objects.get().token) == CANARY_TEXT
        for pk, number in expected.items():
            patient = Patient.objects.get(pk=pk)
            assert crypto.decrypt(patient.national_id_encrypted) == number
            assert patient.national_id_hash == crypto.lookup_hash(number)
            assert list(Patient.objects.with_national_id(number).values_list("pk", flat=True)) == [pk]
        assert Patient.objects.get(pk=without_id.pk).national_id_encrypted == ""
        stored = WebhookSubscription.objects.get()
        assert stored.signing_secrets(now=subscription.created_at)[0] == secret
        assert stored.extra_headers == {"Authorization": "Bearer receiver-token"}
        replay = client.post(
            "/api/v1/test/departments",
            body,
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="k-1",
            **bearer(token),
        )
        assert (replay.status_code, replay.content, replay["Idempotent-Replayed"]) == (201, first.content, "true")
        assert crypto.is_current(IdempotencyRecord.objects.get().response_body)

        # Step 4: a second run finds nothing to do and writes nothing.
        before = stored_values()
        again = rotate()
        assert stored_values() == before
    for table in ENCRYPTED_TABLES:
        assert f"{table.model}: " in again
    assert again.count(" 0 rewrote (0 values re-encrypted, 0 lookup hashes re-hashed, 0 undecryptable)") == 4


@pytest.mark.django_db(transaction=True)
def test_a_row_locked_by_a_request_is_rotated_once_released_keeping_the_value_the_request_wrote():
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        patients = [PatientFactory(national_id=national_id(n)) for n in range(20)]
    held = patients[3]
    locked, release = threading.Event(), threading.Event()

    def request_holding_the_row() -> None:
        # Under the main thread's "B,A" (override_settings is process-wide: a thread must not nest its own).
        try:
            with transaction.atomic():
                patient = Patient.objects.select_for_update().get(pk=held.pk)
                locked.set()
                release.wait(30)
                patient_update(patient=patient, data={"national_id": national_id(99)})
        finally:
            connection.close()

    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}"):
        thread = threading.Thread(target=request_holding_the_row)
        thread.start()
        try:
            assert locked.wait(30)
            threading.Timer(1.0, release.set).start()
            output = rotate("--batch-size", "5", "--table", "patients.Patient")
        finally:
            release.set()
            thread.join(30)

    assert "patients.Patient: 20 rows scanned" in output
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_B):
        assert crypto.decrypt(Patient.objects.get(pk=held.pk).national_id_encrypted) == national_id(99)
        for patient in patients:
            assert crypto.is_current(Patient.objects.get(pk=patient.pk).national_id_encrypted)


@pytest.mark.django_db
def test_a_dry_run_counts_and_writes_nothing():
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        for n in range(3):
            PatientFactory(national_id=national_id(n))
    before = stored_values()
    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}"):
        output = rotate("--dry-run", "--table", "patients.Patient")
    assert stored_values() == before
    assert output.startswith(
        "patients.Patient: 3 rows scanned, 3 would rewrite (3 values re-encrypted, 3 lookup hashes re-hashed, "
        "0 undecryptable) in "
    )


@pytest.mark.django_db
def test_a_value_no_configured_key_reads_fails_the_rotation_naming_its_row_and_leaves_it():
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_C):
        lost = PatientFactory(national_id=national_id(1))
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        kept = PatientFactory(national_id=national_id(2))
    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}"), pytest.raises(CommandError) as raised:
        rotate("--table", "patients.Patient")
    assert str(raised.value) == (
        "Values that no key of FIELD_ENCRYPTION_KEY decrypts (keep every key until they are dealt with): "
        f"patients.Patient: {lost.pk}"
    )
    assert Patient.objects.get(pk=lost.pk).national_id_encrypted == lost.national_id_encrypted
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_B):
        assert crypto.decrypt(Patient.objects.get(pk=kept.pk).national_id_encrypted) == national_id(2)


# The canary


@pytest.mark.django_db
def test_readyz_is_200_with_the_right_key_and_503_naming_the_reason_with_a_wrong_one(client):
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        right = readyz(client)
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_C):
        wrong = readyz(client)

    assert (right.status_code, right.json()["checks"]["encryption"]) == (200, "ok")
    assert wrong.status_code == 503
    assert wrong.json()["status"] == "unavailable"
    assert wrong.json()["checks"]["encryption"] == CANARY_ERROR
    assert KEY_A not in wrong.content.decode()
    assert KEY_C not in wrong.content.decode()


@pytest.mark.django_db
def test_a_wrong_key_plants_no_canary_over_data_it_cannot_read(client):
    """A database restored from before the canary existed: the first pod must not vouch for its own key."""
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        PatientFactory(national_id=national_id(1))
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_C):
        wrong = readyz(client)
    assert (wrong.status_code, wrong.json()["checks"]["encryption"]) == (503, CANARY_ERROR)
    assert not EncryptionCanary.objects.exists()

    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_C},{KEY_A}"):
        assert readyz(client).status_code == 200  # both keys: A reads the patient, C writes the canary
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        assert readyz(client).status_code == 503  # the canary is under C now


@pytest.mark.django_db
def test_the_admin_finds_a_patient_by_national_id_under_either_key_during_a_rotation(admin_client):
    with override_settings(FIELD_ENCRYPTION_KEY=KEY_A):
        under_a = PatientFactory(national_id=national_id(1), last_name="Under-A")
    with override_settings(FIELD_ENCRYPTION_KEY=f"{KEY_B},{KEY_A}"):
        under_b = PatientFactory(national_id=national_id(2), last_name="Under-B")
        found_a = admin_client.get("/admin/patients/patient/", {"q": national_id(1)})
        found_b = admin_client.get("/admin/patients/patient/", {"q": "-".join(re.findall("....", national_id(2)))})

    assert found_a.status_code == found_b.status_code == 200
    assert [p.pk for p in found_a.context["cl"].result_list] == [under_a.pk]
    assert [p.pk for p in found_b.context["cl"].result_list] == [under_b.pk]
