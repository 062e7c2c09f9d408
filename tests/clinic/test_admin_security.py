"""The admin's login (docs/api-rules.md §7): lockout after repeated failures (django-axes, per user name and
address), sessions of at most ADMIN_SESSION_HOURS, and TOTP two-factor authentication (django-otp) when
ADMIN_REQUIRE_2FA is on, with the enrolment command staff use to set up their authenticator app. A refused
login gives one message whatever was wrong, and every refusal counts towards the lockout."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice

from clinic.admin_site import ENROL_HINT, LOGIN_AT_SESSION_KEY
from tests.factories import network_wide

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
LOGIN = "/admin/login/?next=/admin/"
BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fast_hashing(settings: Any) -> None:
    # PBKDF2 is not under test here; dozens of logins with it would be slow.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "integrations.clients.hashers.ClientSecretHasher",
    ]


def make_staff(username: str = "asha") -> Any:
    return network_wide(get_user_model().objects.create_superuser(username, f"{username}@clinic.invalid", PASSWORD))


def log_in(client: Client, username: str, password: str, ip: str = "203.0.113.7", **extra: Any) -> Any:
    return client.post(LOGIN, {"username": username, "password": password, **extra}, REMOTE_ADDR=ip)


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


# The one message of every refused two-factor login, as the page shows it.
REFUSED = (
    "Please enter the correct username, password and authentication code for a staff account. Note that the user "
    "name and password may be case-sensitive, and that a code is accepted once, while your authenticator app "
    "shows it."
)


def error_notes(response: Any) -> list[str]:
    return [
        " ".join(note.split())
        for note in re.findall(r'<p class="errornote">(.*?)</p>', response.content.decode(), re.S)
    ]


def code_for(device: TOTPDevice, offset_steps: int = 0) -> str:
    """The code an authenticator app shows for the device now (RFC 6238), computed independently of the form."""
    value = totp(device.bin_key, step=device.step, t0=device.t0 - offset_steps * device.step, digits=device.digits)
    return str(value).zfill(device.digits)


# --- Lockout -----------------------------------------------------------------------------------------


def test_after_five_wrong_passwords_the_right_one_is_refused_with_a_lockout_page(settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    user = make_staff()
    client = Client()
    for _ in range(4):
        response = log_in(client, "asha", "wrong password")
        assert response.status_code == 200  # the login form again, with its error
        assert "Please enter the correct username and password" in response.content.decode()
    assert log_in(client, "asha", "wrong password").status_code == 429  # the fifth failure locks

    response = log_in(client, "asha", PASSWORD)

    assert response.status_code == 429
    body = " ".join(response.content.decode().split())
    assert "Login temporarily locked" in body
    assert "Too many failed login attempts for this user name from your address (5 in a row)" in body
    assert "for 0:15:00" in body
    assert not logged_in(client)
    user.refresh_from_db()
    assert user.last_login is None
    attempt = AccessAttempt.objects.get()
    assert (attempt.username, attempt.ip_address, attempt.failures_since_start) == (
        "asha",
        "203.0.113.7",
        6,
    )  # the refused right password counted too


def test_thirty_wrong_passwords_then_the_right_one_stays_locked(settings):
    """The issue's finding: 30 wrong passwords and then the right one logged in."""
    make_staff()
    client = Client()
    statuses = [log_in(client, "asha", f"guess {n}").status_code for n in range(30)]

    assert statuses == [200] * 4 + [429] * 26
    assert log_in(client, "asha", PASSWORD).status_code == 429
    assert not logged_in(client)


def test_a_lockout_leaves_other_staff_and_the_same_user_elsewhere_unaffected():
    make_staff("asha")
    make_staff("ravi")
    attacker = Client()
    for _ in range(5):
        log_in(attacker, "asha", "wrong password", ip="198.51.100.66")
    assert log_in(attacker, "asha", PASSWORD, ip="198.51.100.66").status_code == 429

    colleague = Client()
    assert log_in(colleague, "ravi", PASSWORD, ip="198.51.100.66").status_code == 302
    assert logged_in(colleague)
    asha_at_the_clinic = Client()
    assert log_in(asha_at_the_clinic, "asha", PASSWORD, ip="203.0.113.7").status_code == 302
    assert logged_in(asha_at_the_clinic)


