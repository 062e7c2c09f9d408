"""The admin site: login throttled by django-axes, two-factor (TOTP, django-otp) when ADMIN_REQUIRE_2FA is on.

The site is Django's default site (`clinic.apps.ClinicAdminConfig.default_site`), so every app's
`@admin.register` lands here. Whether a verified device is required is read from the settings on each
request, not fixed when the site is built: a test (or a deployment reload) that changes the setting is
obeyed at once.
"""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.http import HttpRequest, HttpResponse
from django_otp import devices_for_user
from django_otp.admin import OTPAdminAuthenticationForm, OTPAdminSite

from clinic.api.network import client_ip

NO_DEVICE_MESSAGE = (
    "Two-factor authentication is required and no authenticator app is set up for this account. "
    "Ask an administrator to run: python manage.py add_totp_device --user {username}"
)


class TwoFactorLoginForm(OTPAdminAuthenticationForm):
    """User name, password and the current code of the authenticator app, in one step.

    django-otp asks which device to check when a user has several; staff enrolled the supported way
    have exactly one TOTP device, and it is taken without asking."""

    otp_error_messages = {
        **OTPAdminAuthenticationForm.otp_error_messages,
        "token_required": "Enter the 6-digit code your authenticator app shows.",
        "invalid_token": "Invalid code. Enter the code your authenticator app shows now.",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["otp_token"].label = "Authentication code"
        self.fields["otp_token"].widget.attrs.update(
            {"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9]*", "maxlength": "8"}
        )

    def _update_form(self, user: Any) -> None:
        super()._update_form(user)
        self.fields["password"].widget.render_value = False  # never echo the password back into the page

    def _chosen_device(self, user: Any) -> Any:
        device = super()._chosen_device(user)
        if device is None:
            devices = list(devices_for_user(user, confirmed=True, for_verify=True))
            if not devices:
                raise forms.ValidationError(NO_DEVICE_MESSAGE.format(username=user.get_username()), code="no_device")
            if len(devices) == 1:
                device = devices[0]
        return device


class ClinicAdminSite(OTPAdminSite):
    def __init__(self, name: str = "admin") -> None:
        super().__init__(name)

    @property
    def login_form(self) -> type[AdminAuthenticationForm]:
        return TwoFactorLoginForm if settings.ADMIN_REQUIRE_2FA else AdminAuthenticationForm

    @property
    def login_template(self) -> str:
        return "admin/login_2fa.html" if settings.ADMIN_REQUIRE_2FA else "admin/login.html"

    def has_permission(self, request: HttpRequest) -> bool:
        if not session_within_lifetime(request):
            return False  # the login page again: a session lasts ADMIN_SESSION_HOURS from login at most
        if not settings.ADMIN_REQUIRE_2FA:
            return super(OTPAdminSite, self).has_permission(request)
        # A session that logged in with the password alone (before 2FA was switched on) is not enough.
        return super().has_permission(request)

    def autocomplete_view(self, request: HttpRequest) -> HttpResponse:
        from clinic.admin_audit import Clock, audit_autocomplete_response

        clock = Clock()
        response = super().autocomplete_view(request)
        audit_autocomplete_response(self, request, response, clock)  # the patient picker lists patients
        return response


LOGIN_AT_SESSION_KEY = "clinic_login_at"


def record_login_time(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """user_logged_in receiver: the session remembers when its login happened (epoch seconds)."""
    if request is not None and hasattr(request, "session"):
        request.session[LOGIN_AT_SESSION_KEY] = int(time.time())


def session_within_lifetime(request: HttpRequest) -> bool:
    """Whether the session's login is less than ADMIN_SESSION_HOURS old. Django's own expiry is renewed
    whenever the session is saved; this limit is counted from the login and is never renewed. A session
    without the stamp (force_login in tests, a session from before this check) counts from now."""
    session = getattr(request, "session", None)
    if session is None:
        return True
    login_at = session.get(LOGIN_AT_SESSION_KEY)
    if login_at is None:
        if request.user.is_authenticated:
            session[LOGIN_AT_SESSION_KEY] = int(time.time())
        return True
    return time.time() - login_at < settings.ADMIN_SESSION_HOURS * 3600


def axes_client_ip(request: HttpRequest) -> str | None:
    """The address django-axes counts failures against: the same one the API and its audit log use
    (X-Forwarded-For believed only from TRUSTED_PROXIES), so a client cannot shed its lockout by
    sending a different header."""
    return client_ip(request)