def test_the_lockout_ends_after_the_cool_off():
    make_staff()
    client = Client()
    for _ in range(6):
        log_in(client, "asha", "wrong password")
    assert log_in(client, "asha", PASSWORD).status_code == 429

    # Sixteen minutes later (the cool-off is 15 minutes after the last failure).
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16))

    assert log_in(client, "asha", PASSWORD).status_code == 302
    assert logged_in(client)


def test_a_successful_login_clears_earlier_failures():
    make_staff()
    client = Client()
    for _ in range(4):
        log_in(client, "asha", "wrong password")
    assert log_in(client, "asha", PASSWORD).status_code == 302
    assert not AccessAttempt.objects.exists()

    other = Client()
    for _ in range(4):  # four more failures do not lock: the count started again
        log_in(other, "asha", "wrong password")
    assert log_in(other, "asha", PASSWORD).status_code == 302


def test_a_forged_forwarded_for_header_does_not_escape_the_lockout():
    make_staff()
    client = Client()
    for n in range(5):
        client.post(
            LOGIN,
            {"username": "asha", "password": "wrong"},
            REMOTE_ADDR="198.51.100.66",
            HTTP_X_FORWARDED_FOR=f"10.0.0.{n}",
        )

    response = client.post(
        LOGIN, {"username": "asha", "password": PASSWORD}, REMOTE_ADDR="198.51.100.66", HTTP_X_FORWARDED_FOR="10.9.9.9"
    )

    assert response.status_code == 429
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["198.51.100.66"]


def test_behind_a_trusted_proxy_the_forwarded_client_address_is_the_one_locked(settings):
    import ipaddress

    settings.TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/8")]
    make_staff()
    client = Client()
    for _ in range(5):
        client.post(
            LOGIN,
            {"username": "asha", "password": "wrong"},
            REMOTE_ADDR="10.0.0.2",
            HTTP_X_FORWARDED_FOR="198.51.100.66",
        )
    locked = client.post(
        LOGIN, {"username": "asha", "password": PASSWORD}, REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.66"
    )
    elsewhere = Client().post(
        LOGIN, {"username": "asha", "password": PASSWORD}, REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="203.0.113.7"
    )

    assert (locked.status_code, elsewhere.status_code) == (429, 302)
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["198.51.100.66"]


# --- Sessions ----------------------------------------------------------------------------------------


def test_a_session_lasts_at_most_eight_hours_and_ends_with_the_browser(settings):
    assert (settings.ADMIN_SESSION_HOURS, settings.SESSION_COOKIE_AGE) == (8, 8 * 3600)
    make_staff()
    client = Client()

    response = log_in(client, "asha", PASSWORD)

    cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert cookie["max-age"] == ""  # a browser-session cookie
    assert cookie["expires"] == ""
    assert client.session.get_expiry_age() == 8 * 3600
    assert abs(client.session[LOGIN_AT_SESSION_KEY] - time.time()) < 60


def test_a_session_older_than_admin_session_hours_is_sent_to_the_login_page_even_if_used_meanwhile():
    make_staff()
    client = Client()
    log_in(client, "asha", PASSWORD)
    assert logged_in(client)

    session = client.session
    session[LOGIN_AT_SESSION_KEY] = int(time.time()) - 8 * 3600 - 1  # logged in 8 hours and a second ago
    session.save()

    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/"
    assert client.get("/admin/patients/patient/").status_code == 302

    assert log_in(client, "asha", PASSWORD).status_code == 302  # a fresh login starts a fresh 8 hours
    assert logged_in(client)


def settings_in_child(**env: str) -> subprocess.CompletedProcess[str]:
    """The settings loaded in a fresh process from exactly these variables (no .env file)."""
    script = (
        "import django, json, os; os.environ['DJANGO_SETTINGS_MODULE']='clinic.settings'; django.setup();"
        "from django.conf import settings as s;"
        "print(json.dumps([s.SESSION_COOKIE_AGE, s.ADMIN_REQUIRE_2FA, s.AXES_FAILURE_LIMIT,"
        " s.AXES_COOLOFF_TIME.total_seconds()]))"
    )
    base = {
        "PATH": os.environ["PATH"],
        "ENV_FILE": "/nonexistent",
        "DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/clinic",
        "SECRET_KEY": "s" * 50,
        "FIELD_ENCRYPTION_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    }
    return subprocess.run(  # noqa: S603 - fixed arguments
        [sys.executable, "-c", script], env={**base, **env}, cwd=BASE_DIR, capture_output=True, text=True, timeout=60
    )


def test_admin_security_settings_come_from_the_environment_with_production_defaults():
    production = settings_in_child(DEBUG="false")
    development = settings_in_child(DEBUG="true")
    tuned = settings_in_child(
        DEBUG="false",
        ADMIN_SESSION_HOURS="2",
        ADMIN_REQUIRE_2FA="false",
        ADMIN_LOGIN_FAILURE_LIMIT="3",
        ADMIN_LOCKOUT_MINUTES="60",
    )
    too_long = settings_in_child(DEBUG="false", ADMIN_SESSION_HOURS="336")

    assert json.loads(production.stdout.strip().splitlines()[-1]) == [8 * 3600, True, 5, 900.0], production.stderr
    assert json.loads(development.stdout.strip().splitlines()[-1]) == [8 * 3600, False, 5, 900.0]
    assert json.loads(tuned.stdout.strip().splitlines()[-1]) == [2 * 3600, False, 3, 3600.0]
    assert too_long.returncode != 0
    assert "ImproperlyConfigured: ADMIN_SESSION_HOURS must be between 1 and 24, got 336." in too_long.stderr


# --- Two-factor authentication -------------------------------------------------------------------------


@pytest.fixture
def two_factor(settings: Any) -> None:
    settings.ADMIN_REQUIRE_2FA = True


@pytest.fixture
def enrolled() -> TOTPDevice:
    return TOTPDevice.objects.create(user=make_staff(), name="phone", confirmed=True)


def test_with_2fa_required_the_password_alone_is_refused(two_factor, enrolled):
    client = Client()

    response = log_in(client, "asha", PASSWORD)

    assert response.status_code == 200
    assert error_notes(response) == [REFUSED]
    assert 'name="otp_token"' in response.content.decode()
    assert PASSWORD not in response.content.decode()  # the password is not echoed back into the page
    assert not logged_in(client)
    enrolled.user.refresh_from_db()
    assert enrolled.user.last_login is None


def test_with_2fa_required_the_right_code_logs_in(two_factor, enrolled):
    client = Client()

    response = log_in(client, "asha", PASSWORD, otp_token=code_for(enrolled))

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert logged_in(client)
    assert client.get("/admin/patients/patient/").status_code == 200


@pytest.mark.parametrize("which", ["wrong", "ten-steps-old", "letters"])
def test_with_2fa_required_a_wrong_or_old_code_is_refused(two_factor, enrolled, which):
    right = code_for(enrolled)
    wrong = {
        "wrong": str((int(right) + 1) % 10**6).zfill(6),
        "ten-steps-old": code_for(enrolled, offset_steps=-10),
        "letters": "abcdef",
    }[which]
    client = Client()

    response = log_in(client, "asha", PASSWORD, otp_token=wrong)

    assert response.status_code == 200
    assert error_notes(response) == [REFUSED]
    assert "Invalid code" not in response.content.decode()
    assert not logged_in(client)
    enrolled.refresh_from_db()
    assert enrolled.throttling_failure_count == 1


def test_after_a_wrong_code_django_otp_throttles_the_device(two_factor, enrolled):
    client = Client()
    log_in(client, "asha", PASSWORD, otp_token="000000" if code_for(enrolled) != "000000" else "111111")

    response = log_in(client, "asha", PASSWORD, otp_token=code_for(enrolled))

    # Even the right code waits out the (exponential) delay after a failure: guessing codes is slow. The page
    # does not say so: that would tell that the password was right.
    assert response.status_code == 200
    assert error_notes(response) == [REFUSED]
    assert "temporarily disabled" not in response.content.decode()
    assert not logged_in(client)


def test_a_code_is_accepted_only_once(two_factor, enrolled):
    code = code_for(enrolled)
    assert log_in(Client(), "asha", PASSWORD, otp_token=code).status_code == 302

    replay = Client()
    assert log_in(replay, "asha", PASSWORD, otp_token=code).status_code == 200
    assert not logged_in(replay)


def test_the_login_page_tells_everyone_how_to_enrol_and_a_staff_member_without_a_device_is_refused(two_factor):
    make_staff()
    client = Client()

    form = client.get(LOGIN)
    response = log_in(client, "asha", PASSWORD, otp_token="123456")

    hint = "No authenticator app set up yet? Ask an administrator to run: python manage.py add_totp_device --user"
    assert ENROL_HINT.startswith(hint)
    assert hint in form.content.decode()
    assert response.status_code == 200
    assert error_notes(response) == [REFUSED]  # the same as a wrong password: it tells nothing of the account
    assert hint in response.content.decode()
    assert not logged_in(client)


def test_an_unconfirmed_device_does_not_log_in(two_factor):
    device = TOTPDevice.objects.create(user=make_staff(), name="phone", confirmed=False)
    client = Client()

    assert log_in(client, "asha", PASSWORD, otp_token=code_for(device)).status_code == 200
    assert not logged_in(client)


def test_with_2fa_required_a_session_without_a_verified_device_is_not_enough(two_factor, enrolled):
    client = Client()
    client.force_login(enrolled.user)  # a password-only session, e.g. from before 2FA was switched on

    response = client.get("/admin/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/"


def test_with_2fa_off_the_password_alone_logs_in(settings):
    settings.ADMIN_REQUIRE_2FA = False
    make_staff()
    client = Client()

    form = client.get("/admin/login/")
    response = log_in(client, "asha", PASSWORD)

    assert 'name="otp_token"' not in form.content.decode()
    assert response.status_code == 302
    assert logged_in(client)


def same_page(response: Any, username: str) -> str:
    """The page without what legitimately differs between two attempts: the CSRF token, the user name typed."""
    page = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", response.content.decode())
    return page.replace(f'value="{username}"', 'value="<typed>"')


def test_every_refused_two_factor_login_gives_the_same_page(two_factor, enrolled):
    """The issue's finding: a right password with a wrong code said "Invalid code"."""
    get_user_model().objects.create_user("patient", "p@clinic.invalid", PASSWORD)  # a right password, not staff
    right = code_for(enrolled)
    wrong = str((int(right) + 1) % 10**6).zfill(6)
    attempts = {
        "unknown user": ("nobody", PASSWORD, right),
        "wrong password": ("asha", "wrong password", right),
        "wrong code": ("asha", PASSWORD, wrong),
        "no code": ("asha", PASSWORD, ""),
        "letters for a code (the device is throttled now too)": ("asha", PASSWORD, "abcdef"),
        "not a staff account": ("patient", PASSWORD, right),
    }

    pages = {}
    for what, (username, password, code) in attempts.items():
        response = log_in(Client(), username, password, otp_token=code)
        assert (response.status_code, error_notes(response)) == (200, [REFUSED]), what
        pages[what] = same_page(response, username)

    assert len(set(pages.values())) == 1, "a refused login's page must not tell which part was right"
    assert 'name="otp_device"' not in pages["wrong code"]
    assert f'value="{wrong}"' not in pages["wrong code"]  # a code is never typed back into the page
    assert PASSWORD not in pages["wrong code"]
    enrolled.user.refresh_from_db()
    assert enrolled.user.last_login is None
    assert not get_user_model().objects.filter(last_login__isnull=False).exists()


def test_wrong_codes_count_towards_the_lockout_as_wrong_passwords_do(two_factor, enrolled):
    right = code_for(enrolled)
    wrong = str((int(right) + 1) % 10**6).zfill(6)
    client = Client()

    statuses = [
        log_in(client, "asha", PASSWORD, otp_token=wrong).status_code,
        log_in(client, "asha", "wrong password", otp_token=right).status_code,
        log_in(client, "asha", PASSWORD, otp_token=wrong).status_code,
        log_in(client, "asha", PASSWORD).status_code,  # no code at all
        log_in(client, "asha", PASSWORD, otp_token=wrong).status_code,  # the fifth failure locks
    ]
    locked = log_in(client, "asha", PASSWORD, otp_token=code_for(enrolled, offset_steps=1))

    assert statuses == [200, 200, 200, 200, 429]
    assert locked.status_code == 429
    assert "Login temporarily locked" in " ".join(locked.content.decode().split())
    assert not logged_in(client)
    attempt = AccessAttempt.objects.get()
    assert (attempt.username, attempt.ip_address, attempt.failures_since_start) == ("asha", "203.0.113.7", 6)
    enrolled.user.refresh_from_db()
    assert enrolled.user.last_login is None


def test_a_right_password_and_code_after_a_wrong_code_clears_the_failures(two_factor, enrolled):
    right = code_for(enrolled)
    log_in(Client(), "asha", PASSWORD, otp_token=str((int(right) + 1) % 10**6).zfill(6))
    assert AccessAttempt.objects.get().failures_since_start == 1
    TOTPDevice.objects.filter(pk=enrolled.pk).update(throttling_failure_count=0, throttling_failure_timestamp=None)

    assert log_in(Client(), "asha", PASSWORD, otp_token=right).status_code == 302
    assert not AccessAttempt.objects.exists()


def test_a_user_with_two_devices_logs_in_with_the_code_of_either_without_choosing(two_factor, enrolled):
    tablet = TOTPDevice.objects.create(user=enrolled.user, name="tablet", confirmed=True)
    client = Client()

    response = log_in(client, "asha", PASSWORD, otp_token=code_for(tablet))

    assert response.status_code == 302
    assert logged_in(client)
    enrolled.refresh_from_db()
    tablet.refresh_from_db()
    assert enrolled.throttling_failure_count == 0  # the phone's code was not tried and failed
    assert (tablet.throttling_failure_count, tablet.last_used_at is not None) == (0, True)


def test_without_2fa_every_refused_login_gives_the_same_message_and_counts(settings):
    settings.ADMIN_REQUIRE_2FA = False
    make_staff()
    get_user_model().objects.create_user("patient", "p@clinic.invalid", PASSWORD)
    message = (
        "Please enter the correct username and password for a staff account. Note that both fields may be "
        "case-sensitive."
    )

    responses = {
        username: log_in(Client(), username, password)
        for username, password in [("nobody", PASSWORD), ("asha", "wrong password"), ("patient", PASSWORD)]
    }

    assert {name: (r.status_code, error_notes(r)) for name, r in responses.items()} == {
        name: (200, [message]) for name in responses
    }
    assert len({same_page(r, name) for name, r in responses.items()}) == 1
    # A right password for an account that may not use the admin counts as a failure too.
    assert sorted(AccessAttempt.objects.values_list("username", "failures_since_start")) == [
        ("asha", 1),
        ("nobody", 1),
        ("patient", 1),
    ]


# --- Enrolment ------------------------------------------------------------------------------------------


def enrol(*args: str, code: str | None = None) -> str:
    """Run add_totp_device, answering its question with `code`; the code is computed from the key the
    command printed (as the phone would, from the QR code)."""
    out = io.StringIO()

    class Phone(io.StringIO):
        def readline(self, *_: Any) -> str:
            if code is not None:
                return code + "\n"
            secret = re.search(r"secret=([A-Z2-7]+)", out.getvalue()).group(1)
            device = TOTPDevice.objects.get(key=base64.b32decode(secret).hex())
            return code_for(device) + "\n"

    call_command("add_totp_device", *args, stdout=out, stdin=Phone())
    return out.getvalue()


def test_add_totp_device_shows_a_qr_code_and_confirms_the_device_with_a_code(two_factor):
    user = make_staff()

    output = enrol("--user", "asha")

    assert re.search(
        r"otpauth://totp/Clinic%20admin%3Aasha\?secret=[A-Z2-7]+&algorithm=SHA1&digits=6&period=30", output
    )
    assert "█" in output or "▀" in output  # the QR code, drawn in the terminal
    assert "Two-factor device 'Authenticator app' confirmed for asha" in output
    device = TOTPDevice.objects.get(user=user)
    assert device.confirmed
    # The enrolled staff member can now log in, with the app's next code (the one typed is used up).
    assert log_in(Client(), "asha", PASSWORD, otp_token=code_for(device, offset_steps=1)).status_code == 302


def test_add_totp_device_with_a_wrong_code_changes_nothing():
    make_staff()

    with pytest.raises(CommandError, match="That code is not right; nothing was changed"):
        enrol("--user", "asha", code="000000")

    assert not TOTPDevice.objects.exists()


def test_add_totp_device_replace_removes_the_old_phone():
    user = make_staff()
    old = TOTPDevice.objects.create(user=user, name="old phone", confirmed=True)

    enrol("--user", "asha", "--replace", "--name", "new phone")

    assert list(TOTPDevice.objects.values_list("name", "confirmed")) == [("new phone", True)]
    assert not TOTPDevice.objects.filter(pk=old.pk).exists()


@pytest.mark.parametrize(("username", "message"), [("nobody", "No user 'nobody'."), ("patient", "is not staff")])
def test_add_totp_device_refuses_unknown_and_non_staff_users(username, message):
    get_user_model().objects.create_user("patient", "p@clinic.invalid", PASSWORD)

    with pytest.raises(CommandError, match=message):
        enrol("--user", username, code="000000")

    assert not TOTPDevice.objects.exists()


def test_ensure_demo_access_says_how_to_enrol_when_2fa_is_on(two_factor):
    out = io.StringIO()
    call_command("ensure_demo_access", stdout=out)
    assert ".venv/bin/python -m clinic.launch manage add_totp_device --user admin" in out.getvalue()

    TOTPDevice.objects.create(user=get_user_model().objects.get(username="admin"), name="phone", confirmed=True)
    again = io.StringIO()
    call_command("ensure_demo_access", stdout=again)
    assert "add_totp_device" not in again.getvalue()
    assert "Two-factor authentication is on: log in with the code of your authenticator app." in again.getvalue()


def test_ensure_demo_access_says_nothing_of_2fa_when_it_is_off(settings):
    settings.ADMIN_REQUIRE_2FA = False
    out = io.StringIO()
    call_command("ensure_demo_access", stdout=out)
    assert "Two-factor" not in out.getvalue()


def test_the_device_admin_never_shows_a_stored_key_again(enrolled):
    admin = Client()
    admin.force_login(enrolled.user)

    page = admin.get(f"/admin/otp_totp/totpdevice/{enrolled.pk}/change/")
    config = admin.get(f"/admin/otp_totp/totpdevice/{enrolled.pk}/config/")
    qrcode = admin.get(f"/admin/otp_totp/totpdevice/{enrolled.pk}/qrcode/")

    assert page.status_code == 200
    assert enrolled.key not in page.content.decode()
    assert base64.b32encode(enrolled.bin_key).decode() not in page.content.decode()
    assert (config.status_code, qrcode.status_code) == (403, 403)
